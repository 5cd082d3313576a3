"""scoring: the declared aggregation's edges (no positive points, formula params, raw/lo/hi sums, errors word
for word). Written against survivors of `python bench/mutation.py scoring` after the aggregation became
declared; the criteria are our own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from rubric_engine.dataset.load import Criterion
from rubric_engine.scoring.question import Aggregation, score_question


@dataclass(frozen=True)
class Rule:
    id: str = "rc"
    effect: str = "zero_question"
    fires_when: str = "hit"


def item(i: int, weight: float | None, ability: str | None = "a", rule: str | None = None) -> Criterion:
    return Criterion(index=i, label=ability or rule or "", weight=weight, text=f"item {i}", ability=ability, rule=rule)


@pytest.mark.parametrize("field, allowed", [
    ("question", "mean_over_groups, all_items, coverage"), ("overall", "macro_over_groups, mean_over_questions"),
    ("clip", "question, group, overall, none"), ("no_positive_points", "formula, exclude, one, zero")])
def test_an_unknown_aggregation_value_names_the_key_and_the_choices(field: str, allowed: str) -> None:
    with pytest.raises(ValueError) as err:
        Aggregation(**{field: "x"})
    assert str(err.value) == f"aggregation.{field}: unknown value 'x'; allowed: {allowed}"


@pytest.mark.parametrize("mode, expected", [("one", 1.0), ("zero", 0.0), ("exclude", None)])
@pytest.mark.parametrize("question", ["mean_over_groups", "all_items"])
def test_a_group_without_positive_points(mode: str, expected: float | None, question: str) -> None:
    how = Aggregation(question=question, no_positive_points=mode)
    crits = [item(1, -1.0, "a"), item(2, 0.0, "a"), item(3, 2.0, "b")]
    qs = score_question(crits, [False, True, True], "met_over_positive", {}, [], how)
    assert (qs.abilities["a"].score if "a" in qs.abilities else None) == expected
    assert qs.abilities["b"].score == 1.0
    assert (qs.abilities["b"].raw, qs.abilities["b"].lo, qs.abilities["b"].hi) == (2.0, 0.0, 2.0)
    only_negative = score_question([item(1, -1.0, "a")], [False], "met_over_positive", {}, [], how)
    assert only_negative.score == (expected if question == "all_items" or expected is not None else None)


def test_raw_lo_hi_sums_with_a_zero_weight_item() -> None:
    crits = [item(1, 2.0), item(2, -1.0), item(3, 0.0), item(4, 3.0)]
    qs = score_question(crits, [True, True, True, False], "met_over_positive", {}, [], Aggregation(clip="none"))
    a = qs.abilities["a"]
    assert (a.raw, a.lo, a.hi) == (1.0, -1.0, 5.0) and a.score == pytest.approx(0.2)


@pytest.mark.parametrize("question", ["mean_over_groups", "all_items"])
def test_formula_params_reach_every_group_and_the_question(question: str) -> None:
    seen: list[Any] = []

    def formula(raw: float, lo: float, hi: float, params: Any) -> float:
        seen.append((raw, lo, hi, dict(params)))
        return params["k"]

    qs = score_question([item(1, 1.0, "a"), item(2, 2.0, "b", rule=None)], [True, False], formula, {"k": 0.25}, [],
                        Aggregation(question=question))
    assert qs.abilities["a"].score == 0.25 and qs.abilities["b"].score == 0.25 and qs.score == 0.25
    assert (1.0, 0.0, 1.0, {"k": 0.25}) in seen
    if question == "all_items":
        assert (1.0, 0.0, 3.0, {"k": 0.25}) in seen  # the question's own sums over all its items


def test_tag_groups_start_from_zero() -> None:
    crit = Criterion(index=1, label="a", weight=2.0, text="x", ability="a", rule=None, tags=("t",))
    qs = score_question([crit], [False], "met_over_positive", {}, [])
    assert (qs.tags["t"].raw, qs.tags["t"].lo, qs.tags["t"].hi) == (0.0, 0.0, 2.0)


def test_errors_word_for_word() -> None:
    with pytest.raises(ValueError) as err:
        score_question([item(1, None, None, rule="rc")], [True], "met_over_positive", {}, [Rule()],
                       Aggregation(question="all_items"))
    assert str(err.value) == "question has no scored items; every question needs at least one scored criterion"
    with pytest.raises(ValueError) as err:
        score_question([item(1, None)], [True], "met_over_positive", {}, [])
    assert str(err.value) == ("criterion 1 ('a'): a scored item needs a weight, got None (an ability item needs a "
                              "weight)")
    with pytest.raises(ValueError) as err:
        score_question([item(1, 1.0, None)], [True], "met_over_positive", {}, [])
    assert str(err.value) == "criterion 1 (''): exactly one of ability / rule must be set"
    assert score_question([item(1, 1.0, None)], [True], "met_over_positive", {}, [],
                          Aggregation(question="all_items")).score == 1.0  # no group needed when scoring all items


def test_the_public_formulas_are_the_raw_ones_clipped_to_0_1() -> None:
    from rubric_engine.scoring.question import FORMULAS, RAW_FORMULAS

    assert set(FORMULAS) == set(RAW_FORMULAS)
    assert FORMULAS["met_over_positive"](3.0, 0.0, 2.0, {}) == 1.0 and RAW_FORMULAS["met_over_positive"](
        3.0, 0.0, 2.0, {}) == 1.5
    assert FORMULAS["met_over_positive"](-1.0, -1.0, 2.0, {}) == 0.0
    seen: list[Any] = []
    RAW_FORMULAS["probe"] = lambda raw, lo, hi, params: seen.append((raw, lo, hi, params)) or 0.5
    try:
        from rubric_engine.scoring.question import _clipped

        assert _clipped(RAW_FORMULAS["probe"])(1.0, -2.0, 3.0, {"p": 1}) == 0.5
        assert seen == [(1.0, -2.0, 3.0, {"p": 1})]
    finally:
        del RAW_FORMULAS["probe"]
    for name, fn in RAW_FORMULAS.items():
        for args in ((1.0, -1.0, 3.0), (2.5, -0.5, 2.0), (-1.0, -2.0, 1.0)):
            assert FORMULAS[name](*args, {}) == min(1.0, max(0.0, fn(*args, {}))), (name, args)


def test_a_fired_rule_zeroes_an_all_items_question_but_never_invents_a_score() -> None:
    how = Aggregation(question="all_items")
    crits = [item(1, 2.0), item(2, None, None, rule="rc")]
    assert score_question(crits, [True, True], "met_over_positive", {}, [Rule()], how).score == 0.0
    assert score_question(crits, [True, False], "met_over_positive", {}, [Rule()], how).score == 1.0
    excluded = Aggregation(question="all_items", no_positive_points="exclude")
    none = score_question([item(1, -1.0), item(2, None, None, rule="rc")], [False, True], "met_over_positive", {},
                          [Rule()], excluded)
    assert none.catastrophic and none.score is None  # nothing to score stays nothing, not 0
