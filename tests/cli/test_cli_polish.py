"""Small things a new user reads, through the console script: `--help` lists the user's own entries and every
key as the `key=value` a command line writes, the provenance shows the command as typed, a length analysis
with nothing to say says why in one line, the pairwise mock baseline has its own name, `validate` names the
language of the labels it shows, `rescore` keeps dimensions and abilities apart, the leaderboard's error
column says what it counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO, run_cli

pytestmark = pytest.mark.slow


def test_help_lists_the_users_entries_and_keys_as_typed(tmp_path: Path, env: dict[str, str]) -> None:
    own = tmp_path / "conf" / "candidate"
    own.mkdir(parents=True)
    (own / "my-local.yaml").write_text("name: mine\nmodel: mock/mine\napi_base: null\napi_key_env: null\nparams: {}\n")
    res = run_cli(["--help"], env, cwd=tmp_path, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    candidate = next(x for x in lines if x.startswith("candidate: "))
    assert "my-local (yours)" in candidate and "gpt-4o" in candidate
    for typed in ("cache.dir=null", "bootstrap.samples=1000", "baseline=null", "data.path=null", "dry_run=false"):
        assert typed in lines, typed
    assert "  entry: null" not in res.stdout and "cache:" not in lines  # no YAML with paths nobody types
    assert "of the source distribution" not in res.stdout and "pip download" in res.stdout


def test_provenance_shows_the_command_as_typed(tmp_path: Path, env: dict[str, str]) -> None:
    own = tmp_path / "conf" / "candidate"
    own.mkdir(parents=True)
    (own / "my-local.yaml").write_text("name: mine\nmodel: mock/mine\napi_base: null\napi_key_env: null\nparams: {}\n")
    run = tmp_path / "run"
    res = run_cli(["benchmark=heartbench_en", "candidate=my-local", "judge=mock", "limit=4", "progress=none",
                   f"hydra.run.dir={run}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    command = json.loads((run / "summary.json").read_text())["provenance"]["command"]
    assert "candidate=my-local" in command and "hydra.searchpath" not in command, command
    assert "hydra.searchpath" not in (run / "report.html").read_text(encoding="utf-8")
    # the length analysis of mock replies (all one length): one line saying why, not a table of dashes
    assert "reply length vs score: not computed: the replies' lengths or the question scores do not vary" \
        in res.stdout, res.stdout
    assert "Reply length vs score (Spearman" not in res.stdout


def test_the_mock_baseline_has_its_own_name(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli(["benchmark=arena_hard", f"data.path={REPO / 'tests' / 'data' / 'pairwise_mini.jsonl'}",
                   "baseline=mock", "candidate=mock", "judge=mock", "progress=none",
                   f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "win rate against mock-baseline" in res.stdout, res.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["pairwise"]["baseline"]["name"] == "mock-baseline"


def test_validate_names_the_language_of_its_labels(tmp_path: Path, env: dict[str, str]) -> None:
    spec = tmp_path / "benchmarks" / "quiz_es"
    spec.mkdir(parents=True)
    src = REPO / "tests" / "data" / "choice_mini"
    for name in ("candidate.j2", "choice_mini.jsonl"):
        (spec / name).write_bytes((src / name).read_bytes())
    text = (src / "benchmark.yaml").read_text(encoding="utf-8")
    assert "labels: {en: Topics}" in text and "locale: en" in text
    text = text.replace("name: choice_mini", "name: quiz_es").replace("locale: en", "locale: es")
    (spec / "benchmark.yaml").write_text(text.replace("labels: {en: Topics}",
                                                      "labels: {es: Temas}, groups: {'topic:space': {es: Espacio}}"))
    res = run_cli(["validate", "quiz_es"], env, cwd=tmp_path, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "Label (es)" in res.stdout and "English" not in res.stdout and "Espacio" in res.stdout, res.stdout


def test_rescore_shows_dimensions_and_abilities_apart(tmp_path: Path, env: dict[str, str]) -> None:
    run = tmp_path / "run"
    res = run_cli(["benchmark=heartbench_en", "candidate=mock", "judge=mock", "progress=none",
                   f"hydra.run.dir={run}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    res = run_cli(["rescore", str(run), "scoring.formula=linear"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "Dimensions (rank among the dimensions)" in out and "Abilities (rank among the abilities)" in out, out
    dims, abilities = out.split("Abilities (rank among the abilities)")
    assert "Emotion " in dims and "Warmth" not in dims and "Warmth" in abilities
    compare = json.loads((run / "rescore-linear" / "compare.json").read_text())
    assert {row["kind"] for row in compare["runs"][0]["rows"]} == {"dimension", "ability"}
    # the leaderboard's error column says what it counts (docs/leaderboards.md explains it)
    board = run_cli(["leaderboard", str(run), f"out={tmp_path / 'board'}", "bootstrap.samples=20"], env, cwd=tmp_path)
    assert board.returncode == 0, board.stderr
    assert "Err j/c" not in board.stdout and "Errors judge/cand." in " ".join(board.stdout.split()), board.stdout
    assert "Errors: judge / candidate" in (tmp_path / "board" / "leaderboard.md").read_text(encoding="utf-8")
