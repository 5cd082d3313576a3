"""Spearman's rho and its bootstrap, checked against scipy.stats.spearmanr (the reference)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rubric_engine.stats.lengths import (length_block, resample_counts, spearman, spearman_counts, spearman_interval,
                                         strong_note)


@pytest.mark.parametrize("seed", range(6))
def test_spearman_matches_scipy_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    x = rng.integers(0, 12, n).astype(float)  # many ties, like lengths in words
    y = np.round(rng.random(n) * 4) / 4 + 0.1 * x  # lumpy scores, like rubric scores
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)


def test_each_resample_equals_scipy_on_the_drawn_sample() -> None:
    """The count-weighted ranks of a resample are the ranks scipy gives the explicitly drawn sample."""
    rng = np.random.default_rng(7)
    x, y = rng.integers(0, 30, 40).astype(float), rng.integers(0, 5, 40).astype(float)
    draws = np.random.default_rng(3).integers(0, 40, size=(25, 40))
    counts = np.zeros((25, 40))
    np.add.at(counts, (np.arange(25)[:, None], draws), 1.0)
    got = spearman_counts(x, y, counts)
    for b in range(25):
        ref = stats.spearmanr(x[draws[b]], y[draws[b]]).statistic
        assert got[b] == pytest.approx(ref, abs=1e-12)


def test_resample_counts_draw_n_with_replacement() -> None:
    c = resample_counts(17, 50, seed=1)
    assert c.shape == (50, 17) and (c.sum(axis=1) == 17).all() and (c >= 0).all()
    assert (resample_counts(17, 50, seed=1) == c).all()


def test_undefined_cases_are_none_not_zero() -> None:
    assert spearman([1, 2], [3, 4]) is None  # too few points
    assert spearman([1, 2, 3, 4], [5, 5, 5, 5]) is None  # a constant side has no rank correlation
    assert spearman_interval([1, 1, 1], [1, 2, 3]) is None
    with pytest.raises(ValueError):
        spearman([1, 2, 3], [1, 2])


def test_interval_brackets_rho_and_is_reproducible() -> None:
    rng = np.random.default_rng(0)
    x = rng.random(120)
    y = x + rng.normal(0, 0.3, 120)
    a = spearman_interval(x, y, n_boot=400, seed=5)
    assert a == spearman_interval(x, y, n_boot=400, seed=5)
    assert a["lo"] <= a["rho"] <= a["hi"] and a["lo"] > 0.5 and a["n"] == 120
    perfect = spearman_interval([1, 2, 3], [2, 4, 6], n_boot=200)
    assert perfect["rho"] == pytest.approx(1.0) and perfect["lo"] == pytest.approx(1.0)
    # a resample drawing one point 3 times (p = 1/9) has no rho: counted, never filled in
    assert 5 < perfect["undefined_resamples"] < 50


def _samples(n: int, tokens: bool) -> list[dict]:
    out = []
    for i in range(n):
        score = i / n
        out.append({"id": f"q{i}", "response": "x" * (10 + 5 * i), "score": score,
                    "abilities": {"a": {"score": score}, **({"b": {"score": 1 - score}} if i % 2 else {})},
                    "tokens": {"candidate": {"completion": (3 + i) if tokens else 0}}})
    out.append({"id": "err", "response": None, "score": None, "abilities": {}, "candidate_error": "boom"})
    return out


def test_length_block_per_ability_and_strong_flag() -> None:
    block = length_block(_samples(30, tokens=True), ["a", "b", "c"], n_boot=200)
    assert block["questions"] == 30  # the unscored error record is left out
    assert block["overall"]["chars"]["rho"] == pytest.approx(1.0)
    assert block["overall"]["tokens"]["rho"] == pytest.approx(1.0)
    assert block["abilities"]["b"]["chars"]["rho"] == pytest.approx(-1.0)
    assert block["abilities"]["b"]["chars"]["n"] == 15
    assert block["abilities"]["c"] == {"chars": None, "tokens": None}  # no question has ability c
    assert block["strong"] == ["chars", "tokens"] and block["token_measure"]
    assert "gain" in strong_note("m", block)


def test_length_block_without_recorded_tokens_says_so() -> None:
    block = length_block(_samples(10, tokens=False), ["a"], n_boot=50)
    assert "tokens" not in block["overall"] and block["token_measure"] is None
    assert "characters only" in block["note"]
