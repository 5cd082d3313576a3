"""A full score from a subset of the questions: the error against the number of questions asked.

Synthetic benchmarks from a known item model (tests/irtsim.py): a fractional one (values from a beta around a
2PL curve, a mean over questions) and a HeartBench-shaped one (296 questions, weighted binary criteria, eq. 1,
a macro mean over 15 abilities, each model with its own ability profile). 30 models, five folds: the item bank is
fitted on 24 models and each of the 6 held out is estimated from a share of the questions by three rules:
- anchors: the subset chosen from the fit (stats/subsetpick.choose_anchors: the least expected variance of the
  estimate over the training abilities), the same for every model;
- adaptive: one question at a time, the one leaving the least expected variance at the ability estimated so far;
- anchors-i, adaptive-i: the same with the textbook rule, the most Fisher information about the ability;
- adaptive-w16: adaptive in waves of 16 questions picked at one ability (a run's item_budget= at concurrency=16);
- random: a seeded random subset per model, through the same estimator;
- random+mean: tinyBenchmarks' gp-IRT idea with our weighting: the random subset's declared overall and the
  model's estimate, each weighted by the other's variance (a bootstrap over the questions; the interval);
- anchors-theta: the anchors with the ability known (the generator's, put on the fit's scale by a line through the
  training runs' true and fitted abilities): what the item curves and group shifts give without the ability's error;
and, for reference, `mean`: the declared overall of the random subset alone (no model), and `oracle`: the random
subset with every other item at its true expected value (the generator's; no model can know more), whose error is
what the questions not asked vary by themselves: the floor for a random subset. Printed per share of questions:
the mean absolute error in points (0-100), its 95th percentile, the share of held-out models within 1.5 points, how
often the 95% interval covered the full score, and the same subset's oracle (every question it did not ask at its
true expected value: what no estimator from that subset can beat on average) and, on the HeartBench-shaped
benchmark, the same subset's bound: the posterior mean of the full score under the generator's own criterion curves
and priors (tests/irtsim.bayes_full), every other question's value estimated by what the generator itself knows;
only the model's ability and its per-ability deviations are unknown to it, as to any estimator, so no estimator from
that subset does better on average (the oracle knows them too).

    python bench/bench_subset.py                # both benchmarks, shares 5, 10, 20, 30, 50 %
    python bench/bench_subset.py --quick        # the 20 % share only
    python bench/bench_subset.py --quick --seed 1   # another draw of the synthetic benchmarks (default 0)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from irtsim import Synthetic, bayes_full, fractional, heartbench_shaped  # noqa: E402

from rubric_engine.scoring.aggregate import overall  # noqa: E402
from rubric_engine.scoring.question import Aggregation  # noqa: E402
from rubric_engine.stats.irt import next_question, select_anchors  # noqa: E402
from rubric_engine.stats.subset import build_bank, estimate_full, item_values  # noqa: E402
from rubric_engine.stats.subsetpick import adaptive, choose_anchors  # noqa: E402

RULES = ("anchors", "adaptive", "adaptive-w16", "anchors-i", "adaptive-i", "anchors-theta", "random", "random+mean",
         "mean", "oracle")


def _informative(bank, theta, asked):  # the textbook rule: the most Fisher information at theta
    return next_question(theta, bank.fit, bank.groups, asked)


def _combined(model_based, plain: float, picked: list, syn: Synthetic, how: Aggregation, seed: int) -> float:
    """tinyBenchmarks' gp-IRT idea, our weighting: the random subset's declared overall (unbiased over subsets, its
    variance a bootstrap over the questions asked) and the model's estimate (its variance from its 95% interval),
    each weighted by the other's variance."""
    rng = np.random.default_rng(seed)
    boot = [overall([picked[j] for j in rng.integers(0, len(picked), len(picked))], syn.abilities, how)
            for _ in range(100)]
    v_mean, v_model = float(np.var(boot)), ((model_based.high - model_based.low) / 3.92) ** 2
    lam = v_model / (v_model + v_mean) if v_model + v_mean > 0 else 0.0
    return lam * plain + (1 - lam) * model_based.point


Errors = dict[str, tuple[np.ndarray, float, np.ndarray | None, np.ndarray | None]]


def errors(syn: Synthetic, by_group: bool, share: float, folds: int = 5) -> Errors:
    """Per rule: the held-out models' absolute errors in points, the interval's coverage, the errors of the same
    subsets' oracle (observed where asked, every other item at its true expected value: what no estimator from
    that subset can beat on average; None for the rules without a model) and of their bound (the generator's own
    posterior mean, bayes_full; None without the generator's criteria)."""
    how = Aggregation() if by_group else Aggregation(overall="mean_over_questions")
    n = len(syn.runs)
    order = np.random.default_rng(1).permutation(n)
    errs: dict[str, list[float]] = {r: [] for r in RULES}  # RULES: a script may keep only some
    cover: dict[str, int] = {r: 0 for r in RULES}
    floor: dict[str, list[float]] = {r: [] for r in RULES}
    bound: dict[str, list[float]] = {r: [] for r in RULES}
    for f in range(folds):
        held = set(order[f::folds].tolist())
        bank = build_bank([item_values(syn.runs[i], by_group) for i in range(n) if i not in held], by_group)
        k = max(1, round(share * len(bank.questions)))
        train = [i for i in range(n) if i not in held]  # the generator's abilities on the fit's scale: a line
        slope, icept = np.polyfit(syn.theta[train], bank.fit.theta, 1)  # through the training runs' (true, fitted)

        def known(t: float) -> float:
            return float(icept + slope * t)

        anchors = {bank.questions[g] for g in choose_anchors(bank, k)}
        anchors_i = {bank.questions[g] for g in select_anchors(bank.fit, bank.groups, k)} if "anchors-i" in RULES \
            else set()
        for i in sorted(held):
            full = overall(syn.runs[i], syn.abilities, how)
            items = item_values(syn.runs[i], by_group)
            by_q: dict[str, dict] = {}
            for key, v in items.items():
                by_q.setdefault(key[0], {})[key] = v
            rand = set(np.random.default_rng(100 + i).choice(bank.questions, k, replace=False).tolist())
            rules = {"anchors": lambda: estimate_full(bank, {q: v for q in anchors for q, v in by_q[q].items()}),
                     "adaptive": lambda: adaptive(bank, lambda q: by_q[q], k),
                     "anchors-i": lambda: estimate_full(bank, {q: v for q in anchors_i for q, v in by_q[q].items()}),
                     "adaptive-i": lambda: adaptive(bank, lambda q: by_q[q], k, pick=_informative),
                     "adaptive-w16": lambda: adaptive(bank, lambda q: by_q[q], k, wave=16),
                     "anchors-theta": lambda: estimate_full(bank, {q: v for q in anchors for q, v in by_q[q].items()},
                                                            theta=known(syn.theta[i])),
                     "random": lambda: estimate_full(bank, {q: v for q in rand for q, v in by_q[q].items()})}
            est = {rule: run() for rule, run in rules.items() if rule in RULES}
            truth = syn.expected[i]  # every item's true expected value for this model (the generator's)
            for rule, e in est.items():
                errs[rule].append(abs(e.point - full) * 100)
                cover[rule] += e.low <= full <= e.high
                used = set(e.asked)
                best = sum(w * (items[key] if key[0] in used else truth[key]) for key, w in zip(bank.keys, bank.weights))
                floor[rule].append(abs(best - full) * 100)
                if syn.criteria is not None:
                    bound[rule].append(abs(bayes_full(syn, i, used) - full) * 100)
            picked = [q for q in syn.runs[i] if q.id in rand]
            plain = overall(picked, syn.abilities, how)
            errs["mean"].append(abs(plain - full) * 100)
            if "random+mean" in RULES:  # gp-IRT's idea: the model's estimate and the subset's mean, inverse-variance
                errs["random+mean"].append(abs(_combined(est["random"], plain, picked, syn, how, i) - full) * 100)
            oracle = sum(w * (items[key] if key[0] in rand else truth[key]) for key, w in zip(bank.keys, bank.weights))
            errs["oracle"].append(abs(oracle - full) * 100)
    return {r: (np.array(errs[r]), cover[r] / n, np.array(floor[r]) if floor[r] else None,
                np.array(bound[r]) if bound[r] else None) for r in RULES}


def main(shares: list[float]) -> None:
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 0
    benches = (("fractional 2PL, 200 questions, mean over questions", fractional(seed=seed), False),
               ("HeartBench-shaped, 296 questions, macro over 15 abilities", heartbench_shaped(seed=seed), True))
    for title, syn, by_group in benches:
        print(f"\n{title}; 30 models, 5 folds (6 held out each); generator seed {seed}")
        print(f"{'share':>6} {'rule':>10} {'questions':>9} {'mean err':>9} {'p95 err':>8} {'<=1.5 pts':>9} {'covered':>8}"
              f" {'its oracle: mean err':>20} {'<=1.5 pts':>9} {'its bound: mean err':>19} {'<=1.5 pts':>9}")
        n_q = len(syn.runs[0])
        for share in shares:
            for rule, (e, cov, o, b) in errors(syn, by_group, share).items():
                covered = f"{cov:8.0%}" if rule not in ("mean", "oracle", "random+mean") else f"{'-':>8}"
                floor = f"{o.mean():20.2f} {(o <= 1.5).mean():9.0%}" if o is not None else f"{'-':>20} {'-':>9}"
                floor += f" {b.mean():19.2f} {(b <= 1.5).mean():9.0%}" if b is not None else f" {'-':>19} {'-':>9}"
                print(f"{share:6.0%} {rule:>10} {round(share * n_q):9d} {e.mean():9.2f} {np.quantile(e, 0.95):8.2f} "
                      f"{(e <= 1.5).mean():9.0%} {covered} {floor}")


if __name__ == "__main__":
    main([0.2] if "--quick" in sys.argv else [0.05, 0.1, 0.2, 0.3, 0.5])
