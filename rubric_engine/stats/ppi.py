"""Prediction-powered inference (PPI, PPI++) for a mean: many judge scores plus a few human ones.

Why: a judge's benchmark score is biased wherever the judge disagrees with people, and a human-only
score from a few labelled replies is unbiased but wide. PPI (Angelopoulos, Bates, Fannjiang, Jordan,
Zrnic 2023, "Prediction-powered inference") uses the labelled replies to measure the judge's bias and the
unlabelled ones to shrink the variance; PPI++ (Angelopoulos, Duchi, Zrnic 2023, "PPI++: efficient
prediction-powered inference") weights the judge by a tuned lambda so the interval is never much wider
than the human-only one, even for a useless judge. Pure numpy, no I/O: the calibrate command and the
tests call the same functions.

With n labelled replies (human score Y_i, judge score Yhat_i) and N unlabelled ones (judge score Yhat_j):

    theta(lambda) = lambda * mean(Yhat_unlabelled) + mean(Y - lambda * Yhat_labelled)
    se^2          = var(lambda * Yhat_unlabelled) / N + var(Y - lambda * Yhat_labelled) / n   (var: ddof 0)
    lambda*       = cov(Y, Yhat_labelled) / ((1 + n / N) * var(Yhat_all)), clipped to [0, 1]

(cov with ddof 0 over the labelled replies, var(Yhat_all) with ddof 1 over labelled and unlabelled
together), as the authors' reference implementation (ppi_py: ppi_mean_pointestimate, ppi_mean_ci,
_calc_lam_glm) computes them; lambda = 1 is plain PPI, lambda = 0 the human-only mean. The interval is
theta +- z * se (normal approximation, z = 1.96 for 95%).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Z95", "power_lambda", "ppi_mean", "ppi_se", "classical", "labels_to_halve", "ppi_estimate",
           "paired_rates"]

Z95 = 1.959963984540054  # the 97.5% quantile of the standard normal


def _arrays(y: npt.ArrayLike, yhat: npt.ArrayLike, yhat_unl: npt.ArrayLike) -> tuple[np.ndarray, ...]:
    a, b, c = (np.asarray(v, dtype=float) for v in (y, yhat, yhat_unl))
    if a.shape != b.shape:
        raise ValueError(f"human and judge scores of the labelled replies differ in length: {a.size} vs {b.size}")
    if a.size < 2 or c.size < 1:
        raise ValueError(f"PPI needs at least 2 labelled and 1 unlabelled reply (got {a.size} and {c.size})")
    return a, b, c


def power_lambda(y: npt.ArrayLike, yhat: npt.ArrayLike, yhat_unl: npt.ArrayLike) -> float:
    """PPI++'s variance-minimising weight of the judge, clipped to [0, 1]; 0 when the judge's scores are constant."""
    a, b, c = _arrays(y, yhat, yhat_unl)
    n, big_n = a.size, c.size
    cov = float(np.mean((a - a.mean()) * (b - b.mean())))
    var = float(np.var(np.concatenate([b, c]), ddof=1))
    if var == 0.0:
        return 0.0
    return min(1.0, max(0.0, cov / ((1.0 + n / big_n) * var)))


def ppi_mean(y: npt.ArrayLike, yhat: npt.ArrayLike, yhat_unl: npt.ArrayLike, lam: float = 1.0) -> float:
    """The prediction-powered point estimate of the mean human score."""
    a, b, c = _arrays(y, yhat, yhat_unl)
    return float(lam * c.mean() + np.mean(a - lam * b))


def ppi_se(y: npt.ArrayLike, yhat: npt.ArrayLike, yhat_unl: npt.ArrayLike, lam: float = 1.0) -> float:
    """The standard error of `ppi_mean` (the unlabelled term plus the rectifier term)."""
    a, b, c = _arrays(y, yhat, yhat_unl)
    return math.sqrt(float(np.var(lam * c)) / c.size + float(np.var(a - lam * b)) / a.size)


def classical(y: npt.ArrayLike) -> tuple[float, float]:
    """The human-only mean and its standard error (ddof 0, as the reference's classical interval)."""
    a = np.asarray(y, dtype=float)
    return float(a.mean()), float(a.std() / math.sqrt(a.size))


def labels_to_halve(y: npt.ArrayLike, yhat: npt.ArrayLike, yhat_unl: npt.ArrayLike, lam: float) -> int | None:
    """How many labelled replies (of the same n + N) would halve the interval, holding the two variance terms
    and lambda where they are now; None when even labelling all but one reply would not."""
    a, b, c = _arrays(y, yhat, yhat_unl)
    total = a.size + c.size
    v_imp, v_rect = float(np.var(lam * c)), float(np.var(a - lam * b))
    target = (v_imp / c.size + v_rect / a.size) / 4.0
    for n in range(a.size + 1, total):
        if v_imp / (total - n) + v_rect / n <= target:
            return n
    return None


def _interval(center: float, se: float) -> list[float]:
    return [center - Z95 * se, center + Z95 * se]


def ppi_estimate(y: npt.ArrayLike, yhat: npt.ArrayLike, yhat_unl: npt.ArrayLike, power: bool = True) -> dict[str, Any]:
    """Everything the calibration reports for one run: the corrected score (PPI++ when `power`, else PPI with
    lambda = 1) with its 95% interval, the human-only and judge-only means, and the labels that would halve it."""
    a, b, c = _arrays(y, yhat, yhat_unl)
    lam = power_lambda(a, b, c) if power else 1.0
    est, se = ppi_mean(a, b, c, lam), ppi_se(a, b, c, lam)
    h_mean, h_se = classical(a)
    all_judge = np.concatenate([b, c])
    return {"estimate": est, "se": se, "interval": _interval(est, se), "lambda": lam,
            "method": "PPI++ (power-tuned lambda)" if power else "PPI (lambda = 1)",
            "labelled": int(a.size), "unlabelled": int(c.size),
            "human_only": {"estimate": h_mean, "se": h_se, "interval": _interval(h_mean, h_se)},
            "judge_only": float(all_judge.mean()), "judge_on_labelled": float(b.mean()),
            "labels_to_halve": labels_to_halve(a, b, c, lam)}


def paired_rates(judge: npt.ArrayLike, human: npt.ArrayLike, clusters: Sequence[str]) -> dict[str, Any]:
    """Judge vs human hit rate on the same items, the difference (judge minus human) and its 95% interval.

    The items of one question are not independent, so the standard error is the cluster-robust one over
    questions: with d_i = judge_i - human_i and S_c the sum of (d_i - mean d) over question c's items,
    se^2 = G / (G - 1) * sum_c S_c^2 / n^2 (G questions, n items), the interval clipped to [-1, 1]. No interval
    with fewer than 2 questions."""
    j, h = np.asarray(judge, dtype=float), np.asarray(human, dtype=float)
    if j.shape != h.shape or j.size != len(clusters):
        raise ValueError("judge, human and cluster lists differ in length")
    n = j.size
    if n == 0:
        return {"n": 0, "questions": 0, "judge_rate": None, "human_rate": None, "difference": None, "interval": None}
    d = j - h
    diff = float(d.mean())
    sums: dict[str, float] = {}
    for x, c in zip(d - diff, clusters):
        sums[c] = sums.get(c, 0.0) + float(x)
    g = len(sums)
    out: dict[str, Any] = {"n": int(n), "questions": g, "judge_rate": float(j.mean()), "human_rate": float(h.mean()),
                           "difference": diff, "interval": None}
    if g >= 2:
        se = math.sqrt(g / (g - 1) * sum(s * s for s in sums.values())) / n
        lo, hi = _interval(diff, se)
        out["interval"] = [max(-1.0, lo), min(1.0, hi)]  # a difference of two rates lies in [-1, 1]
    return out
