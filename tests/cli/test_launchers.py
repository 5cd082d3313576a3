"""Sweeps through Hydra's parallel launchers (Ray, joblib): each job in its own run directory, the
leaderboard built when every job has ended, a failed job listed as not ranked and the sweep's exit
code non-zero.

Why these tests: with a parallel launcher the jobs run in other processes (Ray workers, loky
workers), so nothing a job sets in its own process reaches the sweep's process; and worker processes
are reused from one job to the next. The failing job is in the middle so a job runs after it in a
reused worker.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from test_cli import DATA, run_cli
from test_sweep import SweepScript

pytestmark = pytest.mark.slow


class FailingModel(SweepScript):
    """SweepScript, except that the model called `missing` does not exist (HTTP 404: the job fails)."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        if body["model"] == "missing":
            return Reply(status=404)
        return super().__call__(body)


def _needs(module: str, extra: str) -> None:
    """Skip with one line when the launcher is not installed, except in CI, which installs it."""
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is not installed; CI must install the extra: pip install \".[test,{extra}]\"")
        pytest.skip(f"{module} not installed (pip install \".[{extra}]\")")


def _sweep(tmp_path: Path, env: dict[str, str], launcher_args: list[str]) -> tuple[Any, Path, FakeServer]:
    sweep = tmp_path / "sweep"
    srv = FakeServer(FailingModel())
    with srv:
        res = run_cli(["-m", "benchmark=heartbench", f"data.path={DATA}", "limit=4", "progress=none",
                       "bootstrap.samples=100", f"hydra.sweep.dir={sweep}", *launcher_args,
                       "candidate=openai_compatible", "candidate.model=openai/good,openai/missing,openai/poor",
                       f"candidate.api_base={srv.url}", "candidate.api_key_env=FAKE_KEY",
                       "judge=openai_compatible", "judge.model=openai/judge", f"judge.api_base={srv.url}",
                       "judge.name=judge", "judge.api_key_env=FAKE_KEY"], env, timeout=600)
    return res, sweep, srv


def _check(res: Any, sweep: Path) -> None:
    assert res.returncode != 0, "a sweep with a failed job must not exit 0"
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(jobs) == 3, jobs
    done = {json.loads((j / "summary.json").read_text())["candidate"]["name"]: j for j in jobs
            if (j / "summary.json").is_file()}
    assert set(done) == {"good", "poor"}, res.stderr
    failed = [j for j in jobs if (j / "error.txt").is_file()]
    assert len(failed) == 1 and "missing" in failed[0].name, res.stderr
    assert len({j for j in jobs}) == 3  # each job its own run directory
    lb = json.loads((sweep / "leaderboard.json").read_text())
    assert [r["candidate"] for r in lb["rows"]] == ["good", "poor"]
    assert any("missing" in w and "not ranked" in w for w in lb["warnings"]), lb["warnings"]
    assert "not ranked" in res.stdout + res.stderr


def test_ray_launcher_sweep_with_a_failed_job(tmp_path: Path, env: dict[str, str]) -> None:
    _needs("hydra_plugins.hydra_ray_launcher", "ray")
    env = {**env, "RAY_USAGE_STATS_ENABLED": "0"}
    res, sweep, srv = _sweep(tmp_path, env, [
        # a local Ray instance, kept on loopback; address=local: with no address Ray joins the instance the
        # machine's last `ray start` (or another test's cluster) recorded, and refuses num_cpus= there
        "hydra/launcher=ray", "hydra.launcher.ray.init.address=local",
        "+hydra.launcher.ray.init.num_cpus=2", "+hydra.launcher.ray.init.include_dashboard=false",
        "+hydra.launcher.ray.init._node_ip_address=127.0.0.1", "+hydra.launcher.ray.remote.num_cpus=1",
    ])
    _check(res, sweep)
    assert srv.max_in_flight >= 1


def test_joblib_launcher_sweep_with_a_failed_job(tmp_path: Path, env: dict[str, str]) -> None:
    _needs("hydra_plugins.hydra_joblib_launcher", "joblib")
    res, sweep, _ = _sweep(tmp_path, env, ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"])
    _check(res, sweep)
    # a job whose worker died (killed, out of memory) leaves only Hydra's .hydra/: listed, not dropped
    (sweep / "3_dead" / ".hydra").mkdir(parents=True)
    (sweep / "3_dead" / ".hydra" / "config.yaml").write_text("{}\n", encoding="utf-8")
    again = run_cli(["leaderboard", str(sweep), f"out={tmp_path / 'lb'}", "bootstrap.samples=50"], env, timeout=300)
    assert again.returncode == 0, again.stderr
    warnings = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())["warnings"]
    assert any("3_dead" in w and "did not finish" in w and "not ranked" in w for w in warnings), warnings
    assert any("missing" in w and "run failed" in w for w in warnings), warnings


def test_unexpected_error_in_one_job_still_gives_a_leaderboard(tmp_path: Path, env: dict[str, str]) -> None:
    """A job that dies of an error the engine did not foresee (here a spec variant whose candidate
    template divides by zero) must not take the sweep's leaderboard with it: Hydra's sweeper would
    re-raise and skip on_multirun_end."""
    variant = tmp_path / "crashing"
    variant.mkdir()
    (variant / "benchmark.yaml").write_text("extends: heartbench\nname: crashing\n"
                                            "candidate: {template: candidate.j2}\n", encoding="utf-8")
    (variant / "candidate.j2").write_text("{{ 1 // 0 }}\n", encoding="utf-8")
    sweep = tmp_path / "sweep"
    with FakeServer(FailingModel()) as srv:
        res = run_cli(["-m", f"benchmark=heartbench,{variant}", f"data.path={DATA}", "limit=2", "progress=none",
                       "bootstrap.samples=50", f"hydra.sweep.dir={sweep}",
                       "candidate=openai_compatible", "candidate.model=openai/good", f"candidate.api_base={srv.url}",
                       "candidate.api_key_env=FAKE_KEY", "judge=openai_compatible", "judge.model=openai/judge",
                       f"judge.api_base={srv.url}", "judge.name=judge", "judge.api_key_env=FAKE_KEY"], env, timeout=600)
    assert res.returncode != 0
    # its template fails before any call: the job is marked rejected (rejected.txt), not failed midway
    errors = list(sweep.glob("*/rejected.txt"))
    assert len(errors) == 1 and "crashing" in errors[0].parent.name, res.stderr
    lb = json.loads((sweep / "leaderboard.json").read_text())
    assert [r["candidate"] for r in lb["rows"]] == ["good"]
    assert any("crashing" in w and "not ranked" in w for w in lb["warnings"]), lb["warnings"]
