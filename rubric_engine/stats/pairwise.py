"""A pairwise run's counts: wins, ties and losses per game, and how often the two orders disagree.

Why apart from the score keys: the win rate itself is the run's overall (the pooled mean of the games'
counted scores, scoring/pairwise.py, with the bootstrap interval over questions every run has); this section
adds what a win rate alone hides. Position inconsistency: among the questions scored with both orders, the
share whose two games disagree once mapped to the candidate's side, comparing the outcome only (win, tie or
loss; a strong and a plain win agree). A judge with no position bias has 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rubric_engine.record.codec import decode
from rubric_engine.record.pairwise import PairwiseJudgment
from rubric_engine.record.types import Record
from rubric_engine.scoring.pairwise import game_scores

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["pairwise_summary", "outcome"]


def outcome(score: float) -> str:
    """A game's outcome from the candidate's side."""
    return "win" if score > 0.5 else "loss" if score < 0.5 else "tie"


def pairwise_summary(records: Iterable[Record | Mapping[str, Any]], spec: "BenchmarkSpec") -> dict[str, Any]:
    """Counts over the scored questions' games (a question with a failed game is a judge error, counted in
    `counts.judge_errors`, and none of its games is counted here). A record given as its JSON object (the run's
    journal line) is decoded (record/codec.py)."""
    assert spec.judge is not None, "a comparison is judged"
    v = spec.judge.verdict
    games = {"win": 0, "tie": 0, "loss": 0}
    labels: dict[str, int] = {lab: 0 for lab in v.labels}
    both = disagree = 0
    for item in records:
        rec = item if isinstance(item, Record) else decode(item)
        played = rec.judgment.games if isinstance(rec.judgment, PairwiseJudgment) else ()
        if rec.score is None or not played:
            continue
        outcomes = []
        for g in played:
            label = str(g.label)
            labels[label] = labels.get(label, 0) + 1
            o = outcome(game_scores(label, g.order, v.strong_weight).score)
            games[o] += 1
            outcomes.append(o)
        if len(outcomes) == 2:
            both += 1
            disagree += outcomes[0] != outcomes[1]
    return {"strong_weight": v.strong_weight, "swap": v.swap,
            "games": {"wins": games["win"], "ties": games["tie"], "losses": games["loss"]}, "labels": labels,
            "position": {"questions": both, "inconsistent": disagree,
                         "inconsistency": disagree / both if both else None}}
