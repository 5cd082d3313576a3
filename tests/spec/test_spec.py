"""Spec loading: the shipped benchmarks, `extends`, the search path and every error message's content."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rubric_engine.errors import SpecError
from rubric_engine.spec.files import benchmark_search_path, deep_merge, list_benchmarks
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import BenchmarkSpec

from conftest import REPO as ROOT
BENCH = ROOT / "benchmarks"
HB = BENCH / "heartbench"


@pytest.fixture
def spec() -> BenchmarkSpec:
    return load_spec(HB)


def variant(tmp_path: Path, old: str, new: str, name: str = "variant") -> Path:
    """A copy of the heartbench spec dir with one text substitution in benchmark.yaml."""
    d = tmp_path / name
    shutil.copytree(HB, d)
    text = (d / "benchmark.yaml").read_text(encoding="utf-8")
    assert old in text, old
    (d / "benchmark.yaml").write_text(text.replace(old, new, 1), encoding="utf-8")
    return d


def error_of(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value)


def line_of(path: Path, needle: str) -> int:
    """1-based line of the first line equal to `needle` (stripped), else the first containing it."""
    lines = (path / "benchmark.yaml").read_text(encoding="utf-8").splitlines()
    exact = [i for i, line in enumerate(lines, start=1) if line.strip() == needle]
    return exact[0] if exact else next(i for i, line in enumerate(lines, start=1) if needle in line)


# ------------------------------------------------------------------------------------------- shipped specs

def test_heartbench_taxonomy(spec: BenchmarkSpec) -> None:
    assert spec.name == "heartbench" and spec.locale == "zh" and spec.version == "1.0"
    assert spec.dir == HB and spec.files == [HB / "benchmark.yaml"]
    dims = spec.dimensions_map()
    assert list(dims) == ["personality", "emotion", "social", "motivation", "morality"]
    assert [len(v) for v in dims.values()] == [7, 4, 2, 1, 1]
    assert len(spec.ability_ids()) == len(set(spec.ability_ids())) == 15
    assert spec.ability_dimension()["emotional_coping"] == "emotion"
    assert len(spec.label_to_ability()) == 15
    assert spec.label_to_rule() == {"其他": "role_confusion"}
    rule = spec.failure_rules[0]
    assert (rule.effect, rule.fires_when) == ("zero_question", "hit")
    assert spec.scoring.formula == "log_normalised" and spec.scoring.scale == 100
    assert spec.data.sha256 == "ef14a94d29668342a4a40039c21e3cb42bba528c31181d8d61fdf6caf420af6e"
    assert "6c79c0809c0c2dfe78dc090dd0685bd6ef69f245" in (spec.data.url or "")
    assert spec.judge.model.model == "anthropic/claude-sonnet-4-5-20250929"
    assert spec.report.decay is not None and spec.report.decay.base == "hard"
    assert len(spec.report.scenarios) == 5
    assert "2512.21849" in (spec.citation or "")


def test_load_by_yaml_path_and_resolved_dump() -> None:
    spec = load_spec(str(HB / "benchmark.yaml"))
    dump = spec.resolved()
    assert dump["report"]["decay"] == {"from": "normal", "to": "hard", "base": "hard"}
    assert dump["_files"] == [str(HB / "benchmark.yaml")] and dump["name"] == "heartbench"


def test_labels_and_locale_fallback(spec: BenchmarkSpec) -> None:
    dim = spec.taxonomy.dimensions[0]
    assert spec.label(dim, "zh") == "人格"
    assert spec.label(dim.labels, "en") == "Personality"
    assert spec.label(dim.labels, "fr") == "Personality"  # falls back to en
    assert spec.label({"zh": "只有中文"}, "fr") == "只有中文"  # then to the first one
    assert spec.label(dim) == "人格"  # default: the spec's locale


def test_templates_render_with_the_agreed_variables(spec: BenchmarkSpec) -> None:
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    dialogue = [{"role": "user", "speaker": "A", "content": "你好"},
                {"role": "other", "speaker": "B", "content": "嗯"},
                {"role": "user", "speaker": "A", "content": "我很累"}]
    criteria = [{"index": 1, "label": "温暖", "weight": 3, "text": "表达共情"},
                {"index": 2, "label": "其他", "weight": None, "text": "扮演用户"}]
    judge = env.from_string(spec.read_template("judge.template")).render(
        dialogue=dialogue, response="我在呢", criteria=criteria, n_criteria=2, question=None, tag="t1")
    assert "1. [温暖][3] 表达共情" in judge and "2. [其他][—] 扮演用户" in judge
    assert "共 2 条" in judge and '"criteria"' in judge and '"met"' in judge and "B：嗯" in judge
    assert "<response-t1>\n我在呢\n</response-t1>" in judge  # the reply is wrapped in a tag it cannot close
    cand = env.from_string(spec.read_template("candidate.j2")).render(dialogue=dialogue, question=None)
    assert "A：我很累" in cand and "Markdown" in cand
    assert spec.read_template("judge.system").startswith("你是")


def test_official_variant_extends(spec: BenchmarkSpec) -> None:
    off = load_spec("heartbench_official", search_path=[BENCH])
    assert off.name == "heartbench_official"
    assert off.files == [HB / "benchmark.yaml", BENCH / "heartbench_official" / "benchmark.yaml"]
    assert off.failure_rules[0].fires_when == "hit_positive_weight"
    assert off.taxonomy == spec.taxonomy and off.data == spec.data and off.judge == spec.judge
    assert off.template_path("judge.template") == HB / "judge.j2"  # declared by the base file
    assert "official" in off.description


# ------------------------------------------------------------------------------------- extends and merging

def test_deep_merge() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    assert deep_merge(base, {"a": {"c": [3]}, "e": None}) == {"a": {"b": 1, "c": [3]}, "d": 1, "e": None}


def test_extends_overrides_one_key(tmp_path: Path, spec: BenchmarkSpec) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    (d / "benchmark.yaml").write_text("extends: heartbench\nname: mine\nscoring: {formula: linear}\n")
    mine = load_spec(d, search_path=[BENCH])
    assert mine.scoring.formula == "linear" and mine.scoring.scale == 100  # mapping merged, sibling kept
    assert mine.taxonomy == spec.taxonomy and mine.candidate == spec.candidate and mine.report == spec.report
    assert mine.dir == d and mine.template_path("candidate.template") == HB / "candidate.j2"


def test_extends_own_template_resolves_locally(tmp_path: Path) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    (d / "judge.j2").write_text("mine {{ response }}")
    (d / "benchmark.yaml").write_text("extends: heartbench\nname: mine\njudge: {template: judge.j2}\n")
    mine = load_spec(d, search_path=[BENCH])
    assert mine.read_template("judge.template") == "mine {{ response }}"
    assert mine.read_template("judge.j2") == "mine {{ response }}"
    assert mine.judge.system == "judge_system.j2" and mine.template_path("judge.system") == HB / "judge_system.j2"
    (d / "judge.j2").unlink()
    msg = error_of(d)
    assert f"{d / 'benchmark.yaml'}:3" in msg and "judge.template" in msg and "not found" in msg


def test_extends_cycle(tmp_path: Path) -> None:
    for a, b in (("x", "y"), ("y", "x")):
        (tmp_path / a).mkdir()
        (tmp_path / a / "benchmark.yaml").write_text(f"name: {a}\nextends: {b}\n")
    msg = error_of(tmp_path / "x")
    assert "extends cycle: x -> y -> x" in msg


def test_extends_unknown(tmp_path: Path) -> None:
    d = tmp_path / "v"
    d.mkdir()
    (d / "benchmark.yaml").write_text("name: v\nextends: heartbenc\n")
    with pytest.raises(SpecError) as info:
        load_spec(d, search_path=[BENCH])
    msg = str(info.value)
    assert f"{d / 'benchmark.yaml'}:2: extends: unknown benchmark (got 'heartbenc')" in msg
    assert "known benchmarks: heartbench, " in msg and "heartbench_official" in msg
    assert "did you mean 'heartbench'" in msg
    assert str(BENCH) in msg


# ------------------------------------------------------------------------------------------------ search path

def test_search_path_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env1, env2, extra = tmp_path / "e1", tmp_path / "e2", tmp_path / "x"
    monkeypatch.setenv("RUBRIC_ENGINE_BENCHMARKS", f"{env1}{__import__('os').pathsep}{env2}")
    monkeypatch.chdir(tmp_path)
    path = benchmark_search_path([extra])
    assert path[:4] == [extra, env1, env2, tmp_path / "benchmarks"]
    # last: the benchmarks installed with the package (this checkout's, for an editable install)
    assert len(path) == 5
    assert (path[-1] / "heartbench" / "benchmark.yaml").read_bytes() == (BENCH / "heartbench" / "benchmark.yaml").read_bytes()


def test_search_path_shadowing_and_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = variant(tmp_path / "mine", "name: heartbench", "name: heartbench", name="heartbench")
    monkeypatch.setenv("RUBRIC_ENGINE_BENCHMARKS", str(own.parent))
    assert list_benchmarks()["heartbench"] == own  # earlier dirs shadow the packaged one
    assert load_spec("heartbench").dir == own
    assert load_spec(str(HB)).dir == HB  # a path is a path
    with pytest.raises(SpecError) as info:
        load_spec("nope", search_path=[BENCH])
    assert "unknown benchmark (got 'nope')" in str(info.value) and "searched: " in str(info.value)


# ----------------------------------------------------------------------------------------- error messages

@pytest.mark.parametrize(
    ("old", "new", "needle", "expected"),
    [
        ("formula: log_normalised", "formula: log_normalized", "formula:",
         ["scoring.formula: unknown formula (got 'log_normalized')", "known formulas: log_normalised, linear",
          "did you mean 'log_normalised'"]),
        ("formula: log_normalised", "formul: log_normalised", "formul:",
         ["scoring.formul: unknown key (got 'formul')", "allowed keys here: formula, params, scale",
          "did you mean 'formula'"]),
        ("fires_when: hit ", "fires_when: always ", "fires_when:",
         ["failure_rules[0].fires_when: unknown value (got 'always')", "'hit' or 'hit_positive_weight'"]),
        ("effect: zero_question", "effect: halve", "effect:",
         ["failure_rules[0].effect: unknown value (got 'halve')", "zero_question"]),
        ("mode: single_message", "mode: multi", "mode:",
         ["candidate.mode: unknown value (got 'multi')", "'single_message' or 'chat_turns'"]),
        ("{id: humor,", "{id: warmth,", "{id: warmth, labels: {en: Humor",
         ["taxonomy.dimensions[0].abilities[5].id: duplicate ability/rule id (got 'warmth')",
          "already used at taxonomy.dimensions[0].abilities[2].id"]),
        ("{id: morality, labels: {en: Morality, zh: 道德}, data_labels: [道德]}",
         "{id: morality, labels: {en: Morality, zh: 道德}, data_labels: [动机]}", "{id: morality,",
         ["taxonomy.dimensions[4].abilities[0].data_labels[0]: data label used twice (got '动机')",
          "already mapped at taxonomy.dimensions[3].abilities[0].data_labels[0]"]),
        ("template: judge.j2", "template: nope.j2", "template: nope.j2",
         ["judge.template: template file not found (got 'nope.j2')", "nope.j2 or fix the path"]),
        ("{id: autonomy,", "{id: Autonomy,", "{id: Autonomy,",
         ["taxonomy.dimensions[0].abilities[4].id: ids must be snake_case ASCII (got 'Autonomy')"]),
        ("{id: autonomy,", "{idx: autonomy,", "{idx: autonomy,",
         ["abilities[4].idx: unknown key (got 'idx')", "allowed keys here: data_labels, id, labels",
          "did you mean 'id'"]),
        ("anthropic/claude-sonnet-4-5-20250929", "anthropic/claude-sonet-4-5-20250929", "claude-sonet",
         ["judge.model.model: unknown anthropic model (got 'anthropic/claude-sonet-4-5-20250929')",
          "did you mean anthropic/claude-sonnet-4-5-20250929", "set api_base"]),
        ("base: hard", "base: easy", "base: easy",
         ["report.decay.base: base must be the 'from' or the 'to' subset (got 'easy')"]),
        ("decay: {from: normal", "decay: {from: easy", "decay: {from: easy",
         ["report.decay.from: unknown subset (got 'easy')", "data.subsets: normal, hard"]),
        ("  roles: {A: user, B: other}", "  roles: {A: other, B: other}", "roles:",
         ["data.roles: no role maps to 'user'"]),
        ("  scale: 100", "  scale: 100\n  scale: 10", "scale: 10",
         ["scoring.scale: duplicate key", "already set at line"]),
        ("system: judge_system.j2", "system: judge_system.j2\n  judge_model: x", "judge_model:",
         ["judge.judge_model: unknown key (got 'judge_model')", "allowed keys here: max_reasks, model, repeats, scope, system,"]),
    ],
)
def test_bad_spec_messages(tmp_path: Path, old: str, new: str, needle: str, expected: list[str]) -> None:
    d = variant(tmp_path, old, new)
    msg = error_of(d)
    line = line_of(d, needle)
    assert msg.startswith(f"{d / 'benchmark.yaml'}:{line}: "), msg
    for part in expected:
        assert part in msg, msg


def test_yaml_syntax_error_has_line(tmp_path: Path) -> None:
    d = variant(tmp_path, "  max_reasks: 2", "  max_reasks: [2")
    msg = error_of(d)
    start = line_of(d, "max_reasks: [2")
    assert "YAML syntax error" in msg and f"at line {start})" in msg and str(d / "benchmark.yaml") in msg


def test_missing_required_key(tmp_path: Path) -> None:
    d = variant(tmp_path, "  template: judge.j2\n", "")
    msg = error_of(d)
    assert "judge.template: required key is missing" in msg and "add `template:`" in msg


def test_model_with_api_base_is_not_checked(tmp_path: Path) -> None:
    d = variant(tmp_path, "model: anthropic/claude-sonnet-4-5-20250929}",
                "model: openai/my-local-judge, api_base: 'http://127.0.0.1:1/v1'}")
    assert load_spec(d).judge.model.api_base == "http://127.0.0.1:1/v1"
    d2 = variant(tmp_path, "model: anthropic/claude-sonnet-4-5-20250929}", "model: claude}", name="v2")
    assert "must be a LiteLLM id 'provider/model'" in error_of(d2)


def test_not_a_spec_dir(tmp_path: Path) -> None:
    msg = error_of(tmp_path)
    assert str(tmp_path) in msg and "no benchmark.yaml here" in msg
