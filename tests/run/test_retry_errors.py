"""`retry_errors=true`: the questions that ended in errors are asked again in place, nothing else is paid twice.

Why through the console script against the fake server: the point is what reaches the server (only the errored
questions' calls) and what the run directory holds afterwards (the same files as a run that never failed, apart
from timestamps and what this invocation counted). The server fails two questions' candidate calls and one
question's judge call on the first run (max_retries=0: one failed request is a recorded error), then answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import model_args, run_cli, sigkill
from fakeserver import FakeServer, Reply
from test_signals import _Script, _rows

pytestmark = pytest.mark.slow

N = 6
FAIL_CANDIDATE = {"sq0001", "sq0004"}
FAIL_JUDGE = {"sq0002"}


class _Failing(_Script):
    """_Script, with the listed questions' candidate / judge calls answered 500 while `failing`."""

    def __init__(self) -> None:
        super().__init__(_rows(N), 0.0)
        self.failing = True

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        qid = next(q for q in self.items if f"[{q}]" in text)
        judge = body["model"] == "judge"
        if self.failing and qid in (FAIL_JUDGE if judge else FAIL_CANDIDATE):
            return Reply(status=500)
        return super().__call__(body)


def _qid(body: dict[str, Any]) -> str:
    text = "\n".join(str(m.get("content", "")) for m in body["messages"])
    return next(f"sq{i:04d}" for i in range(N) if f"[sq{i:04d}]" in text)


def _comparable(run: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """samples.jsonl without its records' cache hits (the retried judge call's reply to grade came from the cache),
    summary.json without what differs between two clean runs too (dates, ids, timings, the command with its
    directory) and `calls`, which counts what each invocation sent."""
    samples = [json.loads(x) for x in (run / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    for rec in samples:
        rec.pop("cache_hits")
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    for key in ("created", "run_id", "wall_seconds", "calls", "provenance"):
        summary.pop(key, None)
    return samples, summary


def test_retry_errors_asks_only_the_errored_questions_again_in_place(tmp_path: Path, env: dict[str, str]) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows(N)), encoding="utf-8")
    script = _Failing()
    with FakeServer(script) as srv:
        base = ["benchmark=heartbench", f"data.path={data}", "progress=none", "max_retries=0", *model_args(srv.url)]
        run = tmp_path / "run"
        first = run_cli([*base, f"hydra.run.dir={run}"], env)
        assert first.returncode == 0, first.stderr[-2000:]
        counts = json.loads((run / "summary.json").read_text())["counts"]
        assert counts["candidate_errors"] == 2 and counts["judge_errors"] == 1, counts

        script.failing = False
        srv.reset()
        again = run_cli([*base, f"hydra.run.dir={run}", "retry_errors=true"], env)
        retried = [_qid(b) for b in srv.requests]
        retried_models = sorted((b["model"], _qid(b)) for b in srv.requests)

        srv.reset()
        clean = tmp_path / "clean"
        fresh = run_cli([*base, f"hydra.run.dir={clean}"], {**env, "RUBRIC_ENGINE_CACHE": str(tmp_path / "cache2")})
        assert fresh.returncode == 0, fresh.stderr[-2000:]
    assert again.returncode == 0, again.stderr[-2000:]
    assert "3 of 6 questions ended in errors" in again.stderr, again.stderr[-2000:]
    # only the errored questions reached the server: a candidate and a judge call for each failed candidate call,
    # only the judge call where the judge had failed (the candidate's reply came from the cache)
    assert retried_models == sorted([("cand", q) for q in FAIL_CANDIDATE] + [("judge", q) for q in FAIL_CANDIDATE]
                                    + [("judge", q) for q in FAIL_JUDGE]), retried_models
    assert set(retried) == FAIL_CANDIDATE | FAIL_JUDGE
    assert _comparable(run) == _comparable(clean)
    answers = (run / "answers.jsonl").read_text(encoding="utf-8")
    assert answers == (clean / "answers.jsonl").read_text(encoding="utf-8")
    assert json.loads((run / "manifest.json").read_text())["state"] == "complete"
    assert (run / "report.html").is_file()


def test_retry_errors_with_no_error_asks_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows(3)), encoding="utf-8")
    with FakeServer(_Script(_rows(3), 0.0)) as srv:
        base = ["benchmark=heartbench", f"data.path={data}", "progress=none", f"hydra.run.dir={tmp_path / 'run'}",
                *model_args(srv.url)]
        assert run_cli(base, env).returncode == 0
        before = (tmp_path / "run" / "samples.jsonl").read_bytes()
        srv.reset()
        res = run_cli([*base, "retry_errors=true"], env)
        assert not srv.requests
    assert res.returncode == 0, res.stderr[-2000:]
    assert "retry_errors: no record holds an error" in res.stderr
    assert (tmp_path / "run" / "samples.jsonl").read_bytes() == before


def test_a_retry_killed_midway_loses_no_record_and_the_same_command_finishes_it(tmp_path: Path,
                                                                               env: dict[str, str]) -> None:
    """kill -9 while the errored questions are being asked again: the journal on disk still holds every successful
    record (and only those), and the same retry command finishes with the files of a run that never failed."""
    import subprocess
    import time

    from conftest import EXE, complete_lines

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows(N)), encoding="utf-8")
    script = _Failing()
    run = tmp_path / "run"
    with FakeServer(script) as srv:
        base = ["benchmark=heartbench", f"data.path={data}", "progress=none", "max_retries=0", *model_args(srv.url),
                f"hydra.run.dir={run}"]
        assert run_cli(base, env).returncode == 0
        ok = {r["id"] for r in complete_lines(run / "samples.jsonl")
              if not (r.get("candidate_error") or r.get("judge_error"))}
        assert len(ok) == N - 3
        script.failing, script.latency = False, 30.0  # the retried calls hang until the kill
        srv.reset()
        proc = subprocess.Popen([EXE, *base, "retry_errors=true"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 240
        while not srv.requests and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        sigkill(proc)
        left = complete_lines(run / "samples.jsonl")
        assert "journal" in left[0] and {r["id"] for r in left[1:]} == ok  # every success kept, no error mixed in
        script.latency = 0.0
        again = run_cli([*base, "retry_errors=true"], env)
        assert again.returncode == 0, again.stderr[-2000:]
        clean = tmp_path / "clean"
        fresh = run_cli([*base[:-1], f"hydra.run.dir={clean}"], {**env, "RUBRIC_ENGINE_CACHE": str(tmp_path / "c2")})
        assert fresh.returncode == 0
    assert "resuming: 3 of 6 questions already in samples.jsonl" in again.stderr, again.stderr[-2000:]
    assert _comparable(run) == _comparable(clean)
