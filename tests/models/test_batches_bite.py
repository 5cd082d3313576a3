"""Batch mode's batcher (models/batches.py; docs/operations.md, batch mode), in-process.

A ModelClient with a Batcher, LiteLLM over HTTP to the files + batches server on 127.0.0.1 (tests/fakebatches.py),
the batch journal in a tmp directory: what one wave sends (one line per distinct request, its body without
credentials, compact UTF-8), the progress lines word for word, every counter a run's summary sums (requests,
batched, tokens, batch cost, unknown costs, retries, errors), which error lines are sent again and which are
recorded (each failure's words), usage that is not a token count, `batch_max_wait`, and what the same command
finds in the journal (an answer read back, a batch re-attached or looked up by its file, ids never uploaded sent
again, the tries of earlier invocations counted). Kill -9 and signals run through the console script in
tests/models/test_batch.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from fakebatches import FakeBatchServer
from fakeserver import Reply
from rubric_engine.errors import FatalModelError, ModelCallError
from rubric_engine.models.batchapi import BatchAPI
from rubric_engine.models.batches import (
    DEFAULT_MAX_WAIT, MAX_BYTES, MAX_LINES, MAX_USAGE_TOKENS, BatchRun, Batcher)
from rubric_engine.models.batchjournal import BATCH_DIR, BATCH_JOURNAL, BatchJournal
from rubric_engine.models.cache import ResultCache
from rubric_engine.models.client import CallResult, ModelClient
from rubric_engine.models.entries import ModelSpec, cache_key

POLL = 0.01  # seconds between polls, and the quiet time that ends a wave
GUARD = 30.0  # seconds an invocation may take before the test fails (each takes well under one)


@pytest.fixture(scope="module", autouse=True)
def _litellm_imported() -> None:
    """LiteLLM imported (its batch and file modules too) before any guarded invocation: on a loaded CI worker its
    first import alone can take most of GUARD, and a guard is for a call left waiting, not for an import."""
    from rubric_engine.models.litellm_runtime import LiteLLMRuntime

    litellm = LiteLLMRuntime().module()
    for name in ("acreate_file", "acreate_batch", "aretrieve_batch", "afile_content", "alist_batches"):
        getattr(litellm, name)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


class Batched:
    """A client's words (its spec, its own call cache, retries, role), built into a ModelClient when an
    invocation's BatchRun exists (`start`): batch mode is a layer chosen at the client's construction. Every other
    attribute (stats, batcher, complete, ...) is the client built last."""

    def __init__(self, spec: ModelSpec, cache: ResultCache, max_retries: int = 1, role: str = "candidate") -> None:
        self.spec, self.client = spec, None
        self._kw: dict[str, Any] = {"cache": cache, "max_retries": max_retries, "role": role}

    def start(self, run_dir: Path, **batch: Any) -> BatchRun:
        """Batch mode over `run_dir` (BatchRun's words), and this client built with it."""
        run = BatchRun(run_dir, **batch)
        self.client = ModelClient(self.spec, batches=run, **self._kw)
        return run

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def client_for(where: Path, srv: FakeBatchServer, model: str = "openai/fake-model", role: str = "candidate",
               max_retries: int = 1) -> Any:
    """A client with a call cache of its own (batch mode answers through it; a fresh one per client, so a second
    invocation finds its answers in the journal, as after a crash before the cache was written)."""
    spec = ModelSpec(name="fake", model=model, api_base=srv.url, api_key_env=None)
    return Batched(spec, ResultCache(where / f"cache-{uuid.uuid4().hex[:8]}"), max_retries=max_retries, role=role)


def key_of(client: Any, text: str) -> str:
    return cache_key(client.spec, user(text), None, 0)


class Said(list):
    def __call__(self, text: str) -> None:
        self.append(text)


async def ask(run_dir: Path, client: Any, texts: list[str], *, max_retries: int = 1,
              max_wait: float = DEFAULT_MAX_WAIT, said: Said | None = None) -> list[Any]:
    """One invocation: batch mode over `run_dir`, each text asked at once; results or the exceptions raised."""
    run = client.start(run_dir, poll=POLL, max_retries=max_retries, notify=said, max_wait=max_wait)
    try:
        # a guard, not a timed assertion: a call left waiting for ever fails the test instead of hanging it
        return list(await asyncio.wait_for(asyncio.gather(*(client.complete(user(t)) for t in texts),
                                                          return_exceptions=True), GUARD))
    finally:
        await run.aclose()
        await client.aclose()


def by_text(replies: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
    """A server script: the reply for a request is chosen by its last message (a list: one per request seen)."""
    def handler(body: dict[str, Any]) -> Any:
        text = body["messages"][-1]["content"]
        got = replies.get(text, Reply(text=f"echo: {text}"))
        return got.pop(0) if isinstance(got, list) and len(got) > 1 else (got[0] if isinstance(got, list) else got)

    return handler


def journal_events(run_dir: Path) -> list[tuple[str, ...]]:
    rows = [json.loads(x) for x in (run_dir / BATCH_JOURNAL).read_text(encoding="utf-8").splitlines()]
    return [(r["event"], *(str(r[k]) for k in ("file_id", "batch_id", "status") if k in r)) for r in rows]


# ------------------------------------------------------------------------------------------------ constants

def test_the_documented_bounds() -> None:
    assert MAX_LINES == 50_000 and MAX_BYTES == 150 * 2**20
    assert MAX_USAGE_TOKENS == 100_000_000 and DEFAULT_MAX_WAIT == 90_000.0  # 24 h window + an hour


@pytest.mark.parametrize("poll, quiet", [(0.2, 0.2), (1.0, 1.0), (30.0, 1.0)])
def test_a_wave_ends_after_min_1_s_and_batch_poll_without_a_request(tmp_path: Path, poll: float, quiet: float) -> None:
    run = BatchRun(tmp_path, poll=poll, max_retries=2)
    assert (run.quiet, run.poll, run.max_retries, run.max_wait, run.notify) == (quiet, poll, 2, DEFAULT_MAX_WAIT, None)
    run.say("nobody listens")  # no notify: nothing, no error
    run.journal.close()


def test_each_client_built_with_a_batch_run_has_its_own_batcher(tmp_path: Path) -> None:
    with FakeBatchServer() as srv:
        said = Said()
        run = BatchRun(tmp_path, poll=3.0, max_retries=4, notify=said, max_wait=5.0)
        spec = ModelSpec(name="fake", model="openai/fake-model", api_base=srv.url, api_key_env=None)
        a, b = (ModelClient(spec, cache=ResultCache(tmp_path / f"cache-{role}"), max_retries=1, role=role,
                            batches=run) for role in ("candidate", "judge"))
        assert isinstance(a.batcher, Batcher) and isinstance(b.batcher, Batcher) and a.batcher is not b.batcher
        assert (a.batcher.run, a.batcher.client, b.batcher.run, b.batcher.client) == (run, a, run, b)
        assert (run.poll, run.max_retries, run.max_wait, run.notify) == (3.0, 4, 5.0, said)
        run.say("x")
        assert said == ["x"]
        api = a.batcher.api()
        assert isinstance(api, BatchAPI) and api is a.batcher.api()  # built once per client
        assert (api.role, api.max_retries, api.spec) == ("candidate", 1, a.spec)
        run.journal.close()
        assert BatchRun(tmp_path, poll=1.0, max_retries=0).max_wait == DEFAULT_MAX_WAIT


# ------------------------------------------------------------------------------------------------- one wave

def test_one_wave_is_one_batch_and_every_number_is_counted(tmp_path: Path) -> None:
    with FakeBatchServer(by_text({"q2": Reply(text="two", usage=(7, 3), finish_reason="length")})) as srv:
        client, said = client_for(tmp_path, srv), Said()
        got = asyncio.run(ask(tmp_path, client, ["q1", "q2", "q3"], said=said))
        assert list(srv.batches) == ["batch-0002"] and srv.steps["create"] == 1
        assert said == ["candidate batch batch-0002: submitted, 3 requests",
                        "candidate batch batch-0002: in_progress, 0 of 3 done, 0 failed",
                        "candidate batch batch-0002: completed, 3 of 3 done, 0 failed"]
    assert got == [CallResult("echo: q1", 10, 5, None, False, 1, "stop", batched=True),
                   CallResult("two", 7, 3, None, False, 1, "length", batched=True),
                   CallResult("echo: q3", 10, 5, None, False, 1, "stop", batched=True)]
    s = client.stats
    assert (s.calls, s.requests, s.batched, s.prompt_tokens, s.completion_tokens, s.cost, s.cost_unknown_calls,
            s.retries, s.errors) == (3, 3, 3, 27, 13, 0.0, 3, 0, 0)
    assert journal_events(tmp_path)[1:] == [("file", "file-0001"), ("batch", "batch-0002"), ("end", "completed")]
    assert journal_events(tmp_path)[0] == ("submit",)
    saved = (tmp_path / BATCH_DIR).glob("*.jsonl")
    assert len([json.loads(x) for f in saved for x in f.read_text().splitlines()]) == 3


def test_a_batch_line_is_compact_utf8_with_the_providers_model_and_no_credentials(tmp_path: Path) -> None:
    with FakeBatchServer() as srv:
        spec = ModelSpec(name="fake", model="openai/fake-model", api_base=srv.url, api_key_env="FAKE_BATCH_KEY",
                         params={"temperature": 0.5}, timeout=33.0)
        client = Batched(spec, ResultCache(tmp_path / "c"), max_retries=0)
        os.environ["FAKE_BATCH_KEY"] = "sk-never-in-a-line-9876"
        try:
            asyncio.run(ask(tmp_path, client, ["héllo"]))
        finally:
            del os.environ["FAKE_BATCH_KEY"]
        raw = srv.files["file-0001"]
    cid = cache_key(spec, user("héllo"), None, 0)
    assert raw == ('{"custom_id":"%s","method":"POST","url":"/v1/chat/completions","body":{"model":"fake-model",'
                   '"temperature":0.5,"messages":[{"role":"user","content":"héllo"}]}}\n' % cid).encode("utf-8")


def test_a_priced_model_costs_the_batch_rate(tmp_path: Path) -> None:
    """gpt-4o behind the fake server: 10 prompt and 5 completion tokens at $1.25 / $5 per million."""
    with FakeBatchServer() as srv:
        client = client_for(tmp_path, srv, model="openai/gpt-4o")
        got = asyncio.run(ask(tmp_path, client, ["a", "b"]))
    each = 10 * 1.25e-6 + 5 * 5e-6
    assert [r.cost for r in got] == [pytest.approx(each, rel=1e-9)] * 2
    assert client.stats.cost == pytest.approx(2 * each, rel=1e-9) and client.stats.cost_unknown_calls == 0


def test_identical_requests_share_one_line(tmp_path: Path) -> None:
    async def go(srv: FakeBatchServer) -> list[Any]:
        client = client_for(tmp_path, srv)
        run = client.start(tmp_path, poll=POLL, max_retries=1)
        batcher = client.batcher
        kw = {"messages": user("same"), "model": "openai/fake-model", "api_version": "v1", "client": object(),
              "api_base": srv.url, "api_key": "k", "timeout": 5.0, "num_retries": 0, "max_retries": 0, "seed": 3}
        try:
            return await asyncio.gather(batcher.call(kw, "k1"), batcher.call(kw, "k1"), batcher.call(kw, "k2"))
        finally:
            await run.aclose()

    with FakeBatchServer() as srv:
        a, b, c = asyncio.run(go(srv))
        lines = srv.batches["batch-0002"]["_lines"]
        assert [line["custom_id"] for line in lines] == ["k1", "k2"]
        assert lines[0]["body"] == {"model": "fake-model", "messages": user("same"), "seed": 3}  # no credentials
    assert a == b == c and a.text == "echo: same"


# ------------------------------------------------------------------------------------------- failed requests

def test_a_retryable_error_is_sent_again_alone_and_counted_as_a_retry(tmp_path: Path) -> None:
    with FakeBatchServer(by_text({"flaky": [Reply(status=500), Reply(text="fine")]})) as srv:
        client = client_for(tmp_path, srv)
        got = asyncio.run(ask(tmp_path, client, ["flaky", "ok"]))
        assert [len(b["_lines"]) for b in srv.batches.values()] == [2, 1]
        assert srv.submitted[key_of(client, "flaky")] == 2 and srv.submitted[key_of(client, "ok")] == 1
    assert [r.text for r in got] == ["fine", "echo: ok"]
    s = client.stats
    assert (s.retries, s.errors, s.requests, s.batched) == (1, 0, 2, 2)


def test_a_retryable_error_past_max_retries_is_that_questions_error_word_for_word(tmp_path: Path) -> None:
    with FakeBatchServer(by_text({"down": Reply(status=503)})) as srv:
        client = client_for(tmp_path, srv)
        got = asyncio.run(ask(tmp_path, client, ["down", "ok"], max_retries=2))
        assert srv.submitted[key_of(client, "down")] == 3
    err = got[0]
    assert type(err) is ModelCallError
    assert str(err) == ("openai/fake-model [HTTP 503]: candidate model 'fake': batch request failed: HTTP 503: The "
                        "engine is currently overloaded, please try again later (sent in 3 batches; raise "
                        "max_retries to send it again) (after 3 attempts)")
    assert (err.status, err.attempts, err.detail) == (503, 3, "HTTP 503: The engine is currently overloaded, please "
                                                             "try again later")
    assert (client.stats.retries, client.stats.errors, client.stats.requests) == (2, 1, 1)


@pytest.mark.parametrize("status, stops", [(400, False), (404, True), (422, False)])
def test_an_error_retrying_cannot_fix_is_raised_at_once(tmp_path: Path, status: int, stops: bool) -> None:
    with FakeBatchServer(by_text({"bad": Reply(status=status, error="scripted refusal")})) as srv:
        client = client_for(tmp_path, srv, role="judge")
        got = asyncio.run(ask(tmp_path, client, ["bad"]))
        assert len(srv.batches) == 1
    err = got[0]
    assert type(err) is FatalModelError
    assert str(err) == (f"openai/fake-model [HTTP {status}]: judge model 'fake': batch request failed: HTTP {status}: "
                        "scripted refusal (after 1 attempt)")
    assert (err.status, err.attempts, err.stops_run, err.detail) == (status, 1, stops, f"HTTP {status}: scripted refusal")
    assert (client.stats.retries, client.stats.errors) == (0, 1)


def _rewrite(f: Callable[[dict[str, Any]], Any]) -> Callable[[list[dict[str, Any]]], list[str]]:
    """A tamper: each output line passed through f (which returns the line to write: a dict or a str)."""
    def tamper(rows: list[dict[str, Any]]) -> list[str]:
        out = [f(r) for r in rows]
        return [r if isinstance(r, str) else json.dumps(r) for r in out]

    return tamper


@pytest.mark.parametrize("line, status, message, retry", [
    ({"response": {"status_code": 200, "body": {"choices": []}}}, 200, "malformed batch answer", True),
    ({"response": {"status_code": 200, "body": "text"}}, 200, "malformed batch answer", True),
    ({"response": {"status_code": 429, "body": {"error": {"message": "slow", "code": "x"}}}}, 429, "HTTP 429: slow",
     True),
    ({"response": {"status_code": 408, "body": {}}}, 408, "HTTP 408: HTTP 408", True),
    ({"response": {"status_code": 500, "body": None}}, 500, "HTTP 500: HTTP 500", True),
    ({"response": {"status_code": 502, "body": {"error": {"type": "server_error"}}}}, 502, "HTTP 502: HTTP 502", True),
    ({"response": {"status_code": 409, "body": {"error": {"code": "conflict"}}}}, 409, "HTTP 409: conflict", False),
    ({"response": {"status_code": 200, "body": {"choices": [{}]}}, "error": {"code": "server_error", "message": "m"}},
     200, "HTTP 200: m", True),
    ({"error": {"code": "rate_limit_exceeded", "message": "wait"}}, None, "wait", True),
    ({"error": {"code": "batch_expired"}}, None, "batch_expired", True),
    ({"error": {"code": "other", "message": "no"}}, None, "no", False),
    ({"response": "not a dict", "error": {"message": "z"}}, None, "z", False),
    ({"response": {"status_code": "500"}, "error": {"message": "s"}}, None, "HTTP 500: s", False),  # not a number
    ({"response": {"status_code": 499, "body": {"error": {"message": "x" * 400}}}}, 499, "HTTP 499: " + "x" * 300,
     False),
])
def test_each_error_line_is_read_as_its_status_words_and_whether_another_batch_could_fix_it(
        tmp_path: Path, line: dict[str, Any], status: int | None, message: str, retry: bool) -> None:
    with FakeBatchServer() as srv:
        srv.tamper = _rewrite(lambda r: {"custom_id": r["custom_id"], **line})
        client = client_for(tmp_path, srv, role="judge", max_retries=0)
        err = asyncio.run(ask(tmp_path, client, ["x"], max_retries=0))[0]
    assert type(err) is (ModelCallError if retry else FatalModelError)
    assert (err.status, err.detail) == (status, message)
    assert f"judge model 'fake': batch request failed: {message}" in str(err)


def test_an_answer_litellm_cannot_read_is_retried_as_a_malformed_reply(tmp_path: Path) -> None:
    with FakeBatchServer() as srv:
        srv.tamper = _rewrite(lambda r: {**r, "response": {**r["response"], "body": {"choices": [1, 2]}}})
        client = client_for(tmp_path, srv)
        got = asyncio.run(ask(tmp_path, client, ["x"], max_retries=1))
        assert len(srv.batches) == 2  # sent again, answered properly the second time
    assert got[0].text == "echo: x" and client.stats.retries == 1
    with FakeBatchServer() as srv:
        srv.tamper = _rewrite(lambda r: {**r, "response": {**r["response"], "body": {"choices": [1, 2]}}})
        (tmp_path / "again").mkdir()
        err = asyncio.run(ask(tmp_path / "again", client_for(tmp_path, srv), ["x"], max_retries=0))[0]
    assert type(err) is ModelCallError and err.status == 200
    assert err.detail.startswith("malformed batch answer (") and err.detail.endswith(")")


def test_requests_an_expired_batch_never_ran_are_sent_again_alone(tmp_path: Path) -> None:
    with FakeBatchServer(expire=(2,)) as srv:
        client, said = client_for(tmp_path, srv), Said()
        got = asyncio.run(ask(tmp_path, client, ["a", "b", "c"], said=said))
        assert [len(b["_lines"]) for b in srv.batches.values()] == [3, 1]
        assert [b["status"] for b in srv.batches.values()] == ["expired", "completed"]
    assert [r.text for r in got] == ["echo: a", "echo: b", "echo: c"] and client.stats.retries == 1
    assert "candidate batch batch-0002: expired, 2 of 3 done, 0 failed" in said
    assert "candidate batch batch-0007: submitted, 1 requests" in said


def test_requests_of_a_cancelled_batch_are_errors_not_sent_again(tmp_path: Path) -> None:
    with FakeBatchServer(expire=(1,)) as srv:
        srv.cut_status = "cancelled"
        client = client_for(tmp_path, srv)
        got = asyncio.run(ask(tmp_path, client, ["a", "b"], max_retries=3))
        assert len(srv.batches) == 1
    assert got[0].text == "echo: a"
    err = got[1]
    assert type(err) is FatalModelError and (err.status, err.stops_run, err.attempts) == (None, False, 1)
    assert str(err) == ("openai/fake-model: candidate model 'fake': batch request failed: batch batch-0002 ended "
                        "'cancelled' without answering this request (after 1 attempt)")


def test_a_batch_failed_as_a_whole_fails_each_request_with_the_providers_reason(tmp_path: Path) -> None:
    with FakeBatchServer(expire=(0,)) as srv:
        srv.cut_status = "failed"
        client = client_for(tmp_path, srv)
        got = asyncio.run(ask(tmp_path, client, ["a", "b"], max_retries=3))
        assert len(srv.batches) == 1
    assert [type(e) for e in got] == [FatalModelError] * 2
    assert [e.detail for e in got] == ["scripted: the file did not validate"] * 2
    saved = [json.loads(x) for x in next((tmp_path / BATCH_DIR).glob("*.jsonl")).read_text().splitlines()]
    assert [r["error"] for r in saved] == [{"code": "batch_failed", "message": "scripted: the file did not validate"}] * 2


class Refusing(FakeBatchServer):
    """A batch failed as a whole with the given errors (None: the provider gave no reason)."""

    def __init__(self, errors: Any) -> None:
        super().__init__(expire=(0,))
        self.cut_status, self._errors = "failed", errors

    def _finish(self, batch: dict[str, Any]) -> None:
        super()._finish(batch)
        batch["errors"] = self._errors


@pytest.mark.parametrize("errors, why", [
    (None, "failed"),
    ({"data": []}, "failed"),
    ({"data": [{"message": "one"}, {"message": "two"}]}, "one; two"),
    ({"data": [{"message": "y" * 400}]}, "y" * 300),
])
def test_the_reason_of_a_batch_failed_as_a_whole(tmp_path: Path, errors: Any, why: str) -> None:
    with Refusing(errors) as srv:
        err = asyncio.run(ask(tmp_path, client_for(tmp_path, srv), ["a"]))[0]
    assert err.detail == why


# ------------------------------------------------------------------------------------------------------- usage

@pytest.mark.parametrize("prompt, completion, counted", [
    (0, 0, True), (MAX_USAGE_TOKENS, 3, True), (4.0, 2, True),
    (MAX_USAGE_TOKENS + 1, 3, False), (-1, 3, False), (4.5, 2, False), (True, 2, False), ("12", 2, False),
    (float("nan"), 2, False), (4, -2, False), (-1, 1.5, False),
])
def test_usage_that_is_not_a_token_count_is_unknown_never_summed(tmp_path: Path, prompt: Any, completion: Any,
                                                                  counted: bool) -> None:
    def bend(r: dict[str, Any]) -> str:
        usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        return json.dumps({**r, "response": {**r["response"], "body": {**r["response"]["body"], "usage": usage}}})

    with FakeBatchServer() as srv:
        srv.tamper = _rewrite(bend)
        client, said = client_for(tmp_path, srv, model="openai/gpt-4o"), Said()
        got = asyncio.run(ask(tmp_path, client, ["x"], said=said))[0]
    s = client.stats
    assert got.text == "echo: x" and (s.requests, s.batched) == (1, 1)  # the answer itself is kept
    if counted:
        cost = prompt * 1.25e-6 + completion * 5e-6
        assert (got.prompt_tokens, got.completion_tokens) == (prompt, completion)
        assert (s.prompt_tokens, s.completion_tokens, s.cost_unknown_calls) == (prompt, completion, 0)
        assert got.cost == pytest.approx(cost, rel=1e-9) and s.cost == pytest.approx(cost, rel=1e-9)
        assert not [x for x in said if x.startswith("warning")]
    else:
        assert (got.prompt_tokens, got.completion_tokens, got.cost) == (0, 0, None)
        assert (s.prompt_tokens, s.completion_tokens, s.cost, s.cost_unknown_calls) == (0, 0, 0.0, 1)
        bad = {k: v for k, v in (("prompt_tokens", prompt), ("completion_tokens", completion))
               if not (isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_USAGE_TOKENS
                       or v == 4.0)}
        named = ", ".join(f"{k}={v!r}" for k, v in bad.items())
        assert [x for x in said if x.startswith("warning")] == [
            f"warning: candidate model 'fake': a batch answer reported usage {named} (request "
            f"{key_of(client, 'x')[:12]}); recorded as unknown: its tokens are left out of the totals and its cost "
            "is unknown"]


def test_an_answer_without_usage_counts_no_tokens(tmp_path: Path) -> None:
    with FakeBatchServer() as srv:
        srv.tamper = _rewrite(lambda r: {**r, "response": {**r["response"], "body": {
            k: v for k, v in r["response"]["body"].items() if k != "usage"}}})
        client, said = client_for(tmp_path, srv), Said()
        got = asyncio.run(ask(tmp_path, client, ["x"], said=said))[0]
    assert got.text == "echo: x" and (client.stats.prompt_tokens, client.stats.completion_tokens) == (0, 0)
    assert not [x for x in said if x.startswith("warning")]


# ------------------------------------------------------------------------------------------------- waiting

def test_a_batch_still_running_after_batch_max_wait_stops_the_run_word_for_word(tmp_path: Path) -> None:
    with FakeBatchServer(polls_to_finish=10**9) as srv:
        client = client_for(tmp_path, srv, role="judge")
        got = asyncio.run(ask(tmp_path, client, ["a", "b"], max_wait=0.0))
        assert srv.steps["poll"] == 1  # the first poll already found the wait over
    err = got[0]
    assert type(err) is FatalModelError and err.stops_run is True and got[1] is err
    assert str(err) == ("openai/fake-model: judge batch batch-0002: in_progress, 0 of 2 done, 0 failed after "
                        "batch_max_wait=0 s of polling; the run stopped here with its finished questions journaled, "
                        "and the batch keeps running at the provider (billed): run the same command to re-attach and "
                        "wait again (raise batch_max_wait= to wait longer) (after 1 attempt)")
    assert journal_events(tmp_path)[-1] == ("batch", "batch-0002")  # not ended: the next invocation polls it


def test_the_max_wait_is_shown_as_the_user_typed_it(tmp_path: Path) -> None:
    with FakeBatchServer(polls_to_finish=10**9) as srv:
        err = asyncio.run(ask(tmp_path, client_for(tmp_path, srv), ["a"], max_wait=0.05))[0]
    assert "after batch_max_wait=0.05 s of polling" in str(err)


# ----------------------------------------------------------------------------------- the same command again

def test_the_same_command_reattaches_to_a_batch_in_flight_and_creates_nothing(tmp_path: Path) -> None:
    with FakeBatchServer(polls_to_finish=10**9) as srv:
        client = client_for(tmp_path, srv)
        first = asyncio.run(ask(tmp_path, client, ["a", "b"], max_wait=0.0))
        assert all(isinstance(e, FatalModelError) for e in first)
        srv.polls_to_finish = 1
        again, said = client_for(tmp_path, srv), Said()
        got = asyncio.run(ask(tmp_path, again, ["a", "b"], said=said))
        assert (srv.steps["upload"], srv.steps["create"], srv.steps["list"]) == (1, 1, 0)
        # a third time: the answers are read from the saved lines, nothing is asked
        third = client_for(tmp_path, srv)
        assert [r.text for r in asyncio.run(ask(tmp_path, third, ["a", "b"]))] == ["echo: a", "echo: b"]
        assert third.stats.batched == 2 and (srv.steps["upload"], srv.steps["create"], srv.steps["poll"]) == (1, 1, 2)
    assert [r.text for r in got] == ["echo: a", "echo: b"]
    assert said == ["candidate batch batch-0002: completed, 2 of 2 done, 0 failed"]
    assert (again.stats.requests, again.stats.batched, again.stats.prompt_tokens) == (2, 2, 20)


def test_a_batch_created_before_its_id_was_journaled_is_found_again(tmp_path: Path) -> None:
    async def made_then_killed(srv: FakeBatchServer, client: Any) -> None:
        """What kill -9 between create and its journal line leaves: submit and file lines, a batch at the provider."""
        run = client.start(tmp_path, poll=POLL, max_retries=1)
        api, cid = client.batcher.api(), key_of(client, "a")
        line = json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                           "body": {"model": "fake-model", "messages": user("a")}}).encode() + b"\n"
        file_id = await api.upload("f.jsonl", line)
        await api.create(file_id, "s1")
        run.journal.append("submit", "s1", ids=[cid])
        run.journal.append("file", "s1", file_id=file_id)
        await run.aclose()

    with FakeBatchServer() as srv:
        asyncio.run(made_then_killed(srv, client_for(tmp_path, srv)))
        client, said = client_for(tmp_path, srv), Said()
        got = asyncio.run(ask(tmp_path, client, ["a"], said=said))
        assert (srv.steps["create"], srv.steps["list"], srv.steps["upload"]) == (1, 1, 1)
    assert got[0].text == "echo: a"
    assert said[0] == "candidate batch batch-0002: found again, 1 requests"
    assert journal_events(tmp_path)[-2:] == [("batch", "batch-0002"), ("end", "completed")]


def test_ids_whose_file_never_reached_the_provider_are_sent_now(tmp_path: Path) -> None:
    with FakeBatchServer() as srv:
        client = client_for(tmp_path, srv)
        j = BatchJournal(tmp_path)
        j.append("submit", "s0", ids=[key_of(client, "a")])  # killed before the upload returned
        j.close()
        got = asyncio.run(ask(tmp_path, client, ["a"], max_retries=0))
        assert srv.steps["upload"] == 1 and srv.submitted[key_of(client, "a")] == 1
    assert got[0].text == "echo: a"


def test_tries_of_earlier_invocations_count_against_max_retries(tmp_path: Path) -> None:
    """Sent in 2 batches by earlier invocations, both answered with a 500: with max_retries=1 it is not sent a
    third time; with max_retries=2 it is, once."""
    with FakeBatchServer(by_text({"down": Reply(status=500)})) as srv:
        client = client_for(tmp_path, srv)
        cid = key_of(client, "down")
        for seq, n in (("s1", 1), ("s2", 2)):
            asyncio.run(_one_batch(tmp_path, srv, client, seq, cid, n))
        err = asyncio.run(ask(tmp_path, client_for(tmp_path, srv), ["down"], max_retries=1))[0]
        assert type(err) is ModelCallError and srv.submitted[cid] == 2 and err.attempts == 2
        assert "(sent in 2 batches; raise max_retries" in str(err)
        err = asyncio.run(ask(tmp_path, client_for(tmp_path, srv), ["down"], max_retries=2))[0]
        assert type(err) is ModelCallError and srv.submitted[cid] == 3 and err.attempts == 3


async def _one_batch(tmp_path: Path, srv: FakeBatchServer, client: Any, seq: str, cid: str, n: int) -> None:
    """An earlier invocation's batch holding `cid`, driven to its end and journaled step by step."""
    run = client.start(tmp_path, poll=POLL, max_retries=5)
    j, api = run.journal, client.batcher.api()
    line = json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                       "body": {"model": "fake-model", "messages": user("down")}}).encode() + b"\n"
    j.append("submit", seq, ids=[cid])
    await run.seq_task(j.seqs[seq], api, line)
    assert j.seqs[seq].status == "completed" and srv.submitted[cid] == n
    await run.aclose()


def test_a_journaled_answer_is_read_back_without_any_call(tmp_path: Path) -> None:
    with FakeBatchServer() as srv:
        first = client_for(tmp_path, srv)
        asyncio.run(ask(tmp_path, first, ["a"]))
        steps = dict(srv.steps)
        again = client_for(tmp_path, srv)
        run = BatchRun(tmp_path, poll=POLL, max_retries=0)
        assert run.journal.seqs and all(s.status == "completed" for s in run.journal.seqs.values())
        run.journal.close()
        got = asyncio.run(ask(tmp_path, again, ["a"]))
        assert dict(srv.steps) == steps
    assert got[0].text == "echo: a" and got[0].batched


def test_closing_stops_polling_and_the_journal_keeps_the_batch(tmp_path: Path) -> None:
    async def go(srv: FakeBatchServer) -> None:
        client = client_for(tmp_path, srv)
        run = client.start(tmp_path, poll=POLL, max_retries=1)
        task = asyncio.ensure_future(client.complete(user("a")))
        async def polled_twice() -> None:
            while srv.steps["poll"] < 2:
                await asyncio.sleep(POLL)
        await asyncio.wait_for(polled_twice(), timeout=60)  # a deadline: a poller that never starts fails, never hangs
        await run.aclose()
        polls = srv.steps["poll"]
        await asyncio.sleep(5 * POLL)
        assert srv.steps["poll"] == polls  # nothing polls after close
        assert task.done() or (await asyncio.sleep(0)) is None
        with pytest.raises((asyncio.CancelledError, FatalModelError)):
            await task

    with FakeBatchServer(polls_to_finish=10**9) as srv:
        asyncio.run(go(srv))
    assert journal_events(tmp_path)[-1] == ("batch", "batch-0002")


def test_closing_as_a_poll_answer_lands_stops_polling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python 3.11's `asyncio.wait_for` returns the inner call's result when the cancel arrives after that call
    finished but before the waiting task resumed: the cancel is lost. A close landing there (seen in CI: a run's
    end racing a poll's answer) once left the batch's task polling for ever and `aclose` waiting on it. Here the
    close is scheduled from inside LiteLLM's poll call, just before it returns, which lands it in that window
    every time; closing must still stop the task, fail its waiting call, and leave the batch in the journal."""
    from rubric_engine.models.litellm_runtime import LiteLLMRuntime

    litellm = LiteLLMRuntime().module()  # imported as the run imports it (its price map local, no fetch)
    real = litellm.aretrieve_batch
    state: dict[str, Any] = {}

    async def retrieve(*args: Any, **kw: Any) -> Any:
        got = await real(*args, **kw)
        if "closing" not in state:
            state["closing"] = asyncio.ensure_future(state["run"].aclose())
        return got

    monkeypatch.setattr(litellm, "aretrieve_batch", retrieve)  # the third-party boundary, not our code

    async def go(srv: FakeBatchServer) -> None:
        client = client_for(tmp_path, srv)
        state["run"] = client.start(tmp_path, poll=POLL, max_retries=1)
        task = asyncio.ensure_future(client.complete(user("a")))
        while "closing" not in state:
            await asyncio.sleep(POLL)
        done, _ = await asyncio.wait({state["closing"]}, timeout=GUARD)  # (not wait_for: its cancel of a late
        assert done, "closing hung"  # close would reach the stuck task and pass for a close that worked)
        polls = srv.steps["poll"]
        await asyncio.sleep(5 * POLL)
        assert srv.steps["poll"] == polls  # nothing polls after close
        with pytest.raises((asyncio.CancelledError, FatalModelError)):
            await asyncio.wait_for(task, timeout=GUARD)

    with FakeBatchServer(polls_to_finish=10**9) as srv:
        asyncio.run(go(srv))
    assert journal_events(tmp_path)[-1] == ("batch", "batch-0002")


def test_after_close_no_call_is_sent_and_a_gathering_wave_is_dropped(tmp_path: Path) -> None:
    """A wave still gathering when the run closes, and a call made after, end as cancelled with nothing uploaded
    and nothing in the journal (they were waiting for ever, or sent, before)."""
    async def go(srv: FakeBatchServer) -> None:
        client = client_for(tmp_path, srv)
        run = client.start(tmp_path, poll=5.0, max_retries=1)  # a one-second quiet time: the wave still gathers
        gathering = asyncio.ensure_future(client.complete(user("a")))
        await asyncio.sleep(0.05)
        await run.aclose()
        for call in (gathering, asyncio.ensure_future(client.complete(user("b")))):
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(call, timeout=GUARD)
        await asyncio.sleep(1.5)  # past the quiet time

    with FakeBatchServer() as srv:
        asyncio.run(go(srv))
        assert not srv.steps and not srv.files
    assert not (tmp_path / BATCH_JOURNAL).exists() or not journal_events(tmp_path)


def test_a_journal_that_cannot_be_written_fails_the_waiting_calls_never_hangs_them(tmp_path: Path) -> None:
    """The submit line is written when a wave's quiet time ends (a task of its own): when it cannot be written
    (a full disk, no permission; here the run directory is gone), every call of that wave gets the error and
    nothing is uploaded, instead of waiting forever for a batch that was never sent."""
    async def go(client: Any) -> list[Any]:
        return await ask(tmp_path / "gone", client, ["a", "b"])

    with FakeBatchServer() as srv:
        got = asyncio.run(go(client_for(tmp_path, srv)))
        assert not srv.steps and not srv.files
    assert [type(e) for e in got] == [FileNotFoundError] * 2 and got[0] is got[1]


class NoCounts(FakeBatchServer):
    """A provider whose batches carry no request counts."""

    @staticmethod
    def _public(batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in FakeBatchServer._public(batch).items() if k != "request_counts"}


def test_a_batch_without_counts_shows_its_own_size_and_none_done(tmp_path: Path) -> None:
    with NoCounts() as srv:
        said = Said()
        got = asyncio.run(ask(tmp_path, client_for(tmp_path, srv), ["a", "b"], said=said))
    assert [r.text for r in got] == ["echo: a", "echo: b"]
    assert said[1:] == ["candidate batch batch-0002: in_progress, 0 of 2 done, 0 failed",
                        "candidate batch batch-0002: completed, 0 of 2 done, 0 failed"]


class Unterminated(FakeBatchServer):
    """A provider whose output and error files do not end with a line break."""

    def _finish(self, batch: dict[str, Any]) -> None:
        super()._finish(batch)
        for name in ("output_file_id", "error_file_id"):
            if batch[name]:
                self.files[batch[name]] = self.files[batch[name]].rstrip(b"\n")


def test_output_and_error_files_without_a_final_line_break_are_read_line_by_line(tmp_path: Path) -> None:
    with Unterminated(by_text({"bad": Reply(status=400, error="no")})) as srv:
        got = asyncio.run(ask(tmp_path, client_for(tmp_path, srv), ["a", "bad"], max_retries=0))
    assert got[0].text == "echo: a"
    assert type(got[1]) is FatalModelError and got[1].detail == "HTTP 400: no"
    saved = next((tmp_path / BATCH_DIR).glob("*.jsonl")).read_bytes()
    assert saved.endswith(b"\n") and len(saved.splitlines()) == 2


def test_closing_during_a_waves_quiet_time_sends_nothing(tmp_path: Path) -> None:
    async def go(srv: FakeBatchServer) -> None:
        client = client_for(tmp_path, srv)
        run = client.start(tmp_path, poll=0.05, max_retries=1)
        task = asyncio.ensure_future(client.complete(user("a")))
        for _ in range(50):  # until the request waits in the batcher for the wave to end
            if client.batcher._pending:
                break
            await asyncio.sleep(0)
        await run.aclose()
        await asyncio.sleep(0.3)  # a few quiet times: a timer still running would have submitted by now
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    with FakeBatchServer() as srv:
        asyncio.run(go(srv))
        assert not srv.steps
    assert not (tmp_path / BATCH_JOURNAL).exists()


def test_a_request_arriving_during_the_quiet_time_joins_the_wave(tmp_path: Path) -> None:
    """The wave ends only after `quiet` seconds without a new request (1 s here): one that arrives a few event-loop
    turns after the first, once the timer has started, goes in the same batch."""
    async def go(srv: FakeBatchServer) -> list[Any]:
        client = client_for(tmp_path, srv)
        run = client.start(tmp_path, poll=1.0, max_retries=0)
        try:
            first = asyncio.ensure_future(client.complete(user("a")))
            for _ in range(5):
                await asyncio.sleep(0)
            second = asyncio.ensure_future(client.complete(user("b")))
            return list(await asyncio.gather(first, second))
        finally:
            await run.aclose()
            await client.aclose()

    with FakeBatchServer(polls_to_finish=1) as srv:
        got = asyncio.run(go(srv))
        assert [len(b["_lines"]) for b in srv.batches.values()] == [2]
    assert [r.text for r in got] == ["echo: a", "echo: b"]
