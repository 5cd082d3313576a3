"""A sweep under Hydra's Ray launcher with the default limits=auto: each job runs in a Ray worker, so its clients
take the cluster's limits without being told (the summary of every job says its gate was the shared one)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from conftest import MINI, run_cli
from fakeserver import FakeServer

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None,
                                 reason="the ray extra is not installed")]


def test_ray_launcher_jobs_share_the_clusters_limits_by_default(tmp_path: Path, env: dict[str, str]) -> None:
    sweep = tmp_path / "sweep"
    with FakeServer(latency=0.01) as srv:
        res = run_cli(["-m", "benchmark=heartbench_en", f"data.path={MINI}", "limit=4", "progress=none",
                       "judge=mock", "concurrency=auto", "bootstrap.samples=100", f"hydra.sweep.dir={sweep}",
                       "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2",
                       "+hydra.launcher.ray.init.include_dashboard=false",
                       "+hydra.launcher.ray.init._node_ip_address=127.0.0.1", "+hydra.launcher.ray.remote.num_cpus=1",
                       "candidate=openai_compatible", "candidate.model=openai/a,openai/b", f"candidate.api_base={srv.url}",
                       "candidate.api_key_env=FAKE_KEY"], {**env, "RAY_USAGE_STATS_ENABLED": "0"}, timeout=600)
        asked = len(srv.requests)
    assert res.returncode == 0, res.stderr
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith("."))
    gates = [json.loads((j / "summary.json").read_text())["calls"]["candidate"]["concurrency"] for j in jobs]
    assert asked == 8 and len(gates) == 2
    assert all(g["scope"] == "cluster" and g["mode"] == "auto" for g in gates), gates
