"""A sweep through Hydra's Ray launcher sent to an existing cluster (`hydra.launcher.ray.init.address=HOST:PORT`)
runs, as docs/operations.md ("Sweeps on one machine or on Ray") says, with no launcher setting beyond the address.

Why: the launcher asks `ray.init` for a small object store by default, and Ray refuses any object store size when it
joins an existing cluster ("object_store_memory must not be provided"), so the documented command failed before
its first job. The cluster is a real one: `ray start --head` in a subprocess with its own temporary directory (so
nothing else on the machine finds it or is found by it), ended by killing exactly its processes.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from conftest import MINI, REAL_EXE

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the ray extra is not installed")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _processes_under(marker: str) -> set[int]:
    """Every process whose command line names `marker` (the cluster's temporary directory), and their children."""
    parents: dict[int, int] = {}
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        parents[int(entry)] = int(stat[stat.rindex(")") + 2:].split()[1])
        if marker.encode() in cmdline:
            found.add(int(entry))
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


@pytest.fixture
def head(env: dict[str, str]) -> Iterator[tuple[str, dict[str, str]]]:
    """(address, environment) of a one-node Ray cluster started with `ray start --head`."""
    temp = tempfile.mkdtemp(prefix="re-ray-")  # short: Ray's socket paths live under it
    env = {**env, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    port = _free_port()
    ray_exe = str(Path(sys.executable).with_name("ray"))
    try:
        subprocess.run([ray_exe, "start", "--head", f"--port={port}", "--num-cpus=1", f"--temp-dir={temp}",
                        "--include-dashboard=false", "--node-ip-address=127.0.0.1"], env=env, check=True,
                       capture_output=True, timeout=180)
        yield f"127.0.0.1:{port}", env
    finally:
        pids = _processes_under(temp)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.2)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp, ignore_errors=True)


def test_a_ray_launcher_sweep_joins_an_existing_cluster_with_only_its_address(head: tuple[str, dict[str, str]],
                                                                            tmp_path: Path) -> None:
    address, env = head
    sweep = tmp_path / "sweep"
    res = subprocess.run([REAL_EXE, "-m", "hydra/launcher=ray", f"hydra.launcher.ray.init.address={address}",
                          "candidate=mock", "judge=mock", f"data.path={MINI}", "limit=2", "progress=none",
                          "bootstrap.samples=50", "candidate.name=m1,m2", f"hydra.sweep.dir={sweep}"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(list(sweep.glob("*/summary.json"))) == 2, res.stderr[-3000:]
    assert (sweep / "leaderboard.json").is_file()
