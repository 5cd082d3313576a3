"""The bootstrap interval's level is pinned: a 90% or 97.5% interval labelled 95% fails here.

Three independent checks: (1) the same resamples recomputed with aggregate.overall and the standard
library's quantiles give the same endpoints; (2) on a large sample the interval's width matches the
textbook normal interval 2 * z * sd / sqrt(n) for the level asked; (3) on simulated data the interval
covers the true mean about as often as its nominal level says.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest

from rubric_engine.scoring.aggregate import ScoredQuestion, overall
from rubric_engine.stats.bootstrap import bootstrap_overall, paired_difference

DIMS = {"d0": ["a", "b", "c"], "d1": ["d"]}
Z = {0.05: 1.959964, 0.10: 1.644854}  # two-sided normal quantiles (textbook values)


def questions(n: int, seed: int, shift: float = 0.0, noise: int = 0) -> list[ScoredQuestion]:
    """n questions with 1-4 abilities (structure fixed by seed; scores by seed + noise)."""
    rng, scores_rng = random.Random(seed), random.Random(seed * 1000 + noise)
    out = []
    for i in range(n):
        names = rng.sample(["a", "b", "c", "d"], rng.randint(1, 4))
        scores = {a: min(1.0, scores_rng.random() * 0.9 + shift) for a in names}
        out.append(ScoredQuestion(f"q{i}", "normal", "", scores, sum(scores.values()) / len(scores), False))
    return out


def reference_interval(qs: list[ScoredQuestion], n: int, seed: int, alpha: float) -> tuple[float, float]:
    """Resample questions with the documented generator, recompute with aggregate.overall, take quantiles."""
    rng = random.Random(seed)
    values = []
    for _ in range(n):
        draw = rng.choices(range(len(qs)), k=len(qs))
        values.append(100 * overall([qs[i] for i in draw], DIMS))
    cuts = statistics.quantiles(values, n=1000, method="inclusive")  # linear interpolation, like numpy
    return cuts[round(1000 * alpha / 2) - 1], cuts[round(1000 * (1 - alpha / 2)) - 1]


@pytest.mark.parametrize("alpha", [0.05, 0.10])
def test_endpoints_equal_an_independent_percentile_computation(alpha: float) -> None:
    qs = questions(80, seed=3)
    point, lo, hi = bootstrap_overall(qs, DIMS, n=400, seed=9, alpha=alpha)
    ref_lo, ref_hi = reference_interval(qs, 400, 9, alpha)
    assert point == pytest.approx(100 * overall(qs, DIMS), abs=1e-12)
    assert (lo, hi) == (pytest.approx(ref_lo, abs=1e-9), pytest.approx(ref_hi, abs=1e-9))


def test_default_level_is_95_percent() -> None:
    qs = questions(80, seed=4)
    assert bootstrap_overall(qs, DIMS, n=400, seed=2) == bootstrap_overall(qs, DIMS, n=400, seed=2, alpha=0.05)
    ref_lo, ref_hi = reference_interval(qs, 400, 2, 0.05)
    _, lo, hi = bootstrap_overall(qs, DIMS, n=400, seed=2)
    assert lo == pytest.approx(ref_lo, abs=1e-9) and hi == pytest.approx(ref_hi, abs=1e-9)


@pytest.mark.parametrize("alpha", [0.05, 0.10])
def test_width_matches_the_normal_interval_on_a_large_sample(alpha: float) -> None:
    """One ability: the overall is a plain mean, whose 1-alpha interval is mean +- z * sd / sqrt(n)."""
    rng = random.Random(17)
    n = 400
    values = [rng.random() for _ in range(n)]
    qs = [ScoredQuestion(f"q{i}", "normal", "", {"d": v}, v, False) for i, v in enumerate(values)]
    _, lo, hi = bootstrap_overall(qs, {"d1": ["d"]}, n=4000, seed=1, alpha=alpha)
    textbook = 2 * Z[alpha] * statistics.pstdev(values) / math.sqrt(n) * 100
    # a 90% interval labelled 95% would give 0.84, a 97.5% one 1.14; resampling noise here is ~2%
    assert (hi - lo) / textbook == pytest.approx(1.0, abs=0.05)


def test_coverage_on_simulated_data_is_near_nominal() -> None:
    """Bernoulli(0.3) scores, 60 questions: the 95% interval covers 30 in about 95% of 200 datasets."""
    rng = random.Random(5)
    covered = 0
    datasets = 200
    for k in range(datasets):
        qs = [ScoredQuestion(f"q{i}", "normal", "", {"d": float(rng.random() < 0.3)}, 0.0, False) for i in range(60)]
        _, lo, hi = bootstrap_overall(qs, {"d1": ["d"]}, n=300, seed=k)
        covered += lo <= 30.0 <= hi
    # binomial sd at 0.95 over 200 datasets is 1.5 points; 90% or 80% intervals fall well below 0.89
    assert 0.89 <= covered / datasets <= 0.99, covered


def test_paired_difference_interval_equals_an_independent_computation() -> None:
    a, b = questions(70, seed=8, shift=0.1, noise=1), questions(70, seed=8, noise=2)
    r = paired_difference(a, b, DIMS, n=300, seed=4)
    rng = random.Random(4)
    diffs = []
    for _ in range(300):
        draw = rng.choices(range(70), k=70)
        diffs.append(100 * (overall([a[i] for i in draw], DIMS) - overall([b[i] for i in draw], DIMS)))
    cuts = statistics.quantiles(diffs, n=1000, method="inclusive")
    assert r["lo"] == pytest.approx(cuts[24], abs=1e-9) and r["hi"] == pytest.approx(cuts[974], abs=1e-9)
    assert r["diff"] == pytest.approx(100 * (overall(a, DIMS) - overall(b, DIMS)), abs=1e-12)
    assert r["excludes_zero"] is (r["lo"] > 0 or r["hi"] < 0)


# -- the edges: defaults, bounds and messages ------------------------------------------------------------
def test_defaults_are_1000_resamples_seed_0() -> None:
    qs = questions(30, seed=6)
    assert bootstrap_overall(qs, DIMS) == bootstrap_overall(qs, DIMS, n=1000, seed=0, alpha=0.05)
    b = questions(30, seed=6, noise=3)
    assert paired_difference(qs, b, DIMS) == paired_difference(qs, b, DIMS, n=1000, seed=0, alpha=0.05)


def test_one_resample_is_allowed_zero_alpha_is_not() -> None:
    qs = questions(10, seed=2)
    point, lo, hi = bootstrap_overall(qs, DIMS, n=1)
    assert lo == hi  # one resample: both percentiles are that resample
    for alpha in (0.0, 1.0):
        with pytest.raises(ValueError, match=rf"alpha must be between 0 and 1 \(0.05 for a 95% interval\), got {alpha}"):
            bootstrap_overall(qs, DIMS, alpha=alpha)
    with pytest.raises(ValueError, match=r"bootstrap needs n >= 1 resamples, got 0"):
        paired_difference(qs, qs, DIMS, n=0)


def test_messages_name_the_problem() -> None:
    from rubric_engine.stats.bootstrap import percentile

    with pytest.raises(ValueError, match=r"^percentile of an empty sequence$"):
        percentile([], 0.5)
    with pytest.raises(ValueError, match=r"^bootstrap_overall needs at least one scored question$"):
        bootstrap_overall([], DIMS)
    with pytest.raises(ValueError, match=r"^the two models have no scored question in common; nothing to compare$"):
        paired_difference(questions(3, seed=1), [], DIMS)
    qs = questions(3, seed=1)
    with pytest.raises(ValueError, match=r"^question id 'q0' appears twice in the second model's scores$"):
        paired_difference(qs, qs + qs[:1], DIMS)
    empty = ScoredQuestion("qx", "normal", "", {}, 0.0, False)
    with pytest.raises(ValueError, match=r"^question 'qx' has no ability scores; it cannot take part in a bootstrap$"):
        bootstrap_overall([empty], DIMS)


def test_excludes_zero_on_any_scale() -> None:
    """On a 0-1 scale a clear difference has 0 < lo < 1: it still excludes zero."""
    a, b = questions(80, seed=8, shift=0.1, noise=1), questions(80, seed=8, noise=2)
    r = paired_difference(a, b, DIMS, n=300, scale=1.0)
    assert 0.0 < r["lo"] < 1.0 and r["excludes_zero"] is True
