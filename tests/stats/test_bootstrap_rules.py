"""bootstrap: every declared aggregation (mean over questions, macro over abilities) and clip point, the std,
and the paired difference, each against an independent resampling with aggregate.overall. Written against
survivors of `python bench/mutation.py bootstrap` after bootstrap re-ran the declared aggregation."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from rubric_engine.scoring.aggregate import ScoredQuestion, overall
from rubric_engine.scoring.question import Aggregation
from rubric_engine.stats.bootstrap import bootstrap_stats, paired_difference, percentile

DIMS = {"d0": ["a", "b"], "d1": ["c"]}
HOWS = [Aggregation(overall=o, clip=c) for o in ("macro_over_groups", "mean_over_questions")
        for c in ("question", "group", "overall", "none")]


def questions(n: int, seed: int, low: float, high: float) -> list[ScoredQuestion]:
    """Scores outside [0, 1] (as penalties and clip: none allow), so clipping the resampled overall shows."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        names = rng.sample(["a", "b", "c"], rng.randint(1, 3))
        scores = {a: rng.uniform(low, high) for a in names}
        out.append(ScoredQuestion(f"q{i}", "", "", scores, rng.uniform(low, high), False))
    return out


def reference(qs: list[ScoredQuestion], how: Aggregation, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        draw = rng.choices(range(len(qs)), k=len(qs))
        value = overall([qs[i] for i in draw], DIMS, how)
        assert value is not None
        out.append(100 * value)
    return out


def cut(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[round(1000 * q) - 1]


@pytest.mark.parametrize("how", HOWS, ids=lambda h: f"{h.overall}-{h.clip}")
@pytest.mark.parametrize("low, high", [(-0.9, 0.4), (0.6, 1.8), (-0.5, 1.5)], ids=["low", "high", "wide"])
def test_stats_equal_an_independent_resampling(how: Aggregation, low: float, high: float) -> None:
    qs = questions(40, seed=5, low=low, high=high)
    got = bootstrap_stats(qs, DIMS, n=200, seed=3, how=how)
    values = reference(qs, how, 200, 3)
    point = overall(qs, DIMS, how)
    assert point is not None
    assert got["point"] == pytest.approx(100 * point, abs=1e-9)
    assert got["lo"] == pytest.approx(cut(values, 0.025), abs=1e-9)
    assert got["hi"] == pytest.approx(cut(values, 0.975), abs=1e-9)
    assert got["std"] == pytest.approx(statistics.pstdev(values), abs=1e-9)
    assert sorted(got) == ["hi", "lo", "point", "std"]


@pytest.mark.parametrize("how", HOWS, ids=lambda h: f"{h.overall}-{h.clip}")
@pytest.mark.parametrize("range_a, range_b", [((0.6, 1.8), (-0.9, 0.4)), ((-0.9, 0.4), (0.6, 1.8))],
                         ids=["a-high", "a-low"])
def test_paired_difference_equals_an_independent_resampling(how: Aggregation, range_a: tuple[float, float],
                                                             range_b: tuple[float, float]) -> None:
    a, b = questions(40, seed=7, low=range_a[0], high=range_a[1]), questions(40, seed=7, low=range_b[0], high=range_b[1])
    got = paired_difference(a, b, DIMS, n=200, seed=4, how=how)
    va, vb = reference(a, how, 200, 4), reference(b, how, 200, 4)
    diffs = [x - y for x, y in zip(va, vb)]
    pa, pb = overall(a, DIMS, how), overall(b, DIMS, how)
    assert pa is not None and pb is not None
    assert got["diff"] == pytest.approx(100 * (pa - pb), abs=1e-9)
    assert got["lo"] == pytest.approx(cut(diffs, 0.025), abs=1e-9)
    assert got["hi"] == pytest.approx(cut(diffs, 0.975), abs=1e-9)
    assert got["questions"] == 40


def test_percentile_at_an_exact_rank_does_no_arithmetic() -> None:
    """At an exact rank, or between equal values, the value itself: never inf - inf = nan."""
    inf = math.inf
    assert percentile([-inf, 0.0, inf], 0.5) == 0.0
    assert percentile([1.0, inf, inf], 0.75) == inf
    assert percentile([-inf, -inf, 2.0], 0.0) == -inf
    assert percentile([0.0, 1.0, 3.0], 0.75) == 2.0
