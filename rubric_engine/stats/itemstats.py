"""Classical item statistics for rubric criteria: point-biserial, corrected item-total, KR-20, Cronbach's alpha.

Why a module of its own: `rubric-engine items` judges a rubric by the textbook statistics of test theory, and
each is checked in tests against a reference (scipy's point-biserial, a published KR-20 example, worked
Cronbach's alpha examples). Pure numpy, no I/O: the tables that use them are built in stats/rubricitems.py.

Conventions: a matrix has one row per examinee (a reply, or a model) and one column per item; a statistic that
is undefined (a constant column, fewer than two rows, zero total variance) is None, never 0. Cronbach's alpha
uses the same variance convention for the items and the total, so the ddof cancels; on 0/1 data it equals
KR-20 computed with p*q and the population variance of the totals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["pearson", "point_biserial", "corrected_item_total", "cronbach_alpha", "kr20", "AlphaInterval",
           "alpha_interval", "is_binary"]


def pearson(x: "Sequence[float] | np.ndarray", y: "Sequence[float] | np.ndarray") -> float | None:
    """Pearson's r; None with fewer than 3 pairs or a constant variable (no correlation is defined)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape or a.size < 3:
        return None
    da, db = a - a.mean(), b - b.mean()
    den = float(np.sqrt((da * da).sum() * (db * db).sum()))
    if den <= 1e-12:
        return None
    return float(max(-1.0, min(1.0, (da * db).sum() / den)))


def point_biserial(binary: Sequence[bool | int], y: Sequence[float]) -> float | None:
    """The point-biserial correlation of a 0/1 variable with a continuous one (Pearson's r on the 0/1 coding)."""
    return pearson([float(v) for v in binary], y)


def corrected_item_total(matrix: np.ndarray) -> list[float | None]:
    """Per column: r between the item and the sum of the OTHER items of its row (the item's own score is left
    out of the total, so an item does not correlate with itself)."""
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[1] < 2:
        return [None] * (m.shape[1] if m.ndim == 2 else 0)
    total = m.sum(axis=1)
    return [pearson(m[:, j], total - m[:, j]) for j in range(m.shape[1])]


def cronbach_alpha(matrix: np.ndarray) -> float | None:
    """k/(k-1) * (1 - sum of item variances / variance of the row totals); None when undefined."""
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] < 2 or m.shape[1] < 2 or not np.all(np.isfinite(m)):
        return None
    k = m.shape[1]
    total_var = float(m.sum(axis=1).var(ddof=1))
    if total_var <= 1e-12:
        return None
    return float(k / (k - 1) * (1 - float(m.var(axis=0, ddof=1).sum()) / total_var))


def is_binary(matrix: np.ndarray) -> bool:
    m = np.asarray(matrix, dtype=float)
    return bool(m.size) and bool(np.all((m == 0) | (m == 1)))


def kr20(matrix: np.ndarray) -> float | None:
    """Kuder-Richardson 20 for 0/1 items: k/(k-1) * (1 - sum p*q / population variance of the totals)."""
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] < 2 or m.shape[1] < 2:
        return None
    if not is_binary(m):
        raise ValueError("KR-20 needs 0/1 items; use cronbach_alpha")
    k = m.shape[1]
    p = m.mean(axis=0)
    total_var = float(m.sum(axis=1).var(ddof=0))
    if total_var <= 1e-12:
        return None
    return float(k / (k - 1) * (1 - float((p * (1 - p)).sum()) / total_var))


@dataclass(frozen=True)
class AlphaInterval:
    """Cronbach's alpha (KR-20 on 0/1 data) with a percentile bootstrap interval over the rows (examinees)."""

    alpha: float | None
    lo: float | None
    hi: float | None
    rows: int
    items: int
    resamples: int  # resamples in which alpha was defined (a resample of identical rows has none)
    binary: bool


def alpha_interval(matrix: np.ndarray, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> AlphaInterval:
    """alpha and its 95% percentile interval from `n_boot` resamples of the rows; no interval when fewer than
    half of the resamples define alpha (too few distinct examinees to say anything)."""
    m = np.asarray(matrix, dtype=float)
    rows, items = (m.shape if m.ndim == 2 else (0, 0))
    point = cronbach_alpha(m)
    values: list[float] = []
    if point is not None and n_boot > 0:
        rng = np.random.default_rng(seed)
        for _ in range(n_boot):
            a = cronbach_alpha(m[rng.integers(0, rows, rows)])
            if a is not None:
                values.append(a)
    lo = hi = None
    if values and len(values) >= n_boot / 2:
        lo, hi = (float(v) for v in np.quantile(np.array(values), [(1 - level) / 2, (1 + level) / 2]))
    return AlphaInterval(alpha=point, lo=lo, hi=hi, rows=int(rows), items=int(items), resamples=len(values),
                         binary=is_binary(m))
