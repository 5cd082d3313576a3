"""`rubric-engine new`: creates a loadable benchmark (from scratch, or a variant with extends=), refuses to overwrite,
cleans up on failure."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import clean_env, run_cli
from rubric_engine.cli.mains import new_main as new_command
from rubric_engine.dataset.load import load_dataset
from rubric_engine.errors import ConfigError, SpecError
from rubric_engine.spec.load import load_spec

from conftest import REPO as ROOT
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


def test_without_extends_a_benchmark_starts_from_scratch(tmp_path: Path) -> None:
    """No silent variant of the configured benchmark: a generic English spec of its own, its sample data loaded."""
    assert new_command(["v2", f"dir={tmp_path}"]) == 0
    d = tmp_path / "v2"
    assert sorted(p.name for p in d.iterdir()) == ["benchmark.yaml", "data.jsonl", "judge.j2", "judge_system.j2"]
    spec = load_spec(d)
    assert (spec.name, spec.extends, spec.locale, spec.taxonomy) == ("v2", None, "en", None)
    assert len(load_dataset(spec, spec.data_path()).questions) == 3
    assert {"{{ tag }}", "dialogue", "response", "criteria"} <= set(re.findall(r"\{\{ tag \}\}|\w+",
                                                                               (d / "judge.j2").read_text("utf-8")))


@pytest.mark.slow
def test_from_scratch_runs_end_to_end_with_the_mock_models(tmp_path: Path) -> None:
    """Through the console script, as a newcomer types it: new, validate, a keyless run."""
    env = {k: v for k, v in clean_env(tmp_path).items() if k != "RUBRIC_ENGINE_BENCHMARKS"}
    made = run_cli(["new", "my_bench"], env, cwd=tmp_path)
    assert made.returncode == 0 and "from scratch" in made.stdout, made.stderr
    checked = run_cli(["validate", "my_bench"], env, cwd=tmp_path)
    assert checked.returncode == 0 and "3 questions" in checked.stdout, checked.stderr + checked.stdout
    run = tmp_path / "run"
    res = run_cli(["benchmark=my_bench", "candidate=mock", "judge=mock", f"hydra.run.dir={run}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["counts"]["scored"] == 3 and summary["counts"]["judge_errors"] == 0
    assert set(summary["breakdowns"]["topics"]) == {"topic:cooking", "topic:fitness", "topic:technology"}
    assert "Cooking" in res.stdout and "Technology" in res.stdout  # the groups' row labels


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


@pytest.mark.slow
def test_benchmark_dot_and_a_bare_directory_name(tmp_path: Path) -> None:
    """`benchmark=.` inside a spec directory and `benchmark=NAME` beside ./NAME/benchmark.yaml are accepted (the
    docs say a directory is); a name on the search path still means that benchmark."""
    env = {k: v for k, v in clean_env(tmp_path).items() if k != "RUBRIC_ENGINE_BENCHMARKS"}
    assert run_cli(["new", "mine", "dir=."], env, cwd=tmp_path).returncode == 0
    bare = run_cli(["benchmark=mine", "candidate=mock", "judge=mock", f"hydra.run.dir={tmp_path / 'run'}"], env,
                   cwd=tmp_path)
    assert bare.returncode == 0 and (tmp_path / "run" / "summary.json").is_file(), bare.stderr
    dot = run_cli(["validate", "benchmark=."], env, cwd=tmp_path / "mine")
    assert dot.returncode == 0 and "3 questions" in dot.stdout, dot.stderr
    run = run_cli(["benchmark=.", "candidate=mock", "judge=mock", "limit=1"], env, cwd=tmp_path / "mine")
    assert run.returncode == 0 and "outputs: outputs/mine/" in run.stdout.replace(str(tmp_path / "mine") + "/", "")
    assert run_cli(["new", "reference_qa", "dir=."], env, cwd=tmp_path).returncode == 0
    shipped = run_cli(["validate", "reference_qa"], env, cwd=tmp_path)
    assert shipped.returncode == 0 and str(tmp_path / "reference_qa") not in shipped.stdout, shipped.stdout
