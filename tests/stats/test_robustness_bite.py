"""Robustness statistics (stats/robustness.py) on small cases computed by hand, in-process and without scipy or
scikit-learn (the mutation tool's environment has neither; tests/stats/test_robustness_stats.py restates kappa with
scikit-learn on random data).

What a user reads in robustness.json and its report (docs/judge-noise.md): the hit rate per shown position and
for the last criterion with Wilson's 95% interval, the original verdicts' rate on the same items, the agreement,
Cohen's kappa, the flip rate with its interval (1 minus the agreement's, ends swapped) and the flips in each
direction. The asymmetric fake: a judge that says "met" only for the criterion shown first.
"""

from __future__ import annotations

import math

import pytest

from rubric_engine.stats.robustness import Z95, Rejudged, compare_verdicts, permutation, position_rates, wilson


def _wilson_by_hand(k: int, n: int) -> tuple[float, float]:
    z = 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@pytest.mark.parametrize(("k", "n"), [(1, 1), (0, 1), (3, 4), (7, 20), (20, 20), (1, 3)])
def test_wilson_equals_the_formula_written_out(k: int, n: int) -> None:
    assert wilson(k, n) == pytest.approx(_wilson_by_hand(k, n), abs=1e-12)


def test_wilson_textbook_values_and_its_edges() -> None:
    assert Z95 == pytest.approx(1.959963984540054, abs=1e-15)
    # Newcombe (1998), Table I: 1/29 -> [0.0061, 0.1718]; 81/263 -> [0.2553, 0.3662]
    assert wilson(1, 29) == pytest.approx((0.0061, 0.1718), abs=1e-4)
    assert wilson(81, 263) == pytest.approx((0.2553, 0.3662), abs=1e-4)
    assert wilson(0, 0) is None and wilson(0, -1) is None
    lo, hi = wilson(10, 10)
    assert hi == pytest.approx(1.0) and hi <= 1.0 and lo == pytest.approx(0.7225, abs=1e-4)
    # z = 1 on 2/4: centre (0.5 + 1/8) / 1.25 = 0.5, half sqrt(1/16 + 1/64) / 1.25 = 0.2236
    assert wilson(2, 4, z=1.0) == pytest.approx((0.5 - math.sqrt(5 / 64) / 1.25, 0.5 + math.sqrt(5 / 64) / 1.25))


def test_permutation_is_the_seeded_shuffle_of_its_question() -> None:
    assert permutation(0, 1, "q") == [] and permutation(1, 1, "q") == [1]
    for n in (2, 3, 5):
        p = permutation(n, 7, "q1")
        assert sorted(p) == list(range(1, n + 1)) and p != sorted(p)
        assert p == permutation(n, 7, "q1")
    assert permutation(2, 7, "q1") == [2, 1]  # two items: the only other order
    # another seed or question gives another order for some n (the seed string is "<seed>:<qid>")
    assert any(permutation(6, 7, "q1") != permutation(6, s, "q1") for s in range(8, 12))
    assert any(permutation(6, 7, "q1") != permutation(6, 7, f"q{i}") for i in range(2, 6))


def _first_shown_bias() -> list[Rejudged]:
    """Three questions of 3, 2 and 3 criteria re-judged by a judge that says met only for the one shown first."""
    rows = []
    original = {("a", 1): True, ("a", 2): True, ("a", 3): False, ("b", 1): False, ("b", 2): True,
                ("c", 1): True, ("c", 2): False, ("c", 3): True}
    shown = {"a": [2, 3, 1], "b": [2, 1], "c": [3, 1, 2]}  # shown[q][pos - 1] = the criterion at that position
    for q, order in shown.items():
        for pos, idx in enumerate(order, 1):
            rows.append(Rejudged(q, idx, original[(q, idx)], pos == 1, pos, len(order)))
    return rows


def test_position_rates_by_hand_on_a_judge_that_prefers_the_first_shown() -> None:
    rates = position_rates(_first_shown_bias())
    assert [r["position"] for r in rates] == ["1", "2", "3", "last"]
    by = {r["position"]: r for r in rates}
    assert (by["1"]["n"], by["1"]["hit_rate"]) == (3, 1.0)
    assert (by["2"]["n"], by["2"]["hit_rate"]) == (3, 0.0)
    assert (by["3"]["n"], by["3"]["hit_rate"]) == (2, 0.0)
    assert (by["last"]["n"], by["last"]["hit_rate"]) == (3, 0.0)  # a's 3rd, b's 2nd, c's 3rd
    # original verdicts on the same items: first shown a2 T, b2 T, c3 T; second a3 F, b1 F, c1 T; third a1 T, c2 F
    assert by["1"]["original_hit_rate"] == 1.0
    assert by["2"]["original_hit_rate"] == pytest.approx(1 / 3)
    assert by["3"]["original_hit_rate"] == 0.5
    assert by["last"]["original_hit_rate"] == pytest.approx(1 / 3)  # a1 T, b1 F, c2 F
    assert by["1"]["ci"] == pytest.approx(list(_wilson_by_hand(3, 3)))
    assert by["last"]["ci"] == pytest.approx(list(_wilson_by_hand(0, 3)))


def test_a_question_of_one_criterion_has_no_last_position() -> None:
    rates = position_rates([Rejudged("q", 1, True, True, 1, 1), Rejudged("r", 1, False, True, 1, 1)])
    assert [r["position"] for r in rates] == ["1"] and rates[0]["hit_rate"] == 1.0
    assert rates[0]["original_hit_rate"] == 0.5
    assert position_rates([]) == []


def test_comparison_by_hand() -> None:
    rows = _first_shown_bias()
    # (new, original): a: (T,T) (F,F) (F,T); b: (T,T) (F,F); c: (T,T) (F,T) (F,F)
    # agreement 6/8; flips: met now not before 0, not now met before 2
    # kappa: p_o = 0.75; new met 3/8, original met 5/8; p_e = 3/8 x 5/8 + 5/8 x 3/8 = 30/64
    cmp = compare_verdicts(rows, n_boot=200, seed=3)
    assert cmp["n"] == 8 and cmp["questions"] == 3
    assert cmp["agreement"] == pytest.approx(0.75) and cmp["flip_rate"] == pytest.approx(0.25)
    assert cmp["cohen_kappa"] == pytest.approx((0.75 - 30 / 64) / (1 - 30 / 64))
    assert cmp["flips"] == {"met_now_not_before": 0, "not_now_met_before": 2}
    assert cmp["agreement_ci"] is None and cmp["flip_rate_ci"] is None and cmp["kappa_ci"] is None  # 3 questions
    assert any("3 question(s): no interval" in n for n in cmp["notes"])


def test_the_flip_rate_interval_is_one_minus_the_agreement_s() -> None:
    rows = []
    for q in range(12):  # 12 questions of 3: the last item of every third question flips from met to not met
        for pos in (1, 2, 3):
            rows.append(Rejudged(f"q{q}", pos, True, not (pos == 3 and q % 3 == 0), pos, 3))
    cmp = compare_verdicts(rows, n_boot=300, seed=5)
    assert cmp["agreement"] == pytest.approx(32 / 36) and cmp["flip_rate"] == pytest.approx(4 / 36)
    lo, hi = cmp["agreement_ci"]
    assert cmp["flip_rate_ci"] == pytest.approx([1 - hi, 1 - lo]) and lo < hi
    assert cmp["flips"] == {"met_now_not_before": 0, "not_now_met_before": 4}
    # the originals are all met: p_e = p_o = 32/36, so kappa is 0 (as scikit-learn's cohen_kappa_score says)
    assert cmp["cohen_kappa"] == pytest.approx(0.0)


def test_nothing_compared() -> None:
    cmp = compare_verdicts([], n_boot=50)
    assert cmp["n"] == 0 and cmp["agreement"] is None and cmp["flip_rate"] is None
    assert cmp["flip_rate_ci"] is None and "no item labelled by both" in cmp["notes"]


def test_wilson_stays_within_0_and_1_where_rounding_would_leave_it() -> None:
    # written out, the upper end of 16/16 and the lower end of 0/21 round to just past 1 and just below 0
    assert _wilson_by_hand(16, 16)[1] == 1.0 and wilson(16, 16)[1] == 1.0
    z = 1.959963984540054
    centre, half = (1 + z * z / 32) / (1 + z * z / 16), z * math.sqrt(z * z / (4 * 256)) / (1 + z * z / 16)
    assert centre + half > 1.0  # what the clip is for
    assert wilson(0, 21)[0] == 0.0


def test_the_intervals_are_stats_agreement_s_cluster_bootstrap_with_the_given_draws() -> None:
    from rubric_engine.stats.agreement import cluster_tables, pair_summary

    rows = []
    for q in range(12):
        for pos in (1, 2, 3):
            original = (q + pos) % 3 != 0
            rows.append(Rejudged(f"q{q}", pos, original, original != (pos == 2 and q % 4 == 0), pos, 3))
    _, tables = cluster_tables([r.new for r in rows], [r.original for r in rows], [r.qid for r in rows])
    for kwargs in ({}, {"n_boot": 150, "seed": 9}):
        cmp = compare_verdicts(rows, **kwargs)
        ref = pair_summary(tables, n_boot=kwargs.get("n_boot", 1000), seed=kwargs.get("seed", 0))
        assert cmp["agreement_ci"] == ref["ci"]["raw"] and cmp["kappa_ci"] == ref["ci"]["cohen_kappa"]
        assert cmp["kappa_ci"] is not None and cmp["cohen_kappa"] == ref["cohen_kappa"]
    assert compare_verdicts(rows, n_boot=150, seed=9)["agreement_ci"] != compare_verdicts(rows, n_boot=150,
                                                                                        seed=10)["agreement_ci"]
