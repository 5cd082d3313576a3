"""stats/adaptive.py: the estimated flip of a majority verdict, against scipy's binomial and hand values."""

from __future__ import annotations

import pytest
from scipy.stats import binom

from rubric_engine.stats.adaptive import majority_flip


@pytest.mark.parametrize("n,minority", [(1, 0), (2, 0), (2, 1), (3, 1), (4, 1), (4, 2), (5, 1), (5, 2), (10, 3)])
def test_majority_flip_is_the_binomial_tail(n: int, minority: int) -> None:
    p = minority / n
    tail = binom.sf(n // 2, n, p) + (0.5 * binom.pmf(n // 2, n, p) if n % 2 == 0 else 0.0)
    assert majority_flip(n, minority) == pytest.approx(tail)


def test_hand_values() -> None:
    assert majority_flip(1, 0) == 0.0 and majority_flip(3, 0) == 0.0
    assert majority_flip(2, 1) == pytest.approx(0.25 + 0.5 * 0.5)  # both flip, or an even split counted half
    assert majority_flip(5, 1) == pytest.approx(10 * 0.2 ** 3 * 0.8 ** 2 + 5 * 0.2 ** 4 * 0.8 + 0.2 ** 5)
