"""What a run leaves in its directory: no lock file once it has ended, and a dry run no directory at all.

Why through the console script: the lock file (store/layout.RunLock) and Hydra's run directory are made by
the command line around the engine; only a real command shows what is left behind. `view` still tells a
running run by its lock (tests/results/test_view.py holds that test); here the runs have ended.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import MINI, run_cli

pytestmark = pytest.mark.slow

LOCK = ".rubric-engine.lock"


def test_a_finished_run_leaves_no_lock_file(tmp_path: Path, env: dict[str, str]) -> None:
    run = tmp_path / "run"
    res = run_cli(["benchmark=heartbench", f"data.path={MINI}", "candidate=mock", "judge=mock", "limit=2",
                   "progress=none", f"hydra.run.dir={run}"], env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (run / "summary.json").is_file() and not (run / LOCK).exists()
    # and the same command into it again (a resume of a finished run) takes and removes it again
    res = run_cli(["benchmark=heartbench", f"data.path={MINI}", "candidate=mock", "judge=mock", "limit=2",
                   "progress=none", f"hydra.run.dir={run}"], env)
    assert res.returncode == 0 and not (run / LOCK).exists()


def test_a_failed_run_leaves_no_lock_file(tmp_path: Path, env: dict[str, str]) -> None:
    """The candidate's endpoint refuses every connection: the run stops after claiming its directory."""
    run = tmp_path / "run"
    res = run_cli(["benchmark=heartbench", f"data.path={MINI}", "limit=2", "progress=none", f"hydra.run.dir={run}",
                   "candidate=openai_compatible", "candidate.model=openai/x", "candidate.api_base=http://127.0.0.1:9/v1",
                   "judge=mock", "max_retries=0"], env)
    assert res.returncode != 0
    assert (run / "manifest.json").is_file(), res.stderr[-2000:]
    assert not (run / LOCK).exists()


@pytest.mark.parametrize("where", ["default", "given"])
def test_a_dry_run_leaves_no_run_directory(tmp_path: Path, env: dict[str, str], where: str) -> None:
    args = ["benchmark=heartbench", f"data.path={MINI}", "candidate=mock", "judge=mock", "dry_run=true"]
    if where == "given":
        args.append(f"hydra.run.dir={tmp_path / 'run'}")
    res = run_cli(args, env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "run").exists(), sorted(
        str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
