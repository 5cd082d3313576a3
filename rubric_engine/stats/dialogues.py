"""Scores of expanded dialogues (`data.expand: assistant_turns`) aggregated back to dialogues.

Why its own rule: a dialogue expands into one question per assistant turn, so a plain mean over questions
would let a long dialogue weigh as much as several short ones, and an interval that resamples turns would
treat the turns of one dialogue as independent draws. Here every dialogue weighs the same:

- a dialogue's score is the mean of its scored turns' question scores (a turn that ended in an error is
  counted in the run's counts, never averaged in; a dialogue none of whose turns scored has no score and is
  counted under `unscored`);
- the benchmark's overall is the mean of the dialogue scores (times the spec's scale);
- the interval is a percentile bootstrap that resamples dialogues (clusters) with replacement, each drawn
  dialogue bringing its own score: the draws come from the same seeded stream as every other interval.

The turns' mean (each turn weighing the same) is reported beside it as `turn_mean`. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rubric_engine.datatypes import dialogue_of
from rubric_engine.scoring.aggregate import ScoredQuestion
from rubric_engine.stats.bootstrap import _draws, _interval

__all__ = ["dialogue_scores", "dialogue_section", "paired_dialogues"]


def dialogue_scores(scored: Iterable[ScoredQuestion]) -> dict[str, list[float]]:
    """Dialogue id -> its scored turns' question scores (0-1), in the order given."""
    out: dict[str, list[float]] = {}
    for q in scored:
        out.setdefault(dialogue_of(q.id), []).append(float(q.score))
    return out


def dialogue_section(scored: Sequence[ScoredQuestion], asked_ids: Iterable[str], scale: float,
                     n: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict[str, Any]:
    """summary.json's `dialogues`: the overall over dialogues, its dialogue-resampling interval, the turns'
    mean, and per dialogue its turns asked, turns scored and score (all on the spec's scale)."""
    asked: dict[str, int] = {}
    for qid in asked_ids:
        asked[dialogue_of(qid)] = asked.get(dialogue_of(qid), 0) + 1
    turns = dialogue_scores(scored)
    means = {d: sum(v) / len(v) for d, v in turns.items()}
    order = list(dict.fromkeys([*asked, *turns]))  # question order; a scored id not among the asked ones too
    values = [means[d] for d in order if d in means]
    out: dict[str, Any] = {
        "weighting": "dialogues", "dialogues": len(order), "scored": len(values),
        "unscored": len(order) - len(values),
        "overall": scale * sum(values) / len(values) if values else None,
        "turn_mean": scale * sum(q.score for q in scored) / len(scored) if scored else None,
        "interval": _cluster_interval(values, scale, n, seed, alpha) if values else None,
        "by_dialogue": {d: {"turns": asked.get(d, len(turns.get(d, []))), "scored": len(turns.get(d, [])),
                            "score": scale * means[d] if d in means else None} for d in order},
    }
    return out


def _cluster_interval(values: Sequence[float], scale: float, n: int, seed: int, alpha: float) -> dict[str, Any]:
    """Percentile interval of the mean over dialogues, resampling dialogues; std is the resamples' (population)."""
    means = [sum(values[i] for i in draw) / len(draw) for draw in _draws(len(values), n, seed)]
    mu = sum(means) / n
    std = (sum((m - mu) ** 2 for m in means) / n) ** 0.5
    lo, hi = _interval(means, alpha)
    return {"unit": "dialogues", "samples": n, "seed": seed, "alpha": alpha, "lo": scale * lo, "hi": scale * hi,
            "std": scale * std}



def paired_dialogues(scored_a: Sequence[ScoredQuestion], scored_b: Sequence[ScoredQuestion], n: int = 1000,
                     seed: int = 0, alpha: float = 0.05, scale: float = 100.0) -> dict[str, Any]:
    """Overall(a) - overall(b) over dialogues, on the turns scored for both, with a paired bootstrap that draws
    the SAME dialogues for both: {"diff", "lo", "hi", "excludes_zero", "questions" (turns), "dialogues"}."""
    by_b = {q.id: q for q in scored_b}
    common = [(q, by_b[q.id]) for q in scored_a if q.id in by_b]
    if not common:
        raise ValueError("the two models have no scored question in common; nothing to compare")
    a, b = dialogue_scores(q for q, _ in common), dialogue_scores(q for _, q in common)
    diffs = [sum(a[d]) / len(a[d]) - sum(b[d]) / len(b[d]) for d in a]  # one paired value per dialogue
    values = [scale * sum(diffs[i] for i in draw) / len(draw) for draw in _draws(len(diffs), n, seed)]
    lo, hi = _interval(values, alpha)
    return {"diff": scale * sum(diffs) / len(diffs), "lo": lo, "hi": hi, "excludes_zero": lo > 0 or hi < 0,
            "questions": len(common), "dialogues": len(diffs)}
