"""Agreement statistics against textbook values, reference packages and a planted judge."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from irrCAC.raw import CAC
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score

from rubric_engine.stats import agreement as st
from rubric_engine.stats.lengths import spearman  # the one Spearman (lengths and agreement share it)

nan = math.nan


def test_krippendorff_worked_example_nominal_0743() -> None:
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12 units, missing values
    data = [[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
            [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]
    assert st.krippendorff_alpha(np.array(data)) == pytest.approx(0.743, abs=5e-4)


def _random_pairs(n_cases: int = 40):
    rng = np.random.default_rng(7)
    for _ in range(n_cases):
        n = int(rng.integers(5, 80))
        a = rng.random(n) < rng.uniform(0.05, 0.95)
        flip = rng.random(n) < rng.uniform(0.0, 0.5)
        yield a, a ^ flip


def test_two_rater_statistics_match_reference_packages() -> None:
    checked = 0
    for a, b in _random_pairs():
        s = st.pair_statistics(st.table(a, b))
        if len(set(a) | set(b)) < 2:
            continue
        assert s["raw"] == pytest.approx(np.mean(a == b))
        if not np.isnan(s["cohen_kappa"]):
            assert s["cohen_kappa"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
        ac1 = CAC(pd.DataFrame({"a": a.astype(int), "b": b.astype(int)})).gwet()["est"]["coefficient_value"]
        assert s["gwet_ac1"] == pytest.approx(ac1, abs=1e-5)  # irrCAC rounds to 5 decimals
        lib = st.krippendorff_alpha(np.array([a, b], dtype=float))
        assert s["krippendorff_alpha"] == pytest.approx(lib, abs=1e-12)
        checked += 1
    assert checked >= 30


def test_chance_floor_and_error_rates_by_hand() -> None:
    # judge a vs reference b: 10 items, reference met on 3; judge passes 2 of the 7 not-met, fails 1 of the 3 met
    b = [1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    a = [1, 1, 0, 1, 1, 0, 0, 0, 0, 0]
    s = st.pair_statistics(st.table(a, b))
    assert s["raw"] == pytest.approx(0.7)
    assert s["chance_floor"] == pytest.approx(0.7)  # a judge always saying "not met" does as well
    assert s["false_pass"] == pytest.approx(2 / 7)
    assert s["false_fail"] == pytest.approx(1 / 3)


def test_degenerate_one_class_states_kappa_undefined_and_keeps_ac1() -> None:
    out = st.pair_summary(st.table([0] * 30, [0] * 30)[None, :], n_boot=100)
    assert out["cohen_kappa"] is None and out["krippendorff_alpha"] is None
    assert out["gwet_ac1"] == pytest.approx(1.0) and out["raw"] == 1.0
    assert any("kappa undefined" in n for n in out["notes"])
    assert any("false-fail undefined" in n for n in out["notes"])
    empty = st.pair_summary(np.zeros((0, 4)), n_boot=100)
    assert empty["n"] == 0 and empty["raw"] is None and "no item labelled by both" in empty["notes"]
    assert st.krippendorff_alpha(np.array([[1.0, 0.0, 1.0]])) is None  # a single rater
    assert st.krippendorff_alpha(np.array([[1.0, 1.0], [1.0, 1.0]])) is None  # one value only
    assert st.majority([True, False]) is None and st.majority([True, True, False]) is True


def test_rank_correlations_match_scipy() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        x = rng.integers(0, 6, size=12).astype(float)  # ties on purpose
        y = x + rng.integers(-2, 3, size=12)
        assert spearman(x, y) == pytest.approx(sps.spearmanr(x, y).statistic, abs=1e-12)
        assert st.kendall_tau(x, y) == pytest.approx(sps.kendalltau(x, y).statistic, abs=1e-12)
    assert spearman([1, 1, 1], [1, 2, 3]) is None and st.kendall_tau([1, 2], [2, 1]) is None


def test_bootstrap_resamples_questions_not_items() -> None:
    # 30 questions of 10 items; within a question the two raters either all agree or all disagree.
    # Resampling items would ignore that and give a far narrower interval than resampling questions.
    per_q = np.array([[5, 0, 0, 5] if q % 3 else [0, 5, 5, 0] for q in range(30)], dtype=float)
    by_question = st.pair_summary(per_q, n_boot=2000, seed=1)["ci"]["raw"]
    items = np.repeat(per_q / 10, 10, axis=0)  # the same items, one per "cluster"
    by_item = st.pair_summary(items, n_boot=2000, seed=1)["ci"]["raw"]
    assert (by_question[1] - by_question[0]) > 2 * (by_item[1] - by_item[0])


def test_bootstrap_is_deterministic_for_a_seed() -> None:
    a, b = next(_random_pairs())
    t = st.cluster_tables(a, b, [str(i // 4) for i in range(len(a))])[1]
    assert st.pair_summary(t, n_boot=300, seed=5)["ci"] == st.pair_summary(t, n_boot=300, seed=5)["ci"]


def test_planted_judge_is_recovered_within_intervals() -> None:
    """Humans say met with prevalence p; the judge flips not-met to met with probability fp and met
    to not-met with probability ff. kappa, AC1, false-pass and false-fail must recover the planted
    population values inside their 95% intervals."""
    p, fp, ff = 0.3, 0.10, 0.25
    rng = np.random.default_rng(2024)
    n_q, per_q = 400, 8
    human = rng.random(n_q * per_q) < p
    flip = np.where(human, rng.random(human.size) < ff, rng.random(human.size) < fp)
    judge = human ^ flip
    clusters = [str(i // per_q) for i in range(human.size)]
    out = st.pair_summary(st.cluster_tables(judge, human, clusters)[1], n_boot=2000, seed=0)

    pj = p * (1 - ff) + (1 - p) * fp  # judge's met rate
    po = p * (1 - ff) + (1 - p) * (1 - fp)
    pe_k = p * pj + (1 - p) * (1 - pj)
    pi = (p + pj) / 2
    pe_g = 2 * pi * (1 - pi)
    truth = {"cohen_kappa": (po - pe_k) / (1 - pe_k), "gwet_ac1": (po - pe_g) / (1 - pe_g),
             "false_pass": fp, "false_fail": ff, "raw": po}
    for key, value in truth.items():
        lo, hi = out["ci"][key]
        assert lo <= value <= hi, (key, value, lo, hi)
        assert hi - lo < 0.12, (key, lo, hi)  # informative, not vacuous
    assert out["chance_floor"] == pytest.approx(1 - p, abs=0.03)


def test_multi_rater_alpha_with_missing_and_interval() -> None:
    rng = np.random.default_rng(11)
    truth = rng.random(120) < 0.4
    m = np.array([truth ^ (rng.random(120) < e) for e in (0.05, 0.1, 0.15)], dtype=float)
    m[0, ::4] = np.nan  # rater 1 skipped a quarter of the items
    clusters = [str(i // 6) for i in range(120)]
    out = st.multi_rater_alpha(m, clusters, n_boot=300, seed=0)
    assert out["n_raters"] == 3 and out["units"] == 120
    lo, hi = out["ci"]
    assert lo < out["krippendorff_alpha"] < hi and 0.5 < out["krippendorff_alpha"] < 0.9


def test_mean_difference_interval() -> None:
    pairs = {str(q): [(50.0 + q % 5, 48.0 + q % 5)] for q in range(40)}
    out = st.mean_difference(pairs, n_boot=500)
    assert out["mean"] == pytest.approx(2.0) and out["ci"] == pytest.approx([2.0, 2.0])
