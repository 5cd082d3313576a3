"""Which questions to ask for the full-score estimate: the ones that shrink its expected error most.

Why not the textbook rule alone (the most Fisher information about the ability, stats/irt.next_question): the
estimate's error has three parts (stats/subset.py), and information about theta addresses only the first:
- the ability's: (sum over items not asked of w_j dp_j/dtheta)^2 / (the information gathered + 1);
- each group's shift: for a group g, (the weight of g's items not asked)^2 x tau_g^2 s_g^2 / (tau_g^2 n_g + s_g^2),
  the shift's spread left once n_g of its items are observed (s_g^2 their mean spread around the curve);
- the items' own deviations: sum over items not asked of w_j^2 s_j^2.
An item's weight w_j in the full score differs a lot between items (a rare ability's items weigh many times a
common one's under a macro mean), so a question holding heavy, noisy items removes more error by being observed
than one that is merely informative about theta. The rule here picks the question whose asking leaves the least
expected variance (an A-optimal design for the one number reported), computed for every candidate question at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from rubric_engine.stats.irt import estimate_ability, expected, information
from rubric_engine.stats.subset import Bank, Estimate, estimate_full

__all__ = ["variance_if_asked", "next_for_estimate", "choose_anchors", "adaptive"]


def _layout(bank: Bank) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per column: its question's index, its group's index; per group: tau and the mean within spread s^2."""
    qidx = np.empty(len(bank.keys), dtype=int)
    for q, cols in enumerate(bank.groups):
        qidx[list(cols)] = q
    names = list(dict.fromkeys(k[1] for k in bank.keys))
    gidx = np.array([names.index(k[1]) for k in bank.keys], dtype=int)
    tau = np.array([bank.tau.get(g, 0.0) for g in names])
    within2 = np.maximum(bank.fit.resid_sd ** 2 - tau[gidx] ** 2, 0.0)
    s2 = np.bincount(gidx, weights=within2, minlength=len(names)) / np.bincount(gidx, minlength=len(names))
    return qidx, gidx, tau, s2


def variance_if_asked(bank: Bank, theta: float, asked: np.ndarray) -> np.ndarray:
    """For every question, the estimate's expected variance (module docstring) once it is asked besides the
    columns `asked` (a boolean mask); questions already asked get +inf."""
    fit, w = bank.fit, bank.weights
    qidx, gidx, tau, s2 = _layout(bank)
    n_q, n_g = len(bank.groups), len(tau)
    p = expected(theta, fit.a, fit.b)
    slope, info = w * fit.a * p * (1 - p), information(theta, fit.a, fit.b)
    within2 = np.maximum(fit.resid_sd ** 2 - tau[gidx] ** 2, 0.0)
    un = ~asked

    def per_question(values: np.ndarray) -> np.ndarray:
        return np.bincount(qidx, weights=values * un, minlength=n_q)

    ability = (float((slope * un).sum()) - per_question(slope)) ** 2 / (
        float(info[asked].sum()) + 1.0 + per_question(info))
    items = float((w * w * within2 * un).sum()) - per_question(w * w * within2)
    pair = qidx * n_g + gidx  # (question, group) cells: what asking a question removes from each group
    w_qg = np.bincount(pair, weights=w * un, minlength=n_q * n_g).reshape(n_q, n_g)
    n_qg = np.bincount(pair, weights=un.astype(float), minlength=n_q * n_g).reshape(n_q, n_g)
    w_left = np.bincount(gidx, weights=w * un, minlength=n_g)[None, :] - w_qg
    n_seen = np.bincount(gidx, weights=asked.astype(float), minlength=n_g)[None, :] + n_qg
    t2 = (tau * tau)[None, :]
    left = np.where(t2 > 0, t2 * s2[None, :] / np.maximum(t2 * n_seen + s2[None, :], 1e-300), 0.0)
    shifts = (w_left ** 2 * left).sum(axis=1)
    total = ability + items + shifts
    done = np.bincount(qidx, weights=asked.astype(float), minlength=n_q) > 0
    return np.where(done, np.inf, total)


def next_for_estimate(bank: Bank, theta: float, asked: Sequence[int], exclude: Sequence[int] = ()) -> int | None:
    """The question not yet asked (`asked`: question indices) that leaves the least expected variance; None when
    every question was asked. `exclude`: questions that may not be picked (not in the run's selection); unlike
    the asked ones they stay unobserved in the variance."""
    if len(set(asked) | set(exclude)) >= len(bank.groups):
        return None
    mask = np.zeros(len(bank.keys), dtype=bool)
    for g in asked:
        mask[list(bank.groups[g])] = True
    v = variance_if_asked(bank, theta, mask)
    for g in (*asked, *exclude):
        v[g] = np.inf
    return int(np.argmin(v))


def choose_anchors(bank: Bank, k: int, points: int = 5) -> list[int]:
    """k questions for every model alike: greedily, the one leaving the least expected variance averaged over
    `points` quantiles of the training abilities (a model to come is somewhere among them)."""
    thetas = np.quantile(bank.fit.theta, (np.arange(points) + 0.5) / points)
    mask = np.zeros(len(bank.keys), dtype=bool)
    chosen: list[int] = []
    for _ in range(max(0, min(k, len(bank.groups)))):
        v = np.mean([variance_if_asked(bank, float(t), mask) for t in thetas], axis=0)
        v[chosen] = np.inf
        g = int(np.argmin(v))
        chosen.append(g)
        mask[list(bank.groups[g])] = True
    return chosen


Pick = Callable[[Bank, float, Sequence[int]], "int | None"]


def adaptive(bank: Bank, ask: Callable[[str], Mapping[tuple[str, str], float]], budget: int,
             draws: int = 2000, seed: int = 0, pick: Pick = next_for_estimate, wave: int = 1) -> Estimate:
    """Adaptive selection: ask `budget` questions one at a time, each the one leaving the least expected variance
    at the ability estimated from the answers so far (the first at the prior's 0), then estimate the full score.
    `ask(question id)` returns that question's observed items (an empty mapping: it could not be scored);
    `pick`: another rule (bank, theta, asked) -> the next question, e.g. the most informative one; `wave`: that
    many questions picked at one ability before it is estimated again (a run's waves, item_budget=)."""
    observed: dict[tuple[str, str], float] = {}
    asked: list[int] = []
    theta = 0.0
    while len(asked) < budget:
        before = len(asked)
        while len(asked) < min(budget, before + wave) and (g := pick(bank, theta, asked)) is not None:
            asked.append(g)
            observed.update(ask(bank.questions[g]))
        if len(asked) == before:
            break
        seen = [j for j, k in enumerate(bank.keys) if k in observed]
        theta, _ = estimate_ability(np.array([observed[bank.keys[j]] for j in seen]), bank.fit.a[seen],
                                    bank.fit.b[seen])
    return estimate_full(bank, observed, draws, seed)
