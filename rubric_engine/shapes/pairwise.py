"""Judging by comparison (`judge.verdict.kind: pairwise`): the candidate's reply against a baseline's, one game
per order, the question's score from the games' labels.

Why here: what a comparison changes in a run is gathered in one class: it is judged against the baseline's reply
(judge/pairwise.py asks the games), its record carries the games and the baseline's reply and usage instead of
per-criterion verdicts, its judge prompt has two replies, and validate describes its labels and baseline. Which
baseline a run uses and the summary's `pairwise` section are run/pairwise.py's (they read the command line).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rubric_engine.datatypes import Question
from rubric_engine.judge.grading import JudgeResult
from rubric_engine.judge.pairwise import (PairResult, baseline_reply, baseline_request, game_requests, judge_pair,
                                          pair_judged)
from rubric_engine.models.request import Request
from rubric_engine.record.codec import encode
from rubric_engine.record.pairwise import Game, PairwiseJudgment
from rubric_engine.record.types import Judged, Record
from rubric_engine.scoring.pairwise import question_value
from rubric_engine.shapes.base import Judging, Verdict, judge_of
from rubric_engine.shapes.plan import BASELINE_PLACEHOLDER
from rubric_engine.stats.scores import rescored_fields

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Pairwise"]



class Pairwise(Verdict):
    """The verdict of `judge.verdict.kind: pairwise`."""
    name = "pairwise"
    compares = True

    async def judge(self, j: Judging, question: Question, response: str, first_repeat: int = 0,
                    transcript: Sequence[Mapping[str, str]] | None = None) -> tuple[JudgeResult, dict[int, Any]]:
        base = await baseline_reply(j.baseline_client, j.baseline_answers, j.spec, question)
        return await judge_pair(j.clients[0], j.spec, question, response, base), {}

    def question_score(self, spec: "BenchmarkSpec", question: Question, result: JudgeResult) -> Any:
        """None for a comparison's result: its score comes with its games (judged)."""
        return None if isinstance(result, PairResult) else super().question_score(spec, question, result)

    def judged(self, spec: "BenchmarkSpec", result: JudgeResult | None, clip: Callable[[str], str]) -> Judged:
        """The games and the baseline's reply; the question's score and weight from the games when all were
        read (judge/pairwise.pair_judged)."""
        return pair_judged(spec, result, clip) if isinstance(result, PairResult) else Judged()

    def rescored(self, spec: "BenchmarkSpec", rec: Record, rules: bool, where: str) -> dict[str, Any]:
        """Score and weight again from the stored games' labels (scoring/pairwise.py); a record with an error
        (or without games: never judged) keeps its fields."""
        out = encode(rec)
        games = self.stored_games(rec)
        if games is not None and not (rec.judge_error or rec.candidate_error):
            score, weight = question_value([(str(g.order), str(g.label)) for g in games],
                                           judge_of(spec).verdict.strong_weight)
            out.update(score=score, weight=weight)
        return rescored_fields(spec, rec, out, rules, where)

    def extra_usage(self, result: JudgeResult | None) -> dict[str, Any] | None:
        """The baseline's tokens, cost and cache hits for the record (None: no baseline reply in `result`)."""
        base = result.baseline if isinstance(result, PairResult) else None
        if base is None:
            return None
        return {"tokens": {"prompt": base.tokens[0], "completion": base.tokens[1]}, "cost": base.cost,
                "cache_hits": base.cached}

    def stored_games(self, rec: Record) -> tuple[Game, ...] | None:
        """The record's games (None: never judged, e.g. a candidate error)."""
        return rec.judgment.games if isinstance(rec.judgment, PairwiseJudgment) else None

    def stored_baseline(self, rec: Record) -> str | None:
        return rec.judgment.baseline_response if isinstance(rec.judgment, PairwiseJudgment) else None

    def judge_requests(self, spec: "BenchmarkSpec", question: Question, reply: str,
                       transcript: Sequence[Mapping[str, str]] | None) -> list[Request]:
        """One game per order judged, as judge/pairwise.judge_pair plays them (judge/pairwise.game_requests, the
        function the run renders its games with): the baseline's reply as A first, then (position swap) the
        candidate's; the baseline's reply, written during the run, shown as a placeholder."""
        return game_requests(spec, question, reply, BASELINE_PLACEHOLDER)

    def baseline_request(self, spec: "BenchmarkSpec", question: Question) -> Request | None:
        """The baseline model's request (judge/pairwise.baseline_request, as judge/pairwise.baseline_reply sends
        it)."""
        return baseline_request(spec, question)

    def scoring_line(self, spec: "BenchmarkSpec") -> str:
        v = judge_of(spec).verdict  # scoring/pairwise.py: each game from the candidate's side
        strong = [x for x in v.labels if ">>" in x or "<<" in x]
        return (f"scoring: pairwise labels {', '.join(v.labels)}; a game scores the candidate 1 (win), 0.5 (tie) "
                f"or 0 (loss), a strong label ({', '.join(strong) or 'none declared'}) counted {v.strong_weight:g}x; "
                + ("both orders judged (position swap), a question with a failed game is a judge error; "
                   if v.swap else "one order judged (baseline first, no swap); ")
                + "question score = mean of its counted game scores, overall = win rate against the baseline "
                  "(ties as half), pooled over every counted game score")

    def described(self, spec: "BenchmarkSpec") -> str | None:
        """validate's line: the labels, their weights, the orders judged and the declared baseline."""
        from rubric_engine.models.entries import declared_line

        v, b = judge_of(spec).verdict, spec.baseline
        head = (f"pairwise: labels {', '.join(v.labels)} (strong ones count {v.strong_weight:g}x), "
                f"{'both orders' if v.swap else 'baseline first only'}; ")
        if b is None:
            return head + "no baseline declared: pass baseline=ENTRY or baseline.answers=FILE"
        if b.model is not None:
            m = b.model
            return head + declared_line("baseline model", m.name, m.model, m.api_base, m.api_key_env, m.params)
        assert b.answers is not None
        files = ", ".join(f"{g}: {f.model or '?'} ({f.url or f.path})" for g, f in b.answers.files.items())
        return head + f"baseline answers{f' per {b.answers.by}' if b.answers.by else ''}: {files}"
