"""The limits protocol (models/limits.py): the shared state's rules on a fake clock (one gate and one bucket per
key, leases, abandoned waits, idle keys forgotten, rates the latest asker sets), the limit key (a digest, never the
key), and cluster limits (rubric_engine/cluster/limits.py) driven through ModelClient against the fake server with
the actor's methods called in this process, so two clients share one rpm without Ray (tests/cluster/ runs the same
over a real Ray cluster)."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from fakeserver import FakeServer, Reply
from rubric_engine.cluster.limits import ClusterLimits, ClusterSource, limits_source
from rubric_engine.errors import ConfigError
from rubric_engine.models.client import ModelClient
from rubric_engine.models.entries import ModelSpec
from rubric_engine.models.limits import LOCAL, LocalLimits, SharedLimits, limit_key

import pytest


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def spec(api_base: str | None = "http://h:1/v1", key_env: str | None = "K1", model: str = "openai/m") -> ModelSpec:
    return ModelSpec.from_config({"name": "m", "model": model, "api_base": api_base, "api_key_env": key_env},
                                 role="judge")


def test_the_limit_key_is_the_endpoint_and_a_digest_never_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-live-abcdef0123456789"
    name = limit_key(spec(), secret)
    assert name == "http://h:1/v1|" + hashlib.sha256(secret.encode()).hexdigest()[:16] and secret not in name
    assert limit_key(spec(), "sk-other") != name  # another key: another limit
    assert limit_key(spec(api_base="http://h:2/v1"), secret) != name  # another endpoint: another limit
    assert limit_key(spec(api_base="http://h:1/v1/"), secret) == name
    monkeypatch.setenv("OPENAI_API_KEY", secret)  # no key given: the provider's own variable names the limit
    assert limit_key(spec(api_base=None, key_env=None), None) == "openai|" + name.split("|")[1]


def test_one_gate_per_key_shared_by_every_caller() -> None:
    async def main() -> None:
        clock = Clock()
        shared = SharedLimits(clock, clock.sleep)
        reports = [await shared.acquire("a", f"t{i}", True, None, None, 60.0) for i in range(8)]  # the gate starts at 8
        assert reports[-1]["final"] == 8
        ninth = asyncio.create_task(shared.acquire("a", "t8", True, None, None, 60.0))
        other = await shared.acquire("b", "u0", True, None, None, 60.0)  # another key has its own gate
        await asyncio.sleep(0)
        assert not ninth.done() and other is not None
        await shared.release("a", "t0", "throttled", None, 0)  # a 429: 8 -> 7 (a tenth off) for every caller of "a"
        await asyncio.sleep(0)
        assert not ninth.done()
        held = await shared.held()
        assert held["a"]["in_flight"] == 7 and held["a"]["gate"]["final"] == 7 and held["b"]["gate"]["final"] == 8
        await shared.release("a", "t1", "answered", None, 0)
        await asyncio.wait_for(ninth, 1)  # 6 in flight under 7: the waiter gets its place
        assert (await shared.held())["a"]["in_flight"] == 7

    asyncio.run(main())


def test_rpm_is_the_keys_rate_whoever_asks_and_the_latest_rates_win() -> None:
    async def main() -> None:
        clock = Clock()
        shared = SharedLimits(clock, clock.sleep)
        starts = []
        for i in range(4):  # four callers, one bucket: a start a second at rpm=60
            await shared.acquire("a", f"t{i}", False, 60.0, None, 60.0)
            starts.append(clock.now)
            await shared.release("a", f"t{i}", "answered", None, 0)
        assert starts == [0.0, 1.0, 2.0, 3.0]
        await shared.acquire("a", "x", False, 30.0, None, 60.0)  # a run asking 30 rpm: the key's rate from now on
        await shared.acquire("a", "y", False, 30.0, None, 60.0)
        assert clock.now == 6.0
        held = await shared.held()
        assert held == {"a": {"rpm": 30.0, "tpm": None, "in_flight": 2, "gate": None}}
        await shared.pause("a", 10.0)  # Retry-After: no start on this key before it ends
        await shared.acquire("a", "z", False, 30.0, None, 60.0)
        assert clock.now >= 16.0

    asyncio.run(main())


def test_tokens_answered_push_the_keys_next_start_back() -> None:
    async def main() -> None:
        clock = Clock()
        shared = SharedLimits(clock, clock.sleep)
        await shared.acquire("a", "t0", False, None, 6000.0, 60.0)
        await shared.release("a", "t0", "answered", None, 100)  # 100 tokens of 6,000 a minute: 1 s
        await shared.acquire("a", "t1", False, None, 6000.0, 60.0)
        assert clock.now == pytest.approx(1.0)

    asyncio.run(main())


async def saturated(clock: Clock, waiter: str) -> tuple[SharedLimits, "asyncio.Task[Any]"]:
    """Key a's eight places (auto's start) taken by holders that die, never releasing (5 s leases), and one more
    acquire, `waiter`, queued behind them; idle keys forgotten after 100 s."""
    shared = SharedLimits(clock, clock.sleep, idle=100.0)
    for i in range(8):
        await shared.acquire("a", f"t{i}", True, None, None, 5.0)
    queued = asyncio.create_task(shared.acquire("a", waiter, True, None, None, 5.0))
    await asyncio.sleep(0)
    return shared, queued


def test_a_place_whose_lease_ran_out_comes_back_and_idle_keys_are_forgotten() -> None:
    async def main() -> None:
        clock = Clock()
        shared, late = await saturated(clock, "late")
        assert not late.done()
        clock.now = 6.0  # every lease ended
        await shared.acquire("b", "other", False, None, None, 5.0)  # any call sweeps expired places
        await asyncio.wait_for(late, 1)
        assert (await shared.held())["a"]["in_flight"] == 1
        await shared.release("a", "late", "answered", None, 0)
        await shared.release("b", "other", "answered", None, 0)
        clock.now = 200.0
        await shared.acquire("c", "t", False, None, None, 5.0)
        assert set(await shared.held()) == {"c"}  # a and b idle for more than 100 s with nothing in flight
        await shared.reset("c")
        assert await shared.held() == {}

    asyncio.run(main())


def test_a_key_whose_expired_places_woke_a_waiter_is_not_forgotten() -> None:
    async def main() -> None:
        clock = Clock()
        shared, waiter = await saturated(clock, "w")
        clock.now = 500.0  # every lease ended and the key looks idle, but the sweep hands the waiter a place
        await shared.acquire("b", "x", False, None, None, 5.0)
        await asyncio.wait_for(waiter, 1)
        assert (await shared.held())["a"]["in_flight"] == 1  # its state kept: the waiter's release will find it
        await shared.release("a", "w", "answered", None, 0)
        assert (await shared.held())["a"]["gate"] is not None

    asyncio.run(main())


def test_an_abandoned_wait_gives_its_place_back_when_granted() -> None:
    async def main() -> None:
        clock = Clock()
        shared = SharedLimits(clock, clock.sleep)
        for i in range(8):
            await shared.acquire("a", f"t{i}", True, None, None, 60.0)
        waiting = asyncio.create_task(shared.acquire("a", "gone", True, None, None, 60.0))
        await asyncio.sleep(0)
        await shared.abandon("a", "gone")  # its caller was cancelled while the actor still waited
        await shared.release("a", "t0", "", None, 0)
        assert await asyncio.wait_for(waiting, 1) is None
        assert (await shared.held())["a"]["in_flight"] == 7  # the abandoned place went straight back
        await shared.abandon("a", "t1")  # granted already: given back at once
        assert (await shared.held())["a"]["in_flight"] == 6

    asyncio.run(main())


# ----------------------------------------------------------------------------- through ModelClient, no Ray

class _Method:
    """An actor method called in this process: `.remote(...)` starts it on the running loop."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any) -> "asyncio.Task[Any]":
        return asyncio.ensure_future(self.fn(*args))


class InProcessActor:
    def __init__(self, shared: SharedLimits) -> None:
        for name in ("acquire", "release", "abandon", "pause"):
            setattr(self, name, _Method(getattr(shared, name)))


class InProcessSource(ClusterSource):
    def __init__(self, shared: SharedLimits) -> None:
        super().__init__()
        self._actor = InProcessActor(shared)


def test_two_clients_of_one_key_share_one_rpm_through_the_fake_server(fake_key: str) -> None:
    shared = SharedLimits()
    with FakeServer(lambda body: Reply(text="ok")) as srv:
        entry = ModelSpec.from_config({"name": "c", "model": "openai/c", "api_base": srv.url, "api_key_env": fake_key},
                                      role="candidate")

        async def main() -> list[ModelClient]:
            async with ModelClient(entry, cache=None) as warm:  # LiteLLM loaded first: its import is not a call
                await warm.complete([{"role": "user", "content": "warm"}])
            srv.reset()
            source = InProcessSource(shared)  # each client as if in its own process: one actor between them
            clients = [ModelClient(entry, cache=None, concurrency=4, rpm=600, limits=source) for _ in range(2)]
            await asyncio.gather(*(c.complete([{"role": "user", "content": f"{n}-{i}"}])
                                   for n, c in enumerate(clients) for i in range(5)))
            for c in clients:
                await c.aclose()
            return clients

        clients = asyncio.run(main())
        times = sorted(srv.request_times)
    assert all(isinstance(c.limits, ClusterLimits) for c in clients)
    gaps = [b - a for a, b in zip(times, times[1:])]
    # 600 rpm for both together: starts 0.1 s apart (each client's own 600 rpm would allow 0.05), arrival jitter apart
    assert len(times) == 10 and times[-1] - times[0] >= 0.85 and min(gaps) >= 0.05, gaps
    held = asyncio.run(shared.held())
    assert list(held) == [limit_key(entry, "sk-test")] and "sk-test" not in str(held)
    assert held[limit_key(entry, "sk-test")]["in_flight"] == 0


def test_the_choices_and_a_whole_number_without_rates_asks_nothing() -> None:
    assert limits_source("local") is LOCAL
    with pytest.raises(ConfigError, match="limits=everywhere is not valid; use auto"):
        limits_source("everywhere")
    plain = ClusterSource().limits(spec(), concurrency=4, rpm=None, tpm=None)  # no actor asked for: no Ray needed
    assert isinstance(plain, LocalLimits) and plain.gate is None
    auto = limits_source("auto").limits(spec(), concurrency="auto", rpm=None, tpm=None)  # not on Ray: local
    assert isinstance(auto, LocalLimits) and auto.gate is not None


def test_two_auto_clients_of_one_key_find_one_limit_and_say_so(fake_key: str) -> None:
    from rubric_engine.report.costlines import cost_lines
    from rubric_engine.run.callnotes import call_notes

    shared, limit = SharedLimits(), 6
    with FakeServer() as srv:
        def handler(body: dict[str, Any]) -> Reply:
            # a call long enough that a loaded machine still fills the limit
            return Reply(status=429) if srv.in_flight > limit else Reply(text="ok", delay=0.2)

        srv.handler = handler
        entry = ModelSpec.from_config({"name": "c", "model": "openai/c", "api_base": srv.url, "api_key_env": fake_key},
                                      role="candidate")

        async def main() -> list[ModelClient]:
            source = InProcessSource(shared)
            clients = [ModelClient(entry, cache=None, concurrency="auto", max_retries=30, backoff_base=0.01,
                                   backoff_max=0.05, limits=source) for _ in range(2)]
            texts = await asyncio.gather(*(c.complete([{"role": "user", "content": f"{n}-{i}"}])
                                           for n, c in enumerate(clients) for i in range(80)))
            assert {t.text for t in texts} == {"ok"} and len(texts) == 160
            for c in clients:
                await c.aclose()
            return clients

        clients = asyncio.run(main())
    gate = asyncio.run(shared.held())[limit_key(entry, "sk-test")]["gate"]
    # one limit for both near N (two gates of their own would hold near N each); a loaded machine's calls reach the
    # server later than the gate grants them, so the gate may stand a call or two above N
    assert gate["throttles"] >= 1 and limit - 2 <= gate["final"] <= limit + 2, gate
    report = clients[0].gate.report()
    assert report["scope"] == "cluster" and report["mode"] == "auto"
    line = cost_lines({"judge": call_notes(clients[:1])})
    assert len(line) == 1 and line[0].endswith("; one limit for its key across the Ray cluster"), line
