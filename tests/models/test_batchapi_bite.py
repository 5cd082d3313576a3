"""A provider's batch API as the engine drives it (models/batchapi.py; docs/operations.md, batch mode), in-process.

Which providers batch=true accepts and each refusal word for word, the batch price of a reply against OpenAI's
published batch rates, and BatchAPI's calls: upload, create, poll, look up and fetch over HTTP through LiteLLM
to the files + batches server on 127.0.0.1 (tests/fakebatches.py); then, through a recording stand-in for the
LiteLLM module (passed in as the collaborator it is), what each call carries (credentials, timeout, the model
for providers that need it), the pages of a lookup, the backoff drawn for each retry and the provider's own
Retry-After. The console-script runs of the same paths are in tests/models/test_batch.py.
"""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace
from typing import Any

import pytest

from fakebatches import FakeBatchServer
from rubric_engine.errors import ConfigError, FatalModelError
from rubric_engine.models.batchapi import BATCH_PROVIDERS, ENDPOINT, BatchAPI, batch_cost, batchable, check_batchable
from rubric_engine.models.entries import ModelSpec
from rubric_engine.models.interrupt import SignalStop
from rubric_engine.models.litellm_runtime import LiteLLMRuntime

KEY = "sk-batch-test-4f9a"
LINE = (b'{"custom_id":"a","method":"POST","url":"/v1/chat/completions",'
        b'"body":{"model":"fake-model","messages":[{"role":"user","content":"hi"}]}}\n')


@pytest.fixture(scope="module")
def litellm() -> Any:
    return LiteLLMRuntime().module()


class Sleeps(list):
    """The injected sleep: each delay recorded, none waited."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def spec(model: str = "openai/fake-model", **kw: Any) -> ModelSpec:
    return ModelSpec(**{"name": "fake", "model": model, **kw})


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# ------------------------------------------------------------------------------------------- which providers

@pytest.mark.parametrize("model, ok", [
    ("openai/gpt-4o", True), ("gpt-4o", True), ("hosted_vllm/org/model", True), ("litellm_proxy/m", True),
    ("azure/my-deploy", True), ("vertex_ai/gemini-pro", True), ("bedrock/anthropic.claude", True),
    ("anthropic/claude-x", False), ("claude-3-opus", False), ("gemini/gemini-pro", False), ("mock/judge", False),
    ("deepseek/chat", False),
])
def test_batchable_is_the_provider_having_a_batch_api_through_litellm(model: str, ok: bool) -> None:
    assert batchable(model) is ok


def test_the_providers_and_the_endpoint_are_the_documented_ones() -> None:
    assert BATCH_PROVIDERS == {"openai", "hosted_vllm", "litellm_proxy", "azure", "vertex_ai", "bedrock"}
    assert ENDPOINT == "/v1/chat/completions"


def test_batch_mode_without_the_call_cache_is_refused_word_for_word() -> None:
    with pytest.raises(ConfigError) as err:
        check_batchable([spec()], cache_enabled=False)
    assert str(err.value) == ("batch=true keeps every batched answer in the call cache before it is used; drop "
                              "cache.enabled=false or run without batch=true")


def test_a_mock_model_is_refused_naming_its_role_or_model_word_for_word() -> None:
    with pytest.raises(ConfigError) as err:
        check_batchable([spec(), spec("mock/judge", name="mj", role="judge")], cache_enabled=True)
    assert str(err.value) == ("batch=true: judge mj (mock/judge) is answered offline by the engine, with no batch "
                              "API; run it without batch=true")
    with pytest.raises(ConfigError) as err:
        check_batchable([spec("mock/x", name="m")], cache_enabled=True)
    assert str(err.value).startswith("batch=true: model m (mock/x) is answered offline")


def test_a_provider_without_a_batch_api_is_refused_naming_the_ones_that_have_one() -> None:
    with pytest.raises(ConfigError) as err:
        check_batchable([None, spec("anthropic/claude-x", name="c", role="candidate")], cache_enabled=True)
    assert str(err.value) == ("batch=true: candidate c (anthropic/claude-x): LiteLLM has no batch API for provider "
                              "'anthropic' (batches go to azure, bedrock, hosted_vllm, litellm_proxy, openai, "
                              "vertex_ai); run without batch=true")
    with pytest.raises(ConfigError) as err:
        check_batchable([spec("gemini/g", name="g")], cache_enabled=True)
    assert str(err.value).startswith("batch=true: model g (gemini/g): LiteLLM has no batch API for provider 'gemini'")


def test_every_model_with_a_batch_api_passes_and_absent_roles_are_skipped() -> None:
    assert check_batchable([spec(), None, spec("azure/d", role="judge"), spec("bedrock/b")], cache_enabled=True) is None
    assert check_batchable([], cache_enabled=True) is None


# --------------------------------------------------------------------------------------------------- the price

def test_a_batched_reply_costs_openais_batch_rate(litellm: Any) -> None:
    """gpt-4o's batch price: $1.25 per million prompt tokens, $5 per million completion tokens (half of $2.50 / $10)."""
    assert batch_cost(litellm, "openai/gpt-4o", 40, 20) == pytest.approx(40 * 1.25e-6 + 20 * 5e-6, rel=1e-12)
    assert batch_cost(litellm, "openai/gpt-4o", 1000, 0) == pytest.approx(1000 * 1.25e-6, rel=1e-12)
    assert batch_cost(litellm, "openai/gpt-4o", 0, 1000) == pytest.approx(1000 * 5e-6, rel=1e-12)
    assert batch_cost(litellm, "openai/gpt-4o", 0, 0) == 0.0  # known and free: 0, not unknown
    assert isinstance(batch_cost(litellm, "openai/gpt-4o", 3, 4), float)


def test_an_unpriced_model_costs_none_never_zero(litellm: Any) -> None:
    assert batch_cost(litellm, "openai/fake-model", 40, 20) is None
    assert batch_cost(litellm, "hosted_vllm/org/unknown-model", 0, 0) is None


# ------------------------------------------------------------------------------------- the real path over HTTP

def api_for(srv: FakeBatchServer, litellm: Any, sleeps: Sleeps | None = None, *, max_retries: int = 2,
            role: str = "judge") -> BatchAPI:
    return BatchAPI(spec(api_base=srv.url), litellm, {"api_base": srv.url, "api_key": KEY}, max_retries=max_retries,
                    role=role, sleep=sleeps if sleeps is not None else Sleeps())


def test_upload_create_poll_and_fetch_through_litellm(litellm: Any) -> None:
    async def go(srv: FakeBatchServer) -> None:
        api = api_for(srv, litellm)
        file_id = await api.upload("rubric-engine-s1.jsonl", LINE)
        assert file_id == "file-0001" and srv.files[file_id] == LINE
        batch = await api.create(file_id, "s1")
        assert (batch.id, batch.input_file_id, batch.status) == ("batch-0002", "file-0001", "validating")
        made = srv.batches["batch-0002"]
        assert (made["endpoint"], made["completion_window"], made["metadata"]) == (ENDPOINT, "24h",
                                                                                   {"rubric_engine": "s1"})
        assert (await api.retrieve("batch-0002")).status == "in_progress"
        done = await api.retrieve("batch-0002")
        assert (done.status, done.output_file_id) == ("completed", "file-0004")
        out = await api.content(done.output_file_id)
        assert isinstance(out, bytes) and out == srv.files["file-0004"] and b'"custom_id": "a"' in out
        assert (await api.find("file-0001")).id == "batch-0002"
        assert await api.find("file-9999") is None
        assert srv.steps == {"upload:before": 1, "upload": 1, "create:before": 1, "create": 1, "poll": 2, "content": 1,
                             "list": 2}

    with FakeBatchServer() as srv:
        run(go(srv))


def test_a_create_that_failed_after_the_provider_made_it_is_found_not_made_twice(litellm: Any) -> None:
    async def go(srv: FakeBatchServer) -> None:
        sleeps = Sleeps()
        api = api_for(srv, litellm, sleeps)
        file_id = await api.upload("f.jsonl", LINE)
        srv.failing["create"] = 1  # carried out, then answered with a 500
        batch = await api.create(file_id, "s1")
        assert batch.id == "batch-0002" and list(srv.batches) == ["batch-0002"]
        assert (srv.steps["create"], srv.steps["list"], len(sleeps)) == (1, 1, 1)

    with FakeBatchServer() as srv:
        run(go(srv))


def test_a_failure_retried_past_max_retries_stops_the_run_word_for_word(litellm: Any) -> None:
    async def go(srv: FakeBatchServer) -> None:
        sleeps = Sleeps()
        api = api_for(srv, litellm, sleeps, max_retries=2)
        srv.failing["poll"] = 3
        with pytest.raises(FatalModelError) as err:
            await api.retrieve("batch-0001")
        e = err.value
        assert str(e) == ("openai/fake-model [HTTP 500]: judge model 'fake': batch API: cannot poll batch batch-0001: "
                          "Error code: 500 - The server had an error while processing your request; check the "
                          "provider's status, or raise max_retries, then run the same command (it re-attaches to the "
                          "batches in flight) (after 3 attempts)")
        assert (e.status, e.attempts, e.stops_run, srv.steps["poll"], len(sleeps)) == (500, 3, True, 3, 2)

    with FakeBatchServer() as srv:
        run(go(srv))


def test_a_failure_retrying_cannot_fix_stops_the_run_at_once_word_for_word(litellm: Any) -> None:
    async def go(srv: FakeBatchServer) -> None:
        sleeps = Sleeps()
        api = api_for(srv, litellm, sleeps, max_retries=5, role="candidate")
        with pytest.raises(FatalModelError) as err:
            await api.content("file-missing")
        e = err.value
        assert str(e) == ("openai/fake-model [HTTP 404]: candidate model 'fake': batch API: cannot fetch file "
                          "file-missing: Error code: 404 - no file file-missing; check the model's batch API "
                          "access, then run the same command (it re-attaches to the batches in flight) (after 1 "
                          "attempt)")
        assert (e.status, e.attempts, e.stops_run, sleeps) == (404, 1, True, [])
        assert isinstance(e.__cause__, Exception)

    with FakeBatchServer() as srv:
        run(go(srv))


def test_each_retry_waits_a_random_share_of_a_doubling_bound_capped_at_60_s(litellm: Any) -> None:
    """Attempt n is followed by uniform(0, min(60, 2^(n-1))) s: the draws of the same seed, bound by bound."""
    async def go(srv: FakeBatchServer) -> list[float]:
        sleeps = Sleeps()
        api = api_for(srv, litellm, sleeps, max_retries=8)
        srv.failing["poll"] = 8
        file_id = await api.upload("f.jsonl", LINE)
        batch = await api.create(file_id, "s1")
        random.seed(1234)
        assert (await api.retrieve(batch.id)).id == batch.id  # the ninth attempt is answered
        assert srv.steps["poll"] == 9
        return sleeps

    with FakeBatchServer() as srv:
        sleeps = run(go(srv))
    ref = random.Random(1234)
    assert sleeps == [ref.uniform(0.0, bound) for bound in (1, 2, 4, 8, 16, 32, 60, 60)]


class Boom(Exception):
    """An error as LiteLLM raises it: the server's status, its headers, its words."""

    def __init__(self, text: str, status: int | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(text)
        self.status_code = status
        self.litellm_response_headers = headers or {}


class Recorder:
    """Stands in for the LiteLLM module: records every call's keyword arguments, answers from a script (an
    exception in the script is raised)."""

    def __init__(self, **script: list[Any]) -> None:
        self.script = script
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        if name not in ("acreate_file", "acreate_batch", "aretrieve_batch", "alist_batches", "afile_content"):
            raise AttributeError(name)

        async def call(**kw: Any) -> Any:
            self.calls.append((name, kw))
            got = self.script[name].pop(0)
            if isinstance(got, BaseException):
                raise got
            return got

        return call


def rec_api(rec: Recorder, model: str = "openai/fake-model", base: dict[str, Any] | None = None,
            sleeps: Sleeps | None = None, **kw: Any) -> BatchAPI:
    return BatchAPI(spec(model, **kw), rec, base if base is not None else {"api_base": "http://h/v1", "api_key": KEY},
                    max_retries=3, role="judge", sleep=sleeps if sleeps is not None else Sleeps())


CREDS = {"custom_llm_provider": "openai", "max_retries": 0, "timeout": 600.0, "api_base": "http://h/v1",
         "api_key": KEY}


def test_each_call_carries_the_credentials_no_sdk_retries_and_a_ten_minute_floor_on_its_timeout() -> None:
    rec = Recorder(acreate_file=[SimpleNamespace(id="f1")], acreate_batch=[{"id": "b1"}],
                   aretrieve_batch=[{"id": "b1"}], afile_content=[SimpleNamespace(content=b"x\n")])
    api = rec_api(rec)

    async def go() -> None:
        assert await api.upload("n.jsonl", b"data") == "f1"
        assert await api.create("f1", "seq9") == {"id": "b1"}
        assert await api.retrieve("b1") == {"id": "b1"}
        assert await api.content("f-out") == b"x\n"

    run(go())
    assert rec.calls == [
        ("acreate_file", {"file": ("n.jsonl", b"data", "application/jsonl"), "purpose": "batch", **CREDS}),
        ("acreate_batch", {"completion_window": "24h", "endpoint": "/v1/chat/completions", "input_file_id": "f1",
                           "metadata": {"rubric_engine": "seq9"}, **CREDS}),
        ("aretrieve_batch", {"batch_id": "b1", "litellm_metadata": {"batch_ignore_default_logging": True}, **CREDS}),
        ("afile_content", {"file_id": "f-out", **CREDS}),
    ]
    assert api.provider == "openai" and api.max_retries == 3 and api.role == "judge"


@pytest.mark.parametrize("timeout, expected", [(30.0, 600.0), (600.0, 600.0), (900.0, 900.0)])
def test_the_timeout_is_the_models_own_when_longer_than_ten_minutes(timeout: float, expected: float) -> None:
    rec = Recorder(aretrieve_batch=[{"id": "b"}])
    run(rec_api(rec, timeout=timeout).retrieve("b"))
    assert rec.calls[0][1]["timeout"] == expected


def test_only_the_credentials_the_entry_has_are_sent_and_vertex_and_bedrock_get_their_model() -> None:
    for model, provider, with_model in (("vertex_ai/gemini-pro", "vertex_ai", True),
                                        ("bedrock/anthropic.claude", "bedrock", True),
                                        ("azure/deploy", "azure", False), ("gpt-4o", "openai", False)):
        rec = Recorder(aretrieve_batch=[{"id": "b"}])
        run(rec_api(rec, model, base={"api_base": "", "api_key": None, "api_version": "2024-10-21",
                                      "model": "not a credential"}).retrieve("b"))
        expected = {"custom_llm_provider": provider, "max_retries": 0, "timeout": 600.0, "api_version": "2024-10-21",
                    **({"model": model} if with_model else {})}
        assert rec.calls[0][1] == {"batch_id": "b", "litellm_metadata": {"batch_ignore_default_logging": True},
                                   **expected}, model


def test_the_body_model_is_the_providers_own_name() -> None:
    assert rec_api(Recorder(), "openai/gpt-4o").body_model() == "gpt-4o"
    assert rec_api(Recorder(), "hosted_vllm/org/model-7b").body_model() == "org/model-7b"
    assert rec_api(Recorder(), "gpt-4o").body_model() == "gpt-4o"


def test_fetched_content_is_bytes_whatever_litellm_hands_back() -> None:
    rec = Recorder(afile_content=[SimpleNamespace(content="é\n"), b"raw\n", "plain é", SimpleNamespace(content=b"b")])
    api = rec_api(rec)
    got = [run(api.content("f")) for _ in range(4)]
    assert got == ["é\n".encode("utf-8"), b"raw\n", "plain é".encode("utf-8"), b"b"]


def test_a_create_that_failed_before_the_provider_made_it_is_looked_up_then_made_once() -> None:
    sleeps = Sleeps()
    rec = Recorder(acreate_batch=[Boom("Error code: 503 - busy", 503), {"id": "b2", "input_file_id": "f1"}],
                   alist_batches=[{"data": [{"id": "b9", "input_file_id": "other"}], "has_more": False}])
    got = run(rec_api(rec, sleeps=sleeps).create("f1", "s1"))
    assert got == {"id": "b2", "input_file_id": "f1"}
    assert [name for name, _ in rec.calls] == ["acreate_batch", "alist_batches", "acreate_batch"]
    assert rec.calls[1][1] == {"limit": 100, **CREDS} and len(sleeps) == 1


def test_a_lookup_reads_page_after_page_from_the_last_id_until_no_more() -> None:
    pages = [SimpleNamespace(data=[SimpleNamespace(id="b9", input_file_id="x"),
                                   SimpleNamespace(id="b8", input_file_id="y")], has_more=True),
             {"data": [{"id": "b7", "input_file_id": "z"}], "has_more": True},
             {"data": [{"id": "b6", "input_file_id": "f1"}], "has_more": False}]
    rec = Recorder(alist_batches=list(pages))
    assert run(rec_api(rec).find("f1")) == {"id": "b6", "input_file_id": "f1"}
    assert [kw for _, kw in rec.calls] == [{"limit": 100, **CREDS}, {"limit": 100, "after": "b8", **CREDS},
                                           {"limit": 100, "after": "b7", **CREDS}]


@pytest.mark.parametrize("last", [
    {"data": [{"id": "b7", "input_file_id": "z"}], "has_more": False},
    SimpleNamespace(data=[{"id": "b7", "input_file_id": "z"}], has_more=False),
    SimpleNamespace(data=[SimpleNamespace(id="b7", input_file_id="z")], has_more=None),
    {"data": [], "has_more": True},  # an empty page ends the lookup whatever it says
    SimpleNamespace(data=None, has_more=True),
    SimpleNamespace(has_more=True),
    {"has_more": True},
    SimpleNamespace(data=[SimpleNamespace(id="b7")]),  # neither has_more nor the batch's file: read as absent
])
def test_a_lookup_ends_without_a_batch_on_the_last_page(last: Any) -> None:
    first = {"data": [{"id": "b9", "input_file_id": "x"}], "has_more": True}
    rec = Recorder(alist_batches=[first, last, {"data": [{"id": "b1", "input_file_id": "f1"}], "has_more": False}])
    assert run(rec_api(rec).find("f1")) is None
    assert len(rec.calls) == 2


def test_a_lookup_reads_at_most_the_pages_it_is_given() -> None:
    page = {"data": [{"id": "b9", "input_file_id": "x"}], "has_more": True}
    rec = Recorder(alist_batches=[page] * 25)
    assert run(rec_api(rec).find("f1")) is None
    assert len(rec.calls) == 20
    rec = Recorder(alist_batches=[page] * 5)
    assert run(rec_api(rec).find("f1", pages=3)) is None
    assert len(rec.calls) == 3


def test_the_providers_retry_after_sets_the_wait() -> None:
    sleeps = Sleeps()
    rec = Recorder(aretrieve_batch=[Boom("Error code: 429 - slow down", 429, {"retry-after": "7"}),
                                    Boom("Error code: 429 - slow down", 429, {"retry-after-ms": "1500"}),
                                    {"id": "b"}])
    assert run(rec_api(rec, sleeps=sleeps).retrieve("b")) == {"id": "b"}
    assert sleeps == [7.0, 1.5]


def test_the_key_never_reaches_the_stop_line() -> None:
    rec = Recorder(acreate_file=[Boom(f"Error code: 401 - Incorrect API key provided: {KEY}", 401)])
    with pytest.raises(FatalModelError) as err:
        run(rec_api(rec).upload("n.jsonl", b"x"))
    assert str(err.value) == ("openai/fake-model [HTTP 401]: judge model 'fake': batch API: cannot upload a batch file: "
                              "Error code: 401 - Incorrect API key provided: ***; check the model's batch API access, "
                              "then run the same command (it re-attaches to the batches in flight) (after 1 attempt)")
    assert KEY not in str(err.value)


def test_a_create_that_keeps_failing_names_the_create() -> None:
    sleeps = Sleeps()
    rec = Recorder(acreate_batch=[Boom("Error code: 500 - down", 500)] * 4, alist_batches=[{"data": []}] * 3)
    with pytest.raises(FatalModelError) as err:
        run(rec_api(rec, sleeps=sleeps).create("f1", "s1"))
    assert str(err.value) == ("openai/fake-model [HTTP 500]: judge model 'fake': batch API: cannot create a batch: "
                              "Error code: 500 - down; check the provider's status, or raise max_retries, then run the "
                              "same command (it re-attaches to the batches in flight) (after 4 attempts)")
    assert [name for name, _ in rec.calls] == ["acreate_batch", *["alist_batches", "acreate_batch"] * 3]


def test_list_failures_name_the_listing() -> None:
    rec = Recorder(alist_batches=[Boom("Error code: 403 - no", 403)])
    with pytest.raises(FatalModelError) as err:
        run(rec_api(rec).find("f1"))
    assert "batch API: cannot list batches: Error code: 403 - no;" in str(err.value)


def test_a_stopped_run_sends_nothing_more(litellm: Any) -> None:
    """After a signal (or a full disk) asked the process to stop, no batch call leaves: the same command
    re-attaches later."""
    async def go(srv: FakeBatchServer) -> None:
        api = api_for(srv, litellm)
        SignalStop().halt(OSError(28, "No space left on device"))
        try:
            with pytest.raises(asyncio.CancelledError):
                await api.upload("f.jsonl", LINE)
            with pytest.raises(asyncio.CancelledError):
                await api.retrieve("batch-0001")
        finally:
            SignalStop().install()  # the process may make calls again (what a new run does)
        assert not srv.steps and not srv.files

    with FakeBatchServer() as srv:
        run(go(srv))
