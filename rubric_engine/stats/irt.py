"""An item response model for rubric scores: fitted on earlier runs, it estimates a full score from a few questions.

Why a continuous two-parameter logistic model (a "fractional" 2PL): a rubric question's value is not right or
wrong but a number in [0, 1] (a log-normalised sum of weighted hits, a group's value on a question). The
model keeps the 2PL's expected curve, E[y_ij] = sigmoid(a_j (theta_i - b_j)), with a model's ability theta_i, an
item's discrimination a_j > 0 and difficulty b_j, and reads the observed value y_ij in [0, 1] through the Bernoulli
log-likelihood y log p + (1 - y) log(1 - p) (a quasi-likelihood: Papke and Wooldridge's fractional logit). For
binary y it is the textbook 2PL. A graded model would need the values cut into categories (a weighted rubric's values
take dozens of levels); a model per criterion would leave the question's score, a non-linear function of its hits,
to be simulated back. Here an item is whatever one value per run the caller chooses (a question, or one ability of
a question), and the expected value of an item not asked is read off the curve directly.

Everything here is pure arithmetic on arrays; the optimisers are scipy's (L-BFGS-B for the joint fit, a bounded
scalar search for one ability), never written by hand. Priors (theta ~ N(0, 1), log a ~ N(0, 0.5^2),
b ~ N(0, 2^2)) make the joint fit a maximum a posteriori one and keep an item every training run passed, or every
one failed, at a finite difficulty. A joint fit shrinks the abilities towards 0 (their prior) and lets the
discriminations grow to make up for it; the curve a (theta - b) is unchanged when theta is rescaled with a and b,
so after the fit the training abilities are standardised (mean 0, standard deviation 1, the scale a new model's
prior assumes) and a, b moved with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ItemFit", "fit_items", "expected", "information", "estimate_ability", "select_anchors",
           "next_question", "THETA_BOUND"]

THETA_BOUND = 6.0  # abilities searched in [-6, 6]: six prior standard deviations
_EPS = 1e-9
_LOG_A_SD, _B_SD = 0.5, 2.0


@dataclass(frozen=True)
class ItemFit:
    """Fitted item parameters (one per column) and the training runs' abilities (one per row)."""

    a: np.ndarray
    b: np.ndarray
    theta: np.ndarray
    resid_sd: np.ndarray  # per item: the training runs' residual standard deviation around the curve
    converged: bool


def expected(theta: float | np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sigmoid(a (theta - b)): an item's expected value at ability theta (theta a scalar, or a column)."""
    return 1.0 / (1.0 + np.exp(-a * (np.asarray(theta, dtype=float) - b)))


def information(theta: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Fisher information a^2 p (1 - p) of each item about theta (the 2PL's, also the quasi-likelihood's)."""
    p = expected(theta, a, b)
    return a * a * p * (1.0 - p)


def _neg_log_posterior(params: np.ndarray, y: np.ndarray, seen: np.ndarray) -> tuple[float, np.ndarray]:
    """The joint fit's objective and its gradient; params = [theta (n), log a (m), b (m)]."""
    n, m = y.shape
    theta, log_a, b = params[:n], params[n:n + m], params[n + m:]
    a = np.exp(log_a)
    z = a[None, :] * (theta[:, None] - b[None, :])
    p = np.clip(1.0 / (1.0 + np.exp(-z)), _EPS, 1.0 - _EPS)
    ll = np.where(seen, y * np.log(p) + (1.0 - y) * np.log(1.0 - p), 0.0).sum()
    r = np.where(seen, y - p, 0.0)  # d ll / d z
    d_theta = (r * a[None, :]).sum(axis=1)
    d_log_a = (r * (theta[:, None] - b[None, :])).sum(axis=0) * a
    d_b = -(r * a[None, :]).sum(axis=0)
    prior = 0.5 * (theta @ theta + (log_a @ log_a) / _LOG_A_SD ** 2 + (b @ b) / _B_SD ** 2)
    grad = -np.concatenate([d_theta, d_log_a, d_b]) + np.concatenate([theta, log_a / _LOG_A_SD ** 2, b / _B_SD ** 2])
    return float(-ll + prior), grad


def fit_items(values: np.ndarray, max_iter: int = 2000) -> ItemFit:
    """The joint maximum a posteriori fit of every item's (a, b) and every training run's theta.

    `values`: runs x items, each in [0, 1], NaN where a run has no value for the item (an error, a question
    it did not ask). Returns the parameters and each item's residual standard deviation."""
    from scipy.optimize import minimize

    y = np.asarray(values, dtype=float)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 1:
        raise ValueError("fit_items needs a runs x items matrix with at least 2 runs and 1 item")
    seen = ~np.isnan(y)
    y0 = np.where(seen, np.clip(y, 0.0, 1.0), 0.0)
    n, m = y.shape
    mean_run = np.array([y0[i, seen[i]].mean() if seen[i].any() else 0.5 for i in range(n)])
    z_run = np.log(np.clip(mean_run, 0.02, 0.98) / (1 - np.clip(mean_run, 0.02, 0.98)))
    theta0 = (z_run - z_run.mean()) / (z_run.std() or 1.0)  # start at the runs' standardised mean logits
    mean_item = np.array([y0[seen[:, j], j].mean() if seen[:, j].any() else 0.5 for j in range(m)])
    b0 = -np.log(np.clip(mean_item, 0.02, 0.98) / (1 - np.clip(mean_item, 0.02, 0.98)))
    x0 = np.concatenate([theta0, np.zeros(m), b0])
    res = minimize(_neg_log_posterior, x0, args=(y0, seen), jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "maxfun": max_iter * 2})
    theta, a, b = res.x[:n], np.exp(res.x[n:n + m]), res.x[n + m:]
    centre, spread = float(theta.mean()), float(theta.std()) or 1.0  # back on the prior's scale (docstring)
    theta, a, b = (theta - centre) / spread, a * spread, (b - centre) / spread
    resid = np.where(seen, y0 - expected(theta[:, None], a[None, :], b[None, :]), np.nan)
    counts = seen.sum(axis=0)
    sd = np.sqrt(np.nansum(resid ** 2, axis=0) / np.maximum(counts, 1))
    return ItemFit(a=a, b=b, theta=theta, resid_sd=sd, converged=bool(res.success))


def _ability_objective(theta: float, y: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    p = np.clip(expected(theta, a, b), _EPS, 1.0 - _EPS)
    return float(-(y * np.log(p) + (1.0 - y) * np.log(1.0 - p)).sum() + 0.5 * theta * theta)


def estimate_ability(y: Sequence[float] | np.ndarray, a: np.ndarray,
                     b: np.ndarray) -> tuple[float, float]:
    """(theta, its standard error): the maximum a posteriori ability (prior N(0, 1)) from the observed items'
    values `y` with their fitted (a, b), and 1 / sqrt(the observed information plus the prior's 1)."""
    from scipy.optimize import minimize_scalar

    yy = np.clip(np.asarray(y, dtype=float), 0.0, 1.0)
    if yy.size == 0:
        return 0.0, 1.0
    res = minimize_scalar(_ability_objective, bounds=(-THETA_BOUND, THETA_BOUND), args=(yy, a, b),
                          method="bounded", options={"xatol": 1e-6})
    theta = float(res.x)
    return theta, float(1.0 / np.sqrt(information(theta, a, b).sum() + 1.0))


def select_anchors(fit: ItemFit, groups: Sequence[Sequence[int]], k: int) -> list[int]:
    """k groups (questions, each a list of item columns) chosen to measure every training ability well: the
    training runs' abilities are cut into k quantile points, and for each point in turn (from the middle
    out) the not yet chosen group with the most Fisher information there is taken. Returns group indices."""
    k = max(0, min(k, len(groups)))
    points = np.quantile(fit.theta, (np.arange(k) + 0.5) / k) if k else np.array([])
    order = np.argsort(np.abs(np.arange(k) - (k - 1) / 2.0), kind="stable")
    chosen: list[int] = []
    for t in points[order]:
        info = information(float(t), fit.a, fit.b)
        best = max((g for g in range(len(groups)) if g not in chosen),
                   key=lambda g: (float(info[list(groups[g])].sum()), -g))
        chosen.append(best)
    return chosen


def next_question(theta: float, fit: ItemFit, groups: Sequence[Sequence[int]], asked: Sequence[int]) -> int | None:
    """The group not yet asked with the most Fisher information at the current ability (adaptive testing's rule);
    None when every group was asked."""
    info = information(theta, fit.a, fit.b)
    left = set(range(len(groups))) - set(asked)
    if not left:
        return None
    return max(sorted(left), key=lambda g: float(info[list(groups[g])].sum()))
