"""Verdict shapes (judge/verdicts.py): the JSON schema a judge is sent, what a reply must be, and the words it is
told when it is not. Pure functions, so tested directly; the judge tests drive the same parser over HTTP.

Every shape is built inside the test (fixtures), never at import: mutation testing imports this module once
and forks per mutant, so a shape built at import would not see a mutated VerdictShape.__init__.
"""

from __future__ import annotations

import json

import pytest

from rubric_engine.judge.verdicts import (MAX_NESTING, MAX_REPLY_CHARS, DEFAULT_SHAPE, Verdict, VerdictError,
                                          VerdictShape, _nesting, extract_json)



@pytest.fixture
def list_shape() -> VerdictShape:
    return VerdictShape()


@pytest.fixture
def object_shape() -> VerdictShape:
    return VerdictShape("object", reasoning="explanation", met="criteria_met")


@pytest.fixture
def custom_shape() -> VerdictShape:
    return VerdictShape("list", list_key="items", id="n", reasoning="why", met="ok")


def items(*rows: tuple) -> str:
    return json.dumps({"criteria": [{"id": i, "reasoning": r, "met": m} for i, r, m in rows]})


def problem(shape: VerdictShape, text: str, n: int) -> str:
    with pytest.raises(VerdictError) as info:
        shape.parse(text, n)
    return str(info.value)


# -- the schema sent with response_format ---------------------------------------------------------------------
def test_the_list_schema_sent_to_the_judge(list_shape: VerdictShape) -> None:
    item = {"additionalProperties": False, "title": "criterion_verdict", "type": "object",
            "required": ["id", "reasoning", "met"], "properties": {
                "id": {"description": "the criterion number, 1..n", "title": "Id", "type": "integer"},
                "reasoning": {"description": "short reasoning, written before deciding", "title": "Reasoning",
                              "type": "string"},
                "met": {"description": "true if the criterion applies to the response, else false", "title": "Met",
                        "type": "boolean"}}}
    assert list_shape.schema() == {
        "additionalProperties": False, "title": "verdict", "type": "object", "required": ["criteria"],
        "properties": {"criteria": {"description": "one entry per criterion, ids 1..n in order", "items": item,
                                    "title": "Criteria", "type": "array"}}}
    assert list(list_shape.schema()["properties"]["criteria"]["items"]["properties"]) == ["id", "reasoning", "met"]
    assert list_shape.response_format() == {"type": "json_schema", "json_schema": {
        "name": "verdict", "schema": list_shape.schema(), "strict": True}}
    assert "$defs" not in json.dumps(list_shape.schema()) and "$ref" not in json.dumps(list_shape.schema())


def test_the_object_schema_uses_the_specs_names(object_shape: VerdictShape, custom_shape: VerdictShape) -> None:
    assert object_shape.schema() == {
        "additionalProperties": False, "title": "verdict", "type": "object", "required": ["explanation", "criteria_met"],
        "properties": {
            "explanation": {"description": "short reasoning, written before deciding", "title": "Explanation",
                            "type": "string"},
            "criteria_met": {"description": "true if the criterion applies to the response, else false",
                             "title": "Criteria Met", "type": "boolean"}}}
    assert custom_shape.schema()["required"] == ["items"]
    assert custom_shape.schema()["properties"]["items"]["items"]["required"] == ["n", "why", "ok"]


def test_the_default_shape_is_the_list_shape_with_default_names(list_shape: VerdictShape) -> None:
    assert DEFAULT_SHAPE.response_format() == list_shape.response_format()
    assert (list_shape.shape, list_shape.list_key, list_shape.id, list_shape.reasoning, list_shape.met) == (
        "list", "criteria", "id", "reasoning", "met")


def test_examples_in_each_shape(list_shape: VerdictShape, object_shape: VerdictShape, custom_shape: VerdictShape) -> None:
    assert list_shape.example() == '{"criteria": [{"id": 1, "reasoning": "...", "met": true}, ...]}'
    assert object_shape.example() == '{"explanation": "...", "criteria_met": true}'
    assert custom_shape.example() == '{"items": [{"n": 1, "why": "...", "ok": true}, ...]}'


def test_the_reask_turns(list_shape: VerdictShape, object_shape: VerdictShape) -> None:
    assert list_shape.reask("P", 3) == (
        'Your previous reply could not be used: P. Reply again with only one JSON object of the form '
        '{"criteria": [{"id": 1, "reasoning": "...", "met": true}, ...]} containing exactly 3 items, ids 1 to 3 each '
        'exactly once (one per criterion, in order), each with a "reasoning" string and "met" true or false. '
        'No other text.')
    assert object_shape.reask("P", 1) == (
        'Your previous reply could not be used: P. Reply again with only one JSON object of the form '
        '{"explanation": "...", "criteria_met": true}: "explanation" a string, "criteria_met" true or false. '
        'No other text.')


# -- extracting the one JSON object ---------------------------------------------------------------------------
def test_prose_and_fences_around_the_object_are_tolerated() -> None:
    text = 'Here you go:\n```json\n' + items((1, "r", True)) + '\n```\nThanks {not json'
    assert extract_json(text, "criteria") == {"criteria": [{"id": 1, "reasoning": "r", "met": True}]}


def test_two_verdicts_are_refused_but_other_objects_are_skipped() -> None:
    one = items((1, "r", True))
    with pytest.raises(VerdictError, match="^the reply holds 2 verdict objects; give exactly one$"):
        extract_json(f"{one} or maybe {one}", "criteria")
    assert extract_json('{"note": 1} then ' + one, "criteria") == json.loads(one)
    assert extract_json('{"note": 1} then {"other": 2}', "criteria") == {"note": 1}  # no verdict: the first object
    assert extract_json('{"note": 1} then {"other": 2}') == {"note": 1}


def test_objects_inside_a_decoded_object_are_not_counted() -> None:
    text = json.dumps({"criteria": [{"id": 1, "reasoning": '{"criteria": []}', "met": True}], "x": {"criteria": 1}})
    assert extract_json(text, "criteria")["criteria"][0]["id"] == 1


def test_no_object_and_broken_json_are_named() -> None:
    with pytest.raises(VerdictError, match="^the reply contains no JSON object$"):
        extract_json("met: yes", "criteria")
    with pytest.raises(VerdictError) as info:
        extract_json('{"criteria": [', "criteria")
    assert str(info.value).startswith("the reply is not valid JSON (") and "at line 1 column" in str(info.value)
    with pytest.raises(VerdictError) as info:
        extract_json('x {"a": 1,\n "b": } y', "criteria")
    assert str(info.value) == "the reply is not valid JSON (Expecting value at line 2 column 7)"


def test_size_and_nesting_are_bounded_before_parsing() -> None:
    big = " " * (MAX_REPLY_CHARS - len(items((1, "r", True)))) + items((1, "r", True))
    assert len(big) == MAX_REPLY_CHARS and extract_json(big, "criteria")["criteria"][0]["met"] is True
    with pytest.raises(VerdictError, match=f"^the reply is {MAX_REPLY_CHARS + 1} characters long; a verdict is one "
                                           "short JSON object$"):
        extract_json(big + " ", "criteria")
    deep = "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1)
    with pytest.raises(VerdictError, match=f"^the reply nests brackets more than {MAX_NESTING} deep; a verdict "
                                           "nests 3 deep$"):
        extract_json(deep, "criteria")
    ok = '{"a": ' + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "}"
    assert _nesting(ok) == MAX_NESTING and isinstance(extract_json(ok), dict)


def test_nesting_ignores_brackets_inside_strings() -> None:
    assert _nesting('{"a": "[[[[{{{{"}') == 1
    assert _nesting('{"a": "quote \\" [[[ still a string"}') == 1
    assert _nesting('{"a": "\\\\", "b": [[1]]}') == 3  # an escaped backslash: the quote after it closes the string
    assert _nesting("]]]{") == 1  # stray closers never go below zero
    assert _nesting("[[]][") == 2
    assert _nesting("[" * 40) == MAX_NESTING + 1  # the scan stops once over the bound


# -- one criterion per call (object shape) ------------------------------------------------------------------------
def test_object_shape_parses_one_verdict(object_shape: VerdictShape) -> None:
    assert object_shape.parse('{"explanation": "fine", "criteria_met": "1"}', 1) == [Verdict(1, "fine", True)]
    assert object_shape.parse('{"explanation": "no", "criteria_met": 0}', 1) == [Verdict(1, "no", False)]


def test_object_shape_problems_are_worded_for_the_judge(object_shape: VerdictShape) -> None:
    assert problem(object_shape, '{"explanation": 3, "criteria_met": "yes"}', 1) == (
        '"explanation" must be a string (got 3); "criteria_met" must be true or false (got \'yes\')')


# -- all criteria at once (list shape) ----------------------------------------------------------------------------
def test_list_shape_sorted_by_id_with_lenient_numbers(list_shape: VerdictShape) -> None:
    text = json.dumps({"criteria": [{"id": "2", "reasoning": "b", "met": "0"}, {"id": 1, "reasoning": "a", "met": 1}]})
    assert list_shape.parse(text, 2) == [Verdict(1, "a", True), Verdict(2, "b", False)]
    assert list_shape.parse(items((1, "a", " 1 ")), 1) == [Verdict(1, "a", True)]


def test_list_shape_needs_the_list_key(list_shape: VerdictShape, custom_shape: VerdictShape) -> None:
    assert problem(list_shape, '{"criteria": {"id": 1}}', 1) == 'the JSON must be an object with a "criteria" list'
    assert problem(custom_shape, '{"criteria": []}', 1) == 'the JSON must be an object with a "items" list'


def test_list_shape_names_every_problem(list_shape: VerdictShape) -> None:
    text = json.dumps({"criteria": ["x", {"reasoning": "r", "met": True}, {"id": True, "reasoning": "r", "met": True},
                                     {"id": 2, "reasoning": 5, "met": "yes"}]})
    assert problem(list_shape, text, 2) == (
        "expected exactly 2 items (one per criterion), got 4; item #1 is not an object; "
        'item #2 has no integer "id" (got None); item #3 has no integer "id" (got True); '
        "id 2: \"reasoning\" must be a string (got 5); id 2: \"met\" must be true or false (got 'yes'); "
        "and 1 more problem(s)")


def test_list_shape_ids_missing_duplicated_and_out_of_range(list_shape: VerdictShape) -> None:
    assert problem(list_shape, items((1, "a", True), (1, "b", False), (4, "c", True)), 3) == (
        "missing id(s): 2, 3; duplicate id(s): 1; id(s) out of range 1..3: 4")
    assert problem(list_shape, items((0, "a", True)), 1) == "missing id(s): 1; id(s) out of range 1..1: 0"
    assert problem(list_shape, items((1, "a", True)), 2) == (
        "expected exactly 2 items (one per criterion), got 1; missing id(s): 2")


def test_at_most_six_problems_are_shown(list_shape: VerdictShape) -> None:
    bad = json.dumps({"criteria": ["x"] * 6})
    assert problem(list_shape, bad, 6) == "; ".join(f"item #{i} is not an object" for i in range(1, 7)) + (
        "; and 1 more problem(s)")  # the seventh: missing ids
    five = json.dumps({"criteria": ["x"] * 5})
    assert problem(list_shape, five, 5) == "; ".join(f"item #{i} is not an object" for i in range(1, 6)) + (
        "; missing id(s): 1, 2, 3, 4, 5")


def test_custom_names_are_read_and_unknown_keys_ignored(custom_shape: VerdictShape) -> None:
    text = json.dumps({"items": [{"n": 1, "why": "w", "ok": False, "extra": "ignored"}]})
    assert custom_shape.parse(text, 1) == [Verdict(1, "w", False)]
    text = json.dumps({"items": [{"n": 1, "why": ["w"], "ok": 0.5}]})
    assert problem(custom_shape, text, 1) == "id 1: \"why\" must be a string (got ['w']); id 1: \"ok\" must be true or " \
                                       "false (got 0.5)"


def test_a_newline_in_a_problem_stays_one_line(list_shape: VerdictShape, object_shape: VerdictShape) -> None:
    text = json.dumps({"criteria": [{"id": 1, "reasoning": "r", "met": "a\nb"}]})
    assert "\n" not in problem(list_shape, text, 1)
    assert "\n" not in problem(object_shape, json.dumps({"explanation": "r", "criteria_met": "a\nb"}), 1)


def test_an_object_verdict_ignores_an_id_and_other_objects(object_shape: VerdictShape) -> None:
    text = '{"note": 1} then {"id": 7, "explanation": "x", "criteria_met": true}'
    assert object_shape.parse(text, 1) == [Verdict(1, "x", True)]
    two = '{"explanation": "x", "criteria_met": true} or {"explanation": "y", "criteria_met": false}'
    assert problem(object_shape, two, 1) == "the reply holds 2 verdict objects; give exactly one"


def test_several_duplicate_and_out_of_range_ids_are_listed(list_shape: VerdictShape) -> None:
    text = items((1, "a", True), (1, "b", True), (2, "c", True), (2, "d", True), (5, "e", True), (6, "f", True))
    assert problem(list_shape, text, 2) == ("expected exactly 2 items (one per criterion), got 6; "
                                            "duplicate id(s): 1, 2; id(s) out of range 1..2: 5, 6")


def test_a_field_name_with_a_line_break_is_shown_on_one_line() -> None:
    obj = VerdictShape("object", reasoning="why", met="o\nk")
    assert problem(obj, json.dumps({"why": "r", "o\nk": "yes"}), 1) == "\"o k\" must be true or false (got 'yes')"
    lst = VerdictShape("list", met="o\nk")
    text = json.dumps({"criteria": [{"id": 1, "reasoning": "r", "o\nk": "yes"}]})
    assert problem(lst, text, 1) == "id 1: \"o k\" must be true or false (got 'yes')"


def test_a_broken_brace_before_the_objects_is_skipped_one_brace_at_a_time() -> None:
    assert extract_json('so {maybe} {"a": 1} {"b": 2}') == {"a": 1}
    one = items((1, "r", True))
    with pytest.raises(VerdictError, match="holds 2 verdict objects"):
        extract_json("{oops " + one + " " + one, "criteria")


def test_a_declared_probability_field_is_required_checked_and_kept() -> None:
    """judge.verdict.probability: the field is in the strict schema, the mock's answer and the reask; a number
    from 0 to 1 is kept on the verdict; anything else (a bool, a word, 1.5) is a problem worded for the judge."""
    from rubric_engine.judge.verdicts import VerdictError, VerdictShape

    shape = VerdictShape("list", probability="sure")
    item = shape.schema()["properties"]["criteria"]["items"]
    assert "sure" in item["properties"] and "sure" in item["required"] and shape.answer(2).fields["sure"] == "number"
    got = shape.parse('{"criteria": [{"id": 1, "reasoning": "r", "met": true, "sure": 0.75}, '
                      '{"id": 2, "reasoning": "r", "met": false, "sure": 1}]}', 2)
    assert [(v.hit, v.probability) for v in got] == [(True, 0.75), (False, 1.0)]
    for bad in ("1.5", "true", '"high"', "-0.1"):
        with pytest.raises(VerdictError, match='"sure" must be a number from 0 to 1'):
            shape.parse('{"criteria": [{"id": 1, "reasoning": "r", "met": true, "sure": %s}]}' % bad, 1)
    with pytest.raises(VerdictError):
        shape.parse('{"criteria": [{"id": 1, "reasoning": "r", "met": true}]}', 1)  # declared: required
    assert '"sure" a number from 0 to 1' in VerdictShape("object", probability="sure").reask("x", 1)
    assert VerdictShape("object").parse('{"reasoning": "r", "met": true}', 1)[0].probability is None
