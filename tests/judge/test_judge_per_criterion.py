"""Per-criterion judging through the real client: one call per criterion, each validated, re-asked and
cached on its own, the json_schema -> instructed-JSON fallback, and the calls of one question in flight
together (pipelined under the client's concurrency)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from fakeserver import FakeServer, Reply
from rubric_engine.dataset.load import parse_rows
from rubric_engine.judge.grading import JudgeResult, judge_response
from rubric_engine.models.cache import ResultCache
from rubric_engine.models.client import ModelClient
from rubric_engine.models.entries import ModelSpec
from rubric_engine.spec.load import load_spec

from conftest import REPO


def sample(tmp_path: Path):
    spec = load_spec(REPO / "benchmarks" / "healthbench")
    row = {"prompt": [{"role": "user", "content": "My knee hurts after running."}], "prompt_id": "k1",
           "example_tags": ["theme:x"],
           "rubrics": [{"criterion": f"CRIT#{i} point {i}", "points": p, "tags": ["axis:a"]}
                       for i, p in enumerate([3, -2, 5, 1], start=1)]}
    (tmp_path / "d.jsonl").write_text(json.dumps(row) + "\n")
    return spec, parse_rows(spec, tmp_path / "d.jsonl")[0]


def crit(body: dict[str, Any]) -> int:
    return int(re.search(r"CRIT#(\d+)", body["messages"][-1]["content"] if body["messages"][-1]["role"] == "user"
                         and "CRIT#" in body["messages"][-1]["content"] else json.dumps(body["messages"])).group(1))


def run(srv: FakeServer, tmp_path: Path, spec, question, concurrency: int = 8) -> JudgeResult:
    async def go() -> JudgeResult:
        client = ModelClient(ModelSpec(name="j", model="openai/j", api_base=srv.url, api_key_env="FAKE_KEY"),
                             cache=ResultCache(tmp_path / "cache"), backoff_base=0.01, max_retries=1,
                             role="judge", concurrency=concurrency)
        try:
            return await judge_response(client, spec, question, "Rest and ice it.")
        finally:
            await client.aclose()
    return asyncio.run(go())


def test_one_call_per_criterion_each_cached(tmp_path: Path, fake_key: str) -> None:
    spec, q = sample(tmp_path)
    with FakeServer(lambda b: Reply(text=json.dumps({"explanation": "e", "criteria_met": crit(b) % 2 == 1}),
                                    delay=0.3)) as srv:
        r = run(srv, tmp_path, spec, q)
        assert [v.index for v in r.verdicts] == [1, 2, 3, 4] and [v.hit for v in r.verdicts] == [True, False, True, False]
        assert len(srv.requests) == 4 and srv.max_in_flight == 4  # started together, not one after another
        fmt = srv.requests[0]["response_format"]["json_schema"]["schema"]
        assert list(fmt["properties"]) == ["explanation", "criteria_met"]
        again = run(srv, tmp_path, spec, q)
        assert len(srv.requests) == 4 and again.cache_hits == 4  # each criterion came from the cache


def test_bad_criterion_is_reasked_alone_then_fallback(tmp_path: Path, fake_key: str) -> None:
    spec, q = sample(tmp_path)
    seen: dict[int, int] = {}

    def handler(body: dict[str, Any]) -> Reply:
        i = crit(body)
        seen[i] = seen.get(i, 0) + 1
        if i == 3 and seen[i] == 1:
            return Reply(text='{"explanation": "hmm", "criteria_met": "maybe"}')
        return Reply(text="```json\n" + json.dumps({"explanation": "ok", "criteria_met": True}) + "\n```")

    with FakeServer(handler, reject_json_schema=True) as srv:
        r = run(srv, tmp_path, spec, q)
    assert r.error is None and all(v.hit for v in r.verdicts)
    assert seen[3] == 2 and all(seen[i] == 1 for i in (1, 2, 4))  # only the bad criterion was asked again
    reask = [b for b in srv.requests if len(b["messages"]) > 1 and b["messages"][-2]["role"] == "assistant"]
    assert len(reask) == 1 and '"criteria_met" must be true or false' in reask[0]["messages"][-1]["content"]
    # the calls in flight together each met the 400 once; after that the client asks with instructed JSON only
    assert sum("response_format" in b for b in srv.requests) <= 4 and "response_format" not in reask[0]


def test_a_criterion_that_stays_invalid_is_a_judge_error(tmp_path: Path, fake_key: str) -> None:
    spec, q = sample(tmp_path)
    with FakeServer(lambda b: Reply(text="no idea" if crit(b) == 2 else
                                    json.dumps({"explanation": "x", "criteria_met": False}))) as srv:
        r = run(srv, tmp_path, spec, q)
    assert r.verdicts is None and r.error.startswith("criterion 2: invalid verdict after 3 replies")
