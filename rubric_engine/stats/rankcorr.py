"""Rank correlation between two judges' rankings of the same candidates: Kendall's tau-b with a bootstrap interval.

Why: a judge sweep ranks each candidate under each judge; whether the judges agree on the order is the question
a reader has, and two rankings of four models agree or disagree by chance more often than one expects, so the
number comes with an interval. Tau-b (ties corrected, as scipy.stats.kendalltau computes by default) of the
candidates' overall scores; the interval resamples questions (the same draws for every candidate under both
judges, `bootstrap.common_resamples`) and recomputes both rankings in each resample. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Mapping

from rubric_engine.scoring.aggregate import ScoredQuestion
from rubric_engine.scoring.question import DEFAULT_AGGREGATION, Aggregation
from rubric_engine.stats.bootstrap import common_resamples, percentile

__all__ = ["kendall_tau_b", "tau_interval"]


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of paired values: (concordant - discordant) / sqrt((n0 - ties_x) (n0 - ties_y)), n0 the
    number of pairs; None when it is undefined (fewer than 2 values, or every value of one side tied)."""
    if len(x) != len(y):
        raise ValueError(f"kendall_tau_b needs paired values, got {len(x)} and {len(y)}")
    n = len(x)
    concordant = discordant = ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0:
                ties_x += 1
            if dy == 0:
                ties_y += 1
            if dx != 0 and dy != 0:
                if (dx > 0) == (dy > 0):
                    concordant += 1
                else:
                    discordant += 1
    pairs = n * (n - 1) // 2
    denominator = (pairs - ties_x) * (pairs - ties_y)
    if denominator <= 0:
        return None
    return (concordant - discordant) / math.sqrt(denominator)


def tau_interval(scored_a: Sequence[Sequence[ScoredQuestion]], scored_b: Sequence[Sequence[ScoredQuestion]],
                 dimensions: Mapping[str, Sequence[str]], *, n: int = 1000, seed: int = 0, alpha: float = 0.05,
                 scale: float = 100.0, how: Aggregation = DEFAULT_AGGREGATION) -> dict[str, Any]:
    """Tau-b between judge A's and judge B's rankings of the same candidates (scored_a[i] and scored_b[i]: candidate
    i's per-question scores under A and under B), on the questions all of those runs scored, with a percentile
    bootstrap interval. {tau, lo, hi, questions, candidates, undefined}: `undefined` counts the resamples where tau
    has no value (a judge tied every candidate); they are left out of the interval and said, never counted as 0."""
    if len(scored_a) != len(scored_b):
        raise ValueError("each candidate needs its scores under both judges")
    k = len(scored_a)
    if k < 2:
        raise ValueError("a rank correlation needs at least 2 candidates ranked by both judges")
    points, resamples, m = common_resamples([*scored_a, *scored_b], dimensions, n=n, seed=seed, scale=scale, how=how)
    tau = kendall_tau_b(points[:k], points[k:])
    taus = [kendall_tau_b(v[:k], v[k:]) for v in resamples]
    defined = sorted(t for t in taus if t is not None)
    lo = hi = None
    if defined:
        lo, hi = percentile(defined, alpha / 2), percentile(defined, 1 - alpha / 2)
    return {"tau": tau, "lo": lo, "hi": hi, "questions": m, "candidates": k, "undefined": len(taus) - len(defined)}
