"""judge: what one question's per-criterion calls add up to (replies, attempts, tokens, cache hits, cost)
and how several failed criteria are reported, through the real client and the loopback server.
Written against survivors of `python bench/mutation.py judge`."""

from __future__ import annotations

import json
from pathlib import Path

from fakeserver import FakeServer, Reply
from rubric_engine.judge.grading import JudgeResult, add_usage
from rubric_engine.judge.verdicts import Verdict, VerdictShape
from test_judge_per_criterion import crit, run, sample


def test_per_criterion_usage_is_summed_over_every_reply(tmp_path: Path, fake_key: str) -> None:
    spec, q = sample(tmp_path)
    asked: dict[int, int] = {}

    def handler(body: dict) -> Reply:
        i = crit(body)
        asked[i] = asked.get(i, 0) + 1
        if i == 2 and asked[i] == 1:
            return Reply(text="not json", usage=(100, 1))  # rejected, re-asked; its tokens still count
        return Reply(text=json.dumps({"explanation": f"r{i}", "criteria_met": i != 4}), usage=(10 * i, i))

    with FakeServer(handler) as srv:
        r = run(srv, tmp_path, spec, q)
        again = run(srv, tmp_path, spec, q)
    assert r.error is None and [(v.index, v.hit) for v in r.verdicts] == [(1, True), (2, True), (3, True), (4, False)]
    assert r.attempts == 5  # 4 criteria + 1 re-ask
    # prompt tokens: 10 + (100 + 20) + 30 + 40; completion: 1 + (1 + 2) + 3 + 4
    assert (r.prompt_tokens, r.completion_tokens) == (200, 11)
    assert len(r.raw_replies) == 5 and "not json" in r.raw_replies and r.cache_hits == 0
    assert again.cache_hits == 4 and again.attempts == 4 and again.error is None


def test_several_failed_criteria_name_the_first_and_count_the_rest(tmp_path: Path, fake_key: str) -> None:
    spec, q = sample(tmp_path)
    with FakeServer(lambda b: Reply(text="no idea" if crit(b) in (2, 3) else
                                    json.dumps({"explanation": "x", "criteria_met": True}))) as srv:
        r = run(srv, tmp_path, spec, q)
    assert r.verdicts is None
    assert r.error.startswith("criterion 2: invalid verdict after 3 replies")
    assert r.error.endswith(" (+1 more criteria failed)")
    assert r.attempts == 1 + 3 + 3 + 1 and len(r.raw_replies) == 8


def test_add_usage_sums_parts_and_keeps_unknown_cost_unknown() -> None:
    a = JudgeResult([Verdict(1, "a", True)], None, ["x"], attempts=2, prompt_tokens=10, completion_tokens=3,
                    cost=0.25, cache_hits=1)
    b = JudgeResult(None, "bad", ["y", "z"], attempts=3, prompt_tokens=7, completion_tokens=5, cost=0.5, cache_hits=2)
    out = JudgeResult(None, None)
    add_usage(out, [a, b])
    assert (out.raw_replies, out.attempts, out.prompt_tokens, out.completion_tokens, out.cache_hits) == (
        ["x", "y", "z"], 5, 17, 8, 3)
    assert out.cost == 0.75 and isinstance(out.cost, float)
    unknown = JudgeResult(None, None)
    add_usage(unknown, [a, JudgeResult(None, None, cost=None)])
    assert unknown.cost is None  # never a partial sum
    none = JudgeResult(None, None)
    add_usage(none, [])
    assert none.cost == 0.0 and none.attempts == 0


def test_reask_message_says_what_was_wrong_and_how_many() -> None:
    text = VerdictShape().reask("item 2: 'met' must be true or false", 3)
    assert "item 2: 'met' must be true or false" in text and "exactly 3 items" in text and "1 to 3" in text


def test_a_mock_judge_is_told_the_verdict_shape_of_both_granularities(tmp_path: Path) -> None:
    """The offline `mock/` judge builds its verdict from the shape the judge layer describes; a wrong description
    (field kinds, ids, item count, list key) makes its verdict unparsable and the question a judge error."""
    import asyncio

    from rubric_engine.dataset.load import parse_rows
    from rubric_engine.judge.grading import judge_response
    from rubric_engine.models.client import ModelClient
    from rubric_engine.models.entries import ModelSpec
    from rubric_engine.spec.load import load_spec

    from conftest import MINI, REPO

    heart = load_spec(REPO / "benchmarks" / "heartbench")
    (hq,) = parse_rows(heart, MINI)[:1]
    health, kq = sample(tmp_path)

    async def go(spec, question) -> JudgeResult:  # type: ignore[no-untyped-def]
        client = ModelClient(ModelSpec(name="mock-judge", model="mock/judge"), cache=None, role="judge")
        try:
            return await judge_response(client, spec, question, "I hear you.")
        finally:
            await client.aclose()

    for spec, question in ((heart, hq), (health, kq)):
        r = asyncio.run(go(spec, question))
        assert r.error is None, r.error
        assert [v.index for v in r.verdicts] == [c.index for c in question.criteria]
        assert all(v.reasoning.startswith("[mock]") for v in r.verdicts) and r.attempts == len(
            question.criteria if spec is health else [0])


def test_after_the_format_fallback_invalid_replies_are_still_rejected_and_reasked(fake_key, tmp_path, spec,
                                                                                   questions) -> None:
    """Once a server refused json_schema, later calls go without it; their replies are still validated, so an
    invalid one is re-asked and never cached."""
    import asyncio

    from rubric_engine.judge.grading import judge_response
    from rubric_engine.models.cache import ResultCache
    from rubric_engine.models.client import ModelClient
    from rubric_engine.models.entries import ModelSpec

    q1, q2 = questions[0], questions[1]
    sent: list[str] = []

    def handler(body: dict) -> str:
        q = q1 if "回复一" in json.dumps(body["messages"], ensure_ascii=False) else q2
        n = len(q.criteria) - (1 if q is q2 and "回复二" not in sent else 0)  # q2's first reply misses an item
        if q is q2:
            sent.append("回复二")
        return json.dumps({"criteria": [{"id": i, "reasoning": "r", "met": True} for i in range(1, n + 1)]})

    with FakeServer(handler, reject_json_schema=True) as srv:
        async def go() -> tuple[JudgeResult, JudgeResult]:
            client = ModelClient(ModelSpec(name="j", model="openai/j", api_base=srv.url, api_key_env="FAKE_KEY"),
                                 cache=ResultCache(tmp_path / "cache"), backoff_base=0.01, role="judge")
            try:
                return (await judge_response(client, spec, q1, "回复一"), await judge_response(client, spec, q2, "回复二"))
            finally:
                await client.aclose()
        a, b = asyncio.run(go())
    assert a.error is None and b.error is None
    assert b.attempts == 2 and len(b.verdicts) == len(q2.criteria)
    assert [(r.get("response_format") or {}).get("type") for r in srv.requests] == ["json_schema", None, None, None]


def _client(srv: FakeServer, tmp_path: Path):  # type: ignore[no-untyped-def]
    from rubric_engine.models.cache import ResultCache
    from rubric_engine.models.client import ModelClient
    from rubric_engine.models.entries import ModelSpec

    return ModelClient(ModelSpec(name="j", model="openai/j", api_base=srv.url, api_key_env="FAKE_KEY"),
                       cache=ResultCache(tmp_path / "cache"), backoff_base=0.01, role="judge")


def _criteria_reply(n: int) -> str:
    return json.dumps({"criteria": [{"id": i, "reasoning": "r", "met": i % 2 == 0} for i in range(1, n + 1)]})


def test_reasked_and_repeated_verdicts_are_cached_under_the_original_request(fake_key, tmp_path, spec,
                                                                              questions) -> None:
    """Every reply is stored under the first request of its question (re-asks included) and a repeat grading
    under its own key, on every path: json_schema accepted, refused mid-question, and known to be refused."""
    import asyncio

    from rubric_engine.judge.grading import judge_response

    q = questions[0]
    n = len(q.criteria)
    state = {"schema_ok": True, "replies": 0}

    def handler(body: dict) -> Reply:
        if body.get("response_format") and not state["schema_ok"]:
            return Reply(status=400, error="response_format json_schema is not supported")
        state["replies"] += 1
        if state["replies"] == 1:  # the first answer misses an item; then the server stops taking json_schema
            state["schema_ok"] = False
            return Reply(text=_criteria_reply(n - 1))
        return Reply(text=_criteria_reply(n))

    async def judge_with(srv: FakeServer, *repeats: int | None) -> list[JudgeResult]:
        client = _client(srv, tmp_path)
        try:
            return [await (judge_response(client, spec, q, "我在。") if r is None else
                           judge_response(client, spec, q, "我在。", repeat=r)) for r in repeats]
        finally:
            await client.aclose()

    with FakeServer(handler) as srv:
        (first,) = asyncio.run(judge_with(srv, 0))  # invalid (json_schema) -> re-ask -> 400 -> re-ask without it
        assert first.error is None and first.attempts == 2
        sent = len(srv.requests)
        (again,) = asyncio.run(judge_with(srv, 0))  # fresh client: 400 once, then the stored verdict
        assert again.cache_hits == 1 and again.verdicts == first.verdicts
        assert state["replies"] == 2 and len(srv.requests) == sent + 1
        # one client that already knows the server refuses json_schema: repeat 1 is asked, repeat 0 and a
        # second repeat 1 come from the cache
        r0, r1, r1_again, r2 = asyncio.run(judge_with(srv, None, 1, 1, 2))  # None: the default, a single grading
        assert [r.cache_hits for r in (r0, r1, r1_again, r2)] == [1, 0, 1, 0]
        assert state["replies"] == 4
        # a fresh client's first call (json_schema refused, then without): repeat 3 is its own entry too
        (r3,) = asyncio.run(judge_with(srv, 3))
        (r3_again,) = asyncio.run(judge_with(srv, 3))
        assert (r3.cache_hits, r3_again.cache_hits, state["replies"]) == (0, 1, 5)


def test_a_prompt_too_long_is_not_retried_without_response_format(fake_key, tmp_path, spec, questions) -> None:
    """A 400 saying the context window is exceeded is the prompt's fault: asking again without json_schema
    cannot help, so the question is a judge error after one request."""
    import asyncio

    from rubric_engine.judge.grading import judge_response

    with FakeServer(lambda body: Reply(status=400, error="This model's maximum context length is 8192 tokens. "
                                       "However, your messages resulted in 9000 tokens.")) as srv:
        async def go() -> JudgeResult:
            client = _client(srv, tmp_path)
            try:
                return await judge_response(client, spec, questions[0], "我在。")
            finally:
                await client.aclose()
        r = asyncio.run(go())
    assert r.verdicts is None and "context window" in r.error
    assert len(srv.requests) == 1 and srv.requests[0]["response_format"]["type"] == "json_schema"
