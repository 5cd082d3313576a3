"""From stored verdicts to scores (stats/scores.py), in-process so the mutation tool sees it: the one path a run
and `rescore` share. Hand-built verdicts and samples.jsonl records, each number computed by hand: a question's
groups, item tags and failure rules under the spec's formula and aggregation; the record's score fields and a
candidate error scored 0; the criteria a record stored, typed again; summary.json's score keys, where a failed
question is counted and never averaged in, the counts that exist only where the spec says so, the interval's
fixed resamples and seed, and the stage that judged nothing.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from rubric_engine.datatypes import Criterion
from rubric_engine.errors import DataError
from rubric_engine.scoring.aggregate import ScoredQuestion, scored_from_samples
from rubric_engine.scoring.checks import Choice, Contains
from rubric_engine.spec.checks import check_formula
from rubric_engine.spec.schema import BenchmarkSpec
from rubric_engine.stats.bootstrap import bootstrap_stats
from rubric_engine.stats.lengths import length_block
from rubric_engine.stats.turns import score_sections
from rubric_engine.stats.scores import (EMPTY_SCORES, criteria_from_record, question_score, record_fields,
                                        score_fields, score_summary, unread_choices, zero_fields)

TAXONOMY = {"dimensions": [{"id": "d1", "labels": {"en": "D1"}, "abilities": [
    {"id": "a1", "labels": {"en": "A1"}, "data_labels": ["A1"]},
    {"id": "a2", "labels": {"en": "A2"}, "data_labels": ["A2"]}]}]}
JUDGE = {"model": {"name": "j", "model": "openai/gpt-4.1"}, "template": "judge.j2"}


def bonus_formula(raw: float, lo: float, hi: float, params: Any) -> float:
    """A formula of the spec's own (module:function, trusted) that reads its params."""
    return raw / hi + params["bonus"]


def _spec(trust_code: bool = False, **edit: Any) -> BenchmarkSpec:
    """A spec built in memory: a two-ability taxonomy, met_over_positive on a scale of 100, a failure rule."""
    data = {"name": "s", "data": {"path": "d.jsonl", "roles": {"user": "user"}, "fields": {}},
            "taxonomy": TAXONOMY, "failure_rules": [{"id": "leak", "data_labels": ["LEAK"]}],
            "scoring": {"formula": "met_over_positive"},
            "aggregation": {"question": "mean_over_groups", "overall": "mean_over_questions"}, "judge": JUDGE}
    for key, value in edit.items():
        data[key] = {**data[key], **value} if isinstance(data.get(key), dict) and isinstance(value, dict) else value
    spec = BenchmarkSpec.model_validate(data)

    def fail(*args: Any) -> None:
        raise AssertionError(args)
    check_formula(spec, fail, trust_code)
    return spec


# a1: 2 (axis:x) + 1; a2: 3 (axis:x) - 1; a failure-rule item (no weight)
CRITERIA = (Criterion(1, "A1", 2.0, "c1", ability="a1", tags=("axis:x",)), Criterion(2, "A1", 1.0, "c2", ability="a1"),
            Criterion(3, "A2", 3.0, "c3", ability="a2", tags=("axis:x",)), Criterion(4, "A2", -1.0, "c4", ability="a2"),
            Criterion(5, "LEAK", None, "c5", rule="leak"))
HITS = [True, False, False, True, False]  # a1 2 of 3; a2 -1 of 3 (clipped to 0); axis:x 2 of 5


def _group(raw: float, lo: float, hi: float, score: float) -> dict[str, float]:
    return {"raw": raw, "lo": lo, "hi": hi, "score": score}


# -- one question ---------------------------------------------------------------------------------------------

def test_a_question_scored_by_hand_under_the_specs_rules() -> None:
    qs = question_score(_spec(), CRITERIA, HITS)
    assert qs.score == pytest.approx((2 / 3 + 0.0) / 2) and not qs.catastrophic and qs.failed_rules == ()
    fields = record_fields(qs)
    assert list(fields) == ["abilities", "item_tags", "score", "failed_rules", "catastrophic"]
    assert fields["abilities"] == {"a1": _group(2.0, 0.0, 3.0, pytest.approx(2 / 3)), "a2": _group(-1.0, -1.0, 3.0, 0.0)}
    assert fields["item_tags"] == {"axis:x": _group(2.0, 0.0, 5.0, pytest.approx(0.4))}
    assert fields["failed_rules"] == [] and fields["catastrophic"] is False
    assert score_fields(_spec(), CRITERIA, HITS) == fields
    # all items: 2 - 1 met of 6 positive points
    assert question_score(_spec(aggregation={"question": "all_items"}), CRITERIA, HITS).score == pytest.approx(1 / 6)
    # clip per group turned off: a2's -1/3 stays
    assert question_score(_spec(aggregation={"clip": "none"}), CRITERIA, HITS).score == pytest.approx((2 / 3 - 1 / 3) / 2)


def test_the_formula_gets_the_specs_params() -> None:
    spec = _spec(trust_code=True, scoring={"formula": f"{__name__}:bonus_formula", "params": {"bonus": 0.25}},
                 aggregation={"question": "all_items"})
    assert question_score(spec, CRITERIA, HITS).score == pytest.approx(1 / 6 + 0.25)


def test_a_fired_failure_rule_zeroes_every_group() -> None:
    fields = score_fields(_spec(), CRITERIA, [True, True, True, False, True])
    assert fields["score"] == 0.0 and fields["catastrophic"] is True and fields["failed_rules"] == ["leak"]
    assert fields["abilities"] == {"a1": _group(3.0, 0.0, 3.0, 0.0), "a2": _group(3.0, -1.0, 3.0, 0.0)}


def test_no_item_tags_no_item_tags_key() -> None:
    plain = tuple(Criterion(c.index, c.label, c.weight, c.text, c.ability, c.rule) for c in CRITERIA)
    assert list(score_fields(_spec(), plain, HITS)) == ["abilities", "score", "failed_rules", "catastrophic"]


def test_a_candidate_error_scored_zero_keeps_the_groups() -> None:
    assert zero_fields(_spec(), CRITERIA) == {
        "abilities": {"a1": _group(0.0, 0.0, 3.0, 0.0), "a2": _group(0.0, -1.0, 3.0, 0.0)},
        "item_tags": {"axis:x": _group(0.0, 0.0, 5.0, 0.0)},
        "score": 0.0, "failed_rules": [], "catastrophic": False, "zeroed": "candidate_error"}
    # a formula giving a reply that met nothing more than 0 (no_positive_points: one) is still zeroed
    negative = (Criterion(1, "A1", -1.0, "bad", ability="a1"), Criterion(2, "A1", 2.0, "good", ability="a1"))
    plain = zero_fields(_spec(aggregation={"question": "all_items"}), negative[1:])
    assert list(plain) == ["abilities", "score", "failed_rules", "catastrophic", "zeroed"]
    assert plain["abilities"] == {"a1": _group(0.0, 0.0, 2.0, 0.0)} and plain["score"] == 0.0
    only_negative = _spec(aggregation={"question": "all_items", "no_positive_points": "one"})
    assert zero_fields(only_negative, negative[:1])["abilities"]["a1"]["score"] == 0.0
    tagged = (Criterion(1, "A1", -1.0, "bad", ability="a1", tags=("neg",)), Criterion(2, "A1", 2.0, "good", ability="a1"))
    assert question_score(only_negative, tagged, [False, False]).tags["neg"].score == 1.0  # no positive points: one
    assert zero_fields(only_negative, tagged)["item_tags"] == {"neg": _group(0.0, -1.0, 0.0, 0.0)}
    # no positive points, excluded: such a reply has no score, so neither has the failed one
    assert zero_fields(_spec(aggregation={"question": "all_items", "no_positive_points": "exclude"}), negative[:1]) == {}


# -- what a record stored -------------------------------------------------------------------------------------

def test_criteria_typed_again_from_a_record() -> None:
    rec = {"id": "q", "criteria": [
        {"index": "2", "label": "A1", "text": "t", "weight": 2, "ability": "a1", "tags": ["x", "y"], "reasoning": "r",
         "hit": True, "unknown": 1},
        {"index": 3, "check": {"type": "contains", "value": "x"}, "hit": False},
        {"index": 4, "label": 7, "text": 8, "check": {"type": "choice", "answer": "B", "letters": "ABC"}},
        {"index": 5, "rule": "leak", "check": None}]}
    assert criteria_from_record(rec) == [
        Criterion(2, "A1", 2, "t", ability="a1", tags=("x", "y")), Criterion(3, "", None, "", check=Contains("x")),
        Criterion(4, "7", None, "8", check=Choice("B", "ABC")), Criterion(5, "", None, "", rule="leak")]
    assert criteria_from_record({"id": "q"}) == [] and criteria_from_record({"id": "q", "criteria": None}) == []


def test_a_damaged_stored_check_is_one_line() -> None:
    with pytest.raises(DataError) as err:
        criteria_from_record({"id": "q7", "criteria": [{"index": 1}, {"index": 2, "check": {"type": "nope"}}]})
    assert str(err.value) == ("samples.jsonl: question 'q7', criterion 2: check: type: unknown check type 'nope'; "
                              "allowed: contains, not_contains, equals, not_equals, regex, words, chars, json, similarity, "
                              "formula, choice, python; "
                              "restore the record's check as the run wrote it")


def test_unread_choices_per_record() -> None:
    assert unread_choices({"no_choice": "3", "choice": None}) == 3  # a run's compact totals win
    assert unread_choices({"choice": None}) == 1 and unread_choices({"choice": "B"}) == 0 and unread_choices({}) == 0
    assert unread_choices({"choice": None, "samples": [{"choice": None}, {"choice": "A"}, {}, {"choice": None}]}) == 2


# -- the summary ------------------------------------------------------------------------------------------------

def _rec(qid: str, score: float | None, a1: float | None = None, **more: Any) -> dict[str, Any]:
    abilities = {} if a1 is None else {"a1": _group(0, 0, 1, a1)}
    return {"id": qid, "subset": more.pop("subset", "n"), "scenario": more.pop("scenario", "s1"),
            "abilities": abilities, "score": score, "catastrophic": more.pop("catastrophic", False),
            "response": "x" * (10 * len(qid)), **more}


SAMPLES = [
    _rec("q1", 0.5, 0.5), _rec("q2", 1.0, 1.0, subset="h", scenario="s2"),
    _rec("q3", None, judge_error="judge j: HTTP 500"),  # failed: counted, never averaged in
    _rec("q4", None, candidate_error="HTTP 429"),
    _rec("q5", 0.0, 0.0, catastrophic=True, failed_rules=["leak"], subset="h"),
    _rec("q6", None),  # no positive points, excluded
    _rec("q77", 0.25, 0.25, truncated=True, scenario="s2"),
]
SCORES = {"q1": 0.5, "q2": 1.0, "q5": 0.0, "q77": 0.25}


def test_summary_counts_and_means_by_hand() -> None:
    spec = _spec(data={"path": "d.jsonl", "roles": {"user": "user"}, "fields": {"subset": "sub", "scenario": "sc"}},
                 report={"breakdowns": [{"id": "by_subset", "by": "subset"}], "decay": {"from": "n", "to": "h",
                                                                                         "base": "n"}})
    out = score_summary(spec, SAMPLES)
    assert out["overall"] == pytest.approx(100 * (0.5 + 1.0 + 0.0 + 0.25) / 4)
    # subsets n: q1, q77; h: q2, q5; decay (n - h) / n from n to h; scenarios s1: q1, q5; s2: q2, q77
    assert out["subsets"] == {"n": pytest.approx(100 * 0.75 / 2), "h": pytest.approx(100 * 1.0 / 2),
                              "decay_pct": pytest.approx((37.5 - 50.0) / 37.5 * 100), "decay_base": "n"}
    assert out["scenarios"] == {"s1": pytest.approx(100 * 0.5 / 2), "s2": pytest.approx(100 * 1.25 / 2)}
    assert out["breakdowns"] == {"by_subset": {"n": pytest.approx(37.5), "h": pytest.approx(50.0)}}
    assert out["abilities"] == {"a1": pytest.approx(43.75), "a2": None} and out["dimensions"] == {"d1": pytest.approx(43.75)}
    assert out["counts"] == {"questions": 7, "scored": 4, "judge_errors": 1, "candidate_errors": 1, "catastrophic": 1,
                             "truncated": 1}
    assert out["aggregation"] == {"formula": "met_over_positive", "question": "mean_over_groups",
                                  "overall": "mean_over_questions", "clip": "question", "no_positive_points": "formula",
                                  "candidate_errors": "exclude"}
    assert list(out) == ["overall", "abilities", "dimensions", "subsets", "scenarios", "breakdowns", "interval",
                         "aggregation", "counts", "length", "vetoes"]
    assert out["vetoes"] == {"leak": 1}  # the one catastrophic question, named by its rule


def test_no_scenario_field_no_scenario_table() -> None:
    out = score_summary(_spec(), SAMPLES)
    assert out["scenarios"] == {} and out["subsets"] and out["breakdowns"] == {}


def test_the_interval_uses_its_own_resamples_and_seed() -> None:
    spec = _spec()
    out = score_summary(spec, SAMPLES, n_boot=50, seed=9)
    scored = [ScoredQuestion(q, "n", "s1", {"a1": s}, s, False) for q, s in SCORES.items()]
    ref = bootstrap_stats(scored, spec.dimensions_map(), 1000, 0, scale=100.0, how=spec.aggregation_rule())
    assert out["interval"] == {"samples": 1000, "seed": 0, "alpha": 0.05, "lo": pytest.approx(ref["lo"]),
                               "hi": pytest.approx(ref["hi"]), "std": pytest.approx(ref["std"])}
    assert out["interval"]["lo"] < out["overall"] < out["interval"]["hi"]
    # the length block takes the caller's resamples and seed (defaults 1000 and 0)
    assert out["length"] == length_block(SAMPLES, spec.ability_ids(), n_boot=50, seed=9)
    assert score_summary(spec, SAMPLES)["length"] == length_block(SAMPLES, spec.ability_ids(), n_boot=1000, seed=0)
    assert score_summary(spec, [])["interval"] is None


def test_the_scale_and_the_typed_results_given() -> None:
    spec = _spec(scoring={"formula": "met_over_positive", "scale": 10},
                 data={"path": "d.jsonl", "roles": {"user": "user"}, "fields": {"subset": "sub"}},
                 report={"breakdowns": [{"id": "by_subset", "by": "subset"}]})
    assert score_summary(spec, SAMPLES)["overall"] == pytest.approx(10 * 1.75 / 4)
    assert score_summary(spec, SAMPLES)["breakdowns"] == {"by_subset": {"n": pytest.approx(3.75), "h": pytest.approx(5.0)}}
    typed = [ScoredQuestion("q1", "n", "", {"a1": 0.2}, 0.2, False), ScoredQuestion("q2", "n", "", {"a1": 0.4}, 0.4, True)]
    out = score_summary(spec, SAMPLES, scored=typed)  # the runner's own results win over the records
    assert out["overall"] == pytest.approx(3.0) and out["counts"]["scored"] == 2 and out["counts"]["catastrophic"] == 1
    assert out["counts"]["questions"] == 7 and out["interval"]["lo"] == pytest.approx(2.0)


@pytest.mark.parametrize(("edit", "extra"), [
    ({"aggregation": {"no_positive_points": "exclude"}}, {"unscored": 1}),
    ({"aggregation": {"candidate_errors": "zero"}}, {"candidate_errors_zeroed": 1}),
    ({"data": {"path": "d.jsonl", "roles": {"user": "user"}, "fields": {"choices": "o", "answer": "a"}},
      "taxonomy": None, "aggregation": {"question": "all_items"}}, {"no_choice": 2}),
])
def test_counts_that_exist_only_where_the_spec_says(edit: dict[str, Any], extra: dict[str, int]) -> None:
    samples = [*SAMPLES[:3], {**SAMPLES[3], "zeroed": "candidate_error", "choice": None}, *SAMPLES[4:],
               {**_rec("q8", None, judge_error="x"), "choice": None}]
    out = score_summary(_spec(**edit), samples)
    assert out["counts"] == {"questions": 8, "scored": 4, "judge_errors": 2, "candidate_errors": 1, "catastrophic": 1,
                             "truncated": 1, **extra}


def test_unscored_counts_neither_failures_nor_a_stage_that_judged_nothing() -> None:
    spec = _spec(aggregation={"no_positive_points": "exclude"})
    samples = [_rec("a", None), _rec("b", None), _rec("c", None, judge_error="x"), _rec("d", None, candidate_error="y"),
               _rec("e", 0.5, 0.5)]
    assert score_summary(spec, samples)["counts"]["unscored"] == 2
    assert score_summary(spec, samples, scored_stage=False)["counts"]["unscored"] == 0


def test_a_generate_stage_has_counts_and_no_scores() -> None:
    spec = _spec(data={"path": "d.jsonl", "roles": {"user": "user"}, "fields": {"scenario": "sc"}},
                 report={"breakdowns": [{"id": "s", "by": "scenario"}]})
    out = score_summary(spec, [_rec("q1", None), _rec("q2", None)], scored_stage=False)
    assert {k: out[k] for k in EMPTY_SCORES} == EMPTY_SCORES
    assert out["breakdowns"] == {} and out["interval"] is None and out["length"] is None
    assert out["counts"] == {"questions": 2, "scored": 0, "judge_errors": 0, "candidate_errors": 0, "catastrophic": 0,
                             "truncated": 0}
    scored_records = score_summary(spec, SAMPLES, scored_stage=False)
    assert scored_records["interval"] is None and scored_records["length"] is None and scored_records["overall"] is None
    assert EMPTY_SCORES == {"overall": None, "abilities": {}, "dimensions": {}, "subsets": {}, "scenarios": {}}


def test_scores_on_a_scale_add_their_sections() -> None:
    spec = _spec(taxonomy=None, failure_rules=[], judge={**JUDGE, "verdict": {"kind": "score", "min": 1, "max": 5}},
                 aggregation={"question": "all_items"})
    samples = [_rec("q1", 0.5), _rec("q2", 1.0), _rec("q3", None, judge_error="x")]
    out = score_summary(spec, samples)
    assert out["scale"] == {"min": 1, "max": 5, "scope": "conversation"} and "turns" in out
    assert out["counts"]["turn_errors"] == 0 and "turn_errors" not in out and "group_intervals" in out
    assert spec.scoring.scale == 1.0 and out["overall"] == pytest.approx(0.75)  # a score's own scale: 1
    many = [_rec(f"q{i}", v, scenario="s1" if i % 2 else "s2") for i, v in enumerate((0.1, 0.9, 0.4, 0.7, 0.2, 1.0, 0.55))]
    spec = _spec(taxonomy=None, failure_rules=[], judge={**JUDGE, "verdict": {"kind": "score", "min": 1, "max": 5}},
                 aggregation={"question": "all_items"},
                 data={"path": "d.jsonl", "roles": {"user": "user"}, "fields": {"scenario": "sc"}})
    sections = score_sections(spec, many, scored_from_samples(many), 1000, 0)
    got = score_summary(spec, many, n_boot=20, seed=5)
    assert got["group_intervals"] == sections["group_intervals"] and got["turns"] == sections["turns"]
    assert got["group_intervals"]["scenarios"]["s1"]["questions"] == 3
    generate = score_summary(spec, samples, scored_stage=False)
    assert "scale" not in generate and "turn_errors" not in generate["counts"]
    criteria = score_summary(_spec(), SAMPLES)
    assert "scale" not in criteria and "turn_errors" not in criteria["counts"]
    assert not math.isnan(out["interval"]["std"])
