"""Synthetic benchmarks for the subset estimator (tests/stats/test_irt.py, bench/bench_subset.py).

Two generators, both from a known item model, neither the model the estimator fits exactly:
- `fractional`: each (model, item) value drawn from a beta distribution whose mean is the 2PL curve
  sigmoid(a (theta - b)), one item per question (a mean over questions);
- `heartbench_shaped`: questions shaped like HeartBench's (296 questions, 15 abilities of unequal frequency,
  about 7 abilities a question, 1 to 3 weighted binary criteria an ability, about a quarter of them penalties),
  each criterion hit with its own 2PL probability (a penalty's probability falls with ability), plus a
  per-model, per-ability deviation (a model better at one ability than its overall ability says), scored with
  eq. 1 (log-normalised) and macro-averaged over abilities as the engine does.
Only numbers: no text of the benchmark is used.

`bayes_full` is what the HeartBench-shaped generator itself knows: the posterior mean of a model's full score given
its hits on the questions asked, under the generator's own criterion curves and priors (the ability N(0, 1), each
ability's deviation N(0, profile_sd^2)); only the model's ability and deviations are unknown to it. No estimator
that sees only those questions does better on average: bench/bench_subset.py's bound for a subset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_engine.scoring.aggregate import ScoredQuestion

__all__ = ["Synthetic", "Criteria", "fractional", "heartbench_shaped", "bayes_full", "sigmoid"]


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


@dataclass(frozen=True)
class Criteria:
    """The HeartBench-shaped generator's criteria: the hit probability of criterion c for a model of ability t on
    its ability is sigmoid(intercept_c + slope_c t), t = theta + that ability's deviation (profile_sd its spread)."""

    question: list[str]
    ability: np.ndarray  # index into Synthetic.abilities["all"]
    weight: np.ndarray
    intercept: np.ndarray
    slope: np.ndarray
    hits: np.ndarray  # models x criteria, 0 / 1
    profile_sd: float


@dataclass
class Synthetic:
    runs: list[list[ScoredQuestion]]  # one list of scored questions per model
    theta: np.ndarray  # the models' true abilities
    abilities: dict[str, list[str]]  # the taxonomy (one dimension) the overall macro-averages over
    expected: list[dict[tuple[str, str], float]]  # per model: each item's true expected value (the oracle's)
    criteria: Criteria | None = None  # the HeartBench-shaped generator's (bayes_full)


def _run(qids: list[str], values: list[dict[str, float]], by_group: bool) -> list[ScoredQuestion]:
    out = []
    for qid, groups in zip(qids, values):
        score = float(np.mean(list(groups.values())))
        out.append(ScoredQuestion(qid, "", "", groups if by_group else {}, score, False))
    return out


def fractional(n_models: int = 30, n_questions: int = 200, seed: int = 0, concentration: float = 8.0) -> Synthetic:
    """Values ~ Beta(mean p, concentration) with p = sigmoid(a (theta - b)); a mean over questions."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    a = np.exp(rng.normal(0.0, 0.3, size=n_questions))
    b = rng.normal(0.0, 1.0, size=n_questions)
    p = np.clip(sigmoid(a[None, :] * (theta[:, None] - b[None, :])), 1e-3, 1 - 1e-3)
    y = rng.beta(p * concentration, (1 - p) * concentration)
    qids = [f"q{j:03d}" for j in range(n_questions)]
    runs = [_run(qids, [{"score": float(v)} for v in row], by_group=False) for row in y]
    expect = [{(q, "score"): float(v) for q, v in zip(qids, row)} for row in p]
    return Synthetic(runs, theta, {"all": []}, expect)


def _log_normalised(raw: float, lo: float, hi: float) -> float:
    return float(np.log1p(raw - lo) / np.log1p(hi - lo)) if hi - lo > 0 else 0.0


def heartbench_shaped(n_models: int = 30, n_questions: int = 296, n_abilities: int = 15, seed: int = 0,
                      profile_sd: float = 0.3) -> Synthetic:
    """Weighted binary criteria from a per-criterion 2PL, eq. 1 per ability, macro mean over abilities."""
    rng = np.random.default_rng(seed)
    names = [f"ab{k:02d}" for k in range(n_abilities)]
    freq = np.sort(rng.uniform(0.06, 1.0, size=n_abilities))[::-1]  # some abilities in most questions, some rare
    theta = rng.normal(size=n_models)
    profile = rng.normal(0.0, profile_sd, size=(n_models, n_abilities))
    positive = np.array([3, 2, 5, 4, 6, 1, 7, 8])
    questions = []  # per question: {ability: [(weight, a, b), ...]}
    for _ in range(n_questions):
        present = [k for k in range(n_abilities) if rng.random() < freq[k] * 0.5] or [int(rng.integers(n_abilities))]
        crit: dict[int, list[tuple[float, float, float]]] = {}
        for k in present:
            crit[k] = [(float(rng.choice(positive)) if rng.random() > 0.25 else -float(rng.choice([10, 3, 2])),
                        float(np.exp(rng.normal(0.2, 0.4))), float(rng.normal(0.0, 1.2)))
                       for _ in range(1 + int(rng.random() < 0.35) + int(rng.random() < 0.1))]
        questions.append(crit)
    qids = [f"q{j:03d}" for j in range(n_questions)]
    runs, expect, hit_rows = [], [], []
    for i in range(n_models):
        values, means, row = [], {}, []
        for qid, crit in zip(qids, questions):
            groups = {}
            for k, items in crit.items():
                t = theta[i] + profile[i, k]
                ps = [float(sigmoid(np.array(a * (t - b))) if w > 0 else sigmoid(np.array(-a * (t + 1.5 - b))))
                      for w, a, b in items]
                ws = [w for w, _, _ in items]
                lo, hi = sum(min(w, 0.0) for w in ws), sum(max(w, 0.0) for w in ws)
                hits = [rng.random() < p for p in ps]
                row.extend(hits)
                groups[names[k]] = _log_normalised(sum(w for w, h in zip(ws, hits) if h), lo, hi)
                means[(qid, names[k])] = float(_expected_value(ws, ps, lo, hi))
            values.append(groups)
        runs.append(_run(qids, values, by_group=True))
        expect.append(means)
        hit_rows.append(row)
    table = [(qid, k, w, a, b) for qid, crit in zip(qids, questions) for k, items in crit.items() for w, a, b in items]
    # a (t - b) for a criterion, -a (t + 1.5 - b) for a penalty: intercept + slope t
    criteria = Criteria([c[0] for c in table], np.array([c[1] for c in table]), np.array([c[2] for c in table]),
                        np.array([-c[3] * c[4] if c[2] > 0 else c[3] * (c[4] - 1.5) for c in table]),
                        np.array([c[3] if c[2] > 0 else -c[3] for c in table]), np.array(hit_rows, dtype=float),
                        profile_sd)
    return Synthetic(runs, theta, {"all": names}, expect, criteria)


def _expected_value(ws: list[float], ps: list[Any], lo: float, hi: float) -> Any:
    """E[eq. 1] over every pattern of hits (at most 2^3 of them); `ps` the criteria's hit probabilities, numbers or
    arrays of them (one per posterior draw: bayes_full), the result a number or an array alike."""
    total: Any = 0.0
    for mask in range(2 ** len(ws)):
        hit = [(mask >> j) & 1 == 1 for j in range(len(ws))]
        prob = np.prod([p if h else 1 - p for p, h in zip(ps, hit)], axis=0)
        total = total + prob * _log_normalised(sum(w for w, h in zip(ws, hit) if h), lo, hi)
    return total


def bayes_full(syn: Synthetic, model: int, asked: set[str], draws: int = 4000, seed: int = 0) -> float:
    """The posterior mean of `model`'s full score (macro mean over abilities, 0-1) given its hits on the criteria
    of the `asked` questions, under the generator's own curves and priors (module docstring): the values asked as
    observed, every other (question, ability) value at its posterior expectation. By importance sampling from the
    Laplace approximation of the posterior of (theta, deviations), its covariance widened by half."""
    from scipy.optimize import minimize
    from scipy.special import expit

    cr = syn.criteria
    assert cr is not None, "bayes_full needs the HeartBench-shaped generator's criteria"
    names = syn.abilities["all"]
    n_ab = len(names)
    obs = np.array([q in asked for q in cr.question])
    al, be, ab, y = cr.intercept[obs], cr.slope[obs], cr.ability[obs], cr.hits[model, obs]
    prec = np.concatenate([[1.0], np.full(n_ab, 1.0 / cr.profile_sd ** 2)])  # prior precisions of theta, u

    def neg_log_post(x: np.ndarray) -> tuple[float, np.ndarray]:
        logit = al + be * (x[0] + x[1:][ab])
        r = (expit(logit) - y) * be
        grad = np.concatenate([[r.sum()], np.bincount(ab, weights=r, minlength=n_ab)]) + prec * x
        return float((np.logaddexp(0.0, logit) - y * logit).sum() + 0.5 * (prec * x * x).sum()), grad

    mode = minimize(neg_log_post, np.zeros(1 + n_ab), jac=True, method="L-BFGS-B").x
    p = expit(al + be * (mode[0] + mode[1:][ab]))
    design = np.zeros((ab.size, 1 + n_ab))
    design[:, 0], design[np.arange(ab.size), 1 + ab] = 1.0, 1.0
    hess = (design * (p * (1 - p) * be * be)[:, None]).T @ design + np.diag(prec)
    cov = 1.5 * np.linalg.inv(hess)
    rng = np.random.default_rng(seed)
    x = rng.multivariate_normal(mode, cov, size=draws)
    logit = al[None, :] + be[None, :] * (x[:, :1] + x[:, 1:][:, ab])
    diff = x - mode
    log_w = (-(np.logaddexp(0.0, logit) - y[None, :] * logit).sum(1) - 0.5 * (prec * x * x).sum(1)
             + 0.5 * np.einsum("di,ij,dj->d", diff, hess / 1.5, diff))
    wts = np.exp(log_w - log_w.max())
    wts /= wts.sum()
    p_all = expit(cr.intercept[None, :] + cr.slope[None, :] * (x[:, :1] + x[:, 1:][:, cr.ability]))
    posterior_p = {}  # per (question, ability) not asked: its criteria's columns
    for c, (q, k) in enumerate(zip(cr.question, cr.ability)):
        if q not in asked:
            posterior_p.setdefault((q, names[k]), []).append(c)
    observed = {(q.id, g): v for q in syn.runs[model] for g, v in q.abilities.items() if q.id in asked}
    n_of = {g: n for g in names if (n := sum(1 for q in syn.runs[model] if g in q.abilities))}
    total = sum(v / (len(n_of) * n_of[g]) for (_, g), v in observed.items())  # abilities no question has: no term
    for (q, g), cols in posterior_p.items():
        ws = cr.weight[cols].tolist()
        lo, hi = sum(min(w, 0.0) for w in ws), sum(max(w, 0.0) for w in ws)
        value = float(wts @ _expected_value(ws, list(p_all[:, cols].T), lo, hi))
        total += value / (len(n_of) * n_of[g])
    return total
