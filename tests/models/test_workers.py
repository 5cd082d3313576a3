"""workers=N through the console script against the fake server: the same outputs as one process, each
request sent once, failures classified the same, retries, Ctrl-C, and no orphan worker after kill -9."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import MINI, REAL_EXE, model_args, run_cli  # REAL_EXE where a test reads the run's own child processes
from fakeserver import FakeServer, Reply

_ITEM = re.compile(r"^(\d+)\. \[", re.M)
_TIMING = {"created", "run_id", "started", "finished", "resumed", "wall_seconds",
           "provenance"}  # provenance: the command line, which names workers= itself


def _script(body: dict[str, Any]) -> Reply:
    """Deterministic answers: the candidate's depends on the prompt, the judge meets every even item."""
    text = "\n".join(str(m.get("content", "")) for m in body["messages"])
    if body["model"] == "judge":
        n = max([int(x) for x in _ITEM.findall(text)] or [1])
        return Reply(text=json.dumps({"criteria": [{"id": i, "reasoning": f"r{i}", "met": i % 2 == 0}
                                                   for i in range(1, n + 1)]}), usage=(100, 50))
    return Reply(text=f"I hear you ({len(text)}).", usage=(40, 20))


def _args(url: str, run: Path, workers: Any, *extra: str) -> list[str]:
    return ["benchmark=heartbench", f"data.path={MINI}", f"hydra.run.dir={run}", "progress=none",
            f"workers={workers}", *model_args(url), *extra]


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in _TIMING}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_two_workers_give_the_same_files_as_one_process(tmp_path: Path, env: dict[str, str]) -> None:
    outs, seen = {}, {}
    for workers in (1, 2):
        with FakeServer(_script) as srv:
            env["RUBRIC_ENGINE_CACHE"] = str(tmp_path / f"cache{workers}")
            done = run_cli(_args(srv.url, tmp_path / f"run{workers}", workers), env)
            assert done.returncode == 0, done.stderr
            bodies = [json.dumps(b, sort_keys=True) for b in srv.requests]
        seen[workers] = bodies
        run = tmp_path / f"run{workers}"
        outs[workers] = ((run / "samples.jsonl").read_bytes(), (run / "answers.jsonl").read_bytes(),
                         _untimed(json.loads((run / "summary.json").read_text())))
    assert outs[1] == outs[2]
    assert len(seen[2]) == len(set(seen[2])) == 24  # 12 questions: each request once, none twice
    assert sorted(seen[1]) == sorted(seen[2])


def test_a_500_is_retried_and_failures_classify_the_same(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(_script) as srv:
        srv.queue(Reply(status=500))
        done = run_cli(_args(srv.url, tmp_path / "retry", 2, "limit=1", "max_retries=2"), env)
        assert done.returncode == 0, done.stderr
        assert len(srv.requests) == 3  # candidate: 500 then success; judge once
        rows = [json.loads(x) for x in (tmp_path / "retry" / "samples.jsonl").read_text().splitlines()]
        assert rows[0]["candidate_error"] is None and rows[0]["judge_error"] is None
    results = {}
    for workers in (1, 2):  # a 401 stops the run: the same exit code and the same line, with or without workers
        with FakeServer(_script) as srv:
            srv.handler = lambda body: Reply(status=401)
            env["RUBRIC_ENGINE_CACHE"] = str(tmp_path / f"c401-{workers}")
            done = run_cli(_args(srv.url, tmp_path / f"auth{workers}", workers, "limit=2"), env)
            lines = [x for x in done.stderr.splitlines() if "401" in x or "key" in x]
            # the resume command at the end names the run's own words (workers=, the port, the directory)
            assert all(f"workers={workers} " in x and f"auth{workers}" in x for x in lines if "resume with:" in x)
            results[workers] = (done.returncode, [x.split("; after fixing that, resume with:")[0] for x in lines])
            assert len(srv.requests) >= 1
    assert results[1] == results[2]
    assert results[2][0] != 0 and results[2][1]


@pytest.mark.slow
def test_kill_9_of_the_main_process_leaves_no_worker(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(lambda body: Reply(text="slow", delay=30)) as srv:
        proc = subprocess.Popen([REAL_EXE, *_args(srv.url, tmp_path / "run", 2)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while not srv.requests and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            workers = _children(proc.pid)
            assert srv.requests and len(workers) >= 2, "no request reached the server through the workers"
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            deadline = time.monotonic() + 15
            while any(_alive(w) for w in workers) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not any(_alive(w) for w in workers), "a worker outlived the main process"
        finally:
            if proc.poll() is None:
                proc.kill()


@pytest.mark.slow
def test_sigint_stops_the_workers_calls(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(lambda body: Reply(text="slow", delay=3)) as srv:
        proc = subprocess.Popen([REAL_EXE, *_args(srv.url, tmp_path / "run", 2)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while len(srv.requests) < 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None
        workers = _children(proc.pid)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        late = [t for t in srv.request_times if t > sent + 1.0]
        assert not late, f"{len(late)} request(s) left after the signal"
        deadline = time.monotonic() + 15
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers)


def test_workers_must_be_a_whole_number_or_auto(tmp_path: Path, env: dict[str, str]) -> None:
    done = run_cli(["benchmark=heartbench", f"data.path={MINI}", f"hydra.run.dir={tmp_path / 'r'}", "workers=0",
                    "candidate=mock", "judge=mock"], env)
    assert done.returncode != 0 and "workers=0 is not valid" in done.stderr
    assert os.cpu_count()


def test_a_failure_rebuilt_from_a_worker_classifies_as_the_original(fake_key: str) -> None:
    """Real LiteLLM exceptions (from the fake server and from a closed port) classify the same after the trip
    through describe_error / rebuild_error as before it: kind, retry or not, status and Retry-After."""
    import asyncio
    import socket

    from rubric_engine.models.failures import Malformed, classify
    from rubric_engine.models.litellm_runtime import RUNTIME
    from rubric_engine.models.workers import describe_error, rebuild_error

    litellm = RUNTIME.module()
    replies = [Reply(status=429, headers={"Retry-After": "7"}), Reply(status=500), Reply(status=400),
               Reply(status=401), Reply(status=404), Reply(status=413), Reply(status=422),
               Reply(status=400, error="This model's maximum context length is 8192 tokens",
                     headers={}), Reply(raw="<html>gateway</html>"), Reply(delay=5)]

    async def failures(url: str) -> list[BaseException]:
        out: list[BaseException] = []
        for i, _ in enumerate(replies):
            try:
                await litellm.acompletion(model="openai/m", api_base=url, api_key="sk-test", max_retries=0,
                                          timeout=1 if i == len(replies) - 1 else 30,
                                          messages=[{"role": "user", "content": str(i)}])
            except Exception as exc:  # noqa: BLE001 - collected
                out.append(exc)
        with socket.socket() as s:  # a port nobody listens on: connection refused
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            await litellm.acompletion(model="openai/m", api_base=f"http://127.0.0.1:{port}/v1", api_key="sk-test",
                                      max_retries=0, timeout=5, messages=[{"role": "user", "content": "x"}])
        except Exception as exc:  # noqa: BLE001
            out.append(exc)
        return out

    with FakeServer() as srv:
        srv.queue(*replies)
        errors = asyncio.run(failures(srv.url)) + [Malformed("malformed response: no choices"), TimeoutError()]
    assert len(errors) == len(replies) + 3
    for exc in errors:
        before, after = classify(exc, "sk-test"), classify(rebuild_error(describe_error(exc)), "sk-test")
        assert (before.kind, before.fatal, before.status, before.retry_after, before.detail) == \
            (after.kind, after.fatal, after.status, after.retry_after, after.detail), type(exc).__name__


def test_with_workers_the_main_process_never_imports_litellm(tmp_path: Path) -> None:
    """The workers import LiteLLM; the main process keeps only the engine's side (and the cost comes back)."""
    import sys

    code = (
        "import asyncio, os, sys\n"
        "from rubric_engine.models.client import ModelClient\n"
        "from rubric_engine.models.entries import ModelSpec\n"
        "from rubric_engine.models.workers import WorkerPool\n"
        "async def main(url):\n"
        "    pool = WorkerPool(2)\n"
        "    spec = ModelSpec(name='m', model='openai/gpt-4o', api_base=url, api_key_env='FAKE_KEY')\n"
        "    async with ModelClient(spec, cache=None, workers=pool) as c:\n"
        "        rs = await asyncio.gather(*(c.complete([{'role': 'user', 'content': f'x{i}'}]) for i in range(6)))\n"
        "    await pool.aclose()\n"
        "    print(sorted({r.cost for r in rs}), 'litellm' in sys.modules)\n"
        "asyncio.run(main(sys.argv[1]))\n")
    with FakeServer() as srv:
        done = subprocess.run([sys.executable, "-c", code, srv.url], env={**os.environ, "FAKE_KEY": "sk-test"},
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        assert len(srv.requests) == 6
    assert done.stdout.split() == ["[7.500000000000001e-05]", "False"]  # 10 x 2.5e-6 + 5 x 1e-5 (gpt-4o)


def test_worker_start_up_does_not_count_against_the_call_timeout(tmp_path: Path, env: dict[str, str]) -> None:
    """Each worker imports LiteLLM (seconds) before its first call: with timeout=1 and no retry, every call still
    answers, since the clock of a call starts once a worker is ready."""
    with FakeServer(_script) as srv:
        done = run_cli(_args(srv.url, tmp_path / "run", 2, "limit=4", "timeout=1", "max_retries=0"), env)
        assert done.returncode == 0, done.stderr
    rows = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert [(r["candidate_error"], r["judge_error"]) for r in rows] == [(None, None)] * 4


def test_a_stuck_worker_is_retired_and_its_calls_go_to_another(tmp_path: Path, env: dict[str, str]) -> None:
    """One worker stops answering (SIGSTOP) mid-run: a call in it ends at `timeout`, the worker is found silent
    and retired, and the call is retried on a live worker; every question is answered."""
    with FakeServer(lambda body: Reply(text=_script(body).text, delay=0.3)) as srv:
        proc = subprocess.Popen([REAL_EXE, *_args(srv.url, tmp_path / "run", 2, "timeout=4", "max_retries=3",
                                             "concurrency=2")], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while len(srv.requests) < 2 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.02)
            workers = [c for c in _children(proc.pid)  # the call workers, not the report's own worker
                       if b"rubric_engine.models.workers" in Path(f"/proc/{c}/cmdline").read_bytes()]
            assert len(workers) >= 2, "the workers did not start"
            os.kill(workers[0], signal.SIGSTOP)
            _, err = proc.communicate(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
            for w in workers:
                try:
                    os.kill(w, signal.SIGKILL)
                except OSError:
                    pass
    assert proc.returncode == 0, err
    rows = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 12
    assert [(r["candidate_error"], r["judge_error"]) for r in rows] == [(None, None)] * 12, err
