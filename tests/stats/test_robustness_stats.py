"""stats/robustness.py against textbook values and scikit-learn: Wilson's interval, the seeded permutation,
and the agreement / kappa / flip rate of re-judged verdicts."""

from __future__ import annotations

import random

import pytest
from sklearn.metrics import cohen_kappa_score

from rubric_engine.stats.robustness import Rejudged, compare_verdicts, permutation, position_rates, wilson


def test_wilson_matches_textbook_values() -> None:
    # Newcombe (1998), Table I: 0/10 -> [0, 0.2775]; 5/10 -> [0.2366, 0.7634] (Wilson score, 95%)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 0) is None


def test_permutation_is_seeded_and_never_the_listed_order() -> None:
    for n in range(2, 7):
        for q in ("a", "b", "c"):
            p = permutation(n, 0, q)
            assert sorted(p) == list(range(1, n + 1)) and p != sorted(p)
            assert p == permutation(n, 0, q)
    assert permutation(1, 0, "a") == [1]


def test_comparison_matches_sklearn_and_positions_count() -> None:
    rng = random.Random(4)
    rows = []
    for q in range(30):
        n = rng.randint(2, 6)
        for pos in range(1, n + 1):
            old = rng.random() < 0.6
            new = old if rng.random() < 0.8 else not old
            rows.append(Rejudged(f"q{q}", pos, old, new and pos != n, pos, n))
    cmp = compare_verdicts(rows, n_boot=300, seed=1)
    new, old = [r.new for r in rows], [r.original for r in rows]
    assert cmp["cohen_kappa"] == pytest.approx(cohen_kappa_score(new, old), abs=1e-12)
    assert cmp["flip_rate"] == pytest.approx(sum(a != b for a, b in zip(new, old)) / len(rows))
    lo, hi = cmp["flip_rate_ci"]
    assert lo <= cmp["flip_rate"] <= hi
    pos = {p["position"]: p for p in position_rates(rows)}
    assert pos["last"]["n"] == 30 and pos["last"]["hit_rate"] == 0
    assert pos["1"]["n"] == 30 and sum(p["n"] for k, p in pos.items() if k != "last") == len(rows)
