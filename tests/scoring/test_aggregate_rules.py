"""aggregate: the declared statistic, clipping, every breakdown kind, its order and counts, samples parsing.

Each test pins one rule of docs/methodology (what a group holds, which mean, where a value is clipped) with
numbers worked out by hand in the comments; they were written against mutants that survived
`python bench/mutation.py aggregate` (docs/development.md).
"""

from __future__ import annotations

import pytest

from rubric_engine.datatypes import Question
from rubric_engine.scoring.aggregate import (NO_SCENARIO, ScoredQuestion, aggregate, breakdown, breakdowns,
                                             group_members, overall, scored_from_samples, scored_question)
from rubric_engine.scoring.question import AbilityScore, Aggregation, QuestionScore

DIMS = {"x": ["A", "C"], "y": ["B"]}
PER_QUESTION = Aggregation(overall="mean_over_questions")


def q(qid: str, abilities: dict[str, float], score: float, subset: str = "normal", scenario: str = "s",
      tags: tuple[str, ...] = (), item_tags: dict[str, float] | None = None) -> ScoredQuestion:
    return ScoredQuestion(qid, subset, scenario, abilities, score, False, tags, item_tags or {})


# q1 has A and B, q2 only A; question scores are given independently of the abilities on purpose
QS = [q("q1", {"A": 1.0, "B": 0.2}, 0.9, "normal", "s2", ("theme:a", "other"), {"axis:x": 0.4, "misc": 1.0}),
      q("q2", {"A": 0.0}, 0.3, "hard", "", ("theme:b", "theme:a"), {"axis:x": 0.8, "axis:y": 0.0})]


def test_mean_over_questions_averages_question_scores_not_abilities() -> None:
    # (0.9 + 0.3) / 2 = 0.6; the macro mean would be mean(A = 0.5, B = 0.2) = 0.35
    assert overall(QS, DIMS, PER_QUESTION) == pytest.approx(0.6)
    assert overall(QS, DIMS) == pytest.approx(0.35)
    r = aggregate(QS, DIMS, how=PER_QUESTION)
    assert r["overall"] == pytest.approx(60.0)
    assert r["subsets"] == {"normal": pytest.approx(90.0), "hard": pytest.approx(30.0)}
    assert r["scenarios"] == {"s2": pytest.approx(90.0), NO_SCENARIO: pytest.approx(30.0)}


def test_mean_over_questions_inside_item_groups_uses_the_group_value() -> None:
    # an ability / item tag / dimension group holds the question's value on that group, not its score
    r = aggregate(QS, DIMS, how=PER_QUESTION, scale=1.0)
    assert r["abilities"] == {"A": pytest.approx(0.5), "C": None, "B": pytest.approx(0.2)}
    # dimension x of q1 = mean(A) = 1.0 (C absent), of q2 = 0.0 -> 0.5; y = B of q1 only
    assert r["dimensions"] == {"x": pytest.approx(0.5), "y": pytest.approx(0.2)}
    tags = breakdown(QS, "item_tag", DIMS, PER_QUESTION, "axis:")
    assert tags == {"axis:x": pytest.approx(0.6), "axis:y": pytest.approx(0.0)}


def test_dimension_value_is_the_mean_of_its_abilities_in_the_question() -> None:
    dims = {"d": ["A", "B"]}
    one = [q("q", {"A": 0.8, "B": 0.2}, 0.0)]
    # (0.8 + 0.2) / 2 = 0.5 under both statistics
    assert breakdown(one, "dimension", dims, PER_QUESTION) == {"d": pytest.approx(0.5)}
    assert breakdown(one, "dimension", dims) == {"d": pytest.approx(0.5)}


@pytest.mark.parametrize("clip, overall_value, subsets", [
    ("question", -0.25, {"neg": -1.5, "pos": 1.0}),  # per-question clipping happens in scoring, not here
    ("none", -0.25, {"neg": -1.5, "pos": 1.0}),
    ("overall", 0.0, {"neg": -1.5, "pos": 1.0}),  # only the overall is clipped
    ("group", 0.0, {"neg": 0.0, "pos": 1.0}),  # every group and the overall
])
def test_clip_applies_where_declared(clip: str, overall_value: float, subsets: dict[str, float]) -> None:
    qs = [q("a", {"A": -1.5}, -1.5, "neg"), q("b", {"A": 1.0}, 1.0, "pos")]
    how = Aggregation(overall="mean_over_questions", clip=clip)
    assert overall(qs, DIMS, how) == pytest.approx(overall_value)
    assert breakdown(qs, "subset", DIMS, how) == pytest.approx(subsets)


def test_clip_caps_above_one() -> None:
    qs = [q("a", {"A": 1.5}, 1.5), q("b", {"A": 1.25}, 1.25)]
    assert overall(qs, DIMS, Aggregation(overall="mean_over_questions", clip="overall")) == 1.0
    assert overall(qs, DIMS, Aggregation(overall="mean_over_questions", clip="none")) == pytest.approx(1.375)
    assert breakdown(qs, "ability", DIMS, Aggregation(clip="group")) == {"A": 1.0, "C": None, "B": None}
    assert overall([], DIMS, Aggregation(clip="overall")) is None  # nothing scored stays None, never 0


def test_item_tag_breakdown_keeps_the_prefix_and_sorts() -> None:
    got = breakdown(QS, "item_tag", DIMS, prefix="axis:", scale=100.0)
    assert list(got) == ["axis:x", "axis:y"]
    assert got == {"axis:x": pytest.approx(60.0), "axis:y": 0.0}
    assert list(breakdown(QS, "item_tag", DIMS)) == ["axis:x", "axis:y", "misc"]  # no prefix: every tag


def test_example_tag_breakdown_groups_whole_questions() -> None:
    # theme:a = {q1, q2}: A = 0.5, B = 0.2 -> 0.35; theme:b = {q2}: A = 0 -> 0
    got = breakdown(QS, "example_tag", DIMS, prefix="theme:")
    assert list(got) == ["theme:a", "theme:b"]
    assert got == {"theme:a": pytest.approx(0.35), "theme:b": 0.0}
    assert group_members(QS, "example_tag", DIMS, "theme:") == {"theme:a": ["q1", "q2"], "theme:b": ["q2"]}


def test_breakdown_order_and_unknown_groups() -> None:
    qs = [q("1", {"A": 1.0}, 1.0, scenario=""), q("2", {"A": 0.5}, 0.5, scenario="zeta"),
          q("3", {"A": 0.0}, 0.0, scenario="alpha")]
    assert list(breakdown(qs, "scenario", DIMS)) == ["alpha", "zeta", NO_SCENARIO]  # "(none)" always last
    # an ability outside the taxonomy seen in a breakdown by ability comes after the declared ones
    extra = [q("1", {"Z": 1.0, "A": 0.0}, 0.5)]
    assert list(breakdown(extra, "ability", DIMS)) == ["A", "C", "B", "Z"]
    assert list(breakdown(qs, "dimension", DIMS)) == ["x", "y"]
    with pytest.raises(ValueError) as err:
        breakdown(qs, "colour", DIMS)
    assert str(err.value) == ("unknown breakdown kind 'colour'; known: ability, dimension, subset, scenario, "
                              "item_tag, example_tag")


def test_subset_breakdown_skips_questions_without_a_subset() -> None:
    qs = [q("1", {"A": 1.0}, 1.0, subset=""), q("2", {"A": 0.5}, 0.5, subset="s")]
    assert breakdown(qs, "subset", DIMS) == {"s": 0.5}
    assert group_members(qs, "subset", DIMS) == {"s": ["2"]}


def test_unknown_ability_error_lists_the_taxonomy() -> None:
    with pytest.raises(ValueError) as err:
        overall([q("q9", {"E": 1.0}, 1.0)], DIMS)
    assert str(err.value) == "question 'q9' has ability 'E' that is not in the taxonomy; known: A, C, B"


def test_group_members_match_breakdown_groups() -> None:
    assert group_members(QS, "ability", DIMS) == {"A": ["q1", "q2"], "B": ["q1"]}
    assert group_members(QS, "dimension", DIMS) == {"x": ["q1", "q2"], "y": ["q1"]}
    assert group_members(QS, "scenario", DIMS) == {"s2": ["q1"], NO_SCENARIO: ["q2"]}
    assert group_members(QS, "item_tag", DIMS, "axis:") == {"axis:x": ["q1", "q2"], "axis:y": ["q2"]}


def test_breakdowns_runs_each_declared_breakdown_with_scale() -> None:
    got = breakdowns(QS, [("themes", "example_tag", "theme:"), ("axes", "item_tag", "axis:")], DIMS,
                     PER_QUESTION, scale=10.0)
    # theme:a = mean(0.9, 0.3) = 0.6 -> 6; theme:b = q2 -> 3; axis:x = (0.4 + 0.8) / 2 -> 6; axis:y -> 0
    assert got == {"themes": {"theme:a": pytest.approx(6.0), "theme:b": pytest.approx(3.0)},
                   "axes": {"axis:x": pytest.approx(6.0), "axis:y": 0.0}}
    assert breakdowns(QS, [("t", "example_tag", "theme:")], DIMS)["t"]["theme:a"] == pytest.approx(35.0)


def test_decay_with_zero_base_is_none() -> None:
    qs = [q("n", {"A": 0.5}, 0.5, "normal"), q("h", {"A": 0.0}, 0.0, "hard")]
    subsets = aggregate(qs, DIMS, decay=("normal", "hard", "hard"))["subsets"]
    assert subsets["decay_pct"] is None and subsets["decay_base"] == "hard"
    # (50 - 0) / 50 * 100 = 100
    assert aggregate(qs, DIMS, decay=("normal", "hard", "normal"))["subsets"]["decay_pct"] == pytest.approx(100.0)


def test_no_taxonomy_has_no_ability_table() -> None:
    qs = [q("1", {}, 0.4), q("2", {}, 0.8)]
    r = aggregate(qs, {}, how=PER_QUESTION)
    assert r["abilities"] == {} and r["dimensions"] == {}
    assert r["overall"] == pytest.approx(60.0)


def test_scored_question_carries_every_field() -> None:
    question = Question(id="q7", dialogue=(), criteria=(), subset="hard", scenario="sc", tags=("t1",))
    qs = QuestionScore({"A": AbilityScore(2, 0, 4, 0.5)}, 0.5, ("r",), True, {"axis:x": AbilityScore(1, 0, 1, 1.0)})
    assert scored_question(question, qs) == ScoredQuestion("q7", "hard", "sc", {"A": 0.5}, 0.5, True, ("t1",),
                                                           {"axis:x": 1.0})
    assert scored_question(question, QuestionScore({}, None, (), False)) is None  # no score: left out


def test_scored_from_samples_reads_every_field() -> None:
    recs = [{"id": 7, "subset": None, "scenario": None, "score": 1, "catastrophic": 0, "tags": ["t"],
             "abilities": {"A": {"score": 1}}, "item_tags": {"axis:x": {"score": 0.25}}},
            {"id": "b", "subset": "s", "scenario": "c", "score": 0.5, "catastrophic": 1, "abilities": None}]
    got = scored_from_samples(recs)
    assert got == [ScoredQuestion("7", "", "", {"A": 1.0}, 1.0, False, ("t",), {"axis:x": 0.25}),
                   ScoredQuestion("b", "s", "c", {}, 0.5, True, (), {})]
    assert isinstance(got[0].score, float) and isinstance(got[0].abilities["A"], float)


@pytest.mark.parametrize("record, message", [
    ({"id": "x"}, "sample record 1: missing key 'score'; a samples.jsonl record needs id, subset, scenario, "
                  "abilities, score, catastrophic"),
    ({"id": "x", "score": 1.0, "abilities": {}, "subset": "", "scenario": ""},
     "sample record 1 (id 'x'): missing key 'catastrophic'; a samples.jsonl record needs id, subset, scenario, "
     "abilities, score, catastrophic"),
    ({"id": "x", "score": 1.0, "abilities": [1]},
     "sample record 1 (id 'x'): 'abilities' must be a mapping of group -> {raw, lo, hi, score}"),
    ({"id": "x", "score": 1.0, "abilities": {"A": 3}},
     "sample record 1 (id 'x'): abilities.A.score must be a number, got 3"),
    ({"id": "x", "score": 1.0, "abilities": {}, "subset": "", "scenario": "", "catastrophic": False,
      "item_tags": {"t": {"score": "high"}}},
     "sample record 1 (id 'x'): item_tags.t.score must be a number, got {'score': 'high'}"),
])
def test_scored_from_samples_errors_name_record_and_key(record: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        scored_from_samples([record])
    assert str(err.value) == message


def test_scored_from_samples_numbers_records_from_one() -> None:
    good = {"id": "a", "subset": "", "scenario": "", "score": None}
    with pytest.raises(ValueError, match=r"^sample record 2 \(id 'b'\): missing key 'abilities'"):
        scored_from_samples([good, {"id": "b", "score": 0.1}])


def test_tag_tables_are_sorted_not_in_order_of_appearance() -> None:
    qs = [q("1", {"A": 1.0}, 1.0, tags=("theme:z", "theme:b")), q("2", {"A": 0.0}, 0.0, tags=("theme:a",))]
    assert list(breakdown(qs, "example_tag", DIMS, prefix="theme:")) == ["theme:a", "theme:b", "theme:z"]


def test_decay_with_a_missing_from_subset_is_none() -> None:
    qs = [q("h", {"A": 0.5}, 0.5, "hard")]
    assert aggregate(qs, DIMS, decay=("normal", "hard", "hard"))["subsets"]["decay_pct"] is None


def test_ability_and_dimension_tables_use_the_declared_aggregation() -> None:
    dims = {"d": ["A", "C"]}
    qs = [q("1", {"A": 1.5, "C": 1.0}, 1.0), q("2", {"A": 0.0}, 0.0)]
    # group clipping: A = mean(1.5, 0) = 0.75 (unclipped values), C = 1.0; dimension d per question:
    # q1 = (1.5 + 1) / 2 = 1.25, q2 = 0 -> mean over questions 0.625; the macro mean would be (0.75 + 1) / 2 = 0.875
    how = Aggregation(overall="mean_over_questions", clip="group")
    r = aggregate(qs, dims, how=how, scale=1.0)
    assert r["dimensions"] == {"d": pytest.approx(0.625)}
    assert aggregate(qs, dims, scale=1.0)["dimensions"] == {"d": pytest.approx(0.875)}
    one = [q("1", {"A": 1.5}, 1.5)]
    assert aggregate(one, dims, how=how, scale=1.0)["abilities"] == {"A": 1.0, "C": None}  # clipped per group
    assert aggregate(one, dims, scale=1.0)["abilities"] == {"A": 1.5, "C": None}


def test_without_a_taxonomy_no_ability_table_even_if_questions_carry_groups() -> None:
    assert aggregate([q("1", {"A": 1.0}, 1.0)], {}, how=PER_QUESTION)["abilities"] == {}


@pytest.mark.parametrize("missing", ["id", "subset", "scenario"])
def test_scored_from_samples_names_the_record_for_every_missing_key(missing: str) -> None:
    rec = {"id": "x", "subset": "", "scenario": "", "score": 1.0, "catastrophic": False, "abilities": {}}
    del rec[missing]
    shown = "None" if missing == "id" else "'x'"
    with pytest.raises(ValueError) as err:
        scored_from_samples([rec])
    assert str(err.value).startswith(f"sample record 1 (id {shown}): missing key '{missing}'")
