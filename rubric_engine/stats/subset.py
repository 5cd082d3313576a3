"""A benchmark's full score estimated from a subset of its questions, with an item bank fitted on earlier runs.

Why the items are (question, group) values and the score a weighted sum of them: the engine's two overall
statistics are linear in the stored values. A macro mean over groups (a taxonomy's abilities) is
sum over groups g of (1 / G) x the mean of g's values over the n_g questions that have g, so each (question, g)
value counts 1 / (G n_g); a mean over questions counts a question's score weight_q / sum(weight). An item is
therefore one ability of one question under the macro mean and a whole question under the mean over questions,
and the full score is w . v over every item. With a subset asked, the items asked keep their observed values and
every other item its expected value at the model's estimated ability (stats/irt.py): the plug-in estimate
tinyBenchmarks calls gp-IRT without its mixing weight. A question is the unit asked (its groups come together).

A model is rarely exactly as good at every group as its one ability says: each group (an ability) gets a shift,
a random effect whose spread tau_g is measured on the training runs (group_spread); a new model's shift on g is
predicted from its residuals on g's questions that were asked, shrunk towards 0 (the best linear predictor), and
added to the curve for g's questions not asked.

The interval simulates what is not known: the ability (drawn from its normal approximation, with the
quasi-likelihood's sandwich standard error), each group's shift (its remaining spread, one draw shared by the
group's items) and, for every item not asked, its own deviation (normal, the item's residual spread over the
training runs without the group's part), all added to the point's parts; percentiles of the simulated full scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from rubric_engine.scoring.aggregate import ScoredQuestion

from rubric_engine.stats.irt import ItemFit, estimate_ability, expected, information

__all__ = ["Bank", "Estimate", "QUESTION_ITEM", "item_values", "bank_layout", "linear_weights", "build_bank",
           "group_spread", "estimate_full"]

QUESTION_ITEM = "score"  # the group name of a question's one item under a mean over questions


@dataclass(frozen=True)
class Bank:
    """The item bank: the items (question id, group), which columns belong to which question, each item's weight
    in the full score, and its fitted parameters."""

    questions: tuple[str, ...]
    keys: tuple[tuple[str, str], ...]
    groups: tuple[tuple[int, ...], ...]  # per question: its item columns
    weights: np.ndarray
    fit: ItemFit
    clip: bool = False  # the overall is clipped to [0, 1] (aggregation clip: group or overall)
    tau: Mapping[str, float] = field(default_factory=dict)  # per group: the spread of a model's shift (group_spread)


@dataclass(frozen=True)
class Estimate:
    point: float  # the estimated full score, 0-1
    low: float
    high: float
    theta: float
    theta_se: float
    asked: tuple[str, ...]  # the questions whose values were used


def item_values(scored: Sequence[ScoredQuestion], by_group: bool) -> dict[tuple[str, str], float]:
    """One run's items: (question, ability) -> value under a macro mean over groups (`by_group`), or
    (question, "score") -> question score under a mean over questions."""
    if by_group:
        return {(q.id, g): float(v) for q in scored for g, v in q.abilities.items()}
    return {(q.id, QUESTION_ITEM): float(q.score) for q in scored}


def bank_layout(keys: Sequence[tuple[str, str]]) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
    """The questions in first-seen order and, for each, the columns of its items."""
    cols: dict[str, list[int]] = {}
    for j, (qid, _) in enumerate(keys):
        cols.setdefault(qid, []).append(j)
    return tuple(cols), tuple(tuple(c) for c in cols.values())


def linear_weights(keys: Sequence[tuple[str, str]], by_group: bool,
                   question_weights: Mapping[str, float] | None = None) -> np.ndarray:
    """Each item's weight in the full score (module docstring): 1 / (G n_g) under a macro mean over the G groups,
    weight_q / sum(weight) under a mean over questions (every weight 1 when none is given)."""
    if by_group:
        per_group: dict[str, int] = {}
        for _, g in keys:
            per_group[g] = per_group.get(g, 0) + 1
        return np.array([1.0 / (len(per_group) * per_group[g]) for _, g in keys])
    qw = np.array([float((question_weights or {}).get(q, 1.0)) for q, _ in keys])
    return qw / qw.sum()


def _robust_se(theta: float, a: np.ndarray, b: np.ndarray, sd: np.ndarray) -> float:
    """The ability's standard error from the quasi-likelihood's sandwich: the score's variance sum a^2 sd^2 (each
    item's spread around the curve, from the training runs) over the squared curvature (information plus the
    prior's 1). Bernoulli's p (1 - p) would overstate the spread of values that are not 0 or 1."""
    info = float(information(theta, a, b).sum()) + 1.0
    return float(np.sqrt(float((a * a * sd * sd).sum()) + 1.0) / info)


def build_bank(runs: Sequence[Mapping[tuple[str, str], float]], by_group: bool,
               question_weights: Mapping[str, float] | None = None, clip: bool = False) -> Bank:
    """Fit the item bank on the training runs' items (item_values of each run; an item a run lacks is missing)."""
    from rubric_engine.stats.irt import fit_items

    keys = tuple(dict.fromkeys(k for run in runs for k in run))
    matrix = np.array([[run.get(k, np.nan) for k in keys] for run in runs], dtype=float)
    questions, groups = bank_layout(keys)
    fit = fit_items(matrix)
    return Bank(questions, keys, groups, linear_weights(keys, by_group, question_weights), fit, clip,
                group_spread(matrix, fit, keys))


def group_spread(values: np.ndarray, fit: ItemFit, keys: Sequence[tuple[str, str]]) -> dict[str, float]:
    """Per group g, tau_g: the standard deviation across training runs of a run's shift on g's items beyond its
    ability (a model better at one ability than its overall ability says). The mean residual of run i on g,
    rbar_ig, has E[rbar_ig^2] = tau_g^2 + s_ig^2 / n_ig (s_ig^2 the residuals' variance within the group), so
    tau_g^2 = mean_i(rbar_ig^2 - s_ig^2 / n_ig), at least 0 (a method-of-moments estimate)."""
    resid = values - expected(fit.theta[:, None], fit.a[None, :], fit.b[None, :])
    out: dict[str, float] = {}
    for g in dict.fromkeys(k[1] for k in keys):
        cols = [j for j, k in enumerate(keys) if k[1] == g]
        terms = []
        for row in resid[:, cols]:
            r = row[~np.isnan(row)]
            if r.size >= 2:
                terms.append(r.mean() ** 2 - r.var(ddof=1) / r.size)
        out[g] = float(np.sqrt(max(0.0, float(np.mean(terms))))) if terms else 0.0
    return out


def _group_shifts(bank: Bank, seen: np.ndarray, resid: np.ndarray,
                  within: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per item: the predicted shift of its group for this model (the observed mean residual on the group shrunk
    by tau^2 / (tau^2 + within variance / n), the best linear predictor) and the shift's remaining spread."""
    group = [k[1] for k in bank.keys]
    shift, spread = np.zeros(len(group)), np.zeros(len(group))
    for g, tau in bank.tau.items():
        cols = np.array([x == g for x in group])
        obs = cols & seen
        n = int(obs.sum())
        noise = float((within[obs] ** 2).mean()) / n if n else 0.0
        keep = tau * tau / (tau * tau + noise) if n and tau > 0 else 0.0
        shift[cols] = keep * float(resid[obs[seen]].mean()) if n else 0.0
        spread[cols] = tau * np.sqrt(1.0 - keep)
    return shift, spread


def estimate_full(bank: Bank, observed: Mapping[tuple[str, str], float], draws: int = 2000, seed: int = 0,
                  level: float = 0.95, theta: float | None = None) -> Estimate:
    """The full score from the observed items (a subset of the bank's keys; values in [0, 1]) and its interval.
    `theta`: the ability when it is known otherwise (bench/bench_subset.py's bound: estimated from every question)."""
    seen = np.array([k in observed for k in bank.keys])
    y = np.array([observed[k] for k in bank.keys if k in observed], dtype=float)
    fit = bank.fit
    if theta is None:
        theta, _ = estimate_ability(y, fit.a[seen], fit.b[seen])
    se = _robust_se(theta, fit.a[seen], fit.b[seen], fit.resid_sd[seen])
    known = float(bank.weights[seen] @ np.clip(y, 0.0, 1.0))
    tau_of = np.array([bank.tau.get(k[1], 0.0) for k in bank.keys])
    within = np.sqrt(np.maximum(fit.resid_sd ** 2 - tau_of ** 2, 0.0))
    shift, spread = _group_shifts(bank, seen, np.clip(y, 0.0, 1.0) - expected(theta, fit.a[seen], fit.b[seen]),
                                  within)
    un = ~seen
    w_un, a_un, b_un = bank.weights[un], fit.a[un], fit.b[un]
    point = known + float(w_un @ np.clip(expected(theta, a_un, b_un) + shift[un], 0.0, 1.0))
    rng = np.random.default_rng(seed)
    thetas = rng.normal(theta, se, size=draws)
    group_ids = {g: i for i, g in enumerate(dict.fromkeys(k[1] for k in bank.keys))}
    col_group = np.array([group_ids[k[1]] for k in bank.keys], dtype=int)[un]
    shared = rng.normal(size=(draws, len(group_ids)))[:, col_group]  # one draw per group, shared by its items
    means = np.clip(expected(thetas[:, None], a_un[None, :], b_un[None, :]) + shift[un][None, :], 0.0, 1.0)
    # deviations added unclipped: only their weighted sum matters, and clipping each one near 0 or 1 would move
    # the simulated scores away from the point; the total is kept in [0, 1], where every overall lies
    noise = shared * spread[un][None, :] + rng.normal(size=(draws, a_un.size)) * within[un][None, :]
    totals = np.clip(known + (means + noise) @ w_un, 0.0, 1.0)
    if bank.clip:
        point = min(1.0, max(0.0, point))
    tail = (1.0 - level) / 2.0
    low, high = (float(v) for v in np.quantile(totals, [tail, 1.0 - tail]))
    asked = tuple(q for q, cols in zip(bank.questions, bank.groups) if any(seen[list(cols)]))
    return Estimate(point=point, low=min(low, point), high=max(high, point), theta=theta, theta_se=se, asked=asked)

