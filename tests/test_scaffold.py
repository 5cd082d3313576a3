"""`rubric-engine new`: creates a loadable variant directory, refuses to overwrite, cleans up on failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from rubric_engine.authoring.scaffold import default_parent
from rubric_engine.cli.mains import new_main as new_command
from rubric_engine.errors import ConfigError, SpecError
from rubric_engine.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


@pytest.fixture(autouse=True)
def _search_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUBRIC_ENGINE_BENCHMARKS", str(BENCH))


def test_creates_a_loadable_variant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert new_command(["my_variant", "extends=heartbench", f"dir={tmp_path}", "locale=en"]) == 0
    d = tmp_path / "my_variant"
    assert sorted(p.name for p in d.iterdir()) == ["benchmark.yaml", "candidate.j2", "judge.j2", "judge_system.j2"]
    parent = load_spec("heartbench")
    spec = load_spec(d)
    assert (spec.name, spec.locale, spec.extends) == ("my_variant", "en", "heartbench")
    assert spec.taxonomy == parent.taxonomy and spec.data == parent.data and spec.scoring == parent.scoring
    for field in ("candidate.template", "judge.template", "judge.system"):
        assert spec.template_path(field).parent == d
        assert spec.template_path(field).read_text("utf-8") == parent.template_path(field).read_text("utf-8")
    text = (d / "benchmark.yaml").read_text("utf-8")
    assert "# data:" in text and "# scoring:" in text and "lists" in text
    out = capsys.readouterr().out
    assert f"rubric-engine validate benchmark=my_variant benchmark_dirs=[{tmp_path}]" in out


def test_key_value_form_and_default_parent(tmp_path: Path) -> None:
    assert default_parent() == "heartbench"  # conf/config.yaml's default benchmark
    assert new_command(["v2", f"dir={tmp_path}"]) == 0
    spec = load_spec(tmp_path / "v2")
    assert spec.extends == "heartbench" and spec.locale == load_spec("heartbench").locale


def test_variant_of_a_variant(tmp_path: Path) -> None:
    assert new_command(["en_plus", "extends=heartbench_en", f"dir={tmp_path}"]) == 0
    spec = load_spec(tmp_path / "en_plus")
    assert spec.locale == "en" and spec.data_path().resolve() == (ROOT / "data" / "heartbench_en_sample.jsonl")
    assert "Rubric (" in (tmp_path / "en_plus" / "judge.j2").read_text("utf-8")


def test_refuses_to_overwrite(tmp_path: Path) -> None:
    d = tmp_path / "taken"
    d.mkdir()
    (d / "benchmark.yaml").write_text("name: mine\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="already exists"):
        new_command(["taken", f"dir={tmp_path}"])
    assert (d / "benchmark.yaml").read_text("utf-8") == "name: mine\n" and len(list(d.iterdir())) == 1


def test_unknown_parent_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="unknown benchmark"):
        new_command(["orphan", "extends=no_such_bench", f"dir={tmp_path}"])
    assert not (tmp_path / "orphan").exists()


@pytest.mark.parametrize("argv, message", [
    ([], "missing NAME"),
    (["a/b"], "not a valid benchmark name"),
    (["x", "y"], "unexpected argument 'y'"),
    (["x", "--extends"], "unknown option '--extends'; write extends=VALUE"),
    (["x", "--force"], "unknown option '--force'"),
    (["x", "extend=heartbench"], "unknown key 'extend' \\(did you mean extends\\?\\)"),
    (["heartbench", "extends=heartbench"], "cannot extend itself"),
])
def test_bad_arguments(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        new_command(argv)


def test_cli_dispatches_new(tmp_path: Path) -> None:
    from rubric_engine.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["new", "via_cli", f"dir={tmp_path}"])
    assert info.value.code == 0 and (tmp_path / "via_cli" / "benchmark.yaml").is_file()
    with pytest.raises(SystemExit) as info:
        main(["new", "via_cli", f"dir={tmp_path}"])
    assert info.value.code == 2
