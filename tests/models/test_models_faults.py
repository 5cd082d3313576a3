"""ModelClient faults over real HTTP to the fake server, with an injected clock instead of wall time.

Why a virtual clock: whether a 429's Retry-After pauses the *whole* client, and how the rpm limiter
spaces requests, are questions about the waits the client asks for. Recording those waits (the clock
stands still; `sleep` only records) answers them exactly, on any machine load, with no duration
asserted. The HTTP path (LiteLLM -> OpenAI SDK -> httpx -> 127.0.0.1) is the real one.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.errors import FatalModelError, ModelCallError
from rubric_engine.models.client import CallResult, ModelClient
from rubric_engine.models.entries import ModelSpec
from rubric_engine.models.failures import classify, retry_after

MSGS = [{"role": "user", "content": "hello"}]


class VirtualClock:
    """Virtual time: `sleep(d)` records d, lets the other tasks run first, then moves the clock to the
    wake-up time, so a task checking the time during someone else's sleep sees it not yet over."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 9))
        wake = self.now + seconds
        for _ in range(5):
            await asyncio.sleep(0)
        self.now = max(self.now, wake)


@pytest.fixture(autouse=True)
def _key(fake_key: str) -> None:
    return None


def client(srv: FakeServer, clock: VirtualClock | None = None, **kw: Any) -> ModelClient:
    spec = ModelSpec(name="fake", model="openai/fake-model", api_base=srv.url, api_key_env="FAKE_KEY",
                     params=kw.pop("params", {}))
    extra = {"clock": clock, "sleep": clock.sleep} if clock else {}
    return ModelClient(spec, cache=None, **{"max_retries": 3, "backoff_base": 0.001, "backoff_max": 60.0,
                                            **extra, **kw})


def run_calls(c: ModelClient, n: int = 1, *, stagger: bool = False) -> list[Any]:
    """n concurrent complete() calls with distinct messages; exceptions returned, not raised."""
    async def main() -> list[Any]:
        try:
            return await asyncio.gather(*(c.complete([{"role": "user", "content": f"m{i}"}]) for i in range(n)),
                                        return_exceptions=True)
        finally:
            await c.aclose()
    return asyncio.run(main())


def _content(body: dict[str, Any]) -> str:
    return body["messages"][-1]["content"]


# -- 429 / Retry-After ----------------------------------------------------------------------------------
def test_retry_after_is_the_wait_before_the_retry(fake_server: FakeServer) -> None:
    clock = VirtualClock()
    fake_server.queue(Reply(status=429, headers={"Retry-After": "7"}), Reply(text="done"))
    [res] = run_calls(client(fake_server, clock))
    assert (res.text, res.attempts, len(fake_server.requests)) == ("done", 2, 2)
    assert clock.sleeps == [7.0]  # exactly the server's hint: no jitter, no extra wait


def test_retry_after_is_capped_at_backoff_max(fake_server: FakeServer) -> None:
    clock = VirtualClock()
    fake_server.queue(Reply(status=429, headers={"Retry-After": "120"}), Reply(text="done"))
    [res] = run_calls(client(fake_server, clock, backoff_max=2.5))
    assert res.text == "done" and clock.sleeps == [2.5]


def test_429_retry_after_pauses_the_whole_client(fake_server: FakeServer) -> None:
    """A second call that did not get the 429 still waits out the pause before its first request."""
    clock = VirtualClock()
    fake_server.queue(Reply(status=429, headers={"Retry-After": "9"}))
    c = client(fake_server, clock, concurrency=1)
    results = run_calls(c, 2)
    assert all(isinstance(r, CallResult) for r in results)
    assert [_content(b) for b in fake_server.requests][0] == "m0" and len(fake_server.requests) == 3
    # m0 sleeps 9 s before its retry; m1, which never saw a 429, is held by the limiter for the same 9 s
    assert sorted(clock.sleeps) == [9.0, 9.0], clock.sleeps


def test_without_retry_after_other_calls_are_not_paused(fake_server: FakeServer) -> None:
    clock = VirtualClock()
    fake_server.queue(Reply(status=503))
    c = client(fake_server, clock, concurrency=1, backoff_base=4.0, backoff_max=4.0)
    results = run_calls(c, 2)
    assert all(isinstance(r, CallResult) for r in results)
    assert len(clock.sleeps) == 1 and 0.0 <= clock.sleeps[0] <= 4.0  # only the failed call's own backoff


def test_rpm_limiter_reserves_evenly_spaced_slots(fake_server: FakeServer) -> None:
    clock = VirtualClock()
    results = run_calls(client(fake_server, clock, concurrency=8, rpm=600), 6)  # one request per 0.1 s
    assert all(isinstance(r, CallResult) for r in results)
    assert sorted(clock.sleeps) == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])


def test_backoff_grows_exponentially_with_full_jitter(fake_server: FakeServer) -> None:
    clock = VirtualClock()
    fake_server.handler = lambda body: Reply(status=500)
    c = client(fake_server, clock, max_retries=3, backoff_base=1.0, backoff_max=60.0)
    [err] = run_calls(c)
    assert type(err) is ModelCallError and err.attempts == 4 == len(fake_server.requests)
    assert len(clock.sleeps) == 3
    for attempt, slept in enumerate(clock.sleeps, start=1):
        assert 0.0 <= slept <= 2 ** (attempt - 1)


def test_retry_after_http_date_in_the_past_means_now() -> None:
    class Exc(Exception):
        litellm_response_headers = {"Retry-After": email.utils.formatdate(0, usegmt=True)}

    assert retry_after(Exc("x")) == 0.0


# -- the default "transient" classification --------------------------------------------------------------
def test_an_unrecognised_error_is_transient_and_retried() -> None:
    class Weird(Exception):
        pass

    failure = classify(Weird("socket said something odd"), None)
    assert (failure.fatal, failure.kind, failure.status) == (False, "transient", None)


def test_an_unknown_status_line_is_retried_then_reported(fake_server: FakeServer) -> None:
    clock = VirtualClock()
    fake_server.handler = lambda body: Reply(raw="<html>gateway</html>", status=200)  # not JSON at all
    [err] = run_calls(client(fake_server, clock, max_retries=1))
    assert type(err) is ModelCallError and err.attempts == 2 == len(fake_server.requests)
    assert "max_retries" in str(err)  # the transient advice


# -- missing credentials ---------------------------------------------------------------------------------
def test_missing_credentials_is_fatal_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no key anywhere LiteLLM answers HTTP 500 'Missing credentials': one fatal error, no retries."""
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    clock = VirtualClock()
    spec = ModelSpec(name="gpt", model="openai/gpt-4o-mini")  # no api_base, no api_key_env, no key in env
    c = ModelClient(spec, cache=None, max_retries=3, clock=clock, sleep=clock.sleep)
    [err] = run_calls(c)
    assert isinstance(err, FatalModelError) and err.attempts == 1 and clock.sleeps == []
    msg = str(err)
    assert "$OPENAI_API_KEY" in msg and "\n" not in msg
    assert c.stats.retries == 0 and c.stats.errors == 1


# -- replies ---------------------------------------------------------------------------------------------
def _raw_completion(content: Any) -> str:
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "fake-model",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}})


def test_content_null_is_an_empty_completion_not_a_retry(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(raw=_raw_completion(None)))
    [res] = run_calls(client(fake_server))
    assert (res.text, res.attempts, res.prompt_tokens, len(fake_server.requests)) == ("", 1, 3, 1)


def test_unpriced_model_cost_is_unknown_not_zero(fake_server: FakeServer) -> None:
    c = client(fake_server)
    [res] = run_calls(c, 1)
    assert res.cost is None
    assert c.stats.cost_unknown_calls == 1 and c.stats.cost == 0.0  # 0.0 is the sum over *known* costs


def test_priced_model_cost_is_known(fake_server: FakeServer) -> None:
    spec = ModelSpec(name="g", model="openai/gpt-4o-2024-11-20", api_base=fake_server.url, api_key_env="FAKE_KEY")
    fake_server.queue(Reply(text="hi", usage=(1000, 1000)))
    c = ModelClient(spec, cache=None, max_retries=0)
    [res] = run_calls(c)
    assert res.cost is not None and res.cost > 0 and c.stats.cost_unknown_calls == 0
