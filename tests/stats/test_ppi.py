"""stats/ppi.py: PPI / PPI++ for a mean against hand-computed numbers, the published formulas restated here
(Angelopoulos et al. 2023, "Prediction-powered inference"; Angelopoulos, Duchi, Zrnic 2023, "PPI++"), as the
authors' reference implementation ppi_py computes them (ppi_mean_pointestimate, ppi_mean_ci, _calc_lam_glm:
ddof 0 for the variances of the interval and the covariance, ddof 1 for the judge's variance in lambda),
and a simulation with known human truth: a judge lenient on one criterion group and strict on another."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rubric_engine.stats import ppi

Y = [1.0, 0.0, 1.0, 1.0]
YHAT = [1.0, 0.0, 0.0, 1.0]
UNL = [1.0, 1.0, 1.0, 0.0]


def test_plain_ppi_by_hand() -> None:
    # lambda = 1: mean(unlabelled judge) 0.75 + mean(Y - Yhat) = mean([0, 0, 1, 0]) 0.25
    assert ppi.ppi_mean(Y, YHAT, UNL, 1.0) == pytest.approx(1.0)
    # var([1,1,1,0]) / 4 + var([0,0,1,0]) / 4 = 0.1875 / 4 + 0.1875 / 4
    assert ppi.ppi_se(Y, YHAT, UNL, 1.0) == pytest.approx(math.sqrt(0.09375))


def test_power_lambda_by_hand() -> None:
    # cov(Y, Yhat) ddof 0 = 0.5 / 4 = 0.125; var of all 8 judge scores (5 ones) ddof 1 = 1.875 / 7; 1 + n/N = 2
    assert ppi.power_lambda(Y, YHAT, UNL) == pytest.approx(0.125 / (2 * 1.875 / 7))  # 7 / 30
    # theta = 7/30 * 0.75 + mean(Y) 0.75 - 7/30 * mean(Yhat) 0.5 = 0.75 + 7/120
    assert ppi.ppi_mean(Y, YHAT, UNL, 7 / 30) == pytest.approx(97 / 120)
    est = ppi.ppi_estimate(Y, YHAT, UNL)
    assert est["lambda"] == pytest.approx(7 / 30) and est["estimate"] == pytest.approx(97 / 120)
    assert est["interval"][1] - est["interval"][0] == pytest.approx(2 * 1.959964 * est["se"], rel=1e-6)
    assert est["judge_only"] == pytest.approx(5 / 8) and est["human_only"]["estimate"] == pytest.approx(0.75)


def test_estimate_fields_and_plain_ppi() -> None:
    est = ppi.ppi_estimate(Y, YHAT, UNL)
    assert set(est) == {"estimate", "se", "interval", "lambda", "method", "labelled", "unlabelled", "human_only",
                        "judge_only", "judge_on_labelled", "labels_to_halve"}
    assert set(est["human_only"]) == {"estimate", "se", "interval"}
    assert (est["method"], est["labelled"], est["unlabelled"]) == ("PPI++ (power-tuned lambda)", 4, 4)
    assert est["judge_on_labelled"] == 0.5 and est["labels_to_halve"] is None
    # lambda 7/30: Y - lambda Yhat = [23, 0, 30, 23] / 30, mean 19/30, squared deviations (16 + 361 + 121 + 16) / 900
    assert est["se"] == pytest.approx(math.sqrt((49 / 900 * 0.1875) / 4 + (514 / 3600) / 4))
    assert est["human_only"]["se"] == pytest.approx(math.sqrt(0.1875 / 4))
    plain = ppi.ppi_estimate(Y, YHAT, UNL, power=False)
    assert (plain["lambda"], plain["estimate"], plain["method"]) == (1.0, pytest.approx(1.0), "PPI (lambda = 1)")
    assert plain["se"] == pytest.approx(math.sqrt(0.09375))


def test_length_mismatches() -> None:
    with pytest.raises(ValueError, match="human and judge scores of the labelled replies differ in length: 4 vs 3"):
        ppi.ppi_mean(Y, YHAT[:3], UNL)
    with pytest.raises(ValueError, match="^judge, human and cluster lists differ in length$"):
        ppi.paired_rates([True, False], [True, False], ["q1"])
    with pytest.raises(ValueError, match="judge, human and cluster lists differ in length"):
        ppi.paired_rates([True, False], [True], ["q1", "q2"])


def test_lambda_is_clipped_and_constant_judge_gives_zero() -> None:
    assert ppi.power_lambda([0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0], [0.0, 1.0]) == 0.0  # negative covariance
    assert ppi.power_lambda([0.0, 1.0, 1.0], [0.5, 0.5, 0.5], [0.5]) == 0.0  # a constant judge carries nothing
    assert ppi.power_lambda([0.0, 10.0], [0.0, 1.0], [0.0, 1.0] * 50) == 1.0  # clipped from above


def test_classical_by_hand() -> None:
    mean, se = ppi.classical(Y)
    assert (mean, se) == (pytest.approx(0.75), pytest.approx(math.sqrt(0.1875 / 4)))


def test_labels_to_halve_by_hand() -> None:
    # lambda = 0 is the human-only mean: its interval halves at 4n labels when the run has that many replies
    assert ppi.labels_to_halve(Y, YHAT, [0.0] * 13, 0.0) == 16
    assert ppi.labels_to_halve(Y, YHAT, [0.0] * 12, 0.0) is None  # 16 labels would leave no unlabelled reply
    # lambda = 1 here: both terms 0.1875; with 4 + 4 replies nothing halves the interval
    assert ppi.labels_to_halve(Y, YHAT, UNL, 1.0) is None
    # lambda = 1, var(Y - Yhat) = 0.1875, 100 unlabelled half 0 half 1 (var 0.25), 104 replies: se^2 = 0.0025 +
    # 0.046875, a quarter of it 0.01234375; 0.25 / (104 - n) + 0.1875 / n is 0.0123512 at n = 20, 0.0119406 at 21
    assert ppi.labels_to_halve(Y, YHAT, [0.0, 1.0] * 50, 1.0) == 21
    assert ppi.ppi_estimate(Y, YHAT, [0.0, 1.0] * 50, power=False)["labels_to_halve"] == 21


def test_too_few_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least 2 labelled and 1 unlabelled"):
        ppi.ppi_estimate([1.0], [1.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="at least 2 labelled and 1 unlabelled"):
        ppi.ppi_estimate(Y, YHAT, [])


def test_paired_rates_by_hand() -> None:
    # d = [0, 1, 0, 1], mean 0.5; deviations by question: q1 -0.5, q2 (0.5 - 0.5) 0, q3 0.5; G = 3
    r = ppi.paired_rates([True, True, False, True], [True, False, False, False], ["q1", "q2", "q2", "q3"])
    se = math.sqrt(3 / 2 * 0.5) / 4
    assert (r["judge_rate"], r["human_rate"], r["difference"]) == (0.75, 0.25, 0.5)
    assert r["interval"] == [pytest.approx(0.5 - 1.959964 * se), pytest.approx(0.5 + 1.959964 * se)]
    assert ppi.paired_rates([True], [False], ["q1"]) == {  # one question: no interval
        "n": 1, "questions": 1, "judge_rate": 1.0, "human_rate": 0.0, "difference": 1.0, "interval": None}
    assert ppi.paired_rates([], [], []) == {"n": 0, "questions": 0, "judge_rate": None, "human_rate": None,
                                            "difference": None, "interval": None}
    two = ppi.paired_rates([True, False], [False, False], ["q1", "q2"])  # two questions: an interval, clipped
    assert two["interval"] == [pytest.approx(0.5 - 1.959964 * math.sqrt(2 * 0.5) / 2), 1.0]
    low = ppi.paired_rates([False, False, True], [True, True, True], ["q1", "q2", "q3"])
    assert low["interval"] == [-1.0, pytest.approx(-2 / 3 + 1.959964 / 3)]
    # d = [1, 1, 0]: deviations 1/3, 1/3, -2/3, one question each; se = sqrt(3/2 * 6/9) / 3 = 1/3; 2/3 + 0.65 > 1
    wide = ppi.paired_rates([True, True, False], [False, False, False], ["q1", "q2", "q3"])
    assert wide["interval"] == [pytest.approx(2 / 3 - 1.959964 / 3), 1.0]


# --- the simulation -------------------------------------------------------------------------------------

REPLIES, LABELLED, CRITERIA = 600, 60, 10  # 5 criteria in group "lenient", 5 in group "strict"


def _population(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Human and judge hits (replies x criteria): the judge passes 45% of the human fails of the first group
    and fails 10% of the human passes of the second, so its score is biased and the bias differs by group."""
    quality = rng.beta(2, 2, size=(REPLIES, 1))
    human = rng.random((REPLIES, CRITERIA)) < quality
    u = rng.random((REPLIES, CRITERIA))
    lenient = np.arange(CRITERIA) < CRITERIA // 2
    judge = np.where(lenient, human | (u < 0.45), human & (u >= 0.10))
    flips = rng.random((REPLIES, CRITERIA)) < 0.05  # plus some plain noise
    return human, judge ^ flips


def _published_estimate(y: np.ndarray, yhat: np.ndarray, yhat_unl: np.ndarray) -> float:
    """PPI++ restated: theta = mean(Y) + lambda (mean(Yhat_U) - mean(Yhat_L)),
    lambda = clip(Cov_n(Y, Yhat_L) / ((1 + n/N) Var(Yhat_L u Yhat_U)), 0, 1)."""
    n, big_n = y.size, yhat_unl.size
    cov = np.sum((y - y.mean()) * (yhat - yhat.mean())) / n
    both = np.concatenate([yhat, yhat_unl])
    lam = float(np.clip(cov / ((1 + n / big_n) * np.sum((both - both.mean()) ** 2) / (both.size - 1)), 0, 1))
    return float(y.mean() + lam * (yhat_unl.mean() - yhat.mean()))


def test_simulation_covers_the_all_human_score_and_beats_human_only() -> None:
    covered = narrower = judge_covered = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        human, judge = _population(rng)
        y_all, yhat_all = human.mean(1) * 100, judge.mean(1) * 100  # reply scores, linear formula
        truth = float(y_all.mean())  # the score had people labelled every reply
        idx = rng.permutation(REPLIES)
        lab, unl = idx[:LABELLED], idx[LABELLED:]
        est = ppi.ppi_estimate(y_all[lab], yhat_all[lab], yhat_all[unl])
        assert est["estimate"] == pytest.approx(_published_estimate(y_all[lab], yhat_all[lab], yhat_all[unl]))
        lo, hi = est["interval"]
        covered += lo <= truth <= hi
        h_lo, h_hi = est["human_only"]["interval"]
        narrower += (hi - lo) < (h_hi - h_lo)
        judge_covered += lo <= est["judge_only"] <= hi
        if seed == 0:  # the per-group bias: lenient group over the humans, strict group under them
            hits = {g: ppi.paired_rates(judge[lab][:, cols].ravel(), human[lab][:, cols].ravel(),
                                        np.repeat(lab.astype(str), cols.stop - cols.start))
                    for g, cols in (("lenient", slice(0, 5)), ("strict", slice(5, 10)))}
            assert hits["lenient"]["interval"][0] > 0 and hits["strict"]["interval"][1] < 0
    assert covered >= 93, covered
    assert narrower >= 95, narrower
    assert judge_covered <= 20, judge_covered  # the judge-only score is biased: mostly outside the interval
