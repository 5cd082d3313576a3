"""Coverage ("at least k of the criteria met", ClinConsensus' CACS@k) and veto groups (a failure rule whose items
are chosen by item tag), as pure functions against hand-computed numbers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rubric_engine.datatypes import Criterion
from rubric_engine.scoring.question import Aggregation, coverage_score, needed, score_question
from rubric_engine.spec.aggregation import AggregationSpec, Coverage, FailureRule

COV = Aggregation(question="coverage", overall="mean_over_questions", coverage_k=3)


def crits(n: int, tags: tuple[str, ...] = ()) -> list[Criterion]:
    return [Criterion(i, "c", 1, "t", tags=tags) for i in range(1, n + 1)]


@pytest.mark.parametrize("met, expected", [(2, 0.0), (3, 1.0), (4, 1.0)])
def test_coverage_scores_one_from_exactly_k_met(met: int, expected: float) -> None:
    hits = [i < met for i in range(5)]
    assert score_question(crits(5), hits, "log_normalised", {}, [], COV).score == expected


def test_k_above_the_number_of_criteria_is_never_reached() -> None:
    how = Aggregation(question="coverage", overall="mean_over_questions", coverage_k=6)
    assert score_question(crits(5), [True] * 5, "log_normalised", {}, [], how).score == 0.0


@pytest.mark.parametrize("k, n, need", [(0.5, 5, 3), (0.5, 4, 2), (0.3, 10, 3), (0.9, 30, 27), (0.01, 30, 1),
                                        (3, 30, 3), (1, 1, 1)])
def test_a_fraction_k_rounds_up_and_a_whole_k_is_itself(k: float, n: int, need: int) -> None:
    assert needed(k, n) == need


def test_coverage_counts_positive_items_of_the_tag_only() -> None:
    items = [Criterion(1, "c", 1, "t", tags=("core",)), Criterion(2, "c", 1, "t", tags=("core",)),
             Criterion(3, "c", 1, "t"), Criterion(4, "c", -2, "t", tags=("core",))]
    # core positives: items 1 and 2; item 3 (untagged) and item 4 (a penalty) never count
    assert coverage_score(items, [True, False, True, True], 2, "core") == 0.0
    assert coverage_score(items, [True, True, False, False], 2, "core") == 1.0
    assert coverage_score(items, [True, False, True, False], 2, None) == 1.0
    with pytest.raises(ValueError, match="no coverage criteria"):
        coverage_score(items, [True] * 4, 1, "missing")


def test_an_unjudged_item_is_never_scored_as_met_or_missed() -> None:
    with pytest.raises(ValueError, match="hit must be a boolean"):
        score_question(crits(3), [True, None, True], "log_normalised", {}, [], COV)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="2 hits for 3 criteria"):
        score_question(crits(3), [True, True], "log_normalised", {}, [], COV)


def test_a_veto_tag_zeroes_the_question_and_names_its_rule() -> None:
    veto = FailureRule(id="unsafe", tags=["danger"])
    items = [Criterion(1, "c", 2, "t", ability="a"), Criterion(2, "c", -3, "t", ability="a", tags=("danger",))]
    qs = score_question(items, [True, True], "linear", {}, [veto])
    assert qs.catastrophic and qs.score == 0.0 and qs.failed_rules == ("unsafe",)
    assert qs.abilities["a"].score == 0.0 and qs.abilities["a"].raw == -1.0  # the arithmetic kept, the score zeroed
    kept = score_question(items, [True, False], "linear", {}, [veto])
    assert not kept.catastrophic and kept.score == 1.0  # (2 - (-3)) / (2 - (-3))
    # under coverage a veto zeroes a question that met k
    how = Aggregation(question="coverage", overall="mean_over_questions", coverage_k=1)
    assert score_question(items, [True, True], "linear", {}, [veto], how).score == 0.0
    assert score_question(items, [True, False], "linear", {}, [veto], how).score == 1.0


def test_spec_models_check_k_and_the_rule_selection() -> None:
    assert Coverage(k=3).k == 3 and Coverage(k=0.5).k == 0.5
    for bad in (0, 1.0, 1.5, -1, True):
        with pytest.raises(ValidationError):
            Coverage(k=bad)
    with pytest.raises(ValidationError, match="needs a coverage block"):
        AggregationSpec(question="coverage", overall="mean_over_questions")
    with pytest.raises(ValidationError, match="mean_over_questions"):
        AggregationSpec(question="coverage", coverage={"k": 2})
    with pytest.raises(ValidationError, match="selects no item"):
        FailureRule(id="r")
