"""spec: the helpers other modules ask (labels, templates, data path, breakdowns) and the cross-field checks
word for word, on a small spec written here. Written against survivors of `python bench/mutation.py spec`."""

from __future__ import annotations

from pathlib import Path

import pytest

from rubric_engine.errors import SpecError
from rubric_engine.scoring.question import Aggregation
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import MAX_TEMPLATE_BYTES, BenchmarkSpec

TAXONOMY = """\
taxonomy:
  dimensions:
    - id: feel
      labels: {en: Feeling, zh: 感受}
      abilities:
        - {id: warmth, labels: {en: Warmth, zh: 温暖}, data_labels: [warm, kind]}
        - {id: humour, labels: {fr: Humour}, data_labels: [funny]}
    - id: act
      labels: {en: Acting}
      abilities:
        - {id: help, labels: {}, data_labels: [helps]}
failure_rules:
  - {id: confusion, data_labels: [confused]}
"""

BASE = """\
name: tiny
version: 3
locale: zh
data:
  path: rows.jsonl
  fields: {item_tags: tags, example_tags: topics}
  roles: {u: user, b: other}
  subsets: [easy, hard]
candidate:
  mode: chat_turns
judge:
  model: {name: j, model: openai/gpt-4.1}
  template: judge.j2
aggregation: {overall: mean_over_questions, clip: group, question: all_items, no_positive_points: zero}
report:
  decay: {from: easy, to: hard, base: easy}
  breakdowns:
    - {id: axes, by: item_tag, prefix: "axis:"}
    - {id: themes, by: example_tag}
"""


def write_spec(tmp_path: Path, text: str = BASE + TAXONOMY, name: str = "tiny") -> Path:
    d = tmp_path / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "benchmark.yaml").write_text(text, encoding="utf-8")
    (d / "judge.j2").write_text("{{ response }}", encoding="utf-8")
    return d


def error_of(d: Path) -> str:
    with pytest.raises(SpecError) as err:
        load_spec(d)
    return str(err.value)


@pytest.fixture
def spec(tmp_path: Path) -> BenchmarkSpec:
    return load_spec(write_spec(tmp_path))


def test_taxonomy_helpers(spec: BenchmarkSpec) -> None:
    assert spec.ability_ids() == ["warmth", "humour", "help"]
    assert spec.dimensions_map() == {"feel": ["warmth", "humour"], "act": ["help"]}
    assert spec.ability_dimension() == {"warmth": "feel", "humour": "feel", "help": "act"}
    assert spec.label_to_ability() == {"warm": "warmth", "kind": "warmth", "funny": "humour", "helps": "help"}
    assert spec.label_to_rule() == {"confused": "confusion"}
    assert spec.declared_breakdowns() == [("axes", "item_tag", "axis:"), ("themes", "example_tag", "")]
    assert spec.aggregation_rule() == Aggregation(question="all_items", overall="mean_over_questions", clip="group",
                                                  no_positive_points="zero")
    assert spec.version == "3"  # a number is kept as text


def test_no_taxonomy_helpers_are_empty(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, BASE))
    assert spec.ability_ids() == [] and spec.dimensions_map() == {} and spec.label_to_ability() == {}
    assert spec.label_to_rule() == {} and spec.ability_dimension() == {}


def test_label_prefers_locale_then_en_then_first(spec: BenchmarkSpec) -> None:
    feel, act = spec.taxonomy.dimensions  # type: ignore[union-attr]
    warmth, humour = feel.abilities
    assert spec.label(warmth) == "温暖"  # the spec's locale (zh)
    assert spec.label(warmth, "en") == "Warmth"
    assert spec.label(act) == "Acting"  # no zh: English
    assert spec.label(humour, "de") == "Humour"  # neither: the first one
    assert spec.label(act.abilities[0]) == ""  # no labels at all
    assert spec.label({"en": "", "zh": "空"}) == "空"
    assert spec.label({"de": "Erste", "fr": "Zweite"}) == "Erste"
    assert spec.label({"de": "", "fr": "Zweite"}) == "Zweite"  # an empty first label falls through
    assert spec.label({"zh": 7}) == "7"


def test_data_path_is_relative_to_the_declaring_file(tmp_path: Path, spec: BenchmarkSpec,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert spec.data_path() == tmp_path / "tiny" / "rows.jsonl"
    child = tmp_path / "child"
    child.mkdir()
    (child / "benchmark.yaml").write_text("extends: ../tiny\nname: child\n")
    assert load_spec(child).data_path() == tmp_path / "tiny" / "rows.jsonl"  # declared in the base
    assert load_spec(child).origin("data.path") == (tmp_path / "tiny" / "benchmark.yaml", 5)
    assert load_spec(child).origin("data.fields.item_tags") == (tmp_path / "tiny" / "benchmark.yaml", 6)
    assert load_spec(child).origin(("name",)) == (child / "benchmark.yaml", 2)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(SpecError, match="outside the spec's directory"):  # ~ leads out of the spec's directory
        load_spec(write_spec(tmp_path, BASE.replace("path: rows.jsonl", "path: ~/d.jsonl"), "h")).data_path()
    none = load_spec(write_spec(tmp_path, BASE.replace("  path: rows.jsonl\n", ""), "n"))
    assert none.data_path() is None


def test_templates_by_field_or_relative_path(tmp_path: Path, spec: BenchmarkSpec) -> None:
    d = tmp_path / "tiny"
    assert spec.template_path("judge.template") == d / "judge.j2"
    assert spec.template_path("judge.j2") == d / "judge.j2"
    assert spec.template_path("other.j2") == d / "other.j2"  # not a field's value: relative to the spec dir
    assert spec.read_template("judge.template") == "{{ response }}"
    with pytest.raises(SpecError) as err:
        spec.template_path("candidate.template")
    assert str(err.value) == f"{d / 'benchmark.yaml'}: candidate.template: no template set; set candidate.template to a file"
    with pytest.raises(SpecError) as err:
        spec.read_template("missing.j2")
    assert str(err.value) == (f"{d / 'missing.j2'}: missing.j2: cannot read template: No such file or directory; "
                              "check the template path in the spec")
    (d / "big.j2").write_text("x" * (MAX_TEMPLATE_BYTES + 1))
    with pytest.raises(SpecError) as err:
        spec.read_template("big.j2")
    assert str(err.value) == (f"{d / 'big.j2'}: big.j2: template is {MAX_TEMPLATE_BYTES + 1} bytes (limit 262144); "
                              "a prompt template is a few KB; check the file")
    (d / "edge.j2").write_text("y" * MAX_TEMPLATE_BYTES)
    assert len(spec.read_template("edge.j2")) == MAX_TEMPLATE_BYTES
    (d / "bom.j2").write_text("\ufeffhi", encoding="utf-8")
    assert spec.read_template("bom.j2") == "hi"


def test_resolved_dump_uses_the_yaml_names(tmp_path: Path, spec: BenchmarkSpec) -> None:
    out = spec.resolved()
    assert out["report"]["decay"] == {"from": "easy", "to": "hard", "base": "easy"}
    assert out["_files"] == [str(tmp_path / "tiny" / "benchmark.yaml")]
    assert spec.files == [tmp_path / "tiny" / "benchmark.yaml"] and spec.dir == tmp_path / "tiny"


def test_load_by_yaml_file_path(tmp_path: Path) -> None:
    d = write_spec(tmp_path)
    assert load_spec(d / "benchmark.yaml").dir == d
    assert load_spec(str(d / "benchmark.yaml")).name == "tiny"
    with pytest.raises(SpecError) as err:
        load_spec(tmp_path / "nowhere" / "x.yml")
    assert str(err.value) == (f"{tmp_path / 'nowhere'}: <root>: no benchmark.yaml here; give a benchmark directory "
                              "containing benchmark.yaml, or a benchmark name")


def line(d: Path, needle: str) -> int:
    return [i for i, t in enumerate((d / "benchmark.yaml").read_text().splitlines(), 1) if needle in t][-1]


@pytest.mark.parametrize("old, new, needle, message", [
    ("{id: help,", "{id: warmth,", "{id: warmth, labels: {}",
     "taxonomy.dimensions[1].abilities[0].id: duplicate ability/rule id (got 'warmth'); "
     "already used at taxonomy.dimensions[0].abilities[0].id"),
    ("- id: act", "- id: feel", "- id: feel\n",
     "taxonomy.dimensions[1].id: duplicate dimension id (got 'feel'); already used at taxonomy.dimensions[0].id"),
    ("{id: confusion, data_labels: [confused]}", "{id: confusion, data_labels: [funny]}", "{id: confusion",
     "failure_rules[0].data_labels[0]: data label used twice (got 'funny'); already mapped at "
     "taxonomy.dimensions[0].abilities[1].data_labels[0]; a data label maps to one ability or rule"),
    ("- id: act", "- id: 9act", "- id: 9act",
     "taxonomy.dimensions[1].id: ids must be snake_case ASCII (got '9act'); use e.g. emotional_coping"),
    ("roles: {u: user, b: other}", "roles: {u: assistant, b: other}", "roles:",
     "data.roles: no role maps to 'user' (got {'u': 'assistant', 'b': 'other'}); map the replied-to speaker's "
     "label to user"),
    ("decay: {from: easy, to: hard, base: easy}", "decay: {from: easy, to: medium, base: easy}", "decay:",
     "report.decay.to: unknown subset (got 'medium'); data.subsets: easy, hard"),
    ("decay: {from: easy, to: hard, base: easy}", "decay: {from: easy, to: hard, base: mid}", "decay:",
     "report.decay.base: base must be the 'from' or the 'to' subset (got 'mid')"),
    ("report:\n", "report:\n  subsets: {medium: {en: M}}\n", "subsets: {medium",
     "report.subsets.medium: unknown subset (got 'medium'); data.subsets: easy, hard"),
    ("  mode: chat_turns", "  mode: single_message", "candidate:",
     "candidate.template: single_message mode needs a template; set candidate.template"),
    ("  template: judge.j2", "  template: judge.j2\n  max_reasks: -1", "max_reasks",
     "judge.max_reasks: Input should be greater than or equal to 0 (got -1); see the spec layout in docs/authoring.md"),
    ("  mode: chat_turns", "  mode: chat_turns\n  colour: red\n  size: 3", "colour",
     "candidate.colour: unknown key (got 'colour'); allowed keys here: mode, system, template "
     "(+1 more problem(s) after this one)"),
    ("aggregation: {overall: mean_over_questions,", "aggregation: {overall: median,", "aggregation:",
     "aggregation.overall: unknown value (got 'median'); allowed: 'macro_over_groups' or 'mean_over_questions'"),
    ("        - {id: help, labels: {}, data_labels: [helps]}", "        - {id: help, labels: {}}", "{id: help",
     "taxonomy.dimensions[1].abilities[0].data_labels: required key is missing; add `data_labels:` here"),
])
def test_spec_errors_word_for_word(tmp_path: Path, old: str, new: str, needle: str, message: str) -> None:
    text = BASE + TAXONOMY
    assert old in text
    d = write_spec(tmp_path, text.replace(old, new, 1))
    assert error_of(d) == f"{d / 'benchmark.yaml'}:{line(d, needle.rstrip())}: {message}"


def test_defaulted_key_errors_point_at_the_file(tmp_path: Path) -> None:
    d = write_spec(tmp_path, BASE.replace("  mode: chat_turns\n", "  system: nope.j2\n  mode: chat_turns\n"))
    msg = error_of(d)
    assert msg == (f"{d / 'benchmark.yaml'}:10: candidate.system: template file not found (got 'nope.j2'); "
                   f"create {d / 'nope.j2'} or fix the path (relative to {d})")


def test_template_syntax_error_names_the_template_line(tmp_path: Path) -> None:
    # was an uncaught jinja2.TemplateSyntaxError from the judge-template variable check (a traceback)
    d = write_spec(tmp_path)
    (d / "judge.j2").write_text("line one\n{% if %}\n")
    assert error_of(d).startswith(f"{d / 'judge.j2'}:2: judge.template: template syntax error: ")
    assert error_of(d).endswith("; fix the jinja2 syntax")


def test_version_must_not_be_a_boolean(tmp_path: Path) -> None:
    d = write_spec(tmp_path, BASE.replace("version: 3", "version: true"))
    assert "version: Input should be a valid string (got True)" in error_of(d)


@pytest.mark.slow
def test_console_template_syntax_error_is_one_line_exit_2(tmp_path: Path) -> None:
    """The same fault through the console script of this environment (was a traceback, exit 1)."""
    import subprocess
    import sys

    d = write_spec(tmp_path)
    (d / "judge.j2").write_text("line one\n{% if %}\n")
    exe = Path(sys.executable).with_name("rubric-engine")
    res = subprocess.run([str(exe), "validate", f"benchmark={d}"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert f"{d / 'judge.j2'}:2: judge.template: template syntax error: " in res.stderr
