"""Ctrl-C mid-run, then the command the interrupt line prints: every distinct request reaches the server once.

Why through the console script against the fake server: what a provider bills is what reaches its server, and
a call cancelled on our side after it was sent is still completed (and billed) there. So the first signal must
let the calls in flight finish and keep their answers, and the resume must find them cached. The run is started
without `hydra.run.dir=`, as a user starts it: the interrupt line must name the directory to resume in, and
running that printed command must resume there (no second timestamped directory).
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import EXE, model_args
from fakeserver import FakeServer, Reply
from test_signals import _Script, _rows

pytestmark = pytest.mark.slow

CONCURRENCY = 4


def _data(tmp_path: Path, n: int) -> Path:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows(n)), encoding="utf-8")
    return data


def _resume_command(err: str) -> list[str]:
    """The command the interrupt line names (after 'resume with: '), as argv for the console script."""
    line = next(x for x in err.splitlines() if x.startswith("rubric-engine: interrupted"))
    assert "resume with: " in line, line
    argv = shlex.split(line.split("resume with: ", 1)[1])
    assert argv[0] == "rubric-engine", argv
    return [EXE, *argv[1:]]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_calls_in_flight_finish_and_the_printed_command_resumes_paying_nothing_twice(
        tmp_path: Path, env: dict[str, str], sig: signal.Signals, code: int) -> None:
    n = 40
    script = _Script(_rows(n), 0.4)  # slow enough that every worker has a call in flight at the signal
    data = _data(tmp_path, n)
    with FakeServer(script) as srv:
        args = ["benchmark=heartbench", f"data.path={data}", f"concurrency={CONCURRENCY}", "progress=plain",
                *model_args(srv.url)]
        proc = subprocess.Popen([EXE, *args], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        deadline = time.monotonic() + 240
        while len(srv.request_times) < 30 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before the signal"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        first = [json.dumps(b, sort_keys=True) for b in srv.requests]
        assert proc.returncode == code, err[-2000:]
        assert "Traceback" not in err and "never awaited" not in err, err[-2000:]
        assert "call(s) in flight" in err, err[-2000:]  # the drain's countdown, on stderr
        runs = list((tmp_path / "outputs" / "heartbench").iterdir())
        assert len(runs) == 1, runs
        assert not (runs[0] / "summary.json").exists()

        srv.reset()
        again = subprocess.run(_resume_command(err), env=env, cwd=tmp_path, capture_output=True, text=True,
                               timeout=600)
        second = [json.dumps(b, sort_keys=True) for b in srv.requests]
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resuming: " in again.stderr, again.stderr[-2000:]
    assert list((tmp_path / "outputs" / "heartbench").iterdir()) == runs  # the same directory, no second one
    summary = json.loads((runs[0] / "summary.json").read_text())
    assert summary["counts"]["questions"] == n and summary["counts"]["scored"] == n
    # every distinct request reached the server exactly once over both commands: the calls in flight at the signal
    # were answered, cached and not sent again
    seen = Counter(first + second)
    assert len(seen) == 2 * n  # one candidate and one judge call per question
    twice = {k: v for k, v in seen.items() if v > 1}
    assert not twice, f"{len(twice)} requests sent more than once"
    assert first and second


def test_the_drain_is_bounded_by_the_call_timeout(tmp_path: Path, env: dict[str, str]) -> None:
    """Calls that hang: the first signal waits for them at most the models' timeout, then cancels them."""
    data = _data(tmp_path, 4)
    with FakeServer(lambda body: Reply(text="x", delay=60)) as srv:
        proc = subprocess.Popen([EXE, "benchmark=heartbench", f"data.path={data}", "concurrency=4", "progress=plain",
                                 "timeout=3", "max_retries=0", f"hydra.run.dir={tmp_path / 'run'}",
                                 *model_args(srv.url)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 240
        while len(srv.request_times) < 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        waited = time.monotonic() - t0
    assert proc.returncode == 130, err[-2000:]
    assert "up to 3 s" in err, err[-2000:]
    assert waited < 30, waited
    assert f"hydra.run.dir={tmp_path / 'run'}" in err


def test_a_failure_after_the_run_began_prints_the_command_that_resumes_it(tmp_path: Path, env: dict[str, str]) -> None:
    """A refused key stops the run after it claimed its directory: the error line ends with the command that
    resumes there; with the key fixed (here: the server accepts it), that command finishes in the same directory."""
    data = _data(tmp_path, 3)
    refuse = {"on": True}

    def handler(body: dict) -> Reply:
        return Reply(status=401) if refuse["on"] else _Script(_rows(3), 0.0)(body)

    with FakeServer(handler) as srv:
        res = subprocess.run([EXE, "benchmark=heartbench", f"data.path={data}", "progress=none", *model_args(srv.url)],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert res.returncode == 2, res.stderr[-2000:]
        line = next(x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error:"))
        assert "after fixing that, resume with: rubric-engine " in line, line
        argv = shlex.split(line.split("resume with: ", 1)[1])
        runs = list((tmp_path / "outputs" / "heartbench").iterdir())
        assert len(runs) == 1 and argv[-1] == f"hydra.run.dir={runs[0]}", (argv, runs)
        refuse["on"] = False
        again = subprocess.run([EXE, *argv[1:]], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert list((tmp_path / "outputs" / "heartbench").iterdir()) == runs
    assert json.loads((runs[0] / "summary.json").read_text())["counts"]["scored"] == 3


def test_an_interrupted_sweep_resumes_in_its_directory_with_the_printed_command(tmp_path: Path,
                                                                                env: dict[str, str]) -> None:
    n = 8
    script = _Script(_rows(n), 0.3)
    data = _data(tmp_path, n)
    with FakeServer(script) as srv:
        args = ["-m", "benchmark=heartbench", f"data.path={data}", "concurrency=2", "progress=none",
                "bootstrap.samples=50", *model_args(srv.url)]
        args = [a if not a.startswith("candidate.model=") else "candidate.model=openai/a,openai/b" for a in args]
        args = [a for a in args if not a.startswith("candidate.name=")]
        proc = subprocess.Popen([EXE, *args], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        deadline = time.monotonic() + 240
        while len(srv.request_times) < 6 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        assert proc.poll() is None, "the sweep ended before the signal"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        first = [json.dumps(b, sort_keys=True) for b in srv.requests]
        assert proc.returncode == 130, err[-2000:]
        command = _resume_command(err)
        assert "-m" in command and any(a.startswith("hydra.sweep.dir=") for a in command), command
        srv.reset()
        again = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        second = [json.dumps(b, sort_keys=True) for b in srv.requests]
    assert again.returncode == 0, again.stderr[-2000:]
    sweeps = list((tmp_path / "multirun" / "heartbench").iterdir())
    assert len(sweeps) == 1 and (sweeps[0] / "leaderboard.json").is_file(), sweeps
    seen = Counter(first + second)
    # each candidate's n calls, and n judge calls: both candidates reply the same text, so the judge's request for
    # the second is the first's, answered from the cache
    assert len(seen) == 3 * n and max(seen.values()) == 1, [k[:80] for k, v in seen.items() if v > 1][:3]
