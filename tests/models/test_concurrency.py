"""concurrency=auto: the AIMD gate's rules on a fake clock, then the real path against a fake server that
answers 429 above N requests in flight (the limit settles near N, every call is answered exactly once), and
the summary line through the console script."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, MINI
from fakeserver import FakeServer, Reply
from rubric_engine.models.client import ModelClient
from rubric_engine.models.concurrency import AUTO_MAX, AdaptiveGate, ceiling, parse_concurrency
from rubric_engine.models.entries import ModelSpec


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fill(gate: AdaptiveGate) -> list[Any]:
    """Take every free place (no waiting: the gate has room for each)."""
    async def take() -> list[Any]:
        return [await gate.acquire() for _ in range(gate.allowed - gate.in_flight)]
    return asyncio.run(take())


def test_slow_start_doubles_until_the_first_throttle_then_adds_one_per_window() -> None:
    gate = AdaptiveGate(start=4, clock=Clock())
    for _ in range(2):  # two full rounds answered: 4 -> 8 -> 16
        for slot in fill(gate):
            slot.answered()
            gate.release(slot)
    assert gate.allowed == 16
    slots = fill(gate)
    slots[0].throttled()
    gate.release(slots[0])
    assert gate.allowed == 12 and gate.throttles == 1  # 16 x 0.75
    for slot in slots[1:4]:  # the same round's other 429s: sent before the cut, no second cut
        slot.throttled()
        gate.release(slot)
    assert gate.allowed == 12 and gate.throttles == 1
    for slot in slots[4:]:
        gate.release(slot)
    for slot in fill(gate):  # congestion avoidance: +1/limit per answer, about one per full window
        slot.answered()
        gate.release(slot)
    assert gate.allowed == 12 and 12.9 < gate.limit < 13  # 12 + 1/12 + 1/12.08 + ...
    slot = fill(gate)[0]
    slot.answered()
    gate.release(slot)
    assert gate.allowed == 13 and gate.report() == {"mode": "auto", "start": 4, "final": 13, "min": 4, "max": 16,
                                                    "throttles": 1}


def test_grows_only_while_every_place_is_taken() -> None:
    gate = AdaptiveGate(start=8, clock=Clock())
    for _ in range(50):
        slot = asyncio.run(gate.acquire())  # one call at a time: the limit is not what holds calls back
        slot.answered()
        gate.release(slot)
    assert gate.allowed == 8


def test_rate_limit_headers() -> None:
    gate = AdaptiveGate(start=8, clock=Clock())
    slots = fill(gate)
    slots[0].answered({"x-ratelimit-remaining-requests": "3"})  # fewer left than in flight: hold
    gate.release(slots[0])
    assert gate.allowed == 8
    slots[1].answered({"llm_provider-x-ratelimit-remaining-tokens": "0"})  # nothing left: cut before the 429s
    gate.release(slots[1])
    assert gate.allowed == 6 and gate.throttles == 1
    slots[2].answered({"x-ratelimit-remaining-requests": "nan"})  # unreadable: as if absent
    gate.release(slots[2])


def test_bounds_and_rpm_cap() -> None:
    clock = Clock()
    gate = AdaptiveGate(start=1, clock=clock)
    for _ in range(3):
        slot = fill(gate)[0]
        slot.throttled()
        gate.release(slot)
    assert gate.allowed == 1  # never below 1
    gate = AdaptiveGate(start=200, clock=clock)
    for _ in range(3):
        for slot in fill(gate):
            slot.answered()
            gate.release(slot)
    assert gate.allowed == AUTO_MAX
    gate = AdaptiveGate(start=2, rpm=60, clock=clock)  # 1 call/s at 2 s a call keeps 2 busy (+1)
    for _ in range(5):
        slots = fill(gate)
        clock.now += 2.0
        for slot in slots:
            slot.answered()
            gate.release(slot)
    assert gate.allowed == 3


def test_waiters_first_come_first_served_and_cancellation_passes_the_place_on() -> None:
    async def main() -> list[int]:
        gate, order = AdaptiveGate(start=1, clock=Clock()), []
        first = await gate.acquire()

        async def one(i: int) -> None:
            async with gate.slot():
                order.append(i)
                await asyncio.sleep(0)

        tasks = [asyncio.create_task(one(i)) for i in range(4)]
        await asyncio.sleep(0)
        tasks[1].cancel()
        gate.release(first)
        await asyncio.gather(*tasks, return_exceptions=True)
        assert gate.in_flight == 0
        return order

    assert asyncio.run(main()) == [0, 2, 3]


def test_parse_and_ceiling() -> None:
    assert parse_concurrency("auto") == "auto" and parse_concurrency(3) == 3 and ceiling("auto") == AUTO_MAX
    for bad in (0, -1, True, "many", 2.5):
        with pytest.raises(ValueError, match="whole number >= 1 or auto"):
            parse_concurrency(bad)


# ----------------------------------------------------------------------------- the real path (LiteLLM, HTTP)

N = 6  # the fake provider answers 429 above this many requests in flight


def throttling(srv: FakeServer, answered: Counter[str]) -> Any:
    def handler(body: dict[str, Any]) -> Reply:
        prompt = body["messages"][-1]["content"]
        if srv.in_flight > N:
            return Reply(status=429)
        answered[str(prompt)] += 1
        return Reply(text=f"answer to {prompt}", delay=0.1)  # long enough that a loaded machine still fills the limit
    return handler


def test_settles_near_the_servers_limit_and_answers_every_call_once(fake_key: str) -> None:
    answered: Counter[str] = Counter()
    with FakeServer() as srv:
        srv.handler = throttling(srv, answered)
        spec = ModelSpec.from_config({"name": "c", "model": "openai/c", "api_base": srv.url, "api_key_env": fake_key}, role="candidate")

        async def main() -> tuple[list[str], ModelClient]:
            client = ModelClient(spec, cache=None, concurrency="auto", max_retries=30, backoff_base=0.01,
                                 backoff_max=0.05)
            try:
                texts = await asyncio.gather(*(client.complete([{"role": "user", "content": f"q{i}"}])
                                               for i in range(300)))
            finally:
                await client.aclose()
            return [t.text for t in texts], client

        texts, client = asyncio.run(main())
        throttled = sum(1 for b in srv.requests) - sum(answered.values())
    assert texts == [f"answer to q{i}" for i in range(300)]
    assert set(answered) == {f"q{i}" for i in range(300)} and set(answered.values()) == {1}  # each answered once
    report = client.gate.report() if client.gate else {}
    assert throttled > 0 and report["throttles"] > 0  # it did meet the limit
    assert N - 2 <= report["final"] <= N + 1, report
    assert report["min"] <= report["final"] <= report["max"]


def test_integer_concurrency_keeps_a_plain_semaphore(fake_key: str) -> None:
    with FakeServer() as srv:
        srv.latency = 0.05
        spec = ModelSpec.from_config({"name": "c", "model": "openai/c", "api_base": srv.url, "api_key_env": fake_key}, role="candidate")

        async def main() -> ModelClient:
            client = ModelClient(spec, cache=None, concurrency=3)
            await asyncio.gather(*(client.complete([{"role": "user", "content": f"q{i}"}]) for i in range(12)))
            await client.aclose()
            return client

        client = asyncio.run(main())
        assert srv.max_in_flight == 3 and client.gate is None


def test_summary_and_console_say_where_it_settled(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer() as srv:
        srv.latency = 0.02

        def run(name: str) -> subprocess.CompletedProcess[str]:
            res = subprocess.run([EXE, "benchmark=heartbench_en", f"data.path={MINI}", "judge=mock", "concurrency=auto", "progress=none", f"hydra.run.dir={tmp_path / name}",
                                  "candidate=openai_compatible", "candidate.model=openai/c", f"candidate.api_base={srv.url}",
                                  "candidate.name=c", "candidate.api_key_env=FAKE_KEY"],
                                 env=env, capture_output=True, text=True, timeout=300)
            assert res.returncode == 0, res.stderr
            return res

        res = run("run")
        again = run("again")  # every answer from the cache: nothing was learnt, nothing is said
    assert "concurrency" not in json.loads((tmp_path / "again" / "summary.json").read_text())["calls"]["candidate"]
    assert "concurrency=auto" not in again.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    gate = summary["calls"]["candidate"]["concurrency"]
    assert gate["mode"] == "auto" and gate["start"] == 8 and gate["throttles"] == 0
    assert gate["min"] <= gate["final"] <= gate["max"]
    assert f"candidate: concurrency=auto settled at {gate['final']} in flight (started at 8" in res.stdout
    assert "concurrency" not in summary["calls"]["judge"] and "judge: concurrency" not in res.stdout  # a mock waits for nothing


def test_bad_concurrency_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    res = subprocess.run([EXE, "benchmark=heartbench_en", "concurrency=lots", "candidate=mock", "judge=mock",
                          f"hydra.run.dir={tmp_path / 'r'}"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "concurrency=lots is not valid; give a whole number >= 1 or auto" in res.stderr


def test_tpm_cap_on_the_gate() -> None:
    clock = Clock()
    gate = AdaptiveGate(start=2, tpm=6000, clock=clock)  # 6,000 tokens a minute at 1,000 a call, 2 s a call: 1 busy (+1)
    for _ in range(5):
        slots = fill(gate)
        clock.now += 2.0
        for slot in slots:
            slot.answered(None, 1000)
            gate.release(slot)
    assert gate.allowed == 2


def test_tpm_spaces_requests_by_the_tokens_answered(fake_key: str) -> None:
    with FakeServer(lambda body: Reply(text="ok", usage=(10, 5))) as srv:  # 15 tokens a call
        spec = ModelSpec.from_config({"name": "c", "model": "openai/c", "api_base": srv.url, "api_key_env": fake_key},
                                     role="candidate")

        async def main() -> None:
            client = ModelClient(spec, cache=None, concurrency=1, tpm=6000)  # 15 tokens = 0.15 s of the budget
            await asyncio.gather(*(client.complete([{"role": "user", "content": f"q{i}"}]) for i in range(6)))
            await client.aclose()

        asyncio.run(main())
        gaps = [b - a for a, b in zip(srv.request_times, srv.request_times[1:])]
    assert len(gaps) == 5 and min(gaps) >= 0.14, gaps
