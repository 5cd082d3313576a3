"""The one structured-output loop (judge/structured.py) on its own, with a parser of its own rather than the judge's.

Through LiteLLM over HTTP to the fake server and the result cache on disk. What each test names: what an
Outcome adds up (replies, attempts, tokens, cost, cache hits), the re-ask turn, caching under the original
request, the response_format fallback remembered on the client, and which failures stop the run.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.errors import FatalModelError
from rubric_engine.judge.structured import Outcome, Unusable, ask_structured, one_line, uses_json_schema
from rubric_engine.models.cache import ResultCache
from rubric_engine.models.client import ModelClient
from rubric_engine.models.entries import ModelSpec, cache_key
from rubric_engine.models.request import Request, VerdictJSON

ASK = [{"role": "system", "content": "answer with a number"}, {"role": "user", "content": "how many?"}]
FORMAT = {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}, "strict": True}}


def number(text: str) -> int:
    data = json.loads(text) if text.strip().startswith("{") else None
    if not isinstance(data, dict) or not isinstance(data.get("n"), int):
        raise ValueError(f"no integer n in {text[:20]!r}")
    return data["n"]


def reask(problem: str) -> str:
    return f"Wrong: {problem}. Again."


def client_for(srv: FakeServer, cache: ResultCache | None, model: str = "openai/fake-model") -> ModelClient:
    spec = ModelSpec(name="s", model=model, api_base=srv.url, api_key_env="FAKE_KEY")
    return ModelClient(spec, cache=cache, max_retries=0, backoff_base=0.001, role="tester")


def ask(client: ModelClient, *, times: int = 1, **kw: Any) -> list[Outcome[int]]:
    request = kw.pop("request", ASK)  # a planned request (models/request.py), or the bare messages
    async def main() -> list[Outcome[int]]:
        try:
            return [await ask_structured(client, request, number,
                                         **{"reask": reask, "max_reasks": 1, "what": "count", "role": "counter", **kw})
                    for _ in range(times)]
        finally:
            await client.aclose()
    return asyncio.run(main())


pytestmark = pytest.mark.usefixtures("fake_key")  # every test here speaks to the fake server with the fake key


def test_a_reply_never_usable_is_an_error_with_every_reply_kept(fake_server: FakeServer, cache: ResultCache) -> None:
    fake_server.queue(Reply(text="five", usage=(10, 4)), Reply(text='{"n": "5"}', usage=(30, 6)))
    [out] = ask(client_for(fake_server, cache))
    assert out.value is None and out.error == """invalid count after 2 replies: no integer n in '{"n": "5"}'"""
    assert out.replies == ["five", '{"n": "5"}'] and out.attempts == 2
    assert (out.prompt_tokens, out.completion_tokens, out.cost, out.cache_hits, out.cached) == (40, 10, None, 0, False)
    second = fake_server.requests[1]["messages"]
    assert second == [*ASK, {"role": "assistant", "content": "five"},
                      {"role": "user", "content": "Wrong: no integer n in 'five'. Again."}]
    assert len(cache) == 0  # nothing unusable is cached


def test_max_reasks_bounds_the_replies_asked_for(fake_server: FakeServer) -> None:
    fake_server.handler = lambda body: Reply(text="nope")
    [zero] = ask(client_for(fake_server, None), max_reasks=0)
    assert zero.attempts == 1 == len(fake_server.requests) and zero.error.startswith("invalid count after 1 replies")
    fake_server.reset()
    [three] = ask(client_for(fake_server, None), max_reasks=3)
    assert three.attempts == 4 == len(fake_server.requests) and len(three.replies) == 4


def test_a_repaired_reply_is_cached_under_the_original_request(fake_server: FakeServer, cache: ResultCache) -> None:
    fake_server.queue(Reply(text="?", usage=(10, 1)), Reply(text='{"n": 7}', usage=(20, 3)))
    [first] = ask(client_for(fake_server, cache))
    assert (first.value, first.error, first.attempts, first.cached, first.cache_hits) == (7, None, 2, False, 0)
    assert (first.prompt_tokens, first.completion_tokens, first.replies) == (30, 4, ["?", '{"n": 7}'])
    [again] = ask(client_for(fake_server, cache))
    assert len(fake_server.requests) == 2  # the rerun asked nothing
    assert (again.value, again.attempts, again.cached, again.cache_hits, again.replies) == (7, 1, True, 1, ['{"n": 7}'])
    assert (again.prompt_tokens, again.completion_tokens) == (20, 3)


def test_repeat_is_an_independent_entry(fake_server: FakeServer, cache: ResultCache) -> None:
    fake_server.queue(Reply(text='{"n": 1}'), Reply(text='{"n": 2}'))
    [a] = ask(client_for(fake_server, cache))
    [b] = ask(client_for(fake_server, cache), repeat=1)
    [a2] = ask(client_for(fake_server, cache))
    assert (a.value, b.value, a2.value, a2.cached, len(fake_server.requests)) == (1, 2, 1, True, 2)


def test_cost_is_summed_over_every_reply_or_unknown(fake_server: FakeServer, cache: ResultCache) -> None:
    fake_server.queue(Reply(text="bad", usage=(1000, 100)), Reply(text='{"n": 3}', usage=(2000, 300)))
    client = client_for(fake_server, cache, model="openai/gpt-4o-2024-11-20")
    [out] = ask(client)
    assert out.value == 3 and isinstance(out.cost, float)
    assert out.cost == pytest.approx(client.stats.cost) and client.stats.cost_unknown_calls == 0
    assert out.cost > 0
    [hit] = ask(client_for(fake_server, cache, model="openai/gpt-4o-2024-11-20"))
    assert hit.cached and 0 < hit.cost < out.cost  # the accepted reply's own cost, read back from the cache


def test_no_reply_at_all_means_unknown_cost_and_a_one_line_error(fake_server: FakeServer) -> None:
    fake_server.handler = lambda body: Reply(status=503, error="overloaded\n  try   later")
    [out] = ask(client_for(fake_server, None, model="openai/gpt-4o-2024-11-20"))
    assert out.value is None and out.cost is None and out.replies == [] and out.attempts == 1
    assert out.error.startswith("counter call failed: openai/gpt-4o-2024-11-20 [HTTP 503]: tester model 's': ") and "\n" not in out.error
    assert "overloaded try later" in out.error


def test_a_request_refused_for_good_is_an_error_not_a_stop(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(status=400, error="temperature too high"))
    [out] = ask(client_for(fake_server, None))
    assert out.value is None and out.error.startswith("counter call failed: ") and "temperature too high" in out.error


def test_a_bad_key_stops_the_run(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(status=401))
    with pytest.raises(FatalModelError) as info:
        ask(client_for(fake_server, None))
    assert info.value.stops_run and info.value.status == 401


# -- response_format json_schema refused ----------------------------------------------------------------------
def test_a_refused_json_schema_is_dropped_at_once_and_remembered(cache: ResultCache) -> None:
    with FakeServer(lambda body: Reply(text='{"n": 4}'), reject_json_schema=True) as srv:
        client = client_for(srv, cache)
        assert uses_json_schema(client)
        out = ask(client, response_format=FORMAT, times=2)
        assert [o.value for o in out] == [4, 4] and out[1].cached
        assert [r.get("response_format") for r in srv.requests] == [FORMAT, None]
        assert client.json_schema_refused and not uses_json_schema(client)
        other = client_for(srv, None)  # another client (another endpoint entry) asks with the format again
        ask(other, response_format=FORMAT)
        assert [r.get("response_format") for r in srv.requests[2:]] == [FORMAT, None]


def test_the_refusal_is_remembered_even_when_the_plain_reply_is_unusable() -> None:
    with FakeServer(lambda body: Reply(text="garbage"), reject_json_schema=True) as srv:
        client = client_for(srv, None)
        [out] = ask(client, response_format=FORMAT, max_reasks=1)
        assert out.error is not None and client.json_schema_refused
        assert [r.get("response_format") for r in srv.requests] == [FORMAT, None, None]


def test_a_too_long_prompt_is_not_retried_without_the_format(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(status=400, error="This model's maximum context length is 8192 tokens; "
                                              "context_length_exceeded"))
    client = client_for(fake_server, None)
    [out] = ask(client, response_format=FORMAT)
    assert len(fake_server.requests) == 1 and out.error.startswith("counter call failed:")
    assert not client.json_schema_refused


def test_a_bad_key_with_the_format_is_not_mistaken_for_a_refused_format(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(status=401))
    client = client_for(fake_server, None)
    with pytest.raises(FatalModelError):
        ask(client, response_format=FORMAT)
    assert len(fake_server.requests) == 1 and not client.json_schema_refused


def test_one_line() -> None:
    assert one_line("  a\n b\t\tc  ") == "a b c"


def test_repeat_with_the_format_is_an_independent_entry(fake_server: FakeServer, cache: ResultCache) -> None:
    fake_server.queue(Reply(text='{"n": 1}'), Reply(text='{"n": 2}'))
    [a] = ask(client_for(fake_server, cache), response_format=FORMAT)
    [b] = ask(client_for(fake_server, cache), response_format=FORMAT, repeat=1)
    [b2] = ask(client_for(fake_server, cache), response_format=FORMAT, repeat=1)
    assert (a.value, b.value, b2.value, b2.cached, len(fake_server.requests)) == (1, 2, 2, True, 2)
    assert [r.get("response_format") for r in fake_server.requests] == [FORMAT, FORMAT]


def test_the_defaults_name_a_reply_of_a_model(fake_server: FakeServer) -> None:
    fake_server.queue(Reply(text="x"), Reply(status=503))

    async def main() -> list[Outcome[int]]:
        client = client_for(fake_server, None)
        try:
            return [await ask_structured(client, ASK, number, reask=reask, max_reasks=0) for _ in range(2)]
        finally:
            await client.aclose()

    bad, failed = asyncio.run(main())
    assert bad.error == "invalid reply after 1 replies: no integer n in 'x'"
    assert failed.error.startswith("model call failed: openai/fake-model [HTTP 503]")


def test_a_mock_model_answers_from_the_request_with_or_without_a_format() -> None:
    shape = VerdictJSON(items=1, list_key=None, fields={"n": "id"})
    client = ModelClient(ModelSpec(name="m", model="mock/any"), cache=None)
    plain = ask(client, request=Request(ASK, answer=shape))
    client = ModelClient(ModelSpec(name="m", model="mock/any"), cache=None)
    formatted = ask(client, request=Request(ASK, answer=shape, response_format=FORMAT))
    assert [o.value for o in plain + formatted] == [1, 1] and [o.attempts for o in plain + formatted] == [1, 1]


def test_an_unusable_reply_says_its_problem() -> None:
    exc = Unusable("no integer n", "five")
    assert (str(exc), exc.problem, exc.text, exc.call_result) == ("no integer n", "no integer n", "five", None)


def test_a_cached_reply_the_parser_now_refuses_is_re_asked_from_the_model(fake_server: FakeServer,
                                                                          cache: ResultCache) -> None:
    """A reply cached by an earlier version whose parser was laxer: the re-ask must reach the model (it used
    to be answered from the same cache entry again, so the unit failed with no request and never recovered)."""
    client = client_for(fake_server, cache)
    cache.set(cache_key(client.spec, ASK, None, 0), {"text": "stale", "prompt_tokens": 3, "completion_tokens": 1})
    fake_server.queue(Reply(text='{"n": 5}', usage=(8, 2)))
    [out] = ask(client)
    assert (out.value, out.replies, out.attempts, out.cache_hits, out.cached) == (5, ["stale", '{"n": 5}'], 2, 1, False)
    assert (out.prompt_tokens, out.completion_tokens, len(fake_server.requests)) == (11, 3, 1)
    [again] = ask(client_for(fake_server, cache))  # the repaired reply replaced the stale entry
    assert (again.value, again.cached, again.attempts, len(fake_server.requests)) == (5, True, 1, 1)
