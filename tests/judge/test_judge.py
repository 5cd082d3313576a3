"""The judge protocol end to end: LiteLLM over HTTP to the fake server, real heartbench spec and data."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any, Callable

import pytest
from fakeserver import FakeServer, Reply

from rubric_engine.errors import FatalModelError
from rubric_engine.judge.grading import RESPONSE_FORMAT, JudgeResult, judge_response, parse_verdict, verdict_schema
from rubric_engine.judge.structured import uses_json_schema
from rubric_engine.judge.verdicts import VerdictError
from rubric_engine.models.cache import ResultCache
from rubric_engine.models.client import ModelClient
from rubric_engine.models.entries import ModelSpec




@pytest.fixture
def question(questions):
    return questions[0]


def verdict(n: int, *, hits: Callable[[int], Any] = lambda i: i % 2 == 0, order: list[int] | None = None,
            ids: list[int] | None = None) -> str:
    ids = ids if ids is not None else (order or list(range(1, n + 1)))
    return json.dumps({"criteria": [{"id": i, "reasoning": f"r{i}", "met": hits(i)} for i in ids]})


def judge(srv: FakeServer, tmp_path: Path, spec, question, response: str = "我在。", *, rounds: int = 1,
          max_retries: int = 1, **kw: Any) -> list[JudgeResult]:
    """Judge `question` `rounds` times, each with a fresh client on the same cache directory."""
    async def go() -> list[JudgeResult]:
        out = []
        for _ in range(rounds):
            client = ModelClient(ModelSpec(name="fake-judge", model="openai/fake-judge", api_base=srv.url,
                                           api_key_env="FAKE_KEY"),
                                 cache=ResultCache(tmp_path / "cache"), backoff_base=0.01,
                                 max_retries=max_retries, role="judge")
            try:
                out.append(await judge_response(client, spec, question, response, **kw))
            finally:
                await client.aclose()
        return out
    return asyncio.run(go())


def last_user(body: dict[str, Any]) -> str:
    return body["messages"][-1]["content"]


# -- pure parsing -----------------------------------------------------------------------------------------

def test_schema_is_openai_strict():
    assert RESPONSE_FORMAT["type"] == "json_schema"
    js = RESPONSE_FORMAT["json_schema"]
    assert js["name"] == "verdict" and js["strict"] is True

    def objects(node: Any):
        if isinstance(node, dict):
            if node.get("type") == "object":
                yield node
            for v in node.values():
                yield from objects(v)
        elif isinstance(node, list):
            for v in node:
                yield from objects(v)

    schema = verdict_schema()
    assert "$ref" not in json.dumps(schema) and "$defs" not in schema
    objs = list(objects(schema))
    assert len(objs) == 2
    for obj in objs:
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])
    item = schema["properties"]["criteria"]["items"]
    assert list(item["properties"]) == ["id", "reasoning", "met"]  # reasoning before the decision


def test_parse_tolerates_fences_prose_and_01():
    text = 'Here you go:\n```json\n{"criteria": [{"id": 2, "reasoning": "b", "met": 0},' \
           ' {"id": 1, "reasoning": "a", "met": "1"}, {"id": 3, "reasoning": "c", "met": false}]}\n```\nDone.'
    got = parse_verdict(text, 3)
    assert [(v.index, v.hit) for v in got] == [(1, True), (2, False), (3, False)]
    assert parse_verdict('Sure. {"criteria": [{"id": 1, "reasoning": "x", "met": 1}]} hope it helps', 1)[0].hit


@pytest.mark.parametrize("text, needle", [
    ("all met", "no JSON object"),
    ('{"criteria": [{"id": 1, "reasoning": "a", "met": tru', "not valid JSON"),
    ('[{"id": 1, "reasoning": "a", "met": true}]', '"criteria" list'),
    ('{"criteria": [{"id": 1, "reasoning": "a", "met": "yes"}, {"id": 2, "reasoning": "b", "met": true}]}',
     "\"met\" must be true or false (got 'yes')"),
    ('{"criteria": [{"id": 1, "reasoning": "a", "met": 2}, {"id": 2, "reasoning": "b", "met": true}]}',
     '"met" must be true or false (got 2)'),
    ('{"criteria": [{"id": 1, "reasoning": "a", "met": true}]}', "expected exactly 2 items"),
    ('{"criteria": [{"id": 1, "reasoning": "a", "met": true}, {"id": 1, "reasoning": "b", "met": true}]}',
     "duplicate id(s): 1"),
    ('{"criteria": [{"id": 1, "reasoning": "a", "met": true}, {"id": 7, "reasoning": "b", "met": true}]}',
     "out of range 1..2: 7"),
    ('{"criteria": [{"id": 1, "met": true}, {"id": 2, "reasoning": "b", "met": true}]}', '"reasoning"'),
])
def test_parse_rejects(text: str, needle: str):
    with pytest.raises(VerdictError) as err:
        parse_verdict(text, 2)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


# -- through LiteLLM and the fake server ------------------------------------------------------------------

def test_valid_verdict(fake_server, fake_key, tmp_path, spec, question):
    n = len(question.criteria)
    fake_server.handler = lambda body: verdict(n)
    (res,) = judge(fake_server, tmp_path, spec, question)
    assert res.error is None
    assert [(v.index, v.hit, v.reasoning) for v in res.verdicts] == [(i, i % 2 == 0, f"r{i}") for i in range(1, n + 1)]
    assert res.attempts == 1 and len(res.raw_replies) == 1 and res.cache_hits == 0
    assert (res.prompt_tokens, res.completion_tokens) == (10, 5)
    (body,) = fake_server.requests
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "verdict"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert f"共 {n} 条" in last_user(body)


def test_shuffled_order_is_sorted(fake_server, fake_key, tmp_path, spec, question):
    n = len(question.criteria)
    order = list(range(1, n + 1))
    random.Random(1).shuffle(order)
    fake_server.handler = lambda body: verdict(n, order=order, hits=lambda i: i in (1, n))
    (res,) = judge(fake_server, tmp_path, spec, question)
    assert [v.index for v in res.verdicts] == list(range(1, n + 1))
    assert [v.hit for v in res.verdicts] == [i in (1, n) for i in range(1, n + 1)]


def test_wrong_length_then_valid_reasks_once(fake_server, fake_key, tmp_path, spec, question):
    n = len(question.criteria)
    bad = verdict(n - 1)
    fake_server.queue(Reply(text=bad), Reply(text=verdict(n)))
    (res,) = judge(fake_server, tmp_path, spec, question)
    assert res.error is None and len(res.verdicts) == n
    assert res.attempts == 2 and res.raw_replies == [bad, verdict(n)]
    first, second = fake_server.requests
    assert second["messages"][:-2] == first["messages"]
    assert second["messages"][-2] == {"role": "assistant", "content": bad}
    reask = last_user(second)
    assert f"expected exactly {n} items (one per criterion), got {n - 1}" in reask
    assert f"missing id(s): {n}" in reask
    assert '"criteria"' in reask and '"met"' in reask  # restates the required format


def test_always_invalid_records_error(fake_server, fake_key, tmp_path, spec, question):
    n = len(question.criteria)
    fake_server.handler = lambda body: verdict(n + 1)
    (res,) = judge(fake_server, tmp_path, spec, question)
    assert res.verdicts is None
    assert spec.judge.max_reasks == 2 and len(fake_server.requests) == 3
    assert res.attempts == 3 and res.raw_replies == [verdict(n + 1)] * 3
    assert res.error.startswith("invalid verdict after 3 replies: ")
    assert f"got {n + 1}" in res.error and "\n" not in res.error


def test_max_reasks_override(fake_server, fake_key, tmp_path, spec, question):
    fake_server.handler = lambda body: "no idea"
    (res,) = judge(fake_server, tmp_path, spec, question, max_reasks=0)
    assert len(fake_server.requests) == 1 and res.verdicts is None
    assert "no JSON object" in res.error


def test_unparsable_then_valid(fake_server, fake_key, tmp_path, spec, question):
    n = len(question.criteria)
    fake_server.queue(Reply(text="I think the reply is great."), Reply(text=verdict(n)))
    (res,) = judge(fake_server, tmp_path, spec, question)
    assert res.error is None and res.attempts == 2
    assert "the reply contains no JSON object" in last_user(fake_server.requests[1])


def test_duplicate_ids_named(fake_server, fake_key, tmp_path, spec, question):
    n = len(question.criteria)
    ids = [1, 2, 2] + list(range(4, n + 1))
    fake_server.handler = lambda body: verdict(n, ids=ids)
    (res,) = judge(fake_server, tmp_path, spec, question)
    assert res.verdicts is None
    reask = last_user(fake_server.requests[1])
    assert "duplicate id(s): 2" in reask and "missing id(s): 3" in reask
    assert "duplicate id(s): 2" in res.error


def test_met_yes_rejected(fake_server, fake_key, tmp_path, spec, question):
    n = len(question.criteria)
    fake_server.queue(Reply(text=verdict(n, hits=lambda i: "yes")), Reply(text=verdict(n, hits=lambda i: 1)))
    (res,) = judge(fake_server, tmp_path, spec, question)
    assert "\"met\" must be true or false (got 'yes')" in last_user(fake_server.requests[1])
    assert res.error is None and all(v.hit for v in res.verdicts)


def test_json_schema_rejected_falls_back_per_client(fake_key, tmp_path, spec, questions):
    q1, q2 = questions[0], questions[1]

    def handler(body: dict[str, Any]) -> str:
        n = q1 if "回复一" in last_user(body) else q2
        return "```json\n" + verdict(len(n.criteria)) + "\n```"

    with FakeServer(handler, reject_json_schema=True) as srv:
        async def go() -> tuple[JudgeResult, JudgeResult, bool]:
            client = ModelClient(ModelSpec(name="fake-judge", model="openai/fake-judge", api_base=srv.url,
                                           api_key_env="FAKE_KEY"),
                                 cache=ResultCache(tmp_path / "cache"), backoff_base=0.01, role="judge")
            try:
                a = await judge_response(client, spec, q1, "回复一")
                b = await judge_response(client, spec, q2, "回复二")
                return a, b, uses_json_schema(client)
            finally:
                await client.aclose()
        a, b, schema_on = asyncio.run(go())
    assert a.error is None and b.error is None and not schema_on
    kinds = [(r.get("response_format") or {}).get("type") for r in srv.requests]
    assert kinds == ["json_schema", None, None]  # the 400 is paid once, not retried, not repeated
    assert a.attempts == 1 and b.attempts == 1


def test_invalid_not_cached_valid_cached(fake_server, fake_key, tmp_path, spec, question):
    n = len(question.criteria)
    fake_server.handler = lambda body: verdict(n - 1)
    results = judge(fake_server, tmp_path, spec, question, rounds=2)
    assert len(fake_server.requests) == 6 and all(r.verdicts is None for r in results)
    assert all(r.cache_hits == 0 for r in results)

    fake_server.reset()
    fake_server.handler = lambda body: verdict(n)
    first, second = judge(fake_server, tmp_path, spec, question, rounds=2)
    assert len(fake_server.requests) == 1
    assert first.cache_hits == 0 and second.cache_hits == 1 and second.attempts == 1
    assert second.verdicts == first.verdicts and second.error is None


def test_server_error_forever_recorded_not_raised(fake_server, fake_key, tmp_path, spec, question):
    fake_server.handler = lambda body: Reply(status=500)
    (res,) = judge(fake_server, tmp_path, spec, question, max_retries=2)
    assert res.verdicts is None and res.raw_replies == []
    assert res.error.startswith("judge call failed: ") and "500" in res.error
    assert len(fake_server.requests) == 3  # 1 + max_retries, no re-ask on a call failure


@pytest.mark.parametrize("status", [401, 404])
def test_auth_and_unknown_model_raise(fake_server, fake_key, tmp_path, spec, question, status):
    fake_server.handler = lambda body: Reply(status=status)
    with pytest.raises(FatalModelError) as err:
        judge(fake_server, tmp_path, spec, question)
    assert err.value.status == status
    assert len(fake_server.requests) == 1


def test_bad_request_without_schema_is_recorded(fake_server, fake_key, tmp_path, spec, question):
    """A 400 that does not name the response format: recorded at once, never retried without the schema
    (that would switch structured output off for the rest of the run and change every later cache key)."""
    fake_server.handler = lambda body: Reply(status=400, error="prompt too long")
    (res,) = judge(fake_server, tmp_path, spec, question)
    assert res.verdicts is None and res.error.startswith("judge call failed: ")
    assert [(r.get("response_format") or {}).get("type") for r in fake_server.requests] == ["json_schema"]


def test_rejected_reply_tokens_counted(fake_server, fake_key, tmp_path, spec, question):
    n = len(question.criteria)
    fake_server.queue(Reply(text=verdict(n - 1), usage=(100, 50)), Reply(text=verdict(n), usage=(7, 3)))
    (res,) = judge(fake_server, tmp_path, spec, question)
    assert (res.prompt_tokens, res.completion_tokens) == (107, 53)


# -- hostile judge replies (issue 9, items 4 and 6) -----------------------------------------------------------

def test_two_verdict_objects_are_refused() -> None:
    one = json.dumps({"criteria": [{"id": 1, "reasoning": "r", "met": True}]})
    other = json.dumps({"criteria": [{"id": 1, "reasoning": "r", "met": False}]})
    with pytest.raises(VerdictError, match="2 verdict objects"):
        parse_verdict(f"```json\n{one}\n```\n```json\n{other}\n```", 1)
    with pytest.raises(VerdictError, match="2 verdict objects"):
        parse_verdict(f"{one} and then {other}", 1)
    assert parse_verdict(f"Here it is:\n```json\n{one}\n```", 1)[0].hit is True


def test_a_verdict_quoted_inside_reasoning_is_not_a_second_verdict() -> None:
    quoted = '{\\"criteria\\": []}'
    reply = '{"criteria": [{"id": 1, "reasoning": "the reply wrote ' + quoted + '", "met": false}]}'
    assert parse_verdict(reply, 1)[0].hit is False


@pytest.mark.parametrize("reply", ["[" * 5000, '{"criteria": ' + "[" * 5000, "{" * 100_000, "x" * 1_000_000])
def test_deep_or_huge_replies_are_verdict_errors_not_crashes(reply: str) -> None:
    with pytest.raises(VerdictError):
        parse_verdict(reply, 1)
