"""Ctrl-C and SIGTERM through the console script against the fake server: the first signal stops paying.

Each request's arrival time is recorded server-side (`FakeServer.request_times`, the same monotonic clock as
this test), so "no request leaves after the signal" is checked where the money is spent. Requests already
sent when the signal lands may still be read by the server a moment later; a short grace window allows for
that on a loaded machine, and nothing may arrive after it.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, MINI, complete_lines, model_args, read_rows
from fakeserver import FakeServer, Reply

pytestmark = pytest.mark.slow

GRACE = 1.0  # seconds after the signal in which a request sent before it may still be read by the server
CONCURRENCY = 8


def _rows(n: int) -> list[dict[str, Any]]:
    """n questions made from the project's 12 mini rows, each with its own id and first turn."""
    base, _ = read_rows(MINI)
    rows = []
    for i in range(n):
        row = json.loads(json.dumps(base[i % len(base)]))
        row["question_id"] = f"sq{i:04d}"
        row["dialogue"][0]["content"] = f"[{row['question_id']}] " + row["dialogue"][0]["content"]
        rows.append(row)
    return rows


class _Script:
    """The candidate names its question; the judge meets every odd item."""

    def __init__(self, rows: list[dict[str, Any]], latency: float) -> None:
        self.items = {r["question_id"]: len(r["rubric"]) for r in rows}
        self.latency = latency

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        qid = next(q for q in self.items if f"[{q}]" in text)
        if body["model"] == "judge":
            verdict = [{"id": i, "reasoning": "ok", "met": i % 2 == 1} for i in range(1, self.items[qid] + 1)]
            return Reply(text=json.dumps({"criteria": verdict}), usage=(100, 50), delay=self.latency)
        return Reply(text=f"REPLY[{qid}] I hear you.", usage=(40, 20), delay=self.latency)


def _start(tmp_path: Path, env: dict[str, str], srv: FakeServer, n: int) -> tuple[subprocess.Popen, list[str]]:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows(n)), encoding="utf-8")
    args = _args(data, tmp_path / "run", srv.url)
    return subprocess.Popen([EXE, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), args


def _wait_for(srv: FakeServer, proc: subprocess.Popen, n: int) -> None:
    """Until the server has seen n requests (generous: the machine may be loaded)."""
    deadline = time.monotonic() + 240
    while len(srv.request_times) < n and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before the signal"


def _args(data: Path, run: Path, url: str) -> list[str]:
    return ["benchmark=heartbench", f"data.path={data}", f"concurrency={CONCURRENCY}", "progress=plain",
            f"hydra.run.dir={run}", *model_args(url)]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_first_signal_stops_paying_and_the_same_command_resumes(tmp_path: Path, env: dict[str, str],
                                                                 sig: signal.Signals, code: int) -> None:
    n = 120
    script = _Script(_rows(n), 0.05)
    with FakeServer(script) as srv:
        proc, args = _start(tmp_path, env, srv, n)
        _wait_for(srv, proc, 40)
        sent = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
        time.sleep(0.5)  # anything the process sent in its last moment has arrived by now
        times = list(srv.request_times)
        bodies = [json.dumps(b, sort_keys=True) for b in srv.requests]
        late = [round(t - sent, 3) for t in times if t > sent + GRACE]
        assert not late, f"{len(late)} requests reached the server after the signal (seconds after it: {late[:10]})"
        assert proc.returncode == code, err[-2000:]
        assert "never awaited" not in err and "Traceback" not in err, err[-2000:]
        said = [line for line in err.splitlines() if line.startswith("rubric-engine: ")]
        assert said and "interrupted" in said[-1] and f"hydra.run.dir={tmp_path / 'run'}" in said[-1], err[-2000:]
        run = tmp_path / "run"
        done = {r["id"] for r in complete_lines(run / "samples.jsonl") if "id" in r}
        assert done, "finished questions are in the journal"
        assert (run / "samples.jsonl").read_bytes().endswith(b"\n")  # synced whole: no half record
        assert not (run / "summary.json").exists()

        # the same command resumes: nothing finished is asked again, and the run completes
        srv.reset()
        script.latency = 0.0
        again = subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=600)
        resent = [json.dumps(b, sort_keys=True) for b in srv.requests]
        asked = {t for b in srv.requests for t in _qids(b)}
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"resuming: {len(done)} of {n} questions" in again.stderr
    assert not (asked & done), f"finished questions asked again: {sorted(asked & done)[:5]}"
    repeated = Counter(resent) & Counter(bodies)
    # only calls cut off in flight by the signal (at most one per worker and role) may be sent again
    assert sum(repeated.values()) <= 2 * 2 * CONCURRENCY, repeated
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"]["questions"] == n and summary["counts"]["scored"] == n


def _qids(body: dict[str, Any]) -> set[str]:
    text = "\n".join(str(m.get("content", "")) for m in body["messages"])
    return {text[i + 1:i + 7] for i in range(len(text)) if text.startswith("[sq", i)}


def test_a_second_signal_exits_at_once(tmp_path: Path, env: dict[str, str]) -> None:
    """In-flight calls that hang: the first SIGINT waits for them (its countdown says so on stderr); a second
    one ends the process at once, without waiting for anything."""
    with FakeServer(lambda body: Reply(text="x", delay=60)) as srv:
        proc, args = _start(tmp_path, env, srv, 4)
        _wait_for(srv, proc, 4)
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:  # until the drain's countdown: the first signal has been handled
            seen.append(line)
            if "call(s) in flight" in line:
                break
        assert seen and "call(s) in flight" in seen[-1], seen[-5:]
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=60)
        assert time.monotonic() - t0 < 20
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "never awaited" not in err, err[-2000:]
    line = next(x for x in err.splitlines() if "SIGINT again: exiting now" in x)  # the command to resume, there too
    typed = [a for a in args if not a.startswith("hydra.run.dir=")]
    resume = shlex.join(["rubric-engine", *typed, f"hydra.run.dir={tmp_path / 'run'}"])
    assert line.endswith(f"resume with: {resume}"), line
