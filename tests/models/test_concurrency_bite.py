"""concurrency=auto's rules (docs/operations.md, "Adaptive concurrency") pinned on hand-computed values.

In-process on a fake clock (the mutation tool sees these): the limit starts at 8 and stays within 1..256 whatever
it is asked to start at; slow start adds one per answer of a full window (8 -> 16 in one round); a throttle cuts
to floor(3/4 of the limit) once per round (a call sent before the cut does not cut again, one sent after it
does); a remaining-requests or remaining-tokens header of 0 cuts like a 429; a remaining-requests header at or
below the calls in flight holds; rpm / tpm cap the limit at ceil(rate / 60 x latency) + 1, latency and tokens per
call being running means (weight 0.2 on the newest). The console-script refusals of out-of-range `rpm=` / `tpm=`
are at the end; tests/models/test_concurrency.py runs the gate against a throttling server.
"""

from __future__ import annotations

import asyncio
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE
from rubric_engine.models.concurrency import (AUTO, AUTO_MAX, AUTO_MIN, AUTO_START, AdaptiveGate, Slot, ceiling,
                                              parse_concurrency)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def take(gate: AdaptiveGate, n: int | None = None) -> list[Slot]:
    """Take `n` places (default: every free one) without waiting."""
    async def main() -> list[Slot]:
        return [await gate.acquire() for _ in range(gate.allowed - gate.in_flight if n is None else n)]
    return asyncio.run(main())


def answer_all(gate: AdaptiveGate, slots: list[Slot], **kw: Any) -> None:
    for s in slots:
        s.answered(**kw)
        gate.release(s)


def test_the_documented_constants() -> None:
    assert (AUTO, AUTO_START, AUTO_MIN, AUTO_MAX) == ("auto", 8, 1, 256)
    gate = AdaptiveGate(clock=Clock())
    assert gate.allowed == 8 and gate.report() == {"mode": "auto", "start": 8, "final": 8, "min": 8, "max": 8,
                                                   "throttles": 0}


@pytest.mark.parametrize(("start", "allowed"), [(0, 1), (-5, 1), (1, 1), (256, 256), (257, 256), (10_000, 256)])
def test_the_start_is_held_within_1_to_256(start: int, allowed: int) -> None:
    gate = AdaptiveGate(start=start, clock=Clock())
    assert gate.allowed == allowed and gate.start == allowed and gate.report()["min"] == allowed


def test_parse_concurrency_and_its_refusals() -> None:
    assert parse_concurrency(" AUTO ") == "auto" and parse_concurrency("Auto") == "auto"
    assert parse_concurrency(1) == 1 and parse_concurrency(256) == 256
    assert ceiling("auto") == 256 and ceiling(5) == 5 and ceiling(1) == 1
    for bad, shown in ((0, "0"), (-3, "-3"), (False, "False"), ("8", "8"), (1.0, "1.0"), (None, "None")):
        with pytest.raises(ValueError) as e:
            parse_concurrency(bad)
        assert str(e.value) == f"concurrency={shown} is not valid; give a whole number >= 1 or auto"


def test_slow_start_adds_one_per_answer_of_a_full_window() -> None:
    gate = AdaptiveGate(start=8, clock=Clock())
    slots = take(gate)
    assert gate.in_flight == 8
    for k, s in enumerate(slots, 1):
        s.answered()
        gate.release(s)
        assert gate.limit == 8 + k  # every one of the 8 calls saw the window full
    assert gate.allowed == 16 and gate.report()["max"] == 16 and gate.in_flight == 0


def test_a_call_that_never_saw_the_window_full_does_not_grow_it() -> None:
    gate = AdaptiveGate(start=3, clock=Clock())
    slots = take(gate, 2)  # two of three places: the limit is not what holds calls back
    answer_all(gate, slots)
    assert gate.limit == 3
    slots = take(gate, 3)  # the third fills the window: all three calls in flight saw it full
    answer_all(gate, slots)
    assert gate.limit == 6


def test_a_throttle_cuts_to_three_quarters_rounded_down_once_per_round() -> None:
    gate = AdaptiveGate(start=13, clock=Clock())
    before = take(gate)
    before[0].throttled()
    gate.release(before[0])
    assert gate.allowed == 9 and gate.throttles == 1 and not gate.slow_start  # floor(13 x 0.75) = 9
    for s in before[1:5]:  # sent before the cut: already answered by it
        s.throttled()
        gate.release(s)
    assert gate.allowed == 9 and gate.throttles == 1
    for s in before[5:]:  # a failure that is no throttle teaches nothing
        gate.release(s)
    assert gate.allowed == 9 and gate.in_flight == 0
    after = take(gate, 1)[0]  # sent after the cut: its 429 is news
    after.throttled()
    gate.release(after)
    assert gate.allowed == 6 and gate.throttles == 2 and gate.report()["min"] == 6  # floor(9 x 0.75)


def test_after_the_first_throttle_growth_is_one_per_window() -> None:
    gate = AdaptiveGate(start=4, clock=Clock())
    s = take(gate)
    s[0].throttled()
    gate.release(s[0])  # 4 -> 3
    for x in s[1:]:
        gate.release(x)
    slots = take(gate)  # 3 places, all taken
    answer_all(gate, slots)
    expected = 3.0
    for _ in range(3):
        expected += 1.0 / expected
    assert gate.limit == pytest.approx(expected) and gate.allowed == 3  # 3 + 1/3 + 1/3.33 + 1/3.63 = 3.9
    slots = take(gate)
    answer_all(gate, slots[:1])
    assert gate.allowed == 4


def test_the_limit_never_goes_below_one() -> None:
    gate = AdaptiveGate(start=1, clock=Clock())
    for _ in range(3):
        s = take(gate)[0]
        s.throttled()
        gate.release(s)
    assert gate.allowed == 1 and gate.limit == 1.0 and gate.throttles == 3


def test_the_limit_never_goes_above_256() -> None:
    gate = AdaptiveGate(start=250, clock=Clock())
    answer_all(gate, take(gate))
    assert gate.limit == 256 and gate.report()["max"] == 256


@pytest.mark.parametrize("headers", [{"x-ratelimit-remaining-requests": "0"}, {"x-ratelimit-remaining-tokens": "0"},
                                     {"llm_provider-x-ratelimit-remaining-requests": "0"},
                                     {"llm_provider-x-ratelimit-remaining-tokens": "0.0"}])
def test_a_header_saying_nothing_is_left_cuts_like_a_throttle(headers: dict[str, str]) -> None:
    gate = AdaptiveGate(start=8, clock=Clock())
    slots = take(gate)
    slots[0].answered(headers)
    gate.release(slots[0])
    assert gate.allowed == 6 and gate.throttles == 1


@pytest.mark.parametrize(("left", "limit"), [("7", 8), ("6", 8), ("8", 9), ("1e3", 9), ("lots", 9), ("inf", 9)])
def test_remaining_requests_at_or_below_the_calls_in_flight_hold_the_limit(left: str, limit: int) -> None:
    gate = AdaptiveGate(start=8, clock=Clock())
    slots = take(gate)  # 8 in flight; after the release 7
    slots[0].answered({"x-ratelimit-remaining-requests": left})
    gate.release(slots[0])
    assert gate.limit == limit and gate.throttles == 0


def test_rpm_caps_the_limit_at_the_calls_the_rate_keeps_busy() -> None:
    clock = Clock()
    gate = AdaptiveGate(start=2, rpm=90, clock=clock)
    slots = take(gate)
    clock.now += 4.0  # 1.5 calls/s at 4 s a call keep 6 busy: cap ceil(6) + 1 = 7
    answer_all(gate, slots)
    assert gate.latency == 4.0 and gate.limit == 4
    for _ in range(3):
        slots = take(gate)
        clock.now += 4.0
        answer_all(gate, slots)
    assert gate.allowed == 7 and gate.limit == 7


def test_latency_and_tokens_are_running_means_weighting_the_newest_by_a_fifth() -> None:
    clock = Clock()
    gate = AdaptiveGate(start=1, tpm=1200, clock=clock)
    s = take(gate)[0]
    clock.now += 10.0
    s.answered(None, 100)
    gate.release(s)
    assert (gate.latency, gate.tokens) == (10.0, 100.0)
    assert gate.limit == 2  # tpm 1200 / 100 tokens = 12 calls a minute, at 10 s: ceil(2) + 1 = 3, not reached
    s = take(gate, 1)[0]
    clock.now += 5.0
    s.answered(None, 0)  # a reply without a token count leaves the tokens mean alone
    gate.release(s)
    assert gate.latency == pytest.approx(0.8 * 10 + 0.2 * 5) and gate.tokens == 100.0
    s = take(gate, 1)[0]
    clock.now += 20.0
    s.answered(None, 600)
    gate.release(s)
    assert gate.latency == pytest.approx(0.8 * 9 + 0.2 * 20) and gate.tokens == pytest.approx(0.8 * 100 + 0.2 * 600)


def test_with_rpm_and_tpm_the_tighter_one_caps() -> None:
    clock = Clock()
    # rpm 600 at 3 s keeps 30 busy; tpm 6000 at 1,000 tokens a call is 6 a minute: ceil(0.3) + 1 = 2
    gate = AdaptiveGate(start=1, rpm=600, tpm=6000, clock=clock)
    for _ in range(4):
        slots = take(gate)
        clock.now += 3.0
        answer_all(gate, slots, tokens=1000)
    assert gate.allowed == 2
    gate = AdaptiveGate(start=1, rpm=20, tpm=10**9, clock=clock)  # rpm the tighter: 20/60 x 3 = 1, +1
    for _ in range(4):
        slots = take(gate)
        clock.now += 3.0
        answer_all(gate, slots, tokens=1000)
    assert gate.allowed == 2


def test_a_rate_cap_below_the_lower_bound_keeps_one_call() -> None:
    clock = Clock()
    gate = AdaptiveGate(start=1, rpm=0.001, clock=clock)
    s = take(gate)[0]
    s.answered()
    gate.release(s)  # latency 0: ceil(0) + 1 = 1
    assert gate.allowed == 1 and math.isclose(gate.latency or 0.0, 0.0)


def test_waiters_are_served_first_come_and_the_place_passes_on_when_one_is_cancelled() -> None:
    async def main() -> None:
        gate = AdaptiveGate(start=2, clock=Clock())
        held = [await gate.acquire(), await gate.acquire()]
        order: list[int] = []

        async def one(i: int) -> None:
            slot = await gate.acquire()
            order.append(i)
            await asyncio.sleep(0)
            gate.release(slot)

        tasks = [asyncio.create_task(one(i)) for i in range(3)]
        await asyncio.sleep(0)
        assert gate.in_flight == 2
        tasks[0].cancel()
        await asyncio.sleep(0)
        for s in held:
            gate.release(s)
        await asyncio.gather(*tasks, return_exceptions=True)
        assert order == [1, 2] and gate.in_flight == 0

    asyncio.run(main())


def test_a_waiter_woken_then_cancelled_hands_its_place_to_the_next() -> None:
    async def main() -> None:
        gate = AdaptiveGate(start=1, clock=Clock())
        first = await gate.acquire()
        got: list[str] = []

        async def second() -> None:
            await gate.acquire()
            got.append("second")

        async def third() -> None:
            slot = await gate.acquire()
            got.append("third")
            gate.release(slot)

        t2, t3 = asyncio.create_task(second()), asyncio.create_task(third())
        await asyncio.sleep(0)
        gate.release(first)  # wakes second's waiter (its place counted) ...
        t2.cancel()          # ... which is cancelled before it runs: the place goes to third
        await asyncio.gather(t2, t3, return_exceptions=True)
        assert got == ["third"] and gate.in_flight == 0

    asyncio.run(main())


def test_slot_records_its_outcome() -> None:
    s = Slot(1.0, 0, 0)
    assert (s.outcome, s.headers, s.tokens) == ("", None, 0)
    s.answered({"a": "1"}, 7)
    assert (s.outcome, s.headers, s.tokens) == ("answered", {"a": "1"}, 7)
    s.throttled()
    assert s.outcome == "throttled"


@pytest.mark.slow
@pytest.mark.parametrize(("option", "line"), [
    ("rpm=0", "rpm=0 is not valid; give a number > 0 and <= 1e+09 (or null)"),
    ("rpm=2e9", "rpm=2000000000.0 is not valid; give a number > 0 and <= 1e+09 (or null)"),
    ("tpm=-5", "tpm=-5 is not valid; give a number > 0 and <= 1e+12 (or null)"),
    ("concurrency=0", "concurrency=0 is not valid; give a whole number >= 1 or auto"),
])
def test_out_of_range_rates_and_concurrency_are_refused_in_one_line(tmp_path: Path, env: dict[str, str],
                                                                    option: str, line: str) -> None:
    res = subprocess.run([EXE, "benchmark=heartbench_en", option, "candidate=mock", "judge=mock",
                          f"hydra.run.dir={tmp_path / 'r'}"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and line in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "r" / "samples.jsonl").exists()


def test_a_call_that_waited_grows_the_limit_when_answered() -> None:
    """A call that found the window full counts it as full: with 2 places, A and B in flight and C waiting,
    A's answer grows the limit to 3 (C is then let in), and C's answer to 4."""
    async def main() -> float:
        gate = AdaptiveGate(start=2, clock=Clock())
        a, b = await gate.acquire(), await gate.acquire()
        waiting = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        assert not waiting.done()
        a.answered()
        gate.release(a)
        c = await waiting
        assert gate.limit == 3 and gate.in_flight == 2
        c.answered()
        gate.release(c)
        gate.release(b)
        return gate.limit

    assert asyncio.run(main()) == 4


def test_one_release_lets_in_only_as_many_waiters_as_there_are_places() -> None:
    async def main() -> None:
        gate = AdaptiveGate(start=1, clock=Clock())
        first = await gate.acquire()
        tasks = [asyncio.create_task(gate.acquire()) for _ in range(2)]
        await asyncio.sleep(0)
        gate.release(first)  # no outcome: the limit stays 1
        await asyncio.sleep(0)
        assert gate.in_flight == 1 and [t.done() for t in tasks] == [True, False]
        gate.release(tasks[0].result())
        await asyncio.sleep(0)
        assert gate.in_flight == 1 and tasks[1].done()
        gate.release(tasks[1].result())
        assert gate.in_flight == 0

    asyncio.run(main())


def test_a_waiter_cancelled_before_its_turn_raises_cancelled_and_takes_no_place() -> None:
    async def main() -> None:
        gate = AdaptiveGate(start=1, clock=Clock())
        first = await gate.acquire()
        task = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        task.cancel()
        (result,) = await asyncio.gather(task, return_exceptions=True)
        assert isinstance(result, asyncio.CancelledError)
        gate.release(first)
        assert gate.in_flight == 0
        async with gate.slot() as slot:  # the context manager takes a place and gives it back
            assert gate.in_flight == 1 and isinstance(slot, Slot)
            slot.answered()
        assert gate.in_flight == 0

    asyncio.run(main())


def test_a_second_round_cuts_again_once() -> None:
    gate = AdaptiveGate(start=16, clock=Clock())
    first = take(gate)
    first[0].throttled()
    gate.release(first[0])  # 16 -> 12
    for s in first[1:]:
        gate.release(s)
    second = take(gate, 2)
    second[0].throttled()
    gate.release(second[0])  # sent after the first cut: 12 -> 9
    second[1].throttled()
    gate.release(second[1])  # sent before the second cut: no third cut
    assert gate.allowed == 9 and gate.throttles == 2


def test_an_answer_without_a_token_count_never_feeds_the_tpm_cap() -> None:
    clock = Clock()
    gate = AdaptiveGate(start=1, tpm=60, clock=clock)  # 60 tokens a minute
    for _ in range(3):
        slots = take(gate)
        clock.now += 1.0
        answer_all(gate, slots)  # no tokens counted: no cap can be derived, the limit grows freely
    assert gate.tokens is None and gate.allowed == 8


def test_rpm_alone_ignores_the_token_counts() -> None:
    clock = Clock()
    gate = AdaptiveGate(start=1, rpm=60, clock=clock)
    for _ in range(4):
        slots = take(gate)
        clock.now += 2.02  # 1 call/s x 2.02 s = 2.02 calls busy: ceil(2.02) + 1 = 4
        answer_all(gate, slots, tokens=500)
    assert gate.allowed == 4 and gate.tokens == pytest.approx(500.0)
