"""Self-preference statistics on hand-computed cases (the end-to-end planted-bias test is in test_audit.py)."""

from __future__ import annotations

import pytest

from rubric_engine.stats.selfpref import audit_judges, is_pass, rank

FAM = {"A": "x", "B": "y", "C": "z", "cx": "x", "cy": "y"}


def test_pass_means_the_verdict_favours_the_candidate() -> None:
    assert is_pass(True, 3) and not is_pass(False, 3)  # rewarded item: met passes
    assert is_pass(False, -2) and not is_pass(True, -2)  # penalised item: not hit passes
    assert is_pass(False, None) and not is_pass(True, None)  # failure-rule item: not hit passes


def test_rates_by_hand() -> None:
    # one question, 4 items; B and C fail items 0-2 for both candidates and pass item 3
    others = {"q": [False, False, False, True]}
    passes = {("cx", "B"): others, ("cx", "C"): others, ("cy", "B"): others, ("cy", "C"): others,
              ("cx", "A"): {"q": [True, True, False, True]},  # A passes 2 of its own family's 3 failures
              ("cy", "A"): {"q": [False, False, True, True]}}  # and 1 of 3 of the other family's
    a = {x.judge: x for x in audit_judges(passes, ["A", "B", "C"], FAM, n_boot=50)}["A"]
    assert (a.own_items, a.other_items) == (3, 3)
    assert a.own_rate == pytest.approx(2 / 3) and a.other_rate == pytest.approx(1 / 3)
    assert a.diff == pytest.approx(1 / 3) and a.lo == a.hi == pytest.approx(1 / 3)  # one question: no spread
    b = {x.judge: x for x in audit_judges(passes, ["A", "B", "C"], FAM, n_boot=50)}["B"]
    # for B the others are A and C: both must fail (strict majority of 2); cx: item 2 only; cy: items 0, 1
    assert (b.other_items, b.own_items) == (1, 2) and b.own_rate == 0.0 and b.other_rate == 0.0


def test_a_tie_among_the_others_is_not_a_majority() -> None:
    flags = {"B": [False], "C": [True], "A": [True]}
    passes = {(c, j): {"q": f} for c in ("cx", "cy") for j, f in flags.items()}
    a = {x.judge: x for x in audit_judges(passes, ["A", "B", "C"], FAM, n_boot=10)}["A"]
    assert a.own_items == a.other_items == 0 and a.own_rate is None and a.diff is None


def test_points_are_relative_to_the_other_judges() -> None:
    passes = {(c, j): {"q": [True]} for c in ("cx", "cy") for j in "ABC"}
    scores = {("cx", "A"): {"q": {"a1": 0.9}}, ("cx", "B"): {"q": {"a1": 0.5}}, ("cx", "C"): {"q": {"a1": 0.5}},
              ("cy", "A"): {"q": {"a1": 0.6}}, ("cy", "B"): {"q": {"a1": 0.5}}, ("cy", "C"): {"q": {"a1": 0.5}}}
    a = {x.judge: x for x in audit_judges(passes, ["A", "B", "C"], FAM, scores, n_boot=20)}["A"]
    # A lifts its own family by 40 points and the other by 10: 30 points of self-preference
    assert a.points == pytest.approx(30.0) and a.points_lo == pytest.approx(30.0)


def test_rank_and_too_few_judges() -> None:
    assert rank({"a": 50.0, "b": 70.0, "c": 50.0, "d": None}) == {"a": 2, "b": 1, "c": 2, "d": None}
    with pytest.raises(ValueError, match="at least two judges"):
        audit_judges({}, ["A"], FAM)
