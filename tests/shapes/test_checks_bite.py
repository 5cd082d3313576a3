"""Deterministic checks and multiple choice, pinned in-process (bench/mutation.py sees these): each check's
boundaries and the sentence the record keeps, the letter readers of docs/authoring.md ("Shapes: multiple
choice") case by case, every refusal word for word (a check that cannot run, a bad answer key, options that
are not 2 to 26 strings, a bad reader), the spec's `checks:` items, and accuracy with unreadable replies
counted as wrong. The console-script checks of the same rules are tests/shapes/test_checks.py and
tests/shapes/test_multiple_choice.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dataset.load import load_dataset
from rubric_engine.errors import DataError, SpecError
from rubric_engine.scoring.checks import (Chars, Choice, CheckProblem, Contains, Json, NotContains, Regex, Words,
                                          check_dict, choice_pattern, describe, parse_check, read_choice, run_check)
from rubric_engine.spec.load import load_spec

from conftest import REPO
CHOICE = REPO / "tests" / "data" / "choice_mini"
CHECKS = REPO / "tests" / "data" / "checks_mini"


# -- each check: its boundaries and what the record says ----------------------------------------------------

def test_contains_and_not_contains() -> None:
    assert run_check(Contains("Paris"), "I love Paris.") == run_check(Contains("Paris"), "I love Paris.")
    assert run_check(Contains("Paris"), "I love Paris.").found == "check contains: found at 7"
    assert run_check(Contains("paris"), "I love Paris.").hit is False
    assert run_check(Contains("paris", ignore_case=True), "I love PARIS.").hit is True
    assert run_check(Contains("x"), "yz").found == "check contains: not found"
    assert run_check(Contains("ß", ignore_case=True), "STRASSE").hit is True  # casefold, not lower()
    nc = run_check(NotContains("sorry", ignore_case=True), "Sorry!")
    assert (nc.hit, nc.found) == (False, "check not_contains: found at 0")
    assert run_check(NotContains("sorry"), "Sorry!").hit is True  # case matters unless told


def test_regex_found_anywhere_and_anchored() -> None:
    assert run_check(Regex(r"\d+"), "abc 123") .found == "check regex: matched at 4"
    assert run_check(Regex(r"^\d+$"), "abc 123").hit is False
    assert run_check(Regex("hello", ignore_case=True), "HeLLo").hit is True
    assert run_check(Regex("hello"), "HeLLo").found == "check regex: no match"


@pytest.mark.parametrize(("check", "reply", "hit", "found"), [
    (Words(min=3), "one two three", True, "check words: 3 (min 3)"),
    (Words(min=3), "one two", False, "check words: 2 (min 3)"),
    (Words(max=2), "one  two\nthree", False, "check words: 3 (max 2)"),
    (Words(min=1, max=2), " one two ", True, "check words: 2 (min 1, max 2)"),
    (Chars(max=5), "  abcde  ", True, "check chars: 5 (max 5)"),  # trimmed
    (Chars(max=5), "abcdef", False, "check chars: 6 (max 5)"),
    (Chars(min=0, max=0), "   ", True, "check chars: 0 (min 0, max 0)"),
])
def test_limits_are_inclusive(check: Any, reply: str, hit: bool, found: str) -> None:
    assert run_check(check, reply) == run_check(check, reply) and run_check(check, reply).hit is hit
    assert run_check(check, reply).found == found


@pytest.mark.parametrize(("check", "reply", "hit", "found"), [
    (Json(), '{"a": 1}', True, "check json: valid JSON"),
    (Json(), "[1, 2]", True, "check json: valid JSON"),
    (Json(("a",)), "[1, 2]", False, "check json: valid JSON but a list, not an object"),
    (Json(("a", "b", "c")), '{"b": 1}', False, "check json: object without key(s) a, c"),
    (Json(("a",)), '```json\n{"a": 1}\n```', True, "check json: valid JSON with every key"),
    (Json(), '```\n{"a": 1}\n```', True, "check json: valid JSON"),
    (Json(), '  ```{"a": 1}```  ', True, "check json: valid JSON"),
    (Json(), '```json\n{"a": 1}\n``` and ```x```', False, None),  # more than one fence: not one JSON body
])
def test_json(check: Any, reply: str, hit: bool, found: str | None) -> None:
    got = run_check(check, reply)
    assert got.hit is hit and (found is None or got.found == found), got
    if not hit and found is None:
        assert got.found.startswith("check json: not valid JSON (")


def test_json_deeply_nested_is_not_valid_rather_than_a_crash() -> None:
    assert run_check(Json(), "[" * 100_000 + "]" * 100_000).hit is False


def test_describe_every_check() -> None:
    assert describe(Contains("x")) == "contains 'x'" and describe(Contains("x", True)) == "contains 'x' (any case)"
    assert describe(NotContains("x")) == "does not contain 'x'"
    assert describe(Regex("a+")) == "matches /a+/" and describe(Regex("a+", True)) == "matches /a+/i"
    assert describe(Words(max=300)) == "at most 300 words" and describe(Chars(min=2)) == "at least 2 characters"
    assert describe(Words(min=1, max=9)) == "at least 1 and at most 9 words"
    assert describe(Json()) == "valid JSON" and describe(Json(("a", "b"))) == "valid JSON object with keys a, b"
    assert describe(Choice("B", "ABCD")) == "the answer is B"
    with pytest.raises(TypeError):
        describe("regex")
    with pytest.raises(TypeError):
        run_check("regex", "x")


def test_check_dict_round_trip() -> None:
    for c in (Contains("v", True), Regex("a"), Words(min=2), Json(("k",)), Choice("C", "ABCD", "pattern", r"<(\w)>")):
        d = check_dict(c)
        assert next(iter(d)) == "type" and parse_check(d, allow_choice=True) == c
    assert check_dict(Json(("k", "l"))) == {"type": "json", "keys": ["k", "l"]}


# -- refusals: one line naming the key ----------------------------------------------------------------------

@pytest.mark.parametrize(("value", "key", "message"), [
    ("regex", "", "a check is an object such as {type: regex, pattern: ...}, got 'regex'"),
    ({"type": "choice", "answer": "A", "letters": "AB"}, "type",
     "unknown check type 'choice'; allowed: contains, not_contains, equals, not_equals, regex, words, chars, json, "
     "similarity, formula"),
    ({"type": "nope"}, "type", "unknown check type 'nope'; allowed: contains, not_contains, equals, not_equals, regex, "
     "words, chars, json, similarity, formula"),
    ({"type": "contains", "value": "x", "regx": 1}, "regx", "unknown key; allowed with type contains: value, ignore_case"),
    ({"type": "regex"}, "pattern", "required key is missing"),
    ({"type": "contains", "value": ""}, "value", "expected a non-empty string, got ''"),
    ({"type": "contains", "value": True}, "value", "expected a non-empty string, got True"),
    ({"type": "contains", "value": "x", "ignore_case": "yes"}, "ignore_case", "expected true or false, got 'yes'"),
    ({"type": "words", "min": "3"}, "min", "expected a whole number >= 0, got '3'"),
    ({"type": "words", "min": -1}, "min", "expected a whole number >= 0, got -1"),
    ({"type": "words", "max": True}, "max", "expected a whole number >= 0, got True"),
    ({"type": "words", "min": 2.5}, "min", "expected a whole number >= 0, got 2.5"),
    ({"type": "words"}, "", "give min, max or both"),
    ({"type": "chars", "min": 5, "max": 4}, "min", "min (5) is above max (4)"),
    ({"type": "json", "keys": "name"}, "keys", "expected a list of non-empty strings, got 'name'"),
    ({"type": "json", "keys": ["a", ""]}, "keys", "expected a list of non-empty strings, got ['a', '']"),
])
def test_refused_checks_word_for_word(value: Any, key: str, message: str) -> None:
    with pytest.raises(CheckProblem) as err:
        parse_check(value)
    assert (err.value.key, err.value.message) == (key, message)
    assert str(err.value) == (f"{key}: {message}" if key else message)


def test_a_regex_re2_cannot_compile_names_the_pattern() -> None:
    with pytest.raises(CheckProblem) as err:
        parse_check({"type": "regex", "pattern": "(?<=a)b"})
    assert err.value.key == "pattern" and "RE2 cannot compile" in err.value.message
    assert err.value.message.endswith("RE2 has no look-arounds or back-references")


def test_limits_accepted_at_their_edges() -> None:
    assert parse_check({"type": "words", "min": 0}) == Words(min=0)
    assert parse_check({"type": "chars", "min": 4, "max": 4}) == Chars(min=4, max=4)
    assert parse_check({"type": "json"}) == Json()


def test_choice_checks_as_records_hold_them() -> None:
    assert parse_check({"type": "choice", "answer": "B", "letters": "ABCD", "read": "first_letter", "pattern": None},
                       allow_choice=True) == Choice("B", "ABCD")
    with pytest.raises(CheckProblem) as err:
        parse_check({"type": "choice", "answer": "B", "letters": "AB", "read": "last"}, allow_choice=True)
    assert (err.value.key, err.value.message) == ("read", "unknown reader 'last'; allowed: first_letter, "
                                                          "answer_line, pattern")
    with pytest.raises(CheckProblem) as err:
        parse_check({"type": "choice", "answer": "B", "letters": "AB", "read": "pattern", "pattern": "<.>"},
                    allow_choice=True)
    assert (err.value.key, err.value.message) == ("pattern", "the pattern needs a group: group 1 is the option letter")


def test_choice_pattern() -> None:
    assert choice_pattern(r"<<([A-Z])>>") == r"<<([A-Z])>>"
    with pytest.raises(ValueError, match="group 1 is the option letter"):
        choice_pattern("<<[A-Z]>>")
    with pytest.raises(ValueError, match="RE2 cannot compile"):
        choice_pattern("(?=A)")


# -- reading the letter -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("reply", "letter"), [
    ("B", "B"), ("(B)", "B"), ("B.", "B"), ("The answer is C", "C"), ("answer: d", None),  # lower case: never
    ("I think B", "B"),  # I is no option among A-D
    ("A good answer is B", "A"),  # the article: documented as read
    ("Bx then C", "C"), ("_B C", "C"), ("B1 D", "D"), ("éB C", "C"),  # not inside a word (letters, digits, _)
    ("E is wrong, so B", "B"),  # E is no option of four
    ("", None), ("none of these", None),
])
def test_first_letter(reply: str, letter: str | None) -> None:
    assert read_choice(reply, Choice("B", "ABCD")) == letter


@pytest.mark.parametrize(("reply", "letter"), [
    ("Answer: B", "B"), ("answer:c", "C"), ("ANSWER : (d)", "D"), ("**Answer:** B", "B"), ("Answer：A", "A"),
    ("Answer: [b]", "B"), ("The answer is B", None), ("Answer: E", None), ("Answer: Bee", None),
    ("Answer: B\nAnswer: C", "B"),
])
def test_answer_line(reply: str, letter: str | None) -> None:
    assert read_choice(reply, Choice("B", "ABCD", read="answer_line")) == letter


def test_pattern_reader() -> None:
    c = Choice("B", "ABCD", read="pattern", pattern=r"<<\s*\(?([A-Za-z])\)?\s*>>")
    assert read_choice("so <<b>>", c) == "B" and read_choice("<< (C) >>", c) == "C"
    assert read_choice("<<E>>", c) is None and read_choice("B", c) is None
    optional = Choice("B", "ABCD", read="pattern", pattern=r"x(A)?|y(B)")
    assert read_choice("y", optional) is None  # group 1 did not take part: nothing read


def test_an_unreadable_reply_is_wrong_and_says_so() -> None:
    got = run_check(Choice("B", "ABCD"), "hmm, not sure")
    assert got == run_check(Choice("B", "ABCD"), "nothing") and (got.hit, got.choice) == (False, None)
    assert got.found == "check choice: no option letter could be read (first_letter); counted as wrong"
    right = run_check(Choice("B", "ABCD"), "B")
    assert (right.hit, right.choice, right.found) == (True, "B", "check choice: read B, the answer is B")
    wrong = run_check(Choice("B", "ABCD", read="answer_line"), "Answer: c")
    assert (wrong.hit, wrong.choice, wrong.found) == (False, "C", "check choice: read C, the answer is B")


# -- multiple-choice rows: answers, options and their refusals (dataset/checked.py) -------------------------

def _choice_data(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    f = tmp_path / "rows.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def _row(**kw: Any) -> dict[str, Any]:
    return {"id": "q1", "question": "Which?", "options": ["w", "x", "y", "z"], "answer": "B", "topics": [], **kw}


@pytest.mark.parametrize(("answer", "letter"), [("B", "B"), ("b", "B"), (" c ", "C"), (0, "A"), (3, "D"), ("2", "C"),
                                                (" 1 ", "B")])
def test_the_answer_key_as_a_letter_or_an_index(tmp_path: Path, answer: Any, letter: str) -> None:
    spec = load_spec(CHOICE)
    q = load_dataset(spec, _choice_data(tmp_path, [_row(answer=answer)])).questions[0]
    assert q.choices == ("w", "x", "y", "z") and len(q.criteria) == 1
    c = q.criteria[0]
    assert (c.index, c.weight, c.text, c.check) == (1, 1, f"the answer is {letter}", Choice(letter, "ABCD"))


@pytest.mark.parametrize(("row", "words"), [
    (_row(answer="E"), "rows.jsonl:1: answer: 'E' is not one of the 4 options"),
    (_row(answer=4), "rows.jsonl:1: answer: 4 is not one of the 4 options"),
    (_row(answer=-1), "is not one of the 4 options"),
    (_row(answer=True), "True is not one of the 4 options"),
    (_row(answer="AB"), "'AB' is not one of the 4 options"),
    (_row(answer=1.0), "1.0 is not one of the 4 options"),
    (_row(options=["only"]), "options: expected a list of 2 to 26 non-empty strings (the options)"),
    (_row(options=["a", " "]), "options: expected a list of 2 to 26 non-empty strings"),
    (_row(options=["a", 2]), "options: expected a list of 2 to 26 non-empty strings"),
    (_row(options="a, b"), "options: expected a list of 2 to 26 non-empty strings"),
    (_row(options=[f"o{i}" for i in range(27)]), "options: expected a list of 2 to 26 non-empty strings"),
])
def test_bad_rows_are_one_line(tmp_path: Path, row: dict[str, Any], words: str) -> None:
    with pytest.raises(DataError) as err:
        load_dataset(load_spec(CHOICE), _choice_data(tmp_path, [row]))
    assert words in str(err.value) and "\n" not in str(err.value).strip(), str(err.value)


def test_the_fix_of_a_bad_answer_names_the_range(tmp_path: Path) -> None:
    with pytest.raises(DataError) as err:
        load_dataset(load_spec(CHOICE), _choice_data(tmp_path, [_row(answer="Z", options=["a", "b", "c"])]))
    assert "give a letter A-C or a 0-based index below 3" in str(err.value)


def test_twenty_six_options_are_accepted(tmp_path: Path) -> None:
    q = load_dataset(load_spec(CHOICE), _choice_data(tmp_path, [_row(options=[f"o{i}" for i in range(26)],
                                                                        answer="z")])).questions[0]
    assert q.criteria[0].check == Choice("Z", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    two = load_dataset(load_spec(CHOICE), _choice_data(tmp_path, [_row(options=["a", "b"], answer=1)])).questions[0]
    assert two.criteria[0].check == Choice("B", "AB")


def _variant(tmp_path: Path, src: Path, extra: str) -> Path:
    d = tmp_path / "spec"
    d.mkdir()
    (d / "benchmark.yaml").write_text(f"name: bite_variant\nextends: {src}\n{extra}")
    return d


def test_the_reader_reaches_each_choice(tmp_path: Path) -> None:
    spec = load_spec(_variant(tmp_path, CHOICE, "multiple_choice: {read: pattern, pattern: '<<([A-D])>>'}\n"))
    q = load_dataset(spec, _choice_data(tmp_path, [_row()])).questions[0]
    assert q.criteria[0].check == Choice("B", "ABCD", "pattern", "<<([A-D])>>")


@pytest.mark.parametrize(("mc", "words"), [
    ("{read: last}", "multiple_choice.read"),
    ("{read: pattern, pattern: '<<[A-D]>>'}", "the pattern needs a group: group 1 is the option letter"),
    ("{read: pattern, pattern: '(?=A)'}", "RE2 cannot compile"),
    ("{reader: first_letter}", "multiple_choice.reader"),
])
def test_a_bad_reader_is_refused_by_validation(tmp_path: Path, mc: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(_variant(tmp_path, CHOICE, f"\nmultiple_choice: {mc}\n"))
    assert words in str(err.value) and "\n" not in str(err.value), str(err.value)


# -- the spec's `checks:` (spec/checked.py and dataset/checked.spec_items) ----------------------------------

def test_spec_checks_follow_the_rows_items(tmp_path: Path) -> None:
    extra = ("\nchecks:\n  - {check: {type: words, max: 300}}\n"
             "  - {text: No apology, weight: 2.5, check: {type: not_contains, value: sorry}, tags: [tone]}\n")
    spec = load_spec(_variant(tmp_path, CHECKS, extra))
    ds = load_dataset(spec, CHECKS / next(p.name for p in CHECKS.iterdir() if p.suffix == ".jsonl"))
    q = ds.questions[0]
    tail = q.criteria[-2:]
    n = len(q.criteria)
    assert [(c.index, c.text, c.weight, c.tags, c.check) for c in tail] == [
        (n - 1, "at most 300 words", 1, (), Words(max=300)),
        (n, "No apology", 2.5, ("tone",), NotContains("sorry"))]
    assert isinstance(tail[0].weight, int)  # a whole weight stays an int (as the record writes it)


@pytest.mark.parametrize(("extra", "words"), [
    ("checks:\n  - {check: {type: regex, pattern: '(?<=a)b'}}\n", "RE2 cannot compile"),
    ("checks:\n  - {check: {type: words}}\n", "give min, max or both"),
    ("checks:\n  - {check: {type: words, max: 3}, weight: .nan}\n", "checks"),
    ("checks:\n  - {check: {type: words, max: 3}, wieght: 1}\n", "wieght"),
])
def test_a_bad_spec_check_is_refused_by_validation(tmp_path: Path, extra: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(_variant(tmp_path, CHECKS, "\n" + extra))
    assert words in str(err.value) and "checks" in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_checks_and_choice_defaults_stay_out_of_the_resolved_spec() -> None:
    from rubric_engine.spec.checked import drop_checked_defaults
    dump = {"data": {"fields": {"id": "id", "item_check": None, "choices": None, "answer": None}},
            "multiple_choice": {"read": "first_letter", "pattern": None}, "checks": []}
    drop_checked_defaults(dump)
    assert dump == {"data": {"fields": {"id": "id"}}}
    kept = {"data": {"fields": {"item_check": "check", "choices": "o", "answer": "a"}},
            "multiple_choice": {"read": "answer_line", "pattern": None}, "checks": [{"check": {}}]}
    before = json.loads(json.dumps(kept))
    drop_checked_defaults(kept)
    assert kept == before


# -- written against the survivors of `python bench/mutation.py dataset.checked` / `spec.checked` -----------

def _checks_rows(tmp_path: Path, rubric: list[dict[str, Any]]) -> Path:
    f = tmp_path / "rows.jsonl"
    f.write_text(json.dumps({"id": "p1", "prompt": "Say hi.", "rubric": rubric}) + "\n")
    return f


def _data_error(spec: Any, path: Path) -> str:
    with pytest.raises(DataError) as err:
        load_dataset(spec, path)
    return str(err.value)


def test_row_checks_are_validated_with_the_row_the_item_and_the_key(tmp_path: Path) -> None:
    spec = load_spec(CHECKS)
    line = _data_error(spec, _checks_rows(tmp_path, [{"label": "", "text": "t", "points": 1},
                                                     {"label": "", "points": 1, "check": {"type": "regex",
                                                                                          "pattern": "(?<=a)b"}}]))
    assert "rows.jsonl:1: rubric[1]: check.pattern: RE2 cannot compile" in line, line
    assert 'see docs/authoring.md, "Shapes: deterministic checks"' in line
    whole = _data_error(spec, _checks_rows(tmp_path, [{"label": "", "points": 1, "check": "words"}]))
    assert "rows.jsonl:1: rubric[0]: check: a check is an object such as" in whole, whole


def test_a_checked_item_may_leave_its_text_out_a_judged_one_may_not(tmp_path: Path) -> None:
    spec = load_spec(CHECKS)
    q = load_dataset(spec, _checks_rows(tmp_path, [{"label": "", "text": "", "points": 1,
                                                    "check": {"type": "words", "max": 5}},
                                                   {"label": "", "points": 1, "check": {"type": "json"}},
                                                   {"label": "", "text": "own words", "points": 1,
                                                    "check": {"type": "json"}}])).questions[0]
    assert [c.text for c in q.criteria[:3]] == ["at most 5 words", "valid JSON", "own words"]
    line = _data_error(spec, _checks_rows(tmp_path, [{"label": "", "text": "", "points": 1}]))
    assert "rows.jsonl:1: rubric[0]: text: expected a non-empty string; got ''" in line, line


def test_a_judged_item_without_a_judge_is_one_line(tmp_path: Path) -> None:
    d = tmp_path / "nojudge"
    d.mkdir()
    (d / "benchmark.yaml").write_text(f"name: nj\nextends: {CHECKS}\njudge: null\n")
    line = _data_error(load_spec(d), _checks_rows(tmp_path, [{"label": "", "text": "judged", "points": 1}]))
    assert "rows.jsonl:1: rubric[0]: no check (check) and the spec declares no judge" in line, line
    assert "give this item a check, or add a judge: block to the spec" in line


def test_a_multiple_choice_item_has_no_label_and_a_missing_options_field_is_named(tmp_path: Path) -> None:
    q = load_dataset(load_spec(CHOICE), _choice_data(tmp_path, [_row()])).questions[0]
    assert q.criteria[0].label == ""
    row = _row()
    del row["options"]
    line = _data_error(load_spec(CHOICE), _choice_data(tmp_path, [row]))
    assert "options" in line and "choices" in line, line
    bad = _data_error(load_spec(CHOICE), _choice_data(tmp_path, [_row(options=["a"])]))
    assert "got ['a']" in bad, bad
    row = _row()
    del row["answer"]
    assert "answer" in _data_error(load_spec(CHOICE), _choice_data(tmp_path, [row]))


def test_dropping_checked_defaults_from_a_dump_without_those_keys() -> None:
    from rubric_engine.spec.checked import drop_checked_defaults
    dump: dict[str, Any] = {"data": {"fields": {"id": "id"}}}
    drop_checked_defaults(dump)
    assert dump == {"data": {"fields": {"id": "id"}}}


def test_scoring_checks_survivors() -> None:
    """Written against the survivors of `python bench/mutation.py scoring.checks`."""
    assert run_check(Contains("a"), "a x a").found == "check contains: found at 0"  # the first occurrence
    with pytest.raises(CheckProblem) as err:
        parse_check({"type": "regex", "pattern": None})  # only a choice's pattern may be null
    assert (err.value.key, err.value.message) == ("pattern", "expected a non-empty string, got None")
    assert run_check(Json(), '```json\n{"a": 1}').hit is False  # an opening fence without its closing one
    assert run_check(Json(), '{"a": "```x```"}').hit is True  # fences inside the JSON are not a fence around it
    assert run_check(Json(), "nope").found.startswith("check json: not valid JSON (Expecting value")
    with pytest.raises(TypeError, match="not a check: 'regex'"):
        run_check("regex", "x")
    with pytest.raises(TypeError, match="not a check: 3"):
        describe(3)
    c = Choice("B", "ABCD", read="pattern", pattern=r"Answer=(\S+)")
    assert read_choice("Answer=(B).", c) == "B" and read_choice("Answer=[C]", c) == "C"
    letters = "ABCDEFGHIJKLMNOPQRSTUVWX"
    assert read_choice("X", Choice("X", letters)) == "X"


def test_missing_fields_name_their_spec_key(tmp_path: Path) -> None:
    row = _row()
    del row["answer"]
    assert "rows.jsonl:1: missing field 'answer'; add it, or fix data.fields.answer in the spec" in _data_error(
        load_spec(CHOICE), _choice_data(tmp_path, [row]))
    row = _row()
    del row["options"]
    assert "rows.jsonl:1: missing field 'options'; add it, or fix data.fields.choices in the spec" in _data_error(
        load_spec(CHOICE), _choice_data(tmp_path, [row]))
    line = _data_error(load_spec(CHECKS), _checks_rows(tmp_path, [{"label": "", "points": 1}]))
    assert "rows.jsonl:1: rubric[0]: missing field 'text'; add it, or fix data.fields.item_text in the spec" in line
