"""The disk fills mid-run: one line naming the file and the command that resumes, and nothing paid twice.

Why a real full disk: ENOSPC surfaces where Python hands buffered bytes to the OS (a flush, an fsync, a close),
not where the code calls `write`, so only a file system that really fills shows which file fails and what the
run does with the calls it has in flight. The run directory is on a small tmpfs (mounting needs root; CI runs
as root), the call cache on the ordinary disk (`cache.dir=`); once the server has seen a few requests, the test
fills the tmpfs with a file of its own. Then, after deleting that file, the printed command resumes: across both
commands every distinct request reaches the fake server exactly once.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import EXE, MINI, model_args
from fakeserver import FakeServer, Reply
from test_signals import _Script, _rows

pytestmark = pytest.mark.slow


class _Staggered(_Script):
    """Replies that take 0.2 to 1.1 s by question, so calls are in flight at every moment, not in waves."""

    def __call__(self, body: dict) -> Reply:
        reply = super().__call__(body)
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        i = next(int(q[2:]) for q in self.items if f"[{q}]" in text)
        reply.delay = 0.2 + 0.15 * (i % 7)
        return reply


def _mount(where: Path, size: str) -> None:
    where.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {res.stderr.strip()[:200]}")


def _fill(where: Path) -> Path:
    """Write a file until the file system is full; returns it."""
    filler = where / "filler.bin"
    block = b"\0" * 65536
    with filler.open("wb", buffering=0) as fh:
        try:
            while True:
                fh.write(block)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        try:
            while True:  # the last bytes, one at a time: not a page left
                fh.write(b"\0")
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler


def _run_until_full(srv: FakeServer, data: Path, run: Path, cache: Path, disk: Path, tmp_path: Path,
                    env: dict[str, str]) -> tuple[subprocess.Popen, Path, str]:
    """Start a run into `run` (its call cache in `cache`), fill `disk` once 16 requests have reached the server
    (calls are in flight then), and wait for the run to stop: (the process, the filler file, its stderr)."""
    proc = subprocess.Popen([EXE, "benchmark=heartbench", f"data.path={data}", "concurrency=4", "progress=plain",
                             f"cache.dir={cache}", f"hydra.run.dir={run}", *model_args(srv.url)],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while len(srv.request_times) < 16 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before the disk filled"
    filler = _fill(disk)
    _, err = proc.communicate(timeout=240)
    return proc, filler, err


def test_a_full_disk_names_the_file_keeps_the_calls_in_flight_and_the_printed_command_resumes(
        tmp_path: Path, env: dict[str, str]) -> None:
    n = 40
    disk = tmp_path / "small"
    _mount(disk, "16m")
    try:
        data = tmp_path / "data.jsonl"
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows(n)), encoding="utf-8")
        run = disk / "run"
        with FakeServer(_Staggered(_rows(n), 0.0)) as srv:
            proc, filler, err = _run_until_full(srv, data, run, tmp_path / "cache", disk, tmp_path, env)
            first = [json.dumps(b, sort_keys=True) for b in srv.requests]
            assert proc.returncode == 2, err[-3000:]
            assert "Traceback" not in err and "Logging error" not in err, err[-3000:]
            line = next((x for x in err.splitlines() if "no space left" in x.lower()), "")
            assert line.startswith("rubric-engine: error: "), err[-3000:]
            assert str(run) in line and any(f in line for f in ("samples.jsonl", "calls.jsonl")), line
            assert "free space" in line and "resume with: " in line, line
            assert "call cache" in line, line  # what became of the answers that arrived while it stopped
            resume = shlex.split(line.split("resume with: ", 1)[1])
            assert resume[0] == "rubric-engine" and f"hydra.run.dir={run}" in resume, resume
            assert len(first) < 2 * n, "every call was made before the disk filled: the test proves nothing"

            os.unlink(filler)
            srv.reset()
            again = subprocess.run([EXE, *resume[1:]], env=env, cwd=tmp_path, capture_output=True, text=True,
                                   timeout=600)
            second = [json.dumps(b, sort_keys=True) for b in srv.requests]
        assert again.returncode == 0, again.stderr[-3000:]
        summary = json.loads((run / "summary.json").read_text())
        assert summary["counts"]["questions"] == n and summary["counts"]["scored"] == n
        seen = Counter(first + second)
        assert len(seen) == 2 * n  # one candidate and one judge call per question
        twice = {k: v for k, v in seen.items() if v > 1}
        assert not twice, f"{len(twice)} of {len(seen)} requests sent more than once"
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_cache_on_the_full_disk_is_named_and_the_line_says_answers_are_paid_again(
        tmp_path: Path, env: dict[str, str]) -> None:
    """The limit of the promise: with the call cache on the disk that filled, an answer that arrives can be kept
    nowhere; the run still stops with one line (no traceback) and says so honestly, and the printed command
    resumes once space is freed."""
    n = 40
    disk = tmp_path / "small"
    _mount(disk, "16m")
    try:
        data = tmp_path / "data.jsonl"
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows(n)), encoding="utf-8")
        run = disk / "run"
        with FakeServer(_Staggered(_rows(n), 0.0)) as srv:
            proc, filler, err = _run_until_full(srv, data, run, disk / "cache", disk, tmp_path, env)
            assert proc.returncode == 2, err[-3000:]
            assert "Traceback" not in err and "Logging error" not in err, err[-3000:]
            line = next((x for x in err.splitlines() if "no space left" in x.lower()), "")
            assert line.startswith("rubric-engine: error: ") and str(disk) in line, err[-3000:]
            assert "same disk" in line and "paid again" in line and "resume with: " in line, line
            os.unlink(filler)
            again = subprocess.run([EXE, *shlex.split(line.split("resume with: ", 1)[1])[1:]], env=env,
                                   cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr[-3000:]
        assert json.loads((run / "summary.json").read_text())["counts"]["scored"] == n
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_an_output_file_on_a_full_disk_is_named(tmp_path: Path, env: dict[str, str]) -> None:
    """The atomic writer (summary, report pages, leaderboard, samples rewrite ...) names its file on a full
    disk: here a leaderboard written into a full tmpfs."""
    run = tmp_path / "run"
    res = subprocess.run([EXE, "benchmark=heartbench", f"data.path={MINI}", "limit=2", "candidate=mock", "judge=mock",
                          "progress=none", f"hydra.run.dir={run}"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    disk = tmp_path / "small"
    _mount(disk, "1m")
    try:
        (disk / "board").mkdir()
        _fill(disk)
        res = subprocess.run([EXE, "leaderboard", str(run), f"out={disk / 'board'}"], env=env, capture_output=True,
                             text=True, timeout=300)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
    assert res.returncode == 2, res.stderr[-2000:]
    line = res.stderr.strip().splitlines()[-1]
    assert "Traceback" not in res.stderr and line.startswith("rubric-engine: error: "), res.stderr[-2000:]
    assert f"{disk / 'board'}/" in line and "free space" in line, line
