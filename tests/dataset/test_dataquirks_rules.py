"""dataquirks: which rows the whole-file checks count, and the tags a data file declares. Written against
survivors of `python bench/mutation.py dataquirks`; the rows are our own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dataset.load import load_dataset, parse_rows
from rubric_engine.errors import DataError
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import BenchmarkSpec

from conftest import REPO as ROOT
HEART = load_spec(ROOT / "benchmarks" / "heartbench")
QA = load_spec(ROOT / "benchmarks" / "reference_qa")
RULE = {"dimension": "其他", "score": None, "content": "角色混淆"}


def item(label: str, weight: Any, **extra: Any) -> dict[str, Any]:
    return {"dimension": label, "score": weight, "content": f"{label} {weight}", **extra}


def row(qid: str, rubric: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"question_id": qid, "dialogue": [{"role": "A", "content": "今天好累。"}], "rubric": rubric,
            "difficulty": "normal", "primary_scene": "工作", "secondary_scene": "加班", **extra}


def warnings_of(tmp_path: Path, rows: list[dict[str, Any]], spec: BenchmarkSpec = HEART) -> list[str]:
    f = tmp_path / "rows.jsonl"
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    out: list[str] = []
    parse_rows(spec, f, out)
    return out


def only_negative(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "only negative-weight items" in w]


@pytest.mark.parametrize("rubric", [
    [item("温暖", 2), item("温暖", -1), RULE],  # a positive item first
    [item("温暖", -1), item("温暖", 2), RULE],  # or last: the ability can still gain points
    [item("温暖", 1), RULE],  # weight 1 is positive
])
def test_an_ability_with_any_positive_item_is_not_only_negative(tmp_path: Path, rubric: list[dict[str, Any]]) -> None:
    assert warnings_of(tmp_path, [row("a", rubric)]) == []


def test_a_zero_weight_item_alone_cannot_gain_points(tmp_path: Path) -> None:
    assert only_negative(warnings_of(tmp_path, [row("a", [item("温暖", 0), RULE])])) == [
        "1 (question, ability) pair(s) have only negative-weight items (max = 0): such an ability can only lose "
        "points in that question"]


def test_only_negative_pairs_are_counted_across_questions_and_abilities(tmp_path: Path) -> None:
    rows = [row("a", [item("温暖", -1), item("幽默", -2), item("动机", 1), RULE]),
            row("b", [item("温暖", -1), RULE]),
            row("c", [item("温暖", 3), RULE])]
    assert only_negative(warnings_of(tmp_path, rows))[0].startswith("3 (question, ability) pair(s)")


def test_a_spec_without_failure_rules_never_warns_about_missing_rule_items(tmp_path: Path) -> None:
    rows = [{"id": "q1", "question": "2+2?", "reference": "4", "topics": [],
             "checks": [{"check": "Says 4.", "points": 1}]}]
    spec = QA.model_copy(update={"data": QA.data.model_copy(update={"format": "jsonl"})})
    assert not spec.failure_rules
    assert warnings_of(tmp_path, rows, spec) == []


def test_rule_items_without_weight_and_rules_in_every_question_give_no_warning(tmp_path: Path) -> None:
    rows = [row("a", [item("温暖", 1), RULE]), row("b", [RULE, item("幽默", 2)])]
    assert warnings_of(tmp_path, rows) == []


def test_only_questions_without_a_rule_item_are_listed(tmp_path: Path) -> None:
    rows = [row("a", [item("温暖", 1), RULE]), row("b", [item("温暖", 1)]), row("c", [item("幽默", 1)])]
    assert warnings_of(tmp_path, rows) == [
        "2 question(s) have no failure-rule item, so no failure rule can fire there: b, c"]


def test_only_dialogues_ending_with_another_role_are_listed(tmp_path: Path) -> None:
    ends_b = [{"role": "A", "content": "你好"}, {"role": "B", "content": "在吗"}]
    ends_a = [{"role": "B", "content": "在吗"}, {"role": "A", "content": "你好"}]
    rows = [row("a", [item("温暖", 1), RULE], dialogue=ends_a), row("b", [item("温暖", 1), RULE], dialogue=ends_b),
            row("c", [item("温暖", 1), RULE])]
    assert warnings_of(tmp_path, rows) == ["1 dialogue(s) do not end with a 'user' turn: b"]


def test_empty_scenarios_are_listed_per_column_in_order(tmp_path: Path) -> None:
    rows = [row("a", [item("温暖", 1), RULE], secondary_scene=" "), row("b", [item("温暖", 1), RULE], primary_scene=""),
            row("c", [item("温暖", 1), RULE], secondary_scene="")]
    assert warnings_of(tmp_path, rows) == ["2 question(s) have an empty 'secondary_scene': a, c",
                                           "1 question(s) have an empty 'primary_scene': b"]


def test_two_columns_absent_from_every_row_are_two_warnings(tmp_path: Path) -> None:
    """Warnings while no column resembles them (a misspelt one a table depends on is an error:
    tests/dataset/test_data_fields_errors.py)."""
    rows = [row("a", [item("温暖", 1), RULE]), row("b", [item("温暖", 1), RULE])]
    for r in rows:
        del r["secondary_scene"], r["difficulty"]
    assert warnings_of(tmp_path, rows) == [
        "no row has the field 'difficulty' (data.fields.subset): subset left empty for all 2 questions, so nothing "
        "can be selected or reported by it",
        "no row has the field 'secondary_scene' (data.fields.secondary_scenario): secondary_scenario left empty for "
        "all 2 questions, so nothing can be selected or reported by it"]


def test_a_column_absent_from_all_rows_but_one_names_the_first_lacking_line(tmp_path: Path) -> None:
    rows = [row("a", [item("温暖", 1), RULE]), row("b", [item("温暖", 1), RULE]), row("c", [item("温暖", 1), RULE])]
    del rows[0]["difficulty"], rows[2]["difficulty"]
    with pytest.raises(DataError) as err:
        warnings_of(tmp_path, rows)
    assert str(err.value) == (f"{tmp_path / 'rows.jsonl'}:1: missing field 'difficulty' (other rows have it); add it "
                              "to every row, or fix data.fields.subset in the spec")


def test_weighted_rule_items_are_listed_with_their_weights(tmp_path: Path) -> None:
    rows = [row("a", [item("温暖", 1), item("其他", 2)]), row("b", [item("温暖", 1), item("其他", -1.5)])]
    assert warnings_of(tmp_path, rows) == ["2 failure-rule item(s) carry a weight (question:weight a:2, b:-1.5)"]


def test_the_dataset_collects_every_item_and_example_tag(tmp_path: Path) -> None:
    fields = HEART.data.fields.model_copy(update={"example_tags": "tags", "item_tags": "tags"})
    spec = HEART.model_copy(update={"data": HEART.data.model_copy(update={"fields": fields, "sha256": None})})
    rows = [row("a", [item("温暖", 1, tags=["axis:x"]), item("其他", None, tags=["axis:y", "axis:x"])], tags=["t:1"]),
            row("b", [item("温暖", 1, tags=["axis:z"]), RULE], tags=["t:2", "t:1"])]
    f = tmp_path / "rows.jsonl"
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    for lazy in (False, True):
        ds = load_dataset(spec, f, lazy=lazy)
        assert ds.item_tags == {"axis:x", "axis:y", "axis:z"} and ds.example_tags == {"t:1", "t:2"}
        assert ds.warnings == []
