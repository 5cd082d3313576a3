"""Mock sweeps for the judge-sweep and `view` tests, made by the console script: a candidate x judge sweep
(`judge_sweep`); and run directories of every state (`make_runs`): a mock sweep with two finished
jobs and two rejected ones (multirun/), a run that scored nothing because its candidate's server answers 400 (failed),
and a run stopped with SIGINT midway (interrupted), which is seen running while it hangs (outputs/)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from conftest import EXE, clean_env
from fakeserver import FakeServer, Reply

CANDIDATES = ("mock-a", "mock-b", "mock-c")
JUDGES = ("mock-judge", "mock-j2", "mock-j3")  # `judge=mock` is the shipped entry named mock-judge


def mock_entries(cwd: Path) -> None:
    """./conf model entries for mock candidates and two more mock judges (docs/authoring.md shows the same)."""
    for role, names in (("candidate", CANDIDATES), ("judge", JUDGES[1:])):
        (cwd / "conf" / role).mkdir(parents=True, exist_ok=True)
        for name in names:
            (cwd / "conf" / role / f"{name}.yaml").write_text(f"name: {name}\nmodel: mock/{name[5:]}\nfamily: mock\n")


def judge_sweep(cwd: Path, env: dict[str, str]) -> tuple[Path, subprocess.CompletedProcess]:
    mock_entries(cwd)
    res = subprocess.run([EXE, "-m", "benchmark=heartbench_en", f"candidate={','.join(CANDIDATES)}",
                          "judge=mock,mock-j2,mock-j3", "hydra.sweep.dir=sweep", "progress=none",
                          "bootstrap.samples=300"], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return cwd / "sweep", res


FAST = 2  # the stopped run's first questions answer at once, the next hangs until the run is stopped


def fake_candidate(url: str, name: str) -> list[str]:
    return ["candidate=openai_compatible", f"candidate.model=openai/{name}", f"candidate.api_base={url}",
            f"candidate.name={name}", "candidate.api_key_env=FAKE_KEY", "judge=mock", "max_retries=0", "timeout=120"]


def make_runs(root: Path) -> dict[str, Any]:
    """Build every state under root; returns {env, running: the view output seen while the stopped run hung, ...}."""
    env = clean_env(root)
    mock_entries(root)
    sweep = subprocess.run([EXE, "-m", "benchmark=heartbench_en", "candidate=mock-a,mock-b", "judge=mock", "limit=4,-3",
                            "hydra.sweep.dir=multirun/sweep", "progress=none"], cwd=root, env=env, capture_output=True,
                           text=True, timeout=600)
    assert sweep.returncode == 2 and "rejected" in sweep.stderr, sweep.stderr[-2000:]
    calls = {"slow": 0}
    # the hanging reply is held until the run is stopped, then let go: the stopped run waits for the calls in
    # flight (models/interrupt.py), and a reply held for a fixed 90 s made this fixture take ~100 s
    release = threading.Event()

    def handler(body: dict[str, Any]) -> Reply:
        model = str(body.get("model"))
        if model.endswith("broken"):
            return Reply(status=400, error="this model does not exist here")
        calls["slow"] += 1
        if calls["slow"] > FAST:
            release.wait(90)
        return Reply(text=f"reply {calls['slow']}")

    out: dict[str, Any] = {"env": env}
    with FakeServer(handler) as srv:
        failed = subprocess.run([EXE, "benchmark=heartbench_en", *fake_candidate(srv.url, "broken"), "limit=3",
                                 "hydra.run.dir=outputs/failed", "progress=none"], cwd=root, env=env,
                                capture_output=True, text=True, timeout=300)
        assert failed.returncode == 1 and "nothing was scored" in failed.stderr, failed.stderr[-2000:]
        run = root / "outputs" / "stopped"
        proc = subprocess.Popen([EXE, "benchmark=heartbench_en", *fake_candidate(srv.url, "slow"), "limit=5",
                                 "concurrency=1", "hydra.run.dir=outputs/stopped", "progress=none"], cwd=root, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 180
            # the hanging request has arrived: the first questions are done (the journal syncs them at the latest
            # when the run stops; records are written in batches, so the file may not show them yet)
            while calls["slow"] <= FAST and proc.poll() is None:
                assert time.monotonic() < deadline, "the run never reached its hanging question"
                time.sleep(0.05)
            assert proc.poll() is None
            out["running"] = subprocess.run([EXE, "view", "outputs", f"out={root / 'while.html'}", "open=false"],
                                            cwd=root, env=env, capture_output=True, text=True, timeout=120)
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.stderr is not None
            seen = []
            for line in proc.stderr:  # the signal handled (the drain's countdown) while the call still hangs
                seen.append(line)
                if "call(s) in flight" in line:
                    break
            release.set()  # then its reply comes, and the run stops without sending another
            _, rest = proc.communicate(timeout=120)
            err = "".join(seen) + rest
        assert proc.returncode == 130, err[-2000:]
        assert json.loads((run / "manifest.json").read_text())["state"] == "running"
    return out
