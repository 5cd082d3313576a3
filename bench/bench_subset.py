"""A full score from a subset of the questions: the error against the number of questions asked.

Synthetic benchmarks from a known item model (tests/irtsim.py): a fractional one (values from a beta around a
2PL curve, a mean over questions) and a HeartBench-shaped one (296 questions, weighted binary criteria, eq. 1,
a macro mean over 15 abilities, each model with its own ability profile). 30 models, five folds: the item bank is
fitted on 24 models and each of the 6 held out is estimated from a share of the questions by three rules:
- anchors: the subset chosen from the fit (stats/subsetpick.choose_anchors: the least expected variance of the
  estimate over the training abilities), the same for every model;
- adaptive: one question at a time, the one leaving the least expected variance at the ability estimated so far;
- anchors-i, adaptive-i: the same with the textbook rule, the most Fisher information about the ability;
- random: a seeded random subset per model, through the same estimator;
and, for reference, `mean`: the declared overall of the random subset alone (no model), and `oracle`: the random
subset with every other item at its true expected value (the generator's; no model can know more), whose error is
what the questions not asked vary by themselves: the floor for a random subset (a subset chosen to observe the
heaviest, noisiest items can do better). Printed per share of
questions: the mean absolute error in points (0-100), its 95th percentile, the share of held-out models within 1.5
points, and how often the 95% interval covered the full score.

    python bench/bench_subset.py            # both benchmarks, shares 5, 10, 20, 30, 50 %
    python bench/bench_subset.py --quick    # the 20 % share only
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from irtsim import Synthetic, fractional, heartbench_shaped  # noqa: E402

from rubric_engine.scoring.aggregate import overall  # noqa: E402
from rubric_engine.scoring.question import Aggregation  # noqa: E402
from rubric_engine.stats.irt import next_question, select_anchors  # noqa: E402
from rubric_engine.stats.subset import build_bank, estimate_full, item_values  # noqa: E402
from rubric_engine.stats.subsetpick import adaptive, choose_anchors  # noqa: E402

RULES = ("anchors", "adaptive", "anchors-i", "adaptive-i", "random", "mean", "oracle")


def _informative(bank, theta, asked):  # the textbook rule: the most Fisher information at theta
    return next_question(theta, bank.fit, bank.groups, asked)


def errors(syn: Synthetic, by_group: bool, share: float, folds: int = 5) -> dict[str, tuple[np.ndarray, float]]:
    """Per rule: the held-out models' absolute errors in points and the interval's coverage."""
    how = Aggregation() if by_group else Aggregation(overall="mean_over_questions")
    n = len(syn.runs)
    order = np.random.default_rng(1).permutation(n)
    errs: dict[str, list[float]] = {r: [] for r in RULES}
    cover: dict[str, int] = {r: 0 for r in RULES}
    for f in range(folds):
        held = set(order[f::folds].tolist())
        bank = build_bank([item_values(syn.runs[i], by_group) for i in range(n) if i not in held], by_group)
        k = max(1, round(share * len(bank.questions)))
        anchors = {bank.questions[g] for g in choose_anchors(bank, k)}
        anchors_i = {bank.questions[g] for g in select_anchors(bank.fit, bank.groups, k)}
        for i in sorted(held):
            full = overall(syn.runs[i], syn.abilities, how)
            items = item_values(syn.runs[i], by_group)
            by_q: dict[str, dict] = {}
            for key, v in items.items():
                by_q.setdefault(key[0], {})[key] = v
            rand = set(np.random.default_rng(100 + i).choice(bank.questions, k, replace=False).tolist())
            est = {"anchors": estimate_full(bank, {q: v for q in anchors for q, v in by_q[q].items()}),
                   "adaptive": adaptive(bank, lambda q: by_q[q], k),
                   "anchors-i": estimate_full(bank, {q: v for q in anchors_i for q, v in by_q[q].items()}),
                   "adaptive-i": adaptive(bank, lambda q: by_q[q], k, pick=_informative),
                   "random": estimate_full(bank, {q: v for q in rand for q, v in by_q[q].items()})}
            for rule, e in est.items():
                errs[rule].append(abs(e.point - full) * 100)
                cover[rule] += e.low <= full <= e.high
            plain = overall([q for q in syn.runs[i] if q.id in rand], syn.abilities, how)
            errs["mean"].append(abs(plain - full) * 100)
            truth = syn.expected[i]  # the random subset observed, every other item at its true expected value
            oracle = sum(w * (items[key] if key[0] in rand else truth[key]) for key, w in zip(bank.keys, bank.weights))
            errs["oracle"].append(abs(oracle - full) * 100)
    return {r: (np.array(errs[r]), cover[r] / n) for r in RULES}


def main(shares: list[float]) -> None:
    benches = (("fractional 2PL, 200 questions, mean over questions", fractional(), False),
               ("HeartBench-shaped, 296 questions, macro over 15 abilities", heartbench_shaped(), True))
    for title, syn, by_group in benches:
        print(f"\n{title}; 30 models, 5 folds (6 held out each)")
        print(f"{'share':>6} {'rule':>10} {'questions':>9} {'mean err':>9} {'p95 err':>8} {'<=1.5 pts':>9} {'covered':>8}")
        n_q = len(syn.runs[0])
        for share in shares:
            for rule, (e, cov) in errors(syn, by_group, share).items():
                covered = f"{cov:8.0%}" if rule not in ("mean", "oracle") else f"{'-':>8}"
                print(f"{share:6.0%} {rule:>10} {round(share * n_q):9d} {e.mean():9.2f} {np.quantile(e, 0.95):8.2f} "
                      f"{(e <= 1.5).mean():9.0%} {covered}")


if __name__ == "__main__":
    main([0.2] if "--quick" in sys.argv else [0.05, 0.1, 0.2, 0.3, 0.5])
