"""The spec's cross-field rules (spec/checks.py), in-process so the mutation tool sees them: each refusal with
its key, words, value and fix as the author reads them, the specs each rule lets through, and the order the
rules apply in (a spec with no judge skips the judge's rules; a score verdict skips the criteria's). The specs
are built in memory (BenchmarkSpec.model_validate, templates in a tmp directory); the end-to-end check of a
refusal through `load_spec` and the console script is tests/spec/test_spec_language.py.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.datatypes import Criterion, Question, Turn
from rubric_engine.errors import SpecError
from rubric_engine.spec.checks import (check_breakdowns_against_data, check_breakdowns_against_tags, check_formula,
                                       check_language, check_model, fetchable_url, template_variables)
from rubric_engine.spec.schema import BenchmarkSpec, ModelRef

ALL = "{% for c in criteria %}{{ c.index }}. {{ c.text }}\n{% endfor %}{{ n_criteria }}"
PER = "{{ criterion.text }}"
TAXONOMY = {"dimensions": [{"id": "d1", "labels": {"en": "D1"}, "abilities": [
    {"id": "a1", "labels": {"en": "A1"}, "data_labels": ["A1"]},
    {"id": "a2", "labels": {"en": "A2"}, "data_labels": ["A2", "B2"]}]}]}
BASE: dict[str, Any] = {
    "name": "t", "data": {"path": "d.jsonl", "roles": {"user": "user"}},
    "scoring": {"formula": "met_over_positive"},
    "aggregation": {"question": "all_items", "overall": "mean_over_questions"},
    "judge": {"model": {"name": "j", "model": "openai/gpt-4.1"}, "template": "judge.j2"}}
PAIRWISE = {"judge": {"verdict": {"kind": "pairwise"}}, "baseline": {"model": {"name": "b", "model": "openai/b"}}}


class Refused(Exception):
    pass


def _fail(key: tuple[Any, ...], msg: str, value: Any = None, fix: str = "") -> None:
    raise Refused(key, msg, value, fix)


def _merge(base: dict[str, Any], edit: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in edit.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _spec(tmp_path: Path, edit: dict[str, Any] | None = None, template: str | None = ALL) -> BenchmarkSpec:
    """A spec built in memory from BASE with `edit` merged in (None drops a key); its judge template in tmp_path."""
    if template is not None:
        (tmp_path / "judge.j2").write_text(template, encoding="utf-8")
    spec = BenchmarkSpec.model_validate(_merge(BASE, edit or {}))
    spec._dir = tmp_path
    return spec


def _refusal(tmp_path: Path, edit: dict[str, Any] | None = None, template: str | None = ALL) -> tuple[Any, ...] | None:
    """(key, message, value, fix) of the first rule the spec breaks, or None when every rule lets it through."""
    try:
        check_language(_spec(tmp_path, edit, template), _fail)
    except Refused as exc:
        return exc.args
    return None


# -- scoring: the groups a taxonomy gives ---------------------------------------------------------------------

@pytest.mark.parametrize(("edit", "want"), [
    ({"aggregation": {"question": "mean_over_groups"}},
     (("aggregation", "question"), "mean_over_groups needs a taxonomy (its abilities are the groups)",
      "mean_over_groups", "without a taxonomy use all_items")),
    ({"aggregation": {"overall": "macro_over_groups"}},
     (("aggregation", "overall"), "macro_over_groups needs a taxonomy (its abilities are the groups)",
      "macro_over_groups", "without a taxonomy use mean_over_questions")),
    # no judge (every item checked): the scoring rules still apply
    ({"judge": None, "data": {"fields": {"item_check": "check"}}, "aggregation": {"overall": "macro_over_groups"}},
     (("aggregation", "overall"), "macro_over_groups needs a taxonomy (its abilities are the groups)",
      "macro_over_groups", "without a taxonomy use mean_over_questions")),
])
def test_groups_need_a_taxonomy(tmp_path: Path, edit: dict[str, Any], want: tuple[Any, ...]) -> None:
    assert _refusal(tmp_path, edit) == want


def test_the_scale_rules_are_reached_for_every_judge_with_criteria_or_a_score(tmp_path: Path) -> None:
    assert _refusal(tmp_path, {"judge": {"verdict": {"kind": "score", "max": 5}}}) == (
        ("judge", "verdict", "min"), "a score verdict needs its declared range", None,
        "declare judge.verdict.min and judge.verdict.max (e.g. 1 and 10)")
    assert _refusal(tmp_path, {"judge": {"verdict": {"min": 1}}}) == (
        ("judge", "verdict", "min"), "judge.verdict.min applies only to kind: score", 1.0,
        "set judge.verdict.kind: score, or drop the key")


def test_groups_with_a_taxonomy_and_pairwise_questions_pass(tmp_path: Path) -> None:
    groups = {"aggregation": {"question": "mean_over_groups", "overall": "macro_over_groups"}}
    assert _refusal(tmp_path, {**groups, "taxonomy": TAXONOMY}) is None
    # a pairwise question has no items: its question rule needs no taxonomy (the overall still must be pooled)
    assert _refusal(tmp_path, {**PAIRWISE, "aggregation": {"question": "mean_over_groups"}}) is None
    # a score verdict skips the criteria's rules: no taxonomy asked for
    score = {"judge": {"verdict": {"kind": "score", "min": 1, "max": 5}}, "aggregation": {"question": "mean_over_groups"}}
    assert _refusal(tmp_path, score) is None


# -- the judge: granularity, shape, field names, template -----------------------------------------------------

@pytest.mark.parametrize(("verdict", "template", "want"), [
    ({"granularity": "per_criterion", "shape": "list"}, PER,
     (("judge", "verdict", "shape"), "per_criterion judging needs a one-object verdict", "list",
      "allowed with judge.verdict.granularity=per_criterion: object")),
    ({"shape": "object"}, ALL,
     (("judge", "verdict", "shape"), "all_criteria judging needs a list verdict", "object",
      "allowed with judge.verdict.granularity=all_criteria: list")),
    ({"granularity": "per_criterion", "shape": "object"}, ALL,
     (("judge", "template"), "an all-criteria template (criteria, n_criteria) with per_criterion judging", "judge.j2",
      "a per_criterion template uses `criterion` (one item), not criteria/n_criteria")),
    ({"granularity": "per_criterion", "shape": "object"}, "{{ n_criteria }} {{ criterion.text }}",
     (("judge", "template"), "an all-criteria template (n_criteria) with per_criterion judging", "judge.j2",
      "a per_criterion template uses `criterion` (one item), not criteria/n_criteria")),
    ({"granularity": "per_criterion", "shape": "object"}, "{{ response }}",
     (("judge", "template"), "a per_criterion template must show the criterion", "judge.j2",
      "use {{ criterion.text }} (and criterion.weight / criterion.tags) in the template")),
    ({}, "{{ criterion.text }}",
     (("judge", "template"), "a per-criterion template with all_criteria judging", "judge.j2",
      "set judge.verdict.granularity: per_criterion, or list every item with `criteria`")),
])
def test_judge_rules_word_for_word(tmp_path: Path, verdict: dict[str, Any], template: str,
                                   want: tuple[Any, ...]) -> None:
    assert _refusal(tmp_path, {"judge": {"verdict": verdict}}, template) == want


@pytest.mark.parametrize("verdict", [{"reasoning": "met"}, {"id": "met"}, {"id": "reasoning"}, {"met": "is met"},
                                     {"list_key": "the-list"}, {"reasoning": "2why"}])
def test_verdict_field_names_must_be_distinct_identifiers(tmp_path: Path, verdict: dict[str, Any]) -> None:
    key, msg, value, fix = _refusal(tmp_path, {"judge": {"verdict": verdict}})
    assert (key, msg, fix) == (("judge", "verdict"), "verdict field names must be distinct identifiers", "")
    assert value == {**_spec(tmp_path).judge.verdict.model_dump(), **verdict}


def test_judge_rules_that_let_a_spec_through(tmp_path: Path) -> None:
    per = {"granularity": "per_criterion", "shape": "object"}
    assert _refusal(tmp_path, {"judge": {"verdict": per}}, PER) is None
    # per criterion the verdict has no id: an id equal to another field is never read
    assert _refusal(tmp_path, {"judge": {"verdict": {**per, "id": "met"}}}, PER) is None
    assert _refusal(tmp_path, {"judge": {"verdict": {"list_key": "checks", "id": "n", "reasoning": "why",
                                                     "met": "passed"}}}) is None
    # a template that is missing or does not parse is the template check's to report (with its file:line)
    assert _refusal(tmp_path / "nowhere", {"judge": {"verdict": per}}, None) is None
    assert _refusal(tmp_path, {"judge": {"verdict": per}}, "{% for x in %}") is None


def test_template_variables_are_the_names_a_template_reads(tmp_path: Path) -> None:
    spec = _spec(tmp_path, template="{{ criterion.text }} {% for t in transcript %}{{ t.content }}{% endfor %}")
    assert template_variables(spec, "judge.template") == {"criterion", "transcript"}


# -- breakdowns --------------------------------------------------------------------------------------------------

def _breakdown(b: dict[str, Any], fields: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    return {"report": {"breakdowns": [{"id": "first", "by": "subset"}, b]},
            "data": {"fields": {"subset": "subset", **(fields or {})}}, **more}


@pytest.mark.parametrize(("edit", "want"), [
    (_breakdown({"id": "first", "by": "subset"}), ((1, "id"), "duplicate breakdown id", "first", "")),
    (_breakdown({"id": "b", "by": "ability"}),
     ((1, "by"), "an ability breakdown needs a taxonomy", "ability",
      "allowed without one: subset, scenario, item_tag, example_tag")),
    (_breakdown({"id": "b", "by": "dimension"}),
     ((1, "by"), "a dimension breakdown needs a taxonomy", "dimension",
      "allowed without one: subset, scenario, item_tag, example_tag")),
    (_breakdown({"id": "b", "by": "scenario"}),
     ((1, "by"), "a scenario breakdown needs data.fields.scenario", "scenario",
      "map data.fields.scenario to the data's column, or drop this breakdown")),
    (_breakdown({"id": "b", "by": "item_tag"}),
     ((1, "by"), "a item_tag breakdown needs data.fields.item_tags", "item_tag",
      "map data.fields.item_tags to the data's column, or drop this breakdown")),
    (_breakdown({"id": "b", "by": "example_tag"}),
     ((1, "by"), "a example_tag breakdown needs data.fields.example_tags", "example_tag",
      "map data.fields.example_tags to the data's column, or drop this breakdown")),
    ({"report": {"breakdowns": [{"id": "b", "by": "subset"}]}},
     ((0, "by"), "a subset breakdown needs data.fields.subset", "subset",
      "map data.fields.subset to the data's column, or drop this breakdown")),
    (_breakdown({"id": "b", "by": "scenario", "prefix": "axis:"}, {"scenario": "s"}),
     ((1, "prefix"), "prefix applies only to item_tag / example_tag breakdowns, not scenario", "axis:", "")),
    (_breakdown({"id": "b", "by": "ability", "prefix": "axis:"}, taxonomy=TAXONOMY),
     ((1, "prefix"), "prefix applies only to item_tag / example_tag breakdowns, not ability", "axis:", "")),
])
def test_breakdown_rules_word_for_word(tmp_path: Path, edit: dict[str, Any], want: tuple[Any, ...]) -> None:
    key, *rest = _refusal(tmp_path, edit)
    assert (key, *rest) == (("report", "breakdowns", *want[0]), *want[1:])


def test_breakdowns_that_pass(tmp_path: Path) -> None:
    fields = {"scenario": "s", "item_tags": "tags", "example_tags": "etags"}
    every = [{"id": "s", "by": "subset"}, {"id": "c", "by": "scenario"}, {"id": "i", "by": "item_tag", "prefix": "x:"},
             {"id": "e", "by": "example_tag", "prefix": "y:"}, {"id": "a", "by": "ability"},
             {"id": "d", "by": "dimension"}]
    assert _refusal(tmp_path, {"report": {"breakdowns": every}, "taxonomy": TAXONOMY,
                               "data": {"fields": {"subset": "subset", **fields}}}) is None


def _q(qid: str, item_tags: tuple[str, ...] = (), tags: tuple[str, ...] = ()) -> Question:
    return Question(qid, (Turn("user", "hi"),), (Criterion(1, "", 1.0, "t", tags=item_tags),), tags=tags)


def test_a_tag_prefix_nothing_in_the_data_starts_with_is_refused(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"data": {"fields": {"item_tags": "it", "example_tags": "et"}}, "report": {"breakdowns": [
        {"id": "axis", "by": "item_tag", "prefix": "axis:"}, {"id": "theme", "by": "example_tag", "prefix": "theme:"},
        {"id": "sub", "by": "subset"}]}})
    check_breakdowns_against_data(spec, [_q("q1", ("axis:accuracy",), ("theme:x",))])  # both found: no error
    check_breakdowns_against_data(spec, [_q("q1", ("axis:a",)), _q("q2", tags=("theme:b",))])  # in any question
    with pytest.raises(SpecError) as err:
        check_breakdowns_against_data(spec, [_q("q1", ("theme:x", "plain"), ("axis:a",))])
    assert str(err.value) == ("t: report.breakdowns[0].prefix: no item tag in the data starts with this (got 'axis:'); "
                              "prefixes in the data: plain, theme:")
    with pytest.raises(SpecError) as err:
        check_breakdowns_against_tags(spec, {"axis:a"}, set())
    assert str(err.value) == ("t: report.breakdowns[1].prefix: no example tag in the data starts with this "
                              "(got 'theme:'); prefixes in the data: (none)")
    with pytest.raises(SpecError) as err:  # the example tags are the questions' own
        check_breakdowns_against_data(spec, [_q("q1", ("axis:a",), ("topic:y",))])
    assert err.value.key_path == "report.breakdowns[1].prefix" and err.value.fix == "prefixes in the data: topic:"
    with pytest.raises(SpecError) as err:  # a prefix is what comes before the first colon
        check_breakdowns_against_tags(spec, {"a:b:c"}, set())
    assert err.value.fix == "prefixes in the data: a:"
    many = {f"k{i:02d}:v" for i in range(25)}
    with pytest.raises(SpecError) as err:
        check_breakdowns_against_tags(spec, {"axis:a"}, many)
    assert err.value.fix == "prefixes in the data: " + ", ".join(f"k{i:02d}:" for i in range(20))
    spec._files = [tmp_path / "benchmark.yaml"]  # a spec read from a file names it
    with pytest.raises(SpecError) as err:
        check_breakdowns_against_tags(spec, set(), {"theme:x"})
    assert err.value.file == str(tmp_path / "benchmark.yaml") and err.value.key_path == "report.breakdowns[0].prefix"


def test_a_breakdown_by_subset_or_scenario_reads_no_tags(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"data": {"fields": {"subset": "s", "scenario": "c"}},
                            "report": {"breakdowns": [{"id": "sub", "by": "subset"}, {"id": "sc", "by": "scenario"}]}})
    check_breakdowns_against_tags(spec, set(), set())
    check_breakdowns_against_data(spec, [_q("q1")])


def test_the_refusal_names_the_line_that_declared_the_prefix(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"data": {"fields": {"item_tags": "it"}},
                            "report": {"breakdowns": [{"id": "axis", "by": "item_tag", "prefix": "axis:"}]}})
    spec._origins = {("report", "breakdowns", 0): (tmp_path / "b.yaml", 7)}
    with pytest.raises(SpecError) as err:
        check_breakdowns_against_tags(spec, {"x:y"}, set())
    assert err.value.file == f"{tmp_path / 'b.yaml'}:7"
    spec._origins[("report", "breakdowns", 0, "prefix")] = (tmp_path / "b.yaml", 9)
    with pytest.raises(SpecError) as err:
        check_breakdowns_against_tags(spec, {"x:y"}, set())
    assert err.value.file == f"{tmp_path / 'b.yaml'}:9"


# -- checked items and multiple choice ---------------------------------------------------------------------------

NO_JUDGE_FIX = "add a judge: block (model, template), or check every item"


@pytest.mark.parametrize(("edit", "want"), [
    ({"data": {"fields": {"choices": "options"}}},
     (("data", "fields", "answer"), "multiple choice needs both data.fields.choices and data.fields.answer", None,
      "name the options' and the answer's fields")),
    ({"data": {"fields": {"answer": "gold"}}},
     (("data", "fields", "choices"), "multiple choice needs both data.fields.choices and data.fields.answer", None,
      "name the options' and the answer's fields")),
    ({"data": {"fields": {"choices": "options", "answer": "gold"}}, "taxonomy": TAXONOMY},
     (("taxonomy",), "a multiple-choice question is one unlabelled item: it has no ability to be scored in", None,
      "drop the taxonomy; group the results with report.breakdowns (subset, scenario, example_tag)")),
    ({"multiple_choice": {"read": "pattern"}},
     (("multiple_choice", "pattern"), "read: pattern and a pattern go together", "pattern",
      "set both, or neither (the default reads the first standalone option letter)")),
    ({"multiple_choice": {"read": "answer_line", "pattern": "<(\\w)>"}},
     (("multiple_choice", "read"), "read: pattern and a pattern go together", "answer_line",
      "set both, or neither (the default reads the first standalone option letter)")),
    ({"taxonomy": TAXONOMY, "checks": [{"label": "B2", "check": {"type": "json"}},
                                       {"label": "C", "check": {"type": "json"}}]},
     (("checks", 1, "label"), "with a taxonomy, a check is scored in an ability: give its data label", "C",
      "known labels: A1, A2, B2")),
    ({"judge": {"verdict": {"kind": "score", "min": 1, "max": 5}}, "data": {"fields": {"item_check": "check"}}},
     (("judge", "verdict", "kind"), "checked items and multiple choice are rubric items: they go with criteria "
      "verdicts", "score", "use judge.verdict.kind: criteria, or drop the checks")),
    ({"judge": {"verdict": {"kind": "score", "min": 1, "max": 5}}, "checks": [{"check": {"type": "json"}}]},
     (("judge", "verdict", "kind"), "checked items and multiple choice are rubric items: they go with criteria "
      "verdicts", "score", "use judge.verdict.kind: criteria, or drop the checks")),
    ({**PAIRWISE, "data": {"fields": {"choices": "options", "answer": "gold"}}},
     (("judge", "verdict", "kind"), "checked items and multiple choice are rubric items: they go with criteria "
      "verdicts", "pairwise", "use judge.verdict.kind: criteria, or drop the checks")),
    ({"judge": None, "data": {"fields": {"item_check": "check"}}, "baseline": {"model": {"name": "b", "model": "o/b"}}},
     (("baseline",), "a baseline is compared by a judge (judge.verdict.kind: pairwise)", None, "remove baseline:")),
    ({"judge": None},
     (("judge",), "required key is missing: without data.fields.item_check or data.fields.choices every item "
      "needs a judge", None, NO_JUDGE_FIX)),
    ({"judge": None, "checks": [{"check": {"type": "json"}}]},  # the spec's own checks: the data's items still need one
     (("judge",), "required key is missing: without data.fields.item_check or data.fields.choices every item "
      "needs a judge", None, NO_JUDGE_FIX)),
])
def test_checked_item_rules_word_for_word(tmp_path: Path, edit: dict[str, Any], want: tuple[Any, ...]) -> None:
    assert _refusal(tmp_path, edit) == want


@pytest.mark.parametrize("edit", [
    {"judge": None, "data": {"fields": {"item_check": "check"}}},
    {"judge": None, "data": {"fields": {"choices": "options", "answer": "gold"}}},
    {"data": {"fields": {"choices": "options", "answer": "gold"}}, "multiple_choice": {"read": "pattern",
                                                                                       "pattern": "<(\\w)>"}},
    {"taxonomy": TAXONOMY, "checks": [{"label": "A1", "check": {"type": "json"}}]},
    {"checks": [{"label": "anything", "check": {"type": "json"}}]},  # without a taxonomy a label is only a label
])
def test_checked_items_that_pass(tmp_path: Path, edit: dict[str, Any]) -> None:
    assert _refusal(tmp_path, edit) is None


def test_a_spec_without_a_judge_skips_the_judges_rules(tmp_path: Path) -> None:
    # a judge-only rule (a scripted conversation's turns) still applies; the judge's own are never reached
    assert _refusal(tmp_path, {"judge": None, "data": {"fields": {"item_check": "check"}},
                               "conversation": {"mode": "scripted"}})[0] == ("data", "fields", "turns")
    spec = _spec(tmp_path, {"judge": None, "data": {"fields": {"item_check": "check"}}})
    check_language(spec, _fail)
    assert spec._formula is not None  # the formula is resolved for every spec


# -- pairwise ------------------------------------------------------------------------------------------------------

def _answers(**a: Any) -> dict[str, Any]:
    return {"judge": {"verdict": {"kind": "pairwise"}}, "baseline": {"answers": a}}


@pytest.mark.parametrize(("edit", "want"), [
    ({"baseline": {"model": {"name": "b", "model": "openai/b"}}},
     (("baseline",), "a baseline is only used by judge.verdict.kind: pairwise", None, "remove baseline:")),
    ({**PAIRWISE, "conversation": {"mode": "scripted"}, "data": {"fields": {"turns": "turns"}}},
     (("conversation", "mode"), "a pairwise comparison judges one reply against one baseline reply", "scripted",
      "use conversation.mode: single (or leave it out) with judge.verdict.kind: pairwise")),
    (_merge(PAIRWISE, {"judge": {"verdict": {"labels": ["A>B", "B>A", "A>B"]}}}),
     (("judge", "verdict", "labels"), "a label is declared twice", ["A>B", "B>A", "A>B"],
      "labels are A>>B, A>B, A=B, B>A, B>>A (or mirrored) written so that group 1 of the pattern captures them")),
    ({**PAIRWISE, "taxonomy": TAXONOMY, "aggregation": {"overall": "macro_over_groups"}},
     (("aggregation", "overall"), "a pairwise win rate is the pooled mean over questions", "macro_over_groups",
      "set aggregation.overall: mean_over_questions")),
    ({"judge": {"verdict": {"kind": "pairwise"}}, "baseline": {}},
     (("baseline",), "give exactly one of baseline.model and baseline.answers", None, "")),
    (_merge(PAIRWISE, _answers(files={"all": {"path": "a.jsonl"}})),
     (("baseline",), "give exactly one of baseline.model and baseline.answers", None, "")),
    (_answers(files={"g1": {"path": "a.jsonl"}, "g2": {"path": "b.jsonl"}}),
     (("baseline", "answers", "files"), "several files need baseline.answers.by (subset or scenario) to say which "
      "questions each answers", ["g1", "g2"], "")),
    (_answers(by="scenario", files={"g1": {"path": "a.jsonl"}}),
     (("baseline", "answers", "by"), "needs data.fields.scenario", "scenario", "map data.fields.scenario")),
    (_answers(files={"g1": {"path": "a.jsonl", "url": "https://example.org/a.jsonl"}}),
     (("baseline", "answers", "files", "g1"), "give exactly one of url and path", None, "")),
    (_answers(by="subset", files={"g1": {"path": "a.jsonl"}, "g2": {}}) | {"data": {"fields": {"subset": "s"}}},
     (("baseline", "answers", "files", "g2"), "give exactly one of url and path", None, "")),
])
def test_pairwise_rules_word_for_word(tmp_path: Path, edit: dict[str, Any], want: tuple[Any, ...]) -> None:
    assert _refusal(tmp_path, edit) == want


def test_pairwise_labels_are_checked_against_the_declared_pattern(tmp_path: Path) -> None:
    edit = _merge(PAIRWISE, {"judge": {"verdict": {"pattern": "verdict: (\\d)"}}})
    assert _refusal(tmp_path, edit)[:2] == (("judge", "verdict", "labels"), "'A>>B' cannot be read by "
                                            "judge.verdict.pattern 'verdict: (\\\\d)' (its group 1 never captures it)")


def test_pairwise_specs_that_pass(tmp_path: Path) -> None:
    assert _refusal(tmp_path, PAIRWISE) is None
    assert _refusal(tmp_path, _answers(files={"all": {"url": "https://example.org/a.jsonl"}})) is None
    assert _refusal(tmp_path, _answers(by="subset", files={"n": {"path": "a"}, "h": {"path": "b"}})
                    | {"data": {"fields": {"subset": "s"}}}) is None


# -- conversations ---------------------------------------------------------------------------------------------------

SIM_FIX = ("set conversation.simulator.system to a template of the simulated user's persona and instructions (and its "
           "model there, or user=ENTRY on the command line)")


@pytest.mark.parametrize(("edit", "want"), [
    ({"conversation": {"mode": "scripted"}},
     (("data", "fields", "turns"), "conversation.mode scripted needs the data's user turns", None,
      "map data.fields.turns to the column holding each row's list of user messages")),
    ({"conversation": {"mode": "simulated"}},
     (("conversation", "simulator"), "conversation.mode simulated needs a simulator with a persona", None, SIM_FIX)),
    ({"conversation": {"mode": "simulated", "simulator": {"template": "u.j2"}}},
     (("conversation", "simulator"), "conversation.mode simulated needs a simulator with a persona", None, SIM_FIX)),
])
def test_conversation_rules_word_for_word(tmp_path: Path, edit: dict[str, Any], want: tuple[Any, ...]) -> None:
    assert _refusal(tmp_path, edit) == want


def test_conversations_that_pass(tmp_path: Path) -> None:
    assert _refusal(tmp_path, {"conversation": {"mode": "scripted"}, "data": {"fields": {"turns": "turns"}}}) is None
    assert _refusal(tmp_path, {"conversation": {"mode": "simulated", "simulator": {"system": "s.j2"}}}) is None


# -- the formula, the model id, the URLs --------------------------------------------------------------------------

def test_an_unknown_formula_names_the_closest_one(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"scoring": {"formula": "met_over_positiv"}})
    with pytest.raises(Refused) as err:
        check_formula(spec, _fail, False)
    key, msg, value, fix = err.value.args
    assert key == ("scoring", "formula") and value == "met_over_positiv" and msg.startswith("unknown formula")
    assert fix.endswith("; did you mean 'met_over_positive'?") and fix.count("did you mean") == 1
    with pytest.raises(Refused) as err:
        check_formula(_spec(tmp_path, {"scoring": {"formula": "zzzzzz"}}), _fail, False)
    assert err.value.args[3] == ("known formulas: log_normalised, linear, met_over_positive; or an entry point of "
                                 "rubric_engine.formulas, or module:function with trust_code=true")
    # through check_language: the same refusal, and code untrusted unless told
    assert _refusal(tmp_path, {"scoring": {"formula": "zzzzzz"}})[:3] == (("scoring", "formula"), "unknown formula",
                                                                          "zzzzzz")
    assert _refusal(tmp_path, {"scoring": {"formula": "os:getcwd"}})[1].startswith(
        "a module:function formula runs Python code")
    with pytest.raises(Refused) as err:  # code runs only when trusted
        check_formula(_spec(tmp_path, {"scoring": {"formula": "os:getcwd"}}), _fail, False)
    assert err.value.args[1].startswith("a module:function formula runs Python code")
    trusted = _spec(tmp_path, {"scoring": {"formula": "os:getcwd"}})
    check_language(trusted, _fail, trust_code=True)
    assert trusted._formula is not None


@pytest.mark.parametrize(("model", "words"), [
    ("gpt-4.1", "key: the model must be a LiteLLM id 'provider/model' (got 'gpt-4.1'); "
     "e.g. anthropic/claude-sonnet-4-5-20250929 or openai/gpt-4o-2024-11-20"),
    ("openai/gpt-4.1-mni", "key: unknown openai model (got 'openai/gpt-4.1-mni'); did you mean openai/gpt-4.1-mini, "
     "openai/gpt-4o-mini, openai/gpt-5.4-mini? use a model id"),  # three at most (a fourth is as close)
    ("azure/x/gpt-4o", "key: unknown azure model (got 'azure/x/gpt-4o'); did you mean "),  # the provider: before the 1st /
    ("openai/zzzzzzzzzzzzzzzz", "key: unknown openai model (got 'openai/zzzzzzzzzzzzzzzz'); use a model id LiteLLM "
     "knows, or set api_base for a self-hosted / OpenAI-compatible server"),
])
def test_a_misspelt_model_id_is_refused(model: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        check_model(ModelRef(name="m", model=model), "where", "key")
    assert str(err.value).startswith("where: " + words), str(err.value)


@pytest.mark.parametrize("ref", [
    {"model": "openai/gpt-4.1"}, {"model": "openai/gpt-4.1-mni", "api_base": "http://127.0.0.1:1/v1"},
    {"model": "nosuchprovider/anything"}, {"model": "azure/gpt-4o"}])  # listed under its full id
def test_known_models_own_servers_and_other_providers_pass(ref: dict[str, Any]) -> None:
    check_model(ModelRef(name="m", **ref), "where", "key")


@pytest.mark.parametrize(("url", "ok"), [
    ("https://example.org/d.jsonl", True), ("http://127.0.0.1:8000/d", True), ("http://localhost/d", True),
    ("http://[::1]:9/d", True), ("http://example.org/d", False), ("file:///etc/passwd", False),
    ("ftp://localhost/d", False), ("https:///nohost", False), ("http://[::1/d", False), ("d.jsonl", False)])
def test_fetchable_urls(url: str, ok: bool) -> None:
    assert fetchable_url(url) is ok


def test_a_malformed_url_in_a_spec_file_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    from rubric_engine.spec.load import load_spec

    (tmp_path / "judge.j2").write_text(ALL, encoding="utf-8")
    (tmp_path / "benchmark.yaml").write_text(
        "name: t\ndata: {url: 'http://[::1/d.jsonl', roles: {user: user}}\nscoring: {formula: met_over_positive}\n"
        "aggregation: {question: all_items, overall: mean_over_questions}\n"
        "candidate: {mode: chat_turns}\njudge: {model: {name: j, model: openai/gpt-4.1}, template: judge.j2}\n",
        encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_spec(tmp_path)
    assert err.value.key_path == "data.url" and "only https:// URLs (or http:// to 127.0.0.1 / localhost)" in str(err.value)
