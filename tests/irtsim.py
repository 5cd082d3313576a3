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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rubric_engine.scoring.aggregate import ScoredQuestion

__all__ = ["Synthetic", "fractional", "heartbench_shaped", "sigmoid"]


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


@dataclass
class Synthetic:
    runs: list[list[ScoredQuestion]]  # one list of scored questions per model
    theta: np.ndarray  # the models' true abilities
    abilities: dict[str, list[str]]  # the taxonomy (one dimension) the overall macro-averages over
    expected: list[dict[tuple[str, str], float]]  # per model: each item's true expected value (the oracle's)


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
    runs, expect = [], []
    for i in range(n_models):
        values, means = [], {}
        for qid, crit in zip(qids, questions):
            groups = {}
            for k, items in crit.items():
                t = theta[i] + profile[i, k]
                ps = [float(sigmoid(np.array(a * (t - b))) if w > 0 else sigmoid(np.array(-a * (t + 1.5 - b))))
                      for w, a, b in items]
                ws = [w for w, _, _ in items]
                lo, hi = sum(min(w, 0.0) for w in ws), sum(max(w, 0.0) for w in ws)
                hits = [rng.random() < p for p in ps]
                groups[names[k]] = _log_normalised(sum(w for w, h in zip(ws, hits) if h), lo, hi)
                means[(qid, names[k])] = _expected_value(ws, ps, lo, hi)
            values.append(groups)
        runs.append(_run(qids, values, by_group=True))
        expect.append(means)
    return Synthetic(runs, theta, {"all": names}, expect)


def _expected_value(ws: list[float], ps: list[float], lo: float, hi: float) -> float:
    """E[eq. 1] over every pattern of hits (at most 2^3 of them)."""
    total = 0.0
    for mask in range(2 ** len(ws)):
        hit = [(mask >> j) & 1 == 1 for j in range(len(ws))]
        prob = float(np.prod([p if h else 1 - p for p, h in zip(ps, hit)]))
        total += prob * _log_normalised(sum(w for w, h in zip(ws, hit) if h), lo, hi)
    return total
