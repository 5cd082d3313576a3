"""Before the first call, through the console script: every model's key is checked (the spec's declared
judge, each juror, score-only runs, the localize model, every job of a sweep), and a run rejected before it
wrote anything leaves no run directory behind (or, in a sweep, a job directory marked rejected)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import EXE, MINI, model_args, run_cli
from fakeserver import FakeServer
from test_cli import Script

pytestmark = pytest.mark.slow


def _debris(root: Path) -> list[str]:
    """Everything a run left in the working directory (the private cache and data cache excepted)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if not p.relative_to(root).parts[0] in ("cache", "xdg", "first"))


def _one_error(stderr: str, needle: str) -> None:
    errors = [line for line in stderr.splitlines() if line.startswith("rubric-engine: ")]
    assert len(errors) == 1 and needle in errors[0], stderr
    assert "Traceback" not in stderr and "HTTP 401" not in stderr and "loading LiteLLM" not in stderr, stderr


@pytest.mark.parametrize("args, variable", [
    # nobody named the judge: the spec declares an Anthropic one
    (["benchmark=heartbench_en", "candidate=mock", "limit=2"], "ANTHROPIC_API_KEY"),
    # a jury: each juror's key
    (["benchmark=heartbench_en", "candidate=mock", "judge=[mock,gpt-4o]", "limit=2"], "OPENAI_API_KEY"),
    # the candidate's, with a mock judge
    (["benchmark=heartbench_en", "candidate=gpt-4.1", "judge=mock", "limit=2"], "OPENAI_API_KEY"),
])
def test_a_missing_key_is_one_line_before_anything(tmp_path: Path, env: dict[str, str], args: list[str],
                                                   variable: str) -> None:
    res = run_cli(args, env, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    _one_error(res.stderr, f"export {variable}=")
    assert _debris(tmp_path) == []  # no outputs/<benchmark>/<time>/ left behind


def test_score_only_run_checks_the_declared_judge(tmp_path: Path, env: dict[str, str]) -> None:
    first = tmp_path / "first"
    made = run_cli(["benchmark=heartbench_en", "candidate=mock", "judge=mock", "limit=2", "progress=none",
                    f"hydra.run.dir={first}"], env, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    res = run_cli(["benchmark=heartbench_en", "stage=score", f"from_run={first}", "limit=2"], env, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    _one_error(res.stderr, "export ANTHROPIC_API_KEY=")
    assert _debris(tmp_path) == []
    # a rejected re-run into a directory holding results leaves those results alone
    before = sorted(p.name for p in first.iterdir())
    res = run_cli(["benchmark=heartbench_en", "candidate=gpt-4.1", "judge=mock", "limit=2",
                   f"hydra.run.dir={first}"], env, cwd=tmp_path)
    assert res.returncode == 2 and sorted(p.name for p in first.iterdir()) == before, res.stderr


def test_localize_checks_its_model_key(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli(["localize", "source=heartbench_en", "target=heartbench_xx", "locale=fr", "model=openai/gpt-4o",
                   "limit=1", f"out={tmp_path / 'loc'}"], env, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    _one_error(res.stderr, "export OPENAI_API_KEY=")
    assert not (tmp_path / "loc").exists()


def test_a_sweep_with_one_job_lacking_its_key_starts_no_job(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Script()) as srv:
        res = run_cli(["-m", "benchmark=heartbench", f"data.path={MINI}", "limit=2", "progress=none",
                       f"hydra.sweep.dir={tmp_path / 'sweep'}", *model_args(srv.url)[:4],
                       "candidate.api_key_env=FAKE_KEY,NOT_SET_KEY", *model_args(srv.url)[5:]], env, cwd=tmp_path)
        assert not srv.requests, "a job was started before the sweep was refused"
    assert res.returncode == 2, res.stderr
    _one_error(res.stderr, "export NOT_SET_KEY=")
    assert "candidate.api_key_env=NOT_SET_KEY" in res.stderr
    assert _debris(tmp_path) == []


@pytest.mark.parametrize("args, needle", [
    (["benchmark=heartbnech_en", "candidate=mock", "judge=mock"], "did you mean 'heartbench_en'"),
    (["benchmark=heartbench_en", "candidate=mock", "judge=mock", "limit=-1"], "limit=-1 is not valid"),
    (["benchmark=heartbench_en", "candidate=mock", "judge=mock", "stage=judge"], "stage='judge' is not a stage"),
])
def test_a_rejected_run_leaves_no_directory(tmp_path: Path, env: dict[str, str], args: list[str],
                                            needle: str) -> None:
    (tmp_path / "outputs" / "heartbench_en" / "earlier").mkdir(parents=True)  # someone's earlier run stays
    (tmp_path / "outputs" / "heartbench_en" / "earlier" / "summary.json").write_text("{}")
    res = run_cli(args, env, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    _one_error(res.stderr, needle)
    assert _debris(tmp_path) == ["outputs", "outputs/heartbench_en", "outputs/heartbench_en/earlier",
                                 "outputs/heartbench_en/earlier/summary.json"]


def test_a_bad_spec_leaves_no_directory(tmp_path: Path, env: dict[str, str]) -> None:
    spec = tmp_path / "specs" / "broken"
    spec.mkdir(parents=True)
    (spec / "benchmark.yaml").write_text("extends: heartbench_en\nname: broken\nscorring: {scale: 10}\n")
    res = run_cli([f"benchmark={spec}", "candidate=mock", "judge=mock", "limit=1"], env, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert _debris(tmp_path) == ["specs", "specs/broken", "specs/broken/benchmark.yaml"]


def test_a_rejected_sweep_job_is_marked_and_the_leaderboard_says_so(tmp_path: Path, env: dict[str, str]) -> None:
    sweep = tmp_path / "sweep"
    res = run_cli(["-m", "benchmark=heartbench_en,heartbnech_en", "candidate=mock", "judge=mock", "limit=2",
                   "progress=none", "bootstrap.samples=20", f"hydra.sweep.dir={sweep}"], env, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    marked = list(sweep.glob("*/rejected.txt"))
    assert len(marked) == 1 and "unknown benchmark" in marked[0].read_text(), res.stderr
    assert not list(sweep.glob("*/error.txt"))
    board = run_cli(["leaderboard", str(sweep)], env, cwd=tmp_path)
    assert "rejected: " in board.stdout + board.stderr and "did not finish" not in board.stdout + board.stderr
    warnings = json.loads((sweep / "leaderboard.json").read_text())["warnings"]
    assert any("rejected: " in w and "unknown benchmark" in w for w in warnings), warnings
    assert EXE


def test_a_run_refused_for_a_directory_in_use_leaves_that_directory_alone(tmp_path: Path,
                                                                         env: dict[str, str]) -> None:
    """The lock file counts as debris of a rejected run, but a directory whose lock another process holds
    (a run that has not written anything yet) is that process's: the refused second run must not remove it."""
    import fcntl
    import os

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    fd = os.open(run_dir / ".rubric-engine.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        res = run_cli(["benchmark=heartbench_en", "candidate=mock", "judge=mock", "limit=2",
                       f"hydra.run.dir={run_dir}"], env, cwd=tmp_path)
        assert res.returncode == 2, res.stderr
        _one_error(res.stderr, "in use by another rubric-engine process")
        assert (run_dir / ".rubric-engine.lock").exists()
    finally:
        os.close(fd)
    # once the owner is gone, a run rejected before it wrote anything removes its directory as before
    res = run_cli(["benchmark=heartbench_en", "candidate=gpt-4.1", "judge=mock", "limit=2",
                   f"hydra.run.dir={run_dir}"], {k: v for k, v in env.items() if k != "OPENAI_API_KEY"}, cwd=tmp_path)
    assert res.returncode == 2 and not run_dir.exists(), res.stderr


@pytest.mark.parametrize("candidate", [
    # an entry chosen, then its model replaced by a hosted provider's: no longer a mock, its provider's key
    ["candidate=mock", "candidate.model=openai/gpt-4o"],
    # the entry's key variable deleted: the provider's own variable is what LiteLLM would read
    ["candidate=gpt-4o", "~candidate.api_key_env"],
])
def test_a_replaced_model_or_deleted_key_variable_is_still_checked(tmp_path: Path, env: dict[str, str],
                                                                   candidate: list[str]) -> None:
    with FakeServer(Script()) as srv:
        res = run_cli(["benchmark=heartbench", f"data.path={MINI}", "limit=2", "progress=none", *candidate,
                       *model_args(srv.url)[5:]], env, cwd=tmp_path)
        assert srv.requests == [], "a call was made before the key check"
    assert res.returncode == 2, res.stderr
    _one_error(res.stderr, "export OPENAI_API_KEY=")
    assert _debris(tmp_path) == []


def test_a_misspelt_benchmark_keeps_its_hint_whatever_the_search_path(tmp_path: Path, env: dict[str, str]) -> None:
    """The error line is capped at 400 characters: the "did you mean" must not sit behind a long search path."""
    deep = tmp_path / ("d" * 120) / ("e" * 120) / ("f" * 120)
    deep.mkdir(parents=True)
    res = run_cli(["validate", "benchmark=heartbnech_en", f"benchmark_dirs=[{deep}]"], env, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    _one_error(res.stderr, "did you mean 'heartbench_en'")
