"""ModelClient rules that its mutation survivors showed no test pinned (see bench/mutation.py).

Through the real path where it is user-facing: LiteLLM over HTTP to the fake server on 127.0.0.1, the
result cache on disk, waits recorded by an injected clock (no duration asserted). What each test names:
counters that count, cache entries read back field by field, the keyless default for a local server,
the advice line per failure kind, LiteLLM's own retries switched off, and each event loop's HTTP clients
handed back to the runtime once.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.errors import FatalModelError, ModelCallError
from rubric_engine.models.cache import ResultCache
from rubric_engine.models.client import CallResult, ModelClient
from rubric_engine.models.entries import ModelSpec, cache_key
from rubric_engine.models.litellm_runtime import LiteLLMRuntime
from rubric_engine.models.mock import mock_reply, mock_tokens
from rubric_engine.models.request import Request, VerdictJSON
from rubric_engine.models.redact import redact

MSGS = [{"role": "user", "content": "hello there"}]


class Clock:
    """Virtual time: sleeps are recorded, never waited."""

    def __init__(self) -> None:
        self.now, self.sleeps = 1000.0, []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class RecordingRuntime(LiteLLMRuntime):
    """The real runtime, recording which loops clients take and hand back (and, if asked, still loading)."""

    def __init__(self, loading: bool = False) -> None:
        super().__init__()
        self.used: list[int] = []
        self.released: list[int] = []
        self._pretend_loading = loading

    @property
    def loading(self) -> bool:
        return self._pretend_loading or super().loading

    def use_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self.used.append(id(loop))
        super().use_loop(loop)

    async def release_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self.released.append(id(loop))
        await super().release_loop(loop)


def spec_for(srv: FakeServer | None, **kw: Any) -> ModelSpec:
    base = {"name": "fake", "model": "openai/fake-model", "api_key_env": "FAKE_KEY"}
    if srv is not None:
        base["api_base"] = srv.url
    return ModelSpec(**{**base, **kw})


def client_for(srv: FakeServer | None, cache: ResultCache | None = None, spec_kw: dict | None = None,
               **kw: Any) -> ModelClient:
    return ModelClient(spec_for(srv, **(spec_kw or {})), cache=cache,
                       **{"max_retries": 0, "backoff_base": 0.001, **kw})


def calls(client: ModelClient, *kws: dict[str, Any], close: bool = True) -> list[Any]:
    """complete() calls (one plain call by default) one after another in one loop; exceptions are returned."""
    kws = kws or ({},)

    async def main() -> list[Any]:
        out: list[Any] = []
        try:
            for kw in kws:
                try:
                    out.append(await client.complete(**{"messages": MSGS, **kw}))
                except Exception as exc:  # noqa: BLE001 - returned for the assertions
                    out.append(exc)
        finally:
            if close:
                await client.aclose()
        return out
    return asyncio.run(main())


pytestmark = pytest.mark.usefixtures("fake_key")  # every test here speaks to the fake server with the fake key


# -- counters ----------------------------------------------------------------------------------------------
def test_every_call_cache_hit_and_rejection_is_counted(fake_server: FakeServer, cache: ResultCache) -> None:
    c = client_for(fake_server, cache)

    def refuse(text: str) -> None:
        raise ValueError("no")

    out = calls(c, {}, {}, {}, {"accept": refuse}, {"accept": refuse})
    assert [type(o) for o in out] == [CallResult] * 3 + [ValueError] * 2
    assert (c.stats.calls, c.stats.requests, c.stats.cache_hits, c.stats.rejected) == (5, 1, 4, 2)
    assert out[3].call_result.cached is True  # a rejected cache hit still carries its result


def test_a_refused_cache_hit_is_not_returned(fake_server: FakeServer, cache: ResultCache) -> None:
    seen: list[str] = []

    def refuse(text: str) -> None:
        seen.append(text)
        raise ValueError("unusable")

    first = calls(client_for(fake_server, cache), {})
    again = calls(client_for(fake_server, cache), {"accept": refuse})
    assert isinstance(first[0], CallResult) and isinstance(again[0], ValueError)
    assert seen == [first[0].text] and len(fake_server.requests) == 1


# -- the cache: what separates entries, what a hit reads back ---------------------------------------------
def test_response_format_and_repeat_each_have_their_own_entry(fake_server: FakeServer, cache: ResultCache) -> None:
    fmt = {"type": "json_object"}
    out = calls(client_for(fake_server, cache), {}, {"response_format": fmt}, {"repeat": 1}, {"repeat": 2},
                {}, {"response_format": fmt}, {"repeat": 1}, {"repeat": 2})
    assert len(fake_server.requests) == 4  # four distinct requests, each paid once
    assert [o.cached for o in out] == [False] * 4 + [True] * 4


def test_a_cache_hit_reads_back_every_field(fake_server: FakeServer, cache: ResultCache) -> None:
    spec = spec_for(fake_server)
    cache.set(cache_key(spec, MSGS, None, 0), {"text": "stored", "prompt_tokens": 12, "completion_tokens": 7,
                                               "cost": 0.25, "finish_reason": "length"})
    [hit] = calls(ModelClient(spec, cache=cache))
    assert hit == CallResult("stored", 12, 7, 0.25, True, 0, "length")
    assert fake_server.requests == []


def test_a_cache_entry_without_usage_reads_as_zero_tokens(fake_server: FakeServer, cache: ResultCache) -> None:
    spec = spec_for(fake_server)
    cache.set(cache_key(spec, MSGS, None, 0), {"text": "bare", "prompt_tokens": None})
    [hit] = calls(ModelClient(spec, cache=cache))
    assert hit == CallResult("bare", 0, 0, None, True, 0, None)


def test_a_priced_reply_is_cached_with_its_cost(fake_server: FakeServer, cache: ResultCache) -> None:
    spec = spec_for(fake_server, model="openai/gpt-4o-2024-11-20")
    fake_server.queue(Reply(text="hi", usage=(1000, 1000), finish_reason="length"))
    [fresh] = calls(ModelClient(spec, cache=cache))
    [hit] = calls(ModelClient(spec, cache=cache))
    assert fresh.cost is not None and fresh.cost > 0
    assert (hit.text, hit.prompt_tokens, hit.completion_tokens, hit.cost, hit.finish_reason, hit.cached) == \
        ("hi", 1000, 1000, fresh.cost, "length", True)


# -- the mock model ---------------------------------------------------------------------------------------
def test_mock_replies_are_counted_and_never_cached(cache: ResultCache) -> None:
    c = ModelClient(ModelSpec(name="m", model="mock/any"), cache=cache)
    seen: list[str] = []
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there, how are you?"}]
    [a, b] = calls(c, {"messages": msgs, "accept": seen.append}, {"messages": msgs})
    text = mock_reply("mock/any", Request(msgs))
    prompt = mock_tokens("be brief") + mock_tokens("hello there, how are you?")
    assert a == b == CallResult(text, prompt, mock_tokens(text), 0.0, False, 1)
    assert seen == [text]
    s = c.stats
    assert (s.calls, s.requests, s.cache_hits, s.prompt_tokens, s.completion_tokens) == \
        (2, 2, 0, 2 * prompt, 2 * mock_tokens(text))
    assert len(cache) == 0


def test_a_mock_model_answers_from_the_request() -> None:
    """What a valid answer looks like rides on the request (models/request.py) to the mock: nothing else tells it."""
    shape = VerdictJSON(items=2, list_key="criteria", fields={"id": "id", "reasoning": "text", "met": "bool"})
    c = ModelClient(ModelSpec(name="m", model="mock/judge"), cache=None)

    async def send() -> Any:
        try:
            return await c.send(Request(MSGS, role="judge", answer=shape))
        finally:
            await c.aclose()
    res = asyncio.run(send())
    assert res.text == mock_reply("mock/judge", Request(MSGS, answer=shape))
    assert [i["id"] for i in json.loads(res.text)["criteria"]] == [1, 2]


def test_a_refused_mock_reply_carries_its_result() -> None:
    c = ModelClient(ModelSpec(name="m", model="mock/any"), cache=None)

    def refuse(text: str) -> None:
        raise ValueError(text)

    [err] = calls(c, {"accept": refuse})
    assert isinstance(err, ValueError) and err.call_result.text == str(err) and c.stats.rejected == 1


# -- the key -----------------------------------------------------------------------------------------------
def test_a_missing_key_fails_each_call_before_any_request(fake_server: FakeServer,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAKE_KEY")
    c = client_for(fake_server, spec_kw={"model": "openai/some-model"})
    errs = calls(c, {}, {})
    assert all(isinstance(e, FatalModelError) for e in errs)
    assert errs[0].model == "openai/some-model" and errs[0].attempts == 0 and "(after 0 attempts)" in str(errs[0])
    assert c.stats.errors == 2 and fake_server.requests == []


def test_a_local_server_without_a_key_entry_gets_the_placeholder_key(fake_server: FakeServer) -> None:
    c = client_for(fake_server, spec_kw={"api_key_env": None})
    calls(c, {})
    assert fake_server.auth_headers == ["Bearer no-key"]


def test_the_entrys_key_is_registered_for_redaction(fake_server: FakeServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "entrykey" + uuid.uuid4().hex[:12]  # new per run (the registry is per process); not key-shaped
    monkeypatch.setenv("FAKE_KEY", secret)
    [res] = calls(client_for(fake_server))
    assert isinstance(res, CallResult) and fake_server.auth_headers == [f"Bearer {secret}"]
    monkeypatch.delenv("FAKE_KEY")  # masked because it was sent, not because it is in the environment now
    assert redact(f"log line {secret} end") == "log line *** end"


def test_a_short_key_echoed_in_an_error_is_masked(fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key too short for the global registry (< 6 characters) is still masked in its own call's error."""
    monkeypatch.setenv("FAKE_KEY", "q7z9w")
    fake_server.queue(Reply(status=400, error="the key q7z9w is not valid for this request"))
    [err] = calls(client_for(fake_server))
    assert isinstance(err, FatalModelError) and fake_server.auth_headers == ["Bearer q7z9w"]
    assert "q7z9w" not in str(err) and "the key *** is not valid" in err.detail


def test_the_providers_own_key_is_registered_for_redaction(fake_server: FakeServer,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """No api_base: LiteLLM reads $OPENAI_API_KEY (and here $OPENAI_BASE_URL, pointed at the fake server; a
    dead proxy catches any request that would leave the machine). The key it sends is registered."""
    secret = "provkey" + uuid.uuid4().hex[:12]
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    _only_loopback(monkeypatch, fake_server.url)
    c = ModelClient(ModelSpec(name="p", model="openai/fake-model"), cache=None, max_retries=0)
    [res] = calls(c)
    assert isinstance(res, CallResult) and fake_server.auth_headers == [f"Bearer {secret}"]
    monkeypatch.delenv("OPENAI_API_KEY")
    assert redact(f"token {secret} end") == "token *** end"


def _only_loopback(monkeypatch: pytest.MonkeyPatch, base_url: str) -> None:
    """LiteLLM's OpenAI base URL from the environment; any HTTPS request elsewhere goes to a dead proxy."""
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, "127.0.0.1")


# -- LiteLLM's and the SDK's own retries are off --------------------------------------------------------------
def test_one_request_per_attempt_and_no_retry_options_in_the_body(fake_server: FakeServer) -> None:
    fake_server.handler = lambda body: Reply(status=500)
    [err] = calls(client_for(fake_server, max_retries=0))
    assert type(err) is ModelCallError and err.attempts == 1 and len(fake_server.requests) == 1
    body = fake_server.requests[0]
    assert not [k for k in body if "retries" in k.lower()]


# -- backoff -----------------------------------------------------------------------------------------------
def test_backoff_draws_full_jitter_from_zero_to_base_times_two_to_the_attempt(
        fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[tuple[float, float]] = []

    def uniform(a: float, b: float) -> float:
        drawn.append((a, b))
        return b / 2

    monkeypatch.setattr(random, "uniform", uniform)
    clock = Clock()
    fake_server.handler = lambda body: Reply(status=500)
    c = client_for(fake_server, max_retries=5, backoff_base=0.5, backoff_max=3.0, clock=clock, sleep=clock.sleep)
    [err] = calls(c)
    assert err.attempts == 6
    assert drawn == [(0.0, 0.5), (0.0, 1.0), (0.0, 2.0), (0.0, 3.0), (0.0, 3.0)]
    assert clock.sleeps == [0.25, 0.5, 1.0, 1.5, 1.5]


# -- the advice line per failure kind ---------------------------------------------------------------------
def test_advice_for_a_too_long_prompt(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(status=400, error="This model's maximum context length is 8192 tokens; "
                                              "context_length_exceeded"))
    [err] = calls(client_for(fake_server))
    assert str(err).endswith("the prompt is longer than the model's context window; use a longer-context model"
                             " (after 1 attempt)")


def test_advice_for_a_bad_request(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(status=400, error="temperature must be at most 2"))
    [err] = calls(client_for(fake_server))
    assert str(err).endswith("temperature must be at most 2; check the request params this provider accepts "
                             "(after 1 attempt)")


def test_advice_for_a_server_that_keeps_failing(fake_server: FakeServer) -> None:
    fake_server.handler = lambda body: Reply(status=503)
    [err] = calls(client_for(fake_server, max_retries=1))
    assert str(err).endswith("; check the provider's status, or raise max_retries / lower concurrency or rpm "
                             "(after 2 attempts)")


def test_advice_for_an_unknown_model_names_the_endpoint(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(status=404))
    [err] = calls(client_for(fake_server))
    assert str(err).endswith(f"; check the model id 'openai/fake-model' and api_base {fake_server.url} "
                             "(after 1 attempt)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_advice_when_nothing_listens_names_the_endpoint() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    c = ModelClient(ModelSpec(name="local", model="openai/fake-model", api_base=url), cache=None, max_retries=0)
    [err] = calls(c)
    assert isinstance(err, FatalModelError) and err.stops_run
    assert str(err).endswith(f"; check that the server is running and reachable at {url} (after 1 attempt)")
    assert err.status is None and "[HTTP" not in str(err)  # nothing answered: no status (LiteLLM says 500)


def test_advice_without_an_endpoint_names_none(fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider model (no api_base): the advice must not mention an endpoint it does not have."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-provider")
    _only_loopback(monkeypatch, fake_server.url)
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    fake_server.queue(Reply(status=404))
    [nf] = calls(ModelClient(ModelSpec(name="p", model="openai/fake-model"), cache=None, max_retries=0))
    assert str(nf).endswith("; check the model id 'openai/fake-model' (after 1 attempt)")
    monkeypatch.setenv("OPENAI_BASE_URL", dead)
    [conn] = calls(ModelClient(ModelSpec(name="p", model="openai/fake-model"), cache=None, max_retries=0))
    assert str(conn).endswith("; check that the server is running and reachable (after 1 attempt)")


# -- the 'loading LiteLLM' line ---------------------------------------------------------------------------
def test_the_loading_line_is_shown_once_to_a_listener(fake_server: FakeServer) -> None:
    runtime = RecordingRuntime(loading=True)
    lines: list[str] = []
    c = client_for(fake_server, runtime=runtime, notify=lines.append)
    calls(c, {}, {"messages": [{"role": "user", "content": "again"}]})
    assert lines == ["loading LiteLLM for the first model call (a few seconds) ..."]


def test_no_listener_no_line_and_no_crash(fake_server: FakeServer) -> None:
    runtime = RecordingRuntime(loading=True)
    out = calls(client_for(fake_server, runtime=runtime), {})
    assert isinstance(out[0], CallResult)
    assert runtime.announce_once() is True  # nobody listened: the one line is still owed


# -- event loops ---------------------------------------------------------------------------------------------
def test_each_loop_is_taken_once_and_handed_back_once(fake_server: FakeServer) -> None:
    runtime = RecordingRuntime()
    c = client_for(fake_server, runtime=runtime)

    async def main() -> int:
        await c.complete(MSGS)
        await c.complete([{"role": "user", "content": "two"}])
        await c.aclose()
        await c.aclose()  # a second close hands nothing back again
        return id(asyncio.get_running_loop())

    loop_id = asyncio.run(main())
    assert runtime.used == [loop_id] and runtime.released == [loop_id]
    assert runtime._loop_users == {}


def test_a_client_used_in_a_second_loop_takes_that_loop_too(fake_server: FakeServer) -> None:
    """asyncio primitives bind to one loop: a client reused by a new asyncio.run() needs a new semaphore."""
    runtime = RecordingRuntime()
    c = client_for(fake_server, runtime=runtime, concurrency=1)

    async def first() -> int:
        await c.complete(MSGS)  # not closed: the loop ends with the client still holding it
        return id(asyncio.get_running_loop())

    async def second() -> int:
        await asyncio.gather(c.complete([{"role": "user", "content": "a"}]),
                             c.complete([{"role": "user", "content": "b"}]))
        await c.aclose()
        return id(asyncio.get_running_loop())

    a = asyncio.run(first())
    b = asyncio.run(second())
    assert runtime.used == [a, b] and runtime.released == [b]


def test_a_client_back_in_a_loop_it_holds_does_not_take_it_twice(fake_server: FakeServer) -> None:
    runtime = RecordingRuntime()
    c = client_for(fake_server, runtime=runtime)
    a, b = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        for i, loop in enumerate((a, b, a)):
            loop.run_until_complete(c.complete([{"role": "user", "content": f"m{i}"}]))
        assert runtime.used == [id(a), id(b)]
        a.run_until_complete(c.aclose())
        b.run_until_complete(c.aclose())
        assert runtime.released == [id(a), id(b)] and runtime._loop_users == {}
    finally:
        for loop in (a, b):  # as asyncio.run does: cancel what LiteLLM left running (its logging worker)
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()


def test_stats_as_a_dict(fake_server: FakeServer) -> None:
    c = client_for(fake_server)
    calls(c, {})
    d = c.stats.as_dict()
    assert d == {"calls": 1, "cache_hits": 0, "errors": 0, "retries": 0, "requests": 1, "rejected": 0,
                 "prompt_tokens": 10, "completion_tokens": 5, "cost": 0.0, "cost_unknown_calls": 1,
                 "cached_tokens": 0, "batched": 0}


def test_closing_a_client_that_made_no_real_call_releases_nothing() -> None:
    runtime = RecordingRuntime()
    c = ModelClient(ModelSpec(name="m", model="mock/any"), cache=None, runtime=runtime)
    calls(c, {})
    assert runtime.used == [] and runtime.released == []


# -- a server that stops answering, and what each error carries ---------------------------------------------
def test_connection_lost_after_an_answer_is_per_question_not_a_stop(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(text="ok"), Reply(drop=True), Reply(drop=True))
    c = client_for(fake_server)
    first, *errs = calls(c, *({"messages": [{"role": "user", "content": t}]} for t in "abc"))
    assert isinstance(first, CallResult)
    assert [type(e) for e in errs] == [ModelCallError, ModelCallError]  # not FatalModelError: no stop
    assert c.stats.errors == 2


def test_nothing_listening_stops_the_run_with_what_was_tried() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    clock = Clock()
    c = ModelClient(ModelSpec(name="local", model="openai/fake-model", api_base=url), cache=None, max_retries=1,
                    backoff_base=0.001, clock=clock, sleep=clock.sleep)
    [err] = calls(c)
    assert type(err) is FatalModelError and err.stops_run is True
    assert err.model == "openai/fake-model" and err.attempts == 2 and err.detail
    assert err.status is None  # LiteLLM labels a refused connection HTTP 500, but no server answered: no status
    assert str(err).startswith("openai/fake-model") and f"candidate model 'local': {err.detail}; " in str(err)


def test_a_fatal_status_after_a_retry_carries_its_status_and_attempts(fake_server: FakeServer) -> None:
    clock = Clock()
    fake_server.queue(Reply(status=500), Reply(status=401), Reply(status=500), Reply(status=400, error="no"))
    c = client_for(fake_server, max_retries=3, clock=clock, sleep=clock.sleep)
    [auth, bad] = calls(c, {}, {"messages": [{"role": "user", "content": "two"}]})
    assert type(auth) is FatalModelError and (auth.status, auth.attempts, auth.stops_run) == (401, 2, True)
    assert type(bad) is FatalModelError and (bad.status, bad.attempts, bad.stops_run) == (400, 2, False)
    assert c.stats.errors == 2 and c.stats.retries == 2


def test_usage_and_cost_add_up_over_calls(fake_server: FakeServer) -> None:
    spec = spec_for(fake_server, model="openai/gpt-4o-2024-11-20")
    fake_server.queue(Reply(text="a", usage=(100, 10)), Reply(text="b", usage=(200, 20)))
    c = ModelClient(spec, cache=None, max_retries=0)
    a, b = calls(c, {}, {"messages": [{"role": "user", "content": "two"}]})
    assert (c.stats.prompt_tokens, c.stats.completion_tokens) == (300, 30)
    assert a.cost > 0 and b.cost > 0 and c.stats.cost == pytest.approx(a.cost + b.cost)
    assert c.stats.cost_unknown_calls == 0
    u = client_for(fake_server)
    calls(u, {}, {"messages": [{"role": "user", "content": "two"}]})
    assert u.stats.cost_unknown_calls == 2 and u.stats.cost == 0.0


# -- defaults and checks of the constructor ---------------------------------------------------------------
def test_rpm_must_be_positive_but_may_be_below_one(fake_server: FakeServer) -> None:
    from rubric_engine.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        ModelClient(spec_for(fake_server), cache=None, rpm=0)
    assert str(info.value) == "candidate: rpm must be > 0, or null for no limit (got 0)"
    assert ModelClient(spec_for(fake_server), cache=None, rpm=0.5).rpm == 0.5  # one request every 2 minutes


def test_default_retries_backoff_and_role(fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[tuple[float, float]] = []
    monkeypatch.setattr(random, "uniform", lambda a, b: drawn.append((a, b)) or 0.0)
    clock = Clock()
    fake_server.handler = lambda body: Reply(status=500)
    c = ModelClient(spec_for(fake_server), cache=None, clock=clock, sleep=clock.sleep)
    [err] = calls(c)
    assert err.attempts == 5 and drawn == [(0.0, 1.0), (0.0, 2.0), (0.0, 4.0), (0.0, 8.0)]
    assert "candidate model 'fake'" in str(err)
    fake_server.reset()
    fake_server.handler = lambda body: Reply(status=429, headers={"Retry-After": "3600"})
    c = ModelClient(spec_for(fake_server), cache=None, max_retries=1, clock=clock, sleep=clock.sleep)
    clock.sleeps.clear()
    calls(c)
    assert clock.sleeps == [60.0]  # a Retry-After is capped at the default backoff_max


def test_default_concurrency_is_eight(fake_server: FakeServer) -> None:
    fake_server.latency = 0.5
    c = ModelClient(spec_for(fake_server), cache=None)

    async def main() -> None:
        await asyncio.gather(*(c.complete([{"role": "user", "content": f"m{i}"}]) for i in range(10)))
        await c.aclose()

    asyncio.run(main())
    assert fake_server.max_in_flight == 8


def test_the_first_request_never_waits_whatever_the_clock_reads(fake_server: FakeServer) -> None:
    """A clock starting at 0 (a fresh boot's monotonic clock may read near it): no wait before request one."""
    clock = Clock()
    clock.now = 0.0
    calls(client_for(fake_server, rpm=60, clock=clock, sleep=clock.sleep), {})
    calls(client_for(fake_server, clock=clock, sleep=clock.sleep), {})
    assert clock.sleeps == [] and len(fake_server.requests) == 2


# -- the retry line --------------------------------------------------------------------------------------------
def test_the_retry_line_says_why_when_and_how(fake_server: FakeServer) -> None:
    clock = Clock()
    fake_server.queue(Reply(status=429, headers={"Retry-After": "2"}), Reply(status=503), Reply(text="ok"))
    lines: list[str] = []
    c = client_for(fake_server, max_retries=2, backoff_base=0.25, clock=clock, sleep=clock.sleep, role="judge",
                   notify=lines.append)
    calls(c)
    assert lines[0] == "judge 'fake': HTTP 429; retry 1/2 in 2.0s (rate limit: waiting as asked (Retry-After))"
    assert lines[1] == f"judge 'fake': HTTP 503; retry 2/2 in {clock.sleeps[1]:.1f}s (backing off)"


def test_the_retry_line_without_a_status_shows_the_detail(fake_server: FakeServer) -> None:
    clock = Clock()
    fake_server.handler = lambda body: Reply(raw=json.dumps({"id": "x", "object": "chat.completion", "created": 0,
                                                             "model": "fake-model", "choices": []}))
    lines: list[str] = []
    c = client_for(fake_server, max_retries=1, clock=clock, sleep=clock.sleep, notify=lines.append)
    [err] = calls(c)
    assert err.status is None and err.detail == "malformed response: no choices"
    assert lines == [f"candidate 'fake': malformed response: no choices; retry 1/1 in {clock.sleeps[0]:.1f}s "
                     "(backing off)"]


def test_url_credentials_and_secret_variables_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_SECRET", "s3cretV4lue")
    monkeypatch.setenv("SMTP_PASSWORD", "pw-V4lue!")
    assert redact("https://alice:hunter2@host:8/v1?q=1&access_token=abc.def&key=xyz#f") == \
        "https://***:***@host:8/v1?q=1&access_token=***&key=***#f"
    assert redact("got s3cretV4lue and pw-V4lue!") == "got *** and ***"
    assert redact("what? a = b & c, see https://host/v1?q=1") == "what? a = b & c, see https://host/v1?q=1"


def test_outgoing_messages_are_redacted_and_an_unchanged_list_is_the_same_object() -> None:
    from rubric_engine.models.redact import MessageRedactor

    redact_messages = MessageRedactor()
    plain = [{"role": "user", "content": "hello"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert redact_messages(plain) is plain
    keyed = [{"role": "user", "content": "Bearer abcdefgh"},
             {"role": "user", "content": [{"type": "text", "text": "sk-abcdefgh", "cache_control": {}}]}]
    assert redact_messages(keyed) == [{"role": "user", "content": "Bearer ***"},
                                      {"role": "user", "content": [{"type": "text", "text": "sk-***",
                                                                    "cache_control": {}}]}]
    assert keyed[0]["content"] == "Bearer abcdefgh"  # the caller's messages (and their cache key) are untouched


def test_a_conversation_through_the_client_scans_each_text_once(fake_server: FakeServer,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn k's request repeats the k - 1 turns before it; each text passes the redaction's scan once as sent
    (and a reply once more as it came back), never once per request: 30 turns, 90 scans, not 900."""
    from rubric_engine.models import redact as module

    scanned: list[str] = []
    real = module._scrub
    monkeypatch.setattr(module, "_scrub", lambda text, secrets: scanned.append(text) or real(text, secrets))
    fake_server.handler = lambda body: Reply(text=f"reply {len(body['messages'])}")
    client = client_for(fake_server)

    async def converse() -> list[dict[str, Any]]:
        convo: list[dict[str, Any]] = []
        try:
            for k in range(30):
                convo = [*convo, {"role": "user", "content": f"turn {k}"}]
                result = await client.complete(convo)
                convo = [*convo, {"role": "assistant", "content": result.text}]
        finally:
            await client.aclose()
        return convo
    convo = asyncio.run(converse())
    assert [m["content"] for m in fake_server.requests[-1]["messages"]] == [m["content"] for m in convo[:-1]]
    # each user turn sent, each reply received, each reply sent back; the first request (one message, no earlier
    # turn) is not remembered, so its text is scanned again in the second
    assert len(scanned) == 30 + 30 + 29 + 1


def test_an_image_part_reaches_the_server_as_built(fake_server: FakeServer) -> None:
    """LiteLLM is imported with MAX_BASE64_LENGTH_FOR_LOGGING=0 (models/litellm_runtime.py): its logging copy of
    the messages is no longer shortened, and what is sent is what the engine built, base64 payload whole."""
    image = "data:image/png;base64," + "iVBORw0KGgo" * 200
    parts = [{"type": "text", "text": "describe it"}, {"type": "image_url", "image_url": {"url": image}}]
    fake_server.handler = lambda body: Reply(text="a picture")
    [res] = calls(client_for(fake_server), {"messages": [{"role": "user", "content": parts}]})
    assert isinstance(res, CallResult) and res.text == "a picture"
    assert fake_server.requests[-1]["messages"] == [{"role": "user", "content": parts}]
