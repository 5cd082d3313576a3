"""A question's score from the judge's numbers on a scale (judge.verdict.kind: score): pure arithmetic.

Why its own module: a run and `rescore` must turn the same stored turn scores into the same question score,
by one rule. The question's score is the mean of its valid turn scores and its `weight` the number of them,
so a weighted mean over questions is the pooled mean over every valid judgment (MT-Bench's "Average"), while
questions stay the unit the bootstrap resamples. A failed turn (no score) is left out of both, never zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rubric_engine.records import SampleRecord

__all__ = ["valid_turn_scores", "scalar_fields"]


def valid_turn_scores(turns: Sequence[Mapping[str, Any]]) -> list[float]:
    """The scores of the turns that got one, in turn order."""
    return [float(t["score"]) for t in turns if t.get("score") is not None and not t.get("error")]


def scalar_fields(turns: Sequence[Mapping[str, Any]]) -> SampleRecord:
    """A samples.jsonl record's score fields for a score verdict: score (mean of the valid turn scores),
    weight (their number, written when it is not 1), and the criteria shape's empty fields; {} when no turn
    got a score (the question is a judge error)."""
    valid = valid_turn_scores(turns)
    if not valid:
        return {}
    out: SampleRecord = {"abilities": {}, "score": sum(valid) / len(valid), "failed_rules": [], "catastrophic": False}
    if len(valid) != 1:
        out["weight"] = float(len(valid))
    return out
