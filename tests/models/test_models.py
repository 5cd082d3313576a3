"""ModelClient through LiteLLM over HTTP to the fake server: retries, fatal errors, cache, limits.

Request counts are asserted exactly: they prove LiteLLM / the OpenAI SDK add no retries of their own.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.errors import ConfigError, FatalModelError, ModelCallError
from rubric_engine.models.cache import ResultCache
from rubric_engine.models.client import CallResult, ModelClient
from rubric_engine.models.entries import ModelSpec, cache_key
from rubric_engine.models.failures import Failure, retry_after

from conftest import REPO as ROOT
MSGS = [{"role": "user", "content": "你好, hi"}]


def spec_for(srv: FakeServer, **kw: Any) -> ModelSpec:
    return ModelSpec(**{"name": "fake", "model": "openai/fake-model", "api_base": srv.url,
                        "api_key_env": "FAKE_KEY", **kw})


def client_for(srv: FakeServer, cache: ResultCache | None = None, spec_kw: dict | None = None,
               **kw: Any) -> ModelClient:
    return ModelClient(spec_for(srv, **(spec_kw or {})), cache=cache,
                       **{"max_retries": 3, "backoff_base": 0.01, "backoff_max": 2.0, **kw})


def run(client: ModelClient, *calls: dict[str, Any]) -> list[Any]:
    """Run complete() calls concurrently in one loop; exceptions are returned, not raised."""
    async def main() -> list[Any]:
        try:
            return await asyncio.gather(*(client.complete(**{"messages": MSGS, **c}) for c in calls),
                                        return_exceptions=True)
        finally:
            await client.aclose()
    return asyncio.run(main())


@pytest.fixture
def cache(tmp_path: Path) -> ResultCache:
    c = ResultCache(tmp_path / "cache")
    yield c
    c.close()


@pytest.fixture(autouse=True)
def _key(fake_key: str) -> None:
    return None


# -- success -----------------------------------------------------------------------------------
def test_success_with_usage_and_params(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(text="hello", usage=(12, 7)))
    client = client_for(fake_server, spec_kw={"params": {"temperature": 0.3, "max_tokens": 9}})
    [res] = run(client, {})
    assert res == CallResult("hello", 12, 7, None, False, 1, "stop")
    body = fake_server.requests[0]
    assert body["model"] == "fake-model" and body["messages"] == MSGS
    assert body["temperature"] == 0.3 and body["max_tokens"] == 9
    s = client.stats
    assert (s.calls, s.requests, s.prompt_tokens, s.completion_tokens, s.cost_unknown_calls) == (1, 1, 12, 7, 1)


def test_empty_content_is_a_completion(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(text=""))
    [res] = run(client_for(fake_server), {})
    assert res.text == "" and res.attempts == 1


def test_response_format_passes_through(fake_server: FakeServer) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "v", "schema": {"type": "object"}}}
    [res] = run(client_for(fake_server), {"response_format": fmt})
    assert isinstance(res, CallResult)
    assert fake_server.requests[0]["response_format"] == fmt


# -- retries -----------------------------------------------------------------------------------
def test_429_retried_once_without_compounding(fake_server: FakeServer) -> None:
    """The wait itself is pinned with a virtual clock in test_models_faults.py; here: exactly 2 requests."""
    fake_server.queue(Reply(status=429, headers={"Retry-After": "0"}), Reply(text="done"))
    client = client_for(fake_server)
    [res] = run(client, {})
    assert res.text == "done"
    assert res.attempts == 2 == len(fake_server.requests)
    assert client.stats.retries == 1 and client.stats.requests == 2


def test_500_twice_then_success(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(status=500), Reply(status=503), Reply(text="third"))
    [res] = run(client_for(fake_server), {})
    assert (res.text, res.attempts, len(fake_server.requests)) == ("third", 3, 3)


def test_500_forever_gives_up_after_exact_attempts(fake_server: FakeServer) -> None:
    fake_server.handler = lambda body: Reply(status=500)
    client = client_for(fake_server, max_retries=2)
    [err] = run(client, {})
    assert type(err) is ModelCallError
    assert err.attempts == 3 == len(fake_server.requests) and err.status == 500
    assert "openai/fake-model" in str(err) and "max_retries" in str(err)
    assert client.stats.errors == 1 and client.stats.retries == 2


def test_timeout_then_success(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(delay=10, text="slow"), Reply(text="fast"))
    [res] = run(client_for(fake_server, spec_kw={"timeout": 0.5}), {})
    # had the 0.5 s timeout been ignored, the first request would have answered "slow"
    assert (res.text, res.attempts, len(fake_server.requests)) == ("fast", 2, 2)


@pytest.mark.parametrize("bad", [Reply(drop=True), Reply(raw="{not json"), Reply(raw='{"choices": []}'),
                                 Reply(raw="{}")], ids=["dropped", "invalid-json", "no-choices", "empty-object"])
def test_transient_body_problems_are_retried(fake_server: FakeServer, bad: Reply) -> None:
    fake_server.queue(bad, Reply(text="fine"))
    [res] = run(client_for(fake_server), {})
    assert (res.text, res.attempts, len(fake_server.requests)) == ("fine", 2, 2)


def test_retry_after_parsing() -> None:
    class Exc(Exception):
        def __init__(self, headers: dict[str, str]) -> None:
            super().__init__("x")
            self.litellm_response_headers = headers

    assert retry_after(Exc({"Retry-After": "7"})) == 7.0
    assert retry_after(Exc({"retry-after-ms": "250"})) == 0.25
    past = email.utils.formatdate(0, usegmt=True)
    assert retry_after(Exc({"Retry-After": past})) == 0.0  # a date already gone: retry now
    far = email.utils.formatdate(4_000_000_000, usegmt=True)  # the year 2096: a date is read as a date
    assert (retry_after(Exc({"Retry-After": far})) or 0) > 365 * 86400
    assert retry_after(Exc({"Retry-After": "soon"})) is None
    assert retry_after(Exc({})) is None


def test_backoff_is_full_jitter_and_capped(fake_server: FakeServer) -> None:
    client = ModelClient(spec_for(fake_server), cache=None, backoff_base=1.0, backoff_max=5.0)
    plain = Failure(False, 500, None, "x", "transient")
    draws = [client._backoff(4, plain) for _ in range(200)]
    assert all(0 <= d <= 5.0 for d in draws) and max(draws) > 3.0 and min(draws) < 2.0
    assert client._backoff(1, Failure(False, 429, 99.0, "x", "transient")) == 5.0


# -- fatal errors ------------------------------------------------------------------------------
def test_401_is_fatal_after_one_request(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(status=401, error="Incorrect API key provided: sk-test"))
    [err] = run(client_for(fake_server), {})
    assert isinstance(err, FatalModelError) and err.attempts == 1 == len(fake_server.requests)
    msg = str(err)
    assert "openai/fake-model" in msg and "'fake'" in msg and "$FAKE_KEY" in msg and err.status == 401
    assert "sk-test" not in msg and "\n" not in msg  # the key never reaches messages


@pytest.mark.parametrize("status,hint", [(404, "check the model id"), (400, "params"), (403, "$FAKE_KEY"),
                                         (422, "params")])
def test_client_errors_are_fatal(fake_server: FakeServer, status: int, hint: str) -> None:
    fake_server.queue(Reply(status=status))
    [err] = run(client_for(fake_server), {})
    assert isinstance(err, FatalModelError) and err.status == status
    assert len(fake_server.requests) == 1 and hint in str(err)


def test_context_window_is_fatal(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(status=400, error="This model's maximum context length is 8192 tokens. "
                                               "However, your messages resulted in 9000 tokens."))
    [err] = run(client_for(fake_server), {})
    assert isinstance(err, FatalModelError) and "context window" in str(err)


def test_json_schema_rejection_names_response_format() -> None:
    with FakeServer(reject_json_schema=True) as srv:
        [err] = run(client_for(srv), {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})
        assert isinstance(err, FatalModelError) and "response_format" in str(err) and len(srv.requests) == 1
        [ok] = run(client_for(srv), {"response_format": {"type": "json_object"}})
        assert isinstance(ok, CallResult)


def test_missing_key_env_is_fatal_without_request(fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAKE_KEY")
    [err] = run(client_for(fake_server), {})
    assert isinstance(err, FatalModelError) and "$FAKE_KEY" in str(err) and fake_server.requests == []


# -- cache -------------------------------------------------------------------------------------
def test_cache_hit_on_second_call(fake_server: FakeServer, cache: ResultCache) -> None:
    fake_server.queue(Reply(text="first", usage=(4, 2)))
    client = client_for(fake_server, cache)
    [a] = run(client, {})
    [b] = run(client, {})  # a second event loop: the client must work there too
    assert len(fake_server.requests) == 1
    assert (a.cached, b.cached, b.text, b.prompt_tokens, b.attempts) == (False, True, "first", 4, 0)
    assert client.stats.cache_hits == 1 and client.stats.prompt_tokens == 4
    stored = cache.get(cache_key(client.spec, MSGS, None))
    assert stored == {"text": "first", "prompt_tokens": 4, "completion_tokens": 2, "cost": None,
                      "model": "openai/fake-model", "finish_reason": "stop", "cached_tokens": 0}


def test_cache_key_rules() -> None:
    base = ModelSpec(name="a", model="openai/m", api_base="http://h/v1", api_key_env="K", params={"temperature": 0})
    k = cache_key(base, MSGS, None)
    same = [ModelSpec(name="other-name", model="openai/m", api_base="http://h/v1/", api_key_env="OTHER",
                      params={"temperature": 0, "timeout": 5, "num_retries": 3}, timeout=9.0)]
    for s in same:
        assert cache_key(s, MSGS, None) == k
    different = [
        cache_key(ModelSpec(name="a", model="openai/m2", api_base="http://h/v1", params={"temperature": 0}), MSGS, None),
        cache_key(ModelSpec(name="a", model="openai/m", api_base="http://other/v1", params={"temperature": 0}), MSGS, None),
        cache_key(ModelSpec(name="a", model="openai/m", api_base="http://h/v1", params={"temperature": 1}), MSGS, None),
        cache_key(base, [{"role": "user", "content": "other"}], None),
        cache_key(base, MSGS, {"type": "json_object"}),
    ]
    assert k not in different and len(set(different)) == len(different)
    with pytest.raises(ConfigError, match="api_key_env"):
        ModelSpec(name="a", model="openai/m", params={"api_key": "sk-x"})


def test_cache_keys_are_stable() -> None:
    """Keys computed by the code that stored users' caches: a change to how the key is built must not
    change a key (or every stored answer would be paid again). OmegaConf containers key like dicts."""
    from omegaconf import OmegaConf

    msgs = [{"role": "system", "content": "评分 grade"}, {"role": "user", "content": "hi"}]
    s1 = ModelSpec(name="a", model="openai/m", api_base="http://h/v1/", api_key_env="K",
                   params={"temperature": 0, "timeout": 3})
    s2 = ModelSpec(name="b", model="anthropic/c", params={"max_tokens": 9}, revision="q4")
    fmt = {"type": "json_schema", "json_schema": {"name": "v", "schema": {"type": "object"}}}
    assert cache_key(s1, msgs, None) == "7cc8d1fa8f0c10a63a4615d125dfdaecb38fc5bce3aa5ad7702de9c433362c05"
    assert cache_key(s1, msgs, fmt) == "2ed8af00a776c4e528fcecf9947f833dccf9a8c4aebf73ba0a1d294261b8e8bd"
    assert cache_key(s1, msgs, None, 2) == "b2238d54f0ba0cbfae112053c2e3dbc71af35f8b1731aa9771a59bd63552486a"
    assert cache_key(s2, msgs, fmt, 1) == "c5511734acc6079e964b2dc81108d8010be50a6147842675dec598ca4eba8d1f"
    assert cache_key(s1, [OmegaConf.create(m) for m in msgs], None) == cache_key(s1, msgs, None)
    assert cache_key(s1, msgs, OmegaConf.create(fmt)) == cache_key(s1, msgs, fmt)


def test_client_settings_do_not_change_key(fake_server: FakeServer, cache: ResultCache,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run(client_for(fake_server, cache), {})
    monkeypatch.setenv("OTHER_KEY", "sk-other")
    other = client_for(fake_server, cache, spec_kw={"api_key_env": "OTHER_KEY", "timeout": 3.0},
                       concurrency=2, max_retries=0, rpm=1000)
    [res] = run(other, {})
    assert res.cached and len(fake_server.requests) == 1


def test_errors_are_not_cached(fake_server: FakeServer, cache: ResultCache) -> None:
    fake_server.queue(Reply(status=500), Reply(text="later"))
    client = client_for(fake_server, cache, max_retries=0)
    [err] = run(client, {})
    assert isinstance(err, ModelCallError) and len(cache) == 0
    [res] = run(client, {})
    assert (res.text, res.cached, len(fake_server.requests)) == ("later", False, 2)


def test_rejected_result_is_not_cached(fake_server: FakeServer, cache: ResultCache) -> None:
    fake_server.queue(Reply(text="not json"), Reply(text='{"ok": true}'))

    def accept(text: str) -> None:
        json.loads(text)

    client = client_for(fake_server, cache)
    [err] = run(client, {"accept": accept})
    assert isinstance(err, ValueError) and len(cache) == 0 and client.stats.rejected == 1
    assert err.call_result.text == "not json" and err.call_result.prompt_tokens == 10  # tokens still count
    [res] = run(client, {"accept": accept})
    [again] = run(client, {"accept": accept})
    assert (res.cached, again.cached, again.text, len(fake_server.requests)) == (False, True, '{"ok": true}', 2)


def test_fully_cached_run_never_imports_litellm(fake_server: FakeServer, cache: ResultCache, tmp_path: Path) -> None:
    run(client_for(fake_server, cache), {})
    cache.close()
    script = textwrap.dedent(f"""
        import asyncio, sys
        from rubric_engine.models.cache import ResultCache
        from rubric_engine.models.client import ModelClient
        from rubric_engine.models.entries import ModelSpec
        spec = ModelSpec(name="fake", model="openai/fake-model", api_base={fake_server.url!r}, api_key_env="FAKE_KEY")
        async def main():
            async with ModelClient(spec, cache=ResultCache({str(tmp_path / "cache")!r})) as c:
                return await c.complete({MSGS!r})
        res = asyncio.run(main())
        print(res.cached, res.text, "litellm" in sys.modules)
    """)
    env = {k: v for k, v in os.environ.items() if k != "FAKE_KEY"}  # a cached run needs no key either
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "echo:", "你好,", "hi", "False"]


# -- limits ------------------------------------------------------------------------------------
def test_concurrency_limit_respected(fake_server: FakeServer) -> None:
    fake_server.latency = 0.15
    client = client_for(fake_server, concurrency=4)
    results = run(client, *({"messages": [{"role": "user", "content": str(i)}]} for i in range(16)))
    assert all(isinstance(r, CallResult) for r in results)
    assert fake_server.max_in_flight == 4 and len(fake_server.requests) == 16


def test_fresh_run_closes_its_http_clients(fake_server: FakeServer) -> None:
    """aclose() leaves no 'Unclosed client session' / unclosed transport warnings (litellm #13251)."""
    script = textwrap.dedent(f"""
        import asyncio, gc
        from rubric_engine.models.client import ModelClient
        from rubric_engine.models.entries import ModelSpec
        spec = ModelSpec(name="fake", model="openai/fake-model", api_base={fake_server.url!r}, api_key_env="FAKE_KEY")
        async def main():
            async with ModelClient(spec, cache=None, role="candidate") as a, \\
                       ModelClient(spec, cache=None, role="judge") as b:
                await asyncio.gather(*(c.complete([{{"role": "user", "content": str(i)}}]) for i in range(4) for c in (a, b)))
        asyncio.run(main())
        gc.collect()
        print("done")
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-W", "always", "-c", script], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done" and len(fake_server.requests) == 8
    assert "nclosed" not in out.stderr and "Warning" not in out.stderr, out.stderr
