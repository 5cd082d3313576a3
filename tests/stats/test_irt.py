"""The item bank (stats/irt.py) and the full score from a subset (stats/subset.py), against reference values:
known parameters recovered from data simulated from the 2PL, the ability against a direct maximisation of the
posterior on a fine grid written out here, the linear weights against the engine's own overall
(scoring/aggregate.overall) on filled-in questions, and the estimate from every question equal to the full score."""

from __future__ import annotations

import math

import numpy as np
import pytest
from irtsim import bayes_full, fractional, heartbench_shaped, sigmoid

from rubric_engine.scoring.aggregate import ScoredQuestion, overall
from rubric_engine.scoring.question import Aggregation
from rubric_engine.stats.irt import estimate_ability, fit_items, information, next_question, select_anchors
from rubric_engine.stats.subset import build_bank, estimate_full, item_values, linear_weights


def test_known_parameters_recovered_from_simulated_2pl() -> None:
    rng = np.random.default_rng(3)
    theta = rng.normal(size=600)
    a = np.exp(rng.normal(0.0, 0.3, size=30))
    b = rng.normal(0.0, 1.0, size=30)
    y = (rng.random((600, 30)) < sigmoid(a[None, :] * (theta[:, None] - b[None, :]))).astype(float)
    fit = fit_items(y)
    assert fit.converged
    assert np.abs(fit.b - b).mean() < 0.15 and np.abs(fit.b - b).max() < 0.45
    assert np.abs(fit.a - a).mean() < 0.15
    assert np.corrcoef(fit.theta, theta)[0, 1] > 0.9


def test_missing_values_are_left_out_not_zero() -> None:
    rng = np.random.default_rng(4)
    y = rng.random((20, 6))
    holes = y.copy()
    holes[0, 0] = np.nan
    fit_full, fit_holes = fit_items(y), fit_items(holes)
    zero = y.copy()
    zero[0, 0] = 0.0
    assert not np.allclose(fit_holes.b, fit_full.b)  # the hole changed something ...
    assert not np.allclose(fit_holes.b, fit_items(zero).b)  # ... and it was not read as a 0


def _log_posterior(t: float, y: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    total = -0.5 * t * t
    for yj, aj, bj in zip(y, a, b):
        p = 1.0 / (1.0 + math.exp(-aj * (t - bj)))
        total += yj * math.log(p) + (1 - yj) * math.log(1 - p)
    return total


@pytest.mark.parametrize("seed", range(5))
def test_ability_is_the_direct_maximum_of_the_posterior(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b, y = np.exp(rng.normal(size=12) * 0.4), rng.normal(size=12), rng.random(12)
    grid = np.linspace(-6, 6, 24001)  # steps of 0.0005
    best = grid[int(np.argmax([_log_posterior(float(t), y, a, b) for t in grid]))]
    theta, se = estimate_ability(y, a, b)
    assert theta == pytest.approx(best, abs=1e-3)
    assert se == pytest.approx(1 / math.sqrt(float(information(theta, a, b).sum()) + 1.0))


def test_no_item_gives_the_prior() -> None:
    assert estimate_ability([], np.array([]), np.array([])) == (0.0, 1.0)


def test_linear_weights_reproduce_the_engines_overall() -> None:
    syn = heartbench_shaped(n_models=2, n_questions=40, seed=5)
    run = syn.runs[0]
    items = item_values(run, by_group=True)
    keys = list(items)
    w = linear_weights(keys, by_group=True)
    assert float(w @ np.array([items[k] for k in keys])) == pytest.approx(overall(run, syn.abilities))
    weighted = [ScoredQuestion(q.id, "", "", {}, q.score, False, weight=1.0 + i % 3) for i, q in enumerate(run)]
    qkeys = list(item_values(weighted, by_group=False))
    wq = linear_weights(qkeys, False, {q.id: q.weight for q in weighted})
    how = Aggregation(overall="mean_over_questions")
    assert float(wq @ np.array([q.score for q in weighted])) == pytest.approx(overall(weighted, {}, how))


def test_every_question_asked_gives_the_full_score() -> None:
    syn = fractional(n_models=12, n_questions=30, seed=2)
    bank = build_bank([item_values(r, False) for r in syn.runs[:10]], by_group=False)
    items = item_values(syn.runs[11], False)
    est = estimate_full(bank, items)
    assert est.point == pytest.approx(float(np.mean(list(items.values()))))
    assert est.low == pytest.approx(est.point) and est.high == pytest.approx(est.point)
    assert len(est.asked) == 30


def test_estimate_from_a_subset_is_near_and_its_interval_covers() -> None:
    syn = fractional(n_models=40, n_questions=150, seed=7, concentration=30.0)
    bank = build_bank([item_values(r, False) for r in syn.runs[:30]], by_group=False)
    anchors = {bank.questions[g] for g in select_anchors(bank.fit, bank.groups, 30)}
    errors, covered = [], 0
    for run in syn.runs[30:]:
        items = item_values(run, False)
        full = float(np.mean(list(items.values())))
        est = estimate_full(bank, {k: v for k, v in items.items() if k[0] in anchors})
        assert set(est.asked) == anchors
        errors.append(abs(est.point - full))
        covered += est.low <= full <= est.high
    assert max(errors) < 0.03 and covered >= 9


def test_anchors_spread_over_abilities_and_adaptive_follows_information() -> None:
    fit = fit_items(np.array([[0.1, 0.9, 0.5, 0.2], [0.3, 1.0, 0.8, 0.4], [0.0, 0.7, 0.3, 0.1]]))
    groups = [(0,), (1,), (2,), (3,)]
    chosen = select_anchors(fit, groups, 2)
    assert len(set(chosen)) == 2
    info = [float(information(1.5, fit.a, fit.b)[g[0]]) for g in groups]
    assert next_question(1.5, fit, groups, []) == int(np.argmax(info))
    assert next_question(1.5, fit, groups, [0, 1, 2, 3]) is None


def test_group_spread_recovers_a_known_shift() -> None:
    """Values built as curve + a per-run shift on each group (sd 0.08) + item noise (sd 0.1): the method of moments
    finds tau near 0.08 for the shifted groups and near 0 for a group without a shift."""
    rng = np.random.default_rng(11)
    n, per = 400, 40
    keys = [(f"q{j}", g) for g in ("g1", "g2", "flat") for j in range(per)]
    theta, a, b = rng.normal(size=n), np.ones(len(keys)), rng.normal(size=len(keys))
    curve = sigmoid(a[None, :] * (theta[:, None] - b[None, :]))
    shift = np.stack([rng.normal(0, 0.08, n), rng.normal(0, 0.08, n), np.zeros(n)], axis=1)
    values = curve + np.repeat(shift, per, axis=1) + rng.normal(0, 0.1, size=curve.shape)
    from rubric_engine.stats.irt import ItemFit
    from rubric_engine.stats.subset import group_spread

    fit = ItemFit(a=a, b=b, theta=theta, resid_sd=np.full(len(keys), 0.1), converged=True)
    tau = group_spread(values, fit, keys)
    assert tau["g1"] == pytest.approx(0.08, abs=0.01) and tau["g2"] == pytest.approx(0.08, abs=0.01)
    assert tau["flat"] < 0.02


def test_adaptive_needs_fewer_questions_than_random_for_the_same_error() -> None:
    """On a HeartBench-shaped synthetic benchmark (150 questions, a macro mean over 15 abilities; 35 models fitted,
    15 held out), adaptive selection with 15 questions errs less on average than random subsets of 30 through the
    same estimator (and random 30 less than random 15)."""
    from rubric_engine.stats.subsetpick import adaptive

    syn = heartbench_shaped(n_models=50, n_questions=150, seed=21)
    bank = build_bank([item_values(r, True) for r in syn.runs[:35]], by_group=True)
    errors: dict[str, list[float]] = {"adaptive 15": [], "random 15": [], "random 30": []}
    for i in range(35, 50):
        items = item_values(syn.runs[i], True)
        by_q: dict[str, dict[tuple[str, str], float]] = {}
        for key, v in items.items():
            by_q.setdefault(key[0], {})[key] = v
        full = overall(syn.runs[i], syn.abilities)
        est = adaptive(bank, lambda q: by_q[q], 15, draws=10)  # noqa: B023
        assert len(est.asked) == 15
        errors["adaptive 15"].append(abs(est.point - full))
        for k in (15, 30):
            chosen = set(np.random.default_rng(i).choice(bank.questions, k, replace=False).tolist())
            sub = {key: v for key, v in items.items() if key[0] in chosen}
            errors[f"random {k}"].append(abs(estimate_full(bank, sub, draws=10).point - full))
    mean = {rule: float(np.mean(e)) for rule, e in errors.items()}
    assert mean["adaptive 15"] < mean["random 30"] < mean["random 15"], mean


def test_the_variance_rule_prefers_heavy_items_and_never_repeats() -> None:
    """Two questions equally informative about the ability, one holding an item that weighs 9 times the other's
    in the full score: the rule asks the heavy one first, then the other, then nothing."""
    from rubric_engine.stats.irt import ItemFit
    from rubric_engine.stats.subset import Bank
    from rubric_engine.stats.subsetpick import next_for_estimate, variance_if_asked

    fit = ItemFit(a=np.ones(2), b=np.zeros(2), theta=np.array([-1.0, 1.0]), resid_sd=np.full(2, 0.2), converged=True)
    bank = Bank(("light", "heavy"), (("light", "g"), ("heavy", "h")), ((0,), (1,)), np.array([0.1, 0.9]), fit)
    v = variance_if_asked(bank, 0.0, np.zeros(2, dtype=bool))
    # by hand at theta 0: p = 1/2, dp/dtheta = 1/4, information 1/4 per item; asking heavy leaves light unasked:
    # ability (0.1 / 4)^2 / (1 + 1/4) + item 0.1^2 0.2^2, and symmetrically for light
    assert v[1] == pytest.approx((0.1 / 4) ** 2 / 1.25 + 0.01 * 0.04)
    assert v[0] == pytest.approx((0.9 / 4) ** 2 / 1.25 + 0.81 * 0.04)
    assert next_for_estimate(bank, 0.0, []) == 1
    assert next_for_estimate(bank, 0.0, [1]) == 0 and next_for_estimate(bank, 0.0, [1, 0]) is None


def test_the_group_shift_term_and_the_sandwich_error_by_hand() -> None:
    """One group with tau = 0.1 and two unit items of spread 0.2 (so 0.2^2 - 0.1^2 = 0.03 their own), weights 1/2:
    asking item 0 at theta 0 leaves (1/2 / 4)^2 / (1 + 1/4) for the ability, (1/2)^2 0.03 for item 1, and for the
    shift (1/2)^2 x 0.01 x 0.03 / (0.01 x 1 + 0.03). The estimate from item 0 reports the sandwich error
    sqrt(1^2 0.2^2 + 1) / (1/4 + 1) at its ability."""
    from rubric_engine.stats.irt import ItemFit
    from rubric_engine.stats.subset import Bank
    from rubric_engine.stats.subsetpick import variance_if_asked

    fit = ItemFit(a=np.ones(2), b=np.zeros(2), theta=np.array([-1.0, 1.0]), resid_sd=np.full(2, 0.2), converged=True)
    bank = Bank(("q0", "q1"), (("q0", "g"), ("q1", "g")), ((0,), (1,)), np.array([0.5, 0.5]), fit, tau={"g": 0.1})
    v = variance_if_asked(bank, 0.0, np.zeros(2, dtype=bool))
    expected_v = (0.5 / 4) ** 2 / 1.25 + 0.25 * 0.03 + 0.25 * 0.01 * 0.03 / (0.01 + 0.03)
    assert v[0] == pytest.approx(expected_v) and v[1] == pytest.approx(expected_v)
    est = estimate_full(bank, {("q0", "g"): 0.5})
    assert est.theta == pytest.approx(0.0, abs=1e-5)
    assert est.theta_se == pytest.approx(math.sqrt(0.04 + 1) / 1.25)
    assert est.point == pytest.approx(0.5) and est.low < 0.5 < est.high


def test_an_excluded_question_is_never_picked_and_stays_unobserved() -> None:
    """`exclude` (questions outside a run's selection): the heavy question is not picked, the light one is, and
    the choice is the rule's with the heavy one still counted among the items not asked (not as observed)."""
    from rubric_engine.stats.irt import ItemFit
    from rubric_engine.stats.subset import Bank
    from rubric_engine.stats.subsetpick import next_for_estimate

    fit = ItemFit(a=np.ones(3), b=np.zeros(3), theta=np.array([-1.0, 1.0]), resid_sd=np.full(3, 0.2), converged=True)
    bank = Bank(("light", "heavy", "mid"), (("light", "g"), ("heavy", "h"), ("mid", "m")), ((0,), (1,), (2,)),
                np.array([0.1, 0.6, 0.3]), fit)
    assert next_for_estimate(bank, 0.0, []) == 1
    assert next_for_estimate(bank, 0.0, [], exclude=[1]) == 2
    assert next_for_estimate(bank, 0.0, [2], exclude=[1]) == 0
    assert next_for_estimate(bank, 0.0, [2, 0], exclude=[1]) is None


def test_adaptive_waves_pick_a_wave_at_one_ability() -> None:
    """wave=k: k questions picked at one ability before it is estimated again; a wave as large as the budget is
    the rule's picks at the prior's 0 (what a dry run of item_budget= counts), wave=1 the one-at-a-time test."""
    from rubric_engine.stats.subsetpick import adaptive, next_for_estimate

    syn = heartbench_shaped(n_models=20, n_questions=60, seed=3)
    bank = build_bank([item_values(r, True) for r in syn.runs[:15]], by_group=True)
    items = item_values(syn.runs[17], True)
    by_q: dict[str, dict[tuple[str, str], float]] = {}
    for key, v in items.items():
        by_q.setdefault(key[0], {})[key] = v
    at_zero: list[int] = []
    for _ in range(8):
        at_zero.append(next_for_estimate(bank, 0.0, at_zero))  # type: ignore[arg-type]
    whole = adaptive(bank, lambda q: by_q[q], 8, draws=10, wave=8)
    assert sorted(whole.asked) == sorted(bank.questions[g] for g in at_zero)
    for wave in (1, 3):
        assert len(adaptive(bank, lambda q: by_q[q], 8, draws=10, wave=wave).asked) == 8
    one = adaptive(bank, lambda q: by_q[q], 8, draws=10, wave=1)
    assert sorted(one.asked) != sorted(whole.asked)  # re-estimating the ability changes what is asked


# ------------------------------------------------------------------ the generator's own bound (bench_subset)

def test_the_generators_bound_is_the_full_score_when_every_question_is_asked() -> None:
    syn = heartbench_shaped(n_models=3, n_questions=40, seed=5)
    every = {q.id for q in syn.runs[0]}
    for model in range(3):
        assert bayes_full(syn, model, every) == pytest.approx(overall(syn.runs[model], syn.abilities), abs=1e-12)


def test_the_generators_bound_equals_a_posterior_integrated_on_a_grid() -> None:
    """One ability: a model's curves see only t = theta + its deviation, t ~ N(0, 1 + profile_sd^2) a priori, so the
    posterior mean of each value not asked is a one-dimensional integral, done here on a fine grid."""
    syn = heartbench_shaped(n_models=4, n_questions=30, n_abilities=1, seed=8)
    cr = syn.criteria
    asked = {f"q{j:03d}" for j in range(0, 30, 3)}
    grid = np.linspace(-7.0, 7.0, 14001)
    obs = np.array([q in asked for q in cr.question])
    for model in range(4):
        p = sigmoid(cr.intercept[obs][None, :] + cr.slope[obs][None, :] * grid[:, None])
        y = cr.hits[model, obs]
        log_post = (y * np.log(p) + (1 - y) * np.log(1 - p)).sum(1) - grid ** 2 / (2 * (1 + cr.profile_sd ** 2))
        post = np.exp(log_post - log_post.max())
        post /= post.sum()
        by_question: dict[str, list[int]] = {}
        for c, q in enumerate(cr.question):
            by_question.setdefault(q, []).append(c)
        values = []
        for q, cols in by_question.items():
            if q in asked:
                values.append(next(x.abilities["ab00"] for x in syn.runs[model] if x.id == q))
                continue
            ws = cr.weight[cols]
            lo, hi = ws[ws < 0].sum(), ws[ws > 0].sum()
            pc = sigmoid(cr.intercept[cols][None, :] + cr.slope[cols][None, :] * grid[:, None])
            value = 0.0
            for mask in range(2 ** len(cols)):
                hit = np.array([(mask >> j) & 1 for j in range(len(cols))], dtype=bool)
                raw = float(ws[hit].sum())
                eq1 = math.log1p(raw - lo) / math.log1p(hi - lo) if hi > lo else 0.0
                value += float(post @ np.prod(np.where(hit, pc, 1 - pc), axis=1)) * eq1
            values.append(value)
        assert bayes_full(syn, model, asked, draws=20000) == pytest.approx(float(np.mean(values)), abs=2e-3)
