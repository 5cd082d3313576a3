"""The hierarchical bootstrap (stats/nested.py) against a hand-written two-stage resample and against theory.

Theory used: with the mean over questions as the statistic and no gradings to resample, one resample's
value is the mean of m i.i.d. draws Y*, each the mean of K draws (with replacement) from one randomly
drawn question's K sample values. So Var* = (B + W / K) / m exactly, with B the (population) variance of
the question means and W the mean over questions of the (population) within-question variance.
"""

from __future__ import annotations

import math
import random
import statistics
from itertools import product

import numpy as np
import pytest

from rubric_engine.scoring.aggregate import ScoredQuestion, overall
from rubric_engine.scoring.question import Aggregation
from rubric_engine.stats.bootstrap import percentile
from rubric_engine.stats.nested import LEVELS, Nested, multisets, nested_stats, paired_nested, point
from rubric_engine.stats.sampling import merge_scores


def table(m: int, k: int, r: int, cols: int, seed: int) -> dict[tuple[int, int, tuple[int, ...]], list[float]]:
    """Random values per (question, sample, multiset of gradings); question q lacks column q % cols when cols > 1."""
    rng = random.Random(seed)
    out = {}
    for q, s in product(range(m), range(k)):
        for ms in multisets(r):
            out[(q, s, ms)] = [math.nan if cols > 1 and c == q % cols and q % 2 else rng.random() for c in range(cols)]
    return out


def build(values: dict[tuple[int, int, tuple[int, ...]], list[float]], m: int, k: int, r: int, cols: int) -> Nested:
    arr = np.full((m, k, len(multisets(r)), cols), np.nan)
    for (q, s, ms), v in values.items():
        arr[q, s, multisets(r).index(ms)] = v
    return Nested([f"q{q}" for q in range(m)], arr, r)


def macro(rows: list[list[float]]) -> float:
    """Mean over columns of each column's mean over the rows that have it (plain Python)."""
    means = []
    for c in range(len(rows[0])):
        got = [row[c] for row in rows if not math.isnan(row[c])]
        if got:
            means.append(sum(got) / len(got))
    return sum(means) / len(means)


def by_hand(values, m, k, r, cols, rng, levels):
    """One resample, written out: questions, then samples within each, then gradings within each sample."""
    qs = [int(x) for x in rng.integers(0, m, size=m)] if "questions" in levels else list(range(m))
    ss = rng.integers(0, k, size=(m, k)) if "samples" in levels and k > 1 else [list(range(k))] * m
    rs = rng.integers(0, r, size=(m, k, r)) if "repeats" in levels and r > 1 else None
    rows = []
    for i, q in enumerate(qs):
        per_sample = []
        for j in range(k):
            s = int(ss[i][j])
            ms = tuple(sorted(int(x) for x in rs[i, j])) if rs is not None else tuple(range(r))
            per_sample.append(values[(q, s, ms)])
        rows.append([sum(v[c] for v in per_sample) / k for c in range(cols)])
    return macro(rows)


@pytest.mark.parametrize("levels", [LEVELS, ("questions",), ("questions", "samples"), ("repeats",)])
def test_matches_a_hand_written_two_stage_resample(levels: tuple[str, ...]) -> None:
    m, k, r, cols, n = 6, 3, 3, 2, 300
    values = table(m, k, r, cols, seed=4)
    got = nested_stats(build(values, m, k, r, cols), n, seed=7, scale=100.0, levels=levels)
    rng = np.random.default_rng(7)
    draws = sorted(100 * by_hand(values, m, k, r, cols, rng, levels) for _ in range(n))
    assert got["lo"] == pytest.approx(percentile(draws, 0.025), abs=1e-9)
    assert got["hi"] == pytest.approx(percentile(draws, 0.975), abs=1e-9)
    mean = sum(draws) / n
    assert got["std"] == pytest.approx(math.sqrt(sum((d - mean) ** 2 for d in draws) / n), abs=1e-9)
    observed = [[sum(values[(q, s, tuple(range(r)))][c] for s in range(k)) / k for c in range(cols)] for q in range(m)]
    assert got["point"] == pytest.approx(100 * macro(observed), abs=1e-9)


def test_paired_matches_a_hand_written_resample() -> None:
    m, k, r, cols, n = 5, 2, 3, 2, 200
    va, vb = table(m, k, r, cols, seed=1), table(m, k, r, cols, seed=2)
    for key in va:  # the same questions lack the same columns in both runs
        vb[key] = [math.nan if math.isnan(x) else y for x, y in zip(va[key], vb[key])]
    got = paired_nested(build(va, m, k, r, cols), build(vb, m, k, r, cols), n, seed=3, scale=1.0)
    rng = np.random.default_rng(3)
    diffs = []
    for _ in range(n):
        qs = rng.integers(0, m, size=m)
        one = []
        for values in (va, vb):
            ss, rs = rng.integers(0, k, size=(m, k)), rng.integers(0, r, size=(m, k, r))
            rows = [[sum(values[(int(q), int(ss[i][j]), tuple(sorted(int(x) for x in rs[i, j])))][c] for j in range(k)) / k
                     for c in range(cols)] for i, q in enumerate(qs)]
            one.append(macro(rows))
        diffs.append(one[0] - one[1])
    diffs.sort()
    assert (got["lo"], got["hi"]) == pytest.approx((percentile(diffs, 0.025), percentile(diffs, 0.975)), abs=1e-12)


@pytest.mark.parametrize("sigma", [0.0, 0.1, 0.3])
def test_interval_width_grows_with_within_question_noise_as_theory_says(sigma: float) -> None:
    m, k, n = 150, 3, 4000
    rng = random.Random(11)
    mu = [rng.random() for _ in range(m)]
    noise = random.Random(12)
    y = [[mu[q] + sigma * noise.gauss(0, 1) for _ in range(k)] for q in range(m)]
    arr = np.array(y, dtype=float).reshape(m, k, 1, 1)
    nested = Nested([str(q) for q in range(m)], arr, 1)
    means = [statistics.fmean(v) for v in y]
    b = statistics.pvariance(means)
    w = statistics.fmean(statistics.pvariance(v) for v in y)
    both = nested_stats(nested, n, seed=5, scale=1.0, levels=("questions", "samples"))
    questions_only = nested_stats(nested, n, seed=5, scale=1.0, levels=("questions",))
    assert both["std"] == pytest.approx(math.sqrt((b + w / k) / m), rel=0.05)
    assert questions_only["std"] == pytest.approx(math.sqrt(b / m), rel=0.05)
    if sigma == 0.0:  # no within-question noise: drawing samples adds nothing (other draws, same spread)
        assert w == 0.0 and both["std"] == pytest.approx(questions_only["std"], rel=0.05)
    else:  # the planted within-question noise widens the interval by the share theory gives it
        ratio = (both["hi"] - both["lo"]) / (questions_only["hi"] - questions_only["lo"])
        assert ratio == pytest.approx(math.sqrt(1 + w / (k * b)), rel=0.08)


def test_resampled_gradings_follow_the_multinomial() -> None:
    """One question, one sample, R = 3: the value is 1 when grading 0 is drawn at least twice, whose
    probability is 7/27 (3 x (1/3)^2 x (2/3) + (1/3)^3)."""
    sets = multisets(3)
    arr = np.array([1.0 if ms.count(0) >= 2 else 0.0 for ms in sets]).reshape(1, 1, len(sets), 1)
    nested = Nested(["q"], arr, 3)
    assert point(nested) == 0.0  # the run's own verdict: every grading once
    st = nested_stats(nested, 20000, seed=1, scale=1.0, levels=("repeats",))
    # a 0/1 value with P(1) = p has variance p(1 - p): solve for p (< 1/2) and compare with 7/27
    p = 0.5 - math.sqrt(max(0.0, 0.25 - st["std"] ** 2))
    assert p == pytest.approx(7 / 27, abs=0.012)


def test_no_grading_noise_gives_a_zero_width_judge_interval() -> None:
    m, k = 8, 2
    rng = random.Random(3)
    same = np.array([[rng.random()] * 10 for _ in range(m * k)]).reshape(m, k, 10, 1)  # every multiset alike
    other = np.array([[rng.random()] * 10 for _ in range(m * k)]).reshape(m, k, 10, 1)
    a, b = Nested([str(i) for i in range(m)], same, 3), Nested([str(i) for i in range(m)], other, 3)
    only = paired_nested(a, b, 500, seed=0, scale=100.0, levels=("repeats",))
    assert only["std"] == 0.0 and only["lo"] == only["hi"] == pytest.approx(only["diff"], abs=1e-9)


def test_point_is_the_aggregate_of_the_sample_means() -> None:
    m, k, r, cols = 7, 3, 1, 3
    values = table(m, k, r, cols, seed=9)
    nested = build(values, m, k, r, cols)
    scored = []
    for q in range(m):
        means = [sum(values[(q, s, (0,))][c] for s in range(k)) / k for c in range(cols)]
        abil = {f"a{c}": v for c, v in enumerate(means) if not math.isnan(v)}
        scored.append(ScoredQuestion(f"q{q}", "", "", abil, sum(abil.values()) / len(abil), False))
    dims = {"d": [f"a{c}" for c in range(cols)]}
    assert point(nested) == pytest.approx(overall(scored, dims, Aggregation()), abs=1e-12)


def test_merge_scores_by_hand() -> None:
    one = {"abilities": {"x": {"raw": 2, "lo": -1, "hi": 3, "score": 0.5}}, "score": 0.5, "failed_rules": [],
           "catastrophic": False}
    two = {"abilities": {"x": {"raw": 0, "lo": -1, "hi": 3, "score": 0.25}}, "score": 0.0, "failed_rules": ["r1"],
           "catastrophic": True}
    got = merge_scores([one, two])
    assert got["abilities"] == {"x": {"raw": 1.0, "lo": -1, "hi": 3, "score": 0.375}}
    assert got["score"] == 0.25 and got["failed_rules"] == ["r1"] and got["catastrophic"] is True
    assert got["sample_score_sd"] == pytest.approx(math.sqrt(0.125))  # sd of (0.5, 0.0) with n - 1
