"""Hierarchical (two-stage) bootstrap: questions, then each question's samples, then each sample's gradings.

Why: with `candidate.samples=K` and `judge.repeats=R` a question's score is itself an estimate (the mean
over K replies, each graded by the majority of R gradings). Resampling questions alone treats that
estimate as exact; resampling at every level makes the interval include sampling and judge noise.

One resample: draw m questions with replacement; for each drawn question draw K of its samples with
replacement; for each drawn sample draw R of its gradings with replacement and combine them as the run
did (majority per criterion, the tie rule, the jury rule): the sample's value is the score of that
combined verdict. Because the combined verdict depends only on WHICH gradings were drawn (a multiset of
repeat indices), each (question, sample) carries its value for every multiset, precomputed by the caller
(`stats/sampling.py`); the bootstrap only looks them up. The question's value is the mean over its drawn
samples, and the overall is the declared statistic (macro over abilities or mean over questions) on the
drawn questions, as `aggregate.overall` computes it.

`levels` chooses what is resampled: ("questions", "samples", "repeats") for the intervals;
("repeats",) alone holds questions and samples at the observed ones and gives the judge-noise-only
component (docs/judge-noise.md). Pure: numpy only, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations_with_replacement
from typing import Any, Sequence

import numpy as np

__all__ = ["LEVELS", "MAX_RESAMPLED_REPEATS", "Nested", "multisets", "nested_stats", "paired_nested", "point"]

LEVELS = ("questions", "samples", "repeats")
MAX_RESAMPLED_REPEATS = 5  # 126 multisets per sample at R=5; above it gradings are not resampled


def multisets(repeats: int) -> list[tuple[int, ...]]:
    """Every multiset of `repeats` repeat indices drawn from range(repeats), as sorted tuples."""
    return list(combinations_with_replacement(range(repeats), repeats))


@dataclass
class Nested:
    """One run's values: `values[q, s, j, c]` = column c (an ability, or the question score) of question q,
    sample s, scored from the gradings in multiset j; NaN where question q has no column c. `repeats` is R
    (1 when gradings are not resampled, then j has the one observed verdict)."""

    ids: list[str]
    values: np.ndarray
    repeats: int = 1
    clip: bool = False

    def __post_init__(self) -> None:
        m, k, n_sets, _ = self.values.shape
        r = self.repeats
        if n_sets != len(multisets(r)):
            raise ValueError(f"{n_sets} multisets given for {r} repeats (expected {len(multisets(r))})")
        self.observed = multisets(r).index(tuple(range(r)))
        self.powers = r ** np.arange(r - 1, -1, -1)
        self.codes = np.full(r ** r, -1, dtype=np.int64)
        for j, ms in enumerate(multisets(r)):
            self.codes[int(np.dot(ms, self.powers))] = j
        if len(self.ids) != m:
            raise ValueError("one id per question is needed")

    @property
    def samples(self) -> int:
        return int(self.values.shape[1])

    def subset(self, rows: Sequence[int]) -> "Nested":
        return Nested([self.ids[i] for i in rows], self.values[list(rows)], self.repeats, self.clip)


def _statistic(q_values: np.ndarray, clip: bool) -> float:
    """Mean over columns present of each column's mean over the questions that have it (0-1 scale)."""
    present = ~np.isnan(q_values)
    counts = present.sum(axis=0)
    sums = np.where(present, q_values, 0.0).sum(axis=0)
    means = sums[counts > 0] / counts[counts > 0]
    value = float(means.mean())
    return min(1.0, max(0.0, value)) if clip else value


def point(n: Nested) -> float:
    """The run's own overall (0-1): every question once, every sample once, every grading once."""
    return _statistic(n.values[:, :, n.observed, :].mean(axis=1), n.clip)


def _draw(rng: np.random.Generator, n: Nested, q: np.ndarray, levels: Sequence[str]) -> np.ndarray:
    """Per drawn question, the mean over its drawn samples of their drawn gradings' value: (len(q), columns)."""
    m, k, r = len(q), n.samples, n.repeats
    if "samples" in levels and k > 1:
        s = rng.integers(0, k, size=(m, k))
    else:
        s = np.broadcast_to(np.arange(k), (m, k))
    if "repeats" in levels and r > 1:
        drawn = np.sort(rng.integers(0, r, size=(m, k, r)), axis=2)
        j = n.codes[drawn @ n.powers]
    else:
        j = np.full((m, k), n.observed)
    return n.values[q[:, None], s, j].mean(axis=1)


def _questions(rng: np.random.Generator, m: int, levels: Sequence[str]) -> np.ndarray:
    return rng.integers(0, m, size=m) if "questions" in levels else np.arange(m)


def _check(n_boot: int, alpha: float, levels: Sequence[str]) -> None:
    if n_boot < 1:
        raise ValueError(f"bootstrap needs n >= 1 resamples, got {n_boot}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (0.05 for a 95% interval), got {alpha}")
    unknown = set(levels) - set(LEVELS)
    if unknown or not levels:
        raise ValueError(f"levels must be a non-empty subset of {LEVELS}, got {tuple(levels)}")


def _summary(values: np.ndarray, alpha: float) -> tuple[float, float, float]:
    if values.min() == values.max():  # nothing varied (e.g. a judge that never flipped): exactly no spread
        return float(values[0]), float(values[0]), 0.0
    lo, hi = np.percentile(values, [100 * alpha / 2, 100 * (1 - alpha / 2)])  # linear, as bootstrap.percentile
    return float(lo), float(hi), float(values.std())


def nested_stats(n: Nested, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05, *, scale: float = 100.0,
                 levels: Sequence[str] = LEVELS) -> dict[str, Any]:
    """{point, lo, hi, std, levels}: the overall, its percentile interval and the (population) std of the
    resampled overalls, times `scale`, resampling the given levels (numpy's default_rng(seed))."""
    _check(n_boot, alpha, levels)
    if not n.ids:
        raise ValueError("the hierarchical bootstrap needs at least one scored question")
    rng = np.random.default_rng(seed)
    m = len(n.ids)
    values = np.array([_statistic(_draw(rng, n, _questions(rng, m, levels), levels), n.clip)
                       for _ in range(n_boot)]) * scale
    lo, hi, std = _summary(values, alpha)
    return {"point": point(n) * scale, "lo": lo, "hi": hi, "std": std, "levels": list(levels)}


def paired_nested(a: Nested, b: Nested, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05, *,
                  scale: float = 100.0, levels: Sequence[str] = LEVELS) -> dict[str, Any]:
    """overall(a) - overall(b) on the questions both scored: the SAME question draws for both runs, each
    run's samples and gradings drawn on their own (they are independent). {diff, lo, hi, std, excludes_zero,
    questions, levels}, times `scale`."""
    _check(n_boot, alpha, levels)
    where_b = {qid: i for i, qid in enumerate(b.ids)}
    rows_a = [i for i, qid in enumerate(a.ids) if qid in where_b]
    if not rows_a:
        raise ValueError("the two models have no scored question in common; nothing to compare")
    ca, cb = a.subset(rows_a), b.subset([where_b[a.ids[i]] for i in rows_a])
    if ca.values.shape[3] != cb.values.shape[3]:
        raise ValueError("the two runs have different score columns; were they scored on the same benchmark?")
    absent_a, absent_b = np.isnan(ca.values[:, 0, 0, :]), np.isnan(cb.values[:, 0, 0, :])
    if (absent_a != absent_b).any():
        bad = ca.ids[int(np.nonzero((absent_a != absent_b).any(axis=1))[0][0])]
        raise ValueError(f"question {bad!r} has different abilities for the two models; were they scored on the "
                         "same benchmark version?")
    rng = np.random.default_rng(seed)
    m = len(ca.ids)
    values = np.empty(n_boot)
    for i in range(n_boot):
        q = _questions(rng, m, levels)
        values[i] = _statistic(_draw(rng, ca, q, levels), ca.clip) - _statistic(_draw(rng, cb, q, levels), cb.clip)
    values *= scale
    lo, hi, std = _summary(values, alpha)
    return {"diff": (point(ca) - point(cb)) * scale, "lo": lo, "hi": hi, "std": std,
            "excludes_zero": lo > 0 or hi < 0, "questions": m, "levels": list(levels)}
