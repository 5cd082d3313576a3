"""rubric_engine.stats.bootstrap: degenerate intervals, reproducibility, paired comparisons.

The interval level is pinned in test_bootstrap_level.py; speed is measured by bench/bench_bootstrap.py."""

from __future__ import annotations

import random
import statistics

import pytest

from rubric_engine.scoring.aggregate import ScoredQuestion, aggregate, overall
from rubric_engine.stats.bootstrap import _macro, _vectors, bootstrap_overall, paired_difference, percentile

ABILITIES = [f"a{i}" for i in range(15)]
DIMS = {"d0": ABILITIES[:7], "d1": ABILITIES[7:11], "d2": ABILITIES[11:13], "d3": ABILITIES[13:14], "d4": ABILITIES[14:]}


def synthetic(n: int = 296, seed: int = 1, shift: float = 0.0, noise_seed: int | None = None) -> list[ScoredQuestion]:
    """n questions with 3-8 abilities each (same structure for a given seed); scores depend on noise_seed."""
    rng = random.Random(seed)
    noise = random.Random(seed if noise_seed is None else noise_seed)
    out = []
    for i in range(n):
        abilities = rng.sample(ABILITIES, rng.randint(3, 8))
        scores = {a: min(1.0, max(0.0, noise.random() * 0.8 + shift)) for a in abilities}
        out.append(ScoredQuestion(f"q{i}", "normal", "", scores, sum(scores.values()) / len(scores), False))
    return out


def test_percentile_matches_linear_interpolation():
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.0) == 1.0 and percentile([1.0, 2.0, 3.0, 4.0], 1.0) == 4.0
    assert percentile([0.0, 10.0], 0.025) == pytest.approx(0.25)  # 0 + (10 - 0) * 0.025


def test_fast_macro_equals_aggregate_on_resamples():
    qs = synthetic(60)
    vectors, k = _vectors(qs, DIMS)
    rng = random.Random(3)
    for _ in range(30):
        draw = rng.choices(range(len(qs)), k=len(qs))
        assert _macro(vectors, draw, k) == pytest.approx(overall([qs[i] for i in draw], DIMS), abs=1e-12)


def test_point_is_aggregate_overall_and_interval_is_the_resampled_2_5_to_97_5_percentiles():
    qs = synthetic()
    point, lo, hi = bootstrap_overall(qs, DIMS, n=300)
    assert point == pytest.approx(aggregate(qs, DIMS)["overall"], abs=1e-12)
    rng = random.Random(0)  # the documented default seed, drawn the documented way
    values = [100 * overall([qs[i] for i in rng.choices(range(len(qs)), k=len(qs))], DIMS) for _ in range(300)]
    cuts = statistics.quantiles(values, n=40, method="inclusive")  # cut points at 2.5% ... 97.5%
    assert lo == pytest.approx(cuts[0], abs=1e-9) and hi == pytest.approx(cuts[-1], abs=1e-9)


def test_constant_scores_collapse_interval():
    qs = [ScoredQuestion(f"q{i}", "normal", "", {a: 0.7 for a in ABILITIES[: 1 + i % 5]}, 0.7, False) for i in range(40)]
    point, lo, hi = bootstrap_overall(qs, DIMS, n=200)
    # every ability mean is 0.7 in every resample -> overall 70 everywhere (up to float round-off)
    assert point == pytest.approx(70.0, abs=1e-9)
    assert lo == pytest.approx(point, abs=1e-9) and hi == pytest.approx(point, abs=1e-9)


def test_seed_reproducibility():
    qs = synthetic()
    assert bootstrap_overall(qs, DIMS, n=200, seed=7) == bootstrap_overall(qs, DIMS, n=200, seed=7)
    assert bootstrap_overall(qs, DIMS, n=200, seed=7) != bootstrap_overall(qs, DIMS, n=200, seed=8)
    b = synthetic(noise_seed=5)
    assert paired_difference(qs, b, DIMS, n=200, seed=7) == paired_difference(qs, b, DIMS, n=200, seed=7)


def test_identical_models_paired_difference_is_exactly_zero():
    qs = synthetic()
    copy = [ScoredQuestion(q.id, q.subset, q.scenario, dict(q.abilities), q.score, q.catastrophic) for q in qs]
    r = paired_difference(qs, copy, DIMS, n=300)
    assert r == {"diff": 0.0, "lo": 0.0, "hi": 0.0, "excludes_zero": False, "questions": 296}


def test_clearly_better_model_excludes_zero():
    a = synthetic(shift=0.15, noise_seed=11)  # same questions and abilities, scores ~15 points higher
    b = synthetic(noise_seed=12)
    r = paired_difference(a, b, DIMS, n=500)
    assert r["diff"] > 5 and r["lo"] > 0 and r["excludes_zero"] is True
    r = paired_difference(b, a, DIMS, n=500)
    assert r["diff"] < -5 and r["hi"] < 0 and r["excludes_zero"] is True


def test_same_noise_level_does_not_exclude_zero():
    a, b = synthetic(noise_seed=21), synthetic(noise_seed=22)  # two draws of the same model
    r = paired_difference(a, b, DIMS, n=500)
    assert r["lo"] < r["diff"] < r["hi"]
    assert r["excludes_zero"] is False


def test_paired_uses_only_common_questions():
    a = synthetic(50)
    b = synthetic(50)[10:] + [ScoredQuestion("extra", "normal", "", {"a0": 1.0}, 1.0, False)]
    r = paired_difference(a, b, DIMS, n=50)
    assert r["questions"] == 40 and r["diff"] == 0.0


def test_invalid_inputs_raise():
    qs = synthetic(10)
    with pytest.raises(ValueError, match="no scored question in common"):
        paired_difference(qs[:5], qs[5:], DIMS)
    with pytest.raises(ValueError, match="appears twice"):
        paired_difference(qs + qs[:1], qs, DIMS)
    other = [ScoredQuestion(qs[0].id, "normal", "", {"a14": 1.0, "a13": 0.0, "a12": 0.5, "a11": 0.1}, 0.4, False)]
    with pytest.raises(ValueError, match="different abilities"):
        paired_difference(qs[:1], other, DIMS)
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_overall([], DIMS)
    with pytest.raises(ValueError, match="n >= 1"):
        bootstrap_overall(qs, DIMS, n=0)
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_overall(qs, DIMS, alpha=1.5)
    with pytest.raises(ValueError, match="not in the taxonomy"):
        bootstrap_overall([ScoredQuestion("x", "", "", {"zz": 1.0}, 1.0, False)], DIMS)
