"""LiteLLM in this process (models/litellm_runtime.py): reading replies, pricing them, the 'loading' line, LiteLLM's
configuration, and closing each event loop's HTTP clients once its last client is done.

The reply readers are pure functions of a response object, so they get plain objects here (the HTTP path
that produces real ones is in test_models*.py). The runtime is process-wide state, so each test builds its
own LiteLLMRuntime and restores whatever of LiteLLM's it touched.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from rubric_engine.models.failures import Malformed
from rubric_engine.models.litellm_runtime import (RUNTIME, LiteLLMRuntime, _close_clients, _prepare_environment,
                                                  finish_reason, parse_reply, reply_cost)


def reply(content: Any = "hi", *, usage: Any = None, finish: Any = "stop", message: bool = True) -> Any:
    msg = SimpleNamespace(content=content) if message else None
    return SimpleNamespace(choices=[SimpleNamespace(message=msg, finish_reason=finish)], usage=usage)


@pytest.fixture(scope="module")
def litellm() -> Any:
    return RUNTIME.module()


# -- reading a reply ------------------------------------------------------------------------------------------
def test_text_and_usage_of_a_reply() -> None:
    assert parse_reply(reply("hello", usage=SimpleNamespace(prompt_tokens=12, completion_tokens=3))) == ("hello", 12, 3)
    assert parse_reply(reply("x", usage=SimpleNamespace(prompt_tokens=None, completion_tokens=None))) == ("x", 0, 0)
    assert parse_reply(reply("x", usage=None)) == ("x", 0, 0)
    assert parse_reply(reply(None)) == ("", 0, 0)  # content null: an empty completion, the caller decides


def test_content_parts_are_joined() -> None:
    parts = [{"type": "text", "text": "a"}, SimpleNamespace(text="b"), {"type": "image"}, SimpleNamespace()]
    assert parse_reply(reply(parts))[0] == "ab"


@pytest.mark.parametrize("response, words", [
    (SimpleNamespace(choices=[]), "malformed response: no choices"),
    (SimpleNamespace(), "malformed response: no choices"),
    (reply(message=False), "malformed response: choice without a message"),
    (reply(5), "malformed response: content is int"),
    (reply({"text": "a"}), "malformed response: content is dict"),
])
def test_unusable_replies_are_malformed(response: Any, words: str) -> None:
    with pytest.raises(Malformed) as info:
        parse_reply(response)
    assert str(info.value) == words


def test_finish_reason() -> None:
    assert finish_reason(reply(finish="length")) == "length"
    assert finish_reason(reply(finish=None)) is None
    assert finish_reason(reply(finish="")) is None
    assert finish_reason(SimpleNamespace(choices=[])) is None
    assert finish_reason(SimpleNamespace()) is None
    assert finish_reason(reply(finish=7)) == "7"


# -- the cost of a reply ----------------------------------------------------------------------------------------
class Pricer:
    def __init__(self, value: Any = None, error: bool = False) -> None:
        self.value, self.error, self.asked = value, error, 0

    def completion_cost(self, completion_response: Any) -> Any:
        self.asked += 1
        if self.error:
            raise ValueError("model not mapped")
        return self.value


def priced(hidden: Any) -> Any:
    r = reply()
    r._hidden_params = hidden
    return r


def test_litellms_own_price_is_reused() -> None:
    pricer = Pricer(9.0)
    assert reply_cost(pricer, priced({"response_cost": 0.125})) == 0.125
    assert reply_cost(pricer, priced({"response_cost": 2})) == 2.0 and isinstance(reply_cost(pricer, priced(
        {"response_cost": 2})), float)
    assert pricer.asked == 0  # never priced twice


@pytest.mark.parametrize("value", [None, True, "0.1", [0.1]])
def test_a_price_that_is_not_a_number_is_unknown(value: Any) -> None:
    pricer = Pricer(9.0)
    assert reply_cost(pricer, priced({"response_cost": value})) is None and pricer.asked == 0


def test_without_litellms_price_it_is_computed_or_unknown() -> None:
    assert reply_cost(Pricer(0.5), priced({})) == 0.5
    assert reply_cost(Pricer(3), priced(None)) == 3.0
    assert reply_cost(Pricer(0.5), priced(["response_cost"])) == 0.5  # hidden params that are not a dict
    assert reply_cost(Pricer(error=True), priced({})) is None  # unmapped model: unknown, never 0
    assert reply_cost(Pricer("free"), priced({})) is None


# -- loading and configuring LiteLLM -------------------------------------------------------------------------
def test_loading_until_imported(litellm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = LiteLLMRuntime()
    assert rt.loading is False  # imported by this process already
    monkeypatch.delitem(sys.modules, "litellm")
    assert rt.loading is True
    assert rt.announce_once() is True and rt.announce_once() is False  # the line is shown once
    rt._module = litellm
    assert rt.loading is False


def test_nothing_to_announce_once_loaded(litellm: Any) -> None:
    rt = LiteLLMRuntime()
    assert rt.announce_once() is False
    assert rt.module() is litellm and rt.announce_once() is False


def test_a_preload_still_running_counts_as_loading(litellm: Any) -> None:
    rt = LiteLLMRuntime()
    rt._preload = SimpleNamespace(is_alive=lambda: True)
    assert rt.loading is True
    rt._preload = SimpleNamespace(is_alive=lambda: False)
    assert rt.loading is False


def test_preload_when_already_imported_starts_no_thread(litellm: Any) -> None:
    rt = LiteLLMRuntime()
    rt.preload()
    assert rt._preload is None


def test_module_configures_litellm_quietly(litellm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(litellm, "suppress_debug_info", False)
    monkeypatch.setattr(litellm, "set_verbose", True)
    names = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm")
    for name in names:
        logger = logging.getLogger(name)
        monkeypatch.setattr(logger, "level", logging.DEBUG)
    rt = LiteLLMRuntime()
    assert rt.module() is sys.modules["litellm"]
    assert litellm.suppress_debug_info is True and litellm.set_verbose is False
    assert [logging.getLogger(n).level for n in names] == [logging.ERROR] * 4
    litellm.set_verbose = True
    assert rt.module() is litellm and litellm.set_verbose is True  # configured once: later calls are a field read


def test_a_python_caller_keeps_its_gc(litellm: Any) -> None:
    """Only the command line asks for the quiet GC: a runtime made from Python neither freezes nor disables it."""
    import gc  # noqa: PLC0415

    rt = LiteLLMRuntime()
    assert rt.quiet_gc is False
    gc.unfreeze()
    rt.module()
    assert gc.get_freeze_count() == 0 and gc.isenabled()


def test_the_command_lines_quiet_gc_freezes_what_the_import_left(litellm: Any) -> None:
    import gc  # noqa: PLC0415

    rt = LiteLLMRuntime()
    rt.quiet_gc = True
    gc.unfreeze()
    try:
        rt.module()
        assert gc.get_freeze_count() > 0 and gc.isenabled()  # frozen out of later collections, GC back on
    finally:
        gc.unfreeze()


def test_the_environment_before_the_import(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_MODE", "MAX_BASE64_LENGTH_FOR_LOGGING"):
        monkeypatch.delenv(name, raising=False)
    _prepare_environment()
    assert (os.environ["LITELLM_LOCAL_MODEL_COST_MAP"], os.environ["LITELLM_MODE"],
            os.environ["MAX_BASE64_LENGTH_FOR_LOGGING"]) == ("True", "PRODUCTION", "0")
    monkeypatch.setenv("LITELLM_MODE", "DEV")
    monkeypatch.setenv("MAX_BASE64_LENGTH_FOR_LOGGING", "128")
    _prepare_environment()
    assert (os.environ["LITELLM_MODE"], os.environ["MAX_BASE64_LENGTH_FOR_LOGGING"]) == ("DEV", "128")  # the user's


def test_the_litellm_the_runtime_imports_copies_no_message_for_its_logging_payload() -> None:
    """In a fresh interpreter (LiteLLM reads the variable once, at its import): the logging copy of a request's
    messages is the messages themselves, not a walk over each of them (a conversation repeats every turn)."""
    probe = ("from rubric_engine.models.litellm_runtime import RUNTIME\n"
             "RUNTIME.module()\n"
             "from litellm.litellm_core_utils.logging_utils import truncate_base64_in_messages\n"
             "image = 'data:image/png;base64,' + 'A' * 500\n"
             "messages = [{'role': 'user', 'content': [{'type': 'image_url', 'image_url': {'url': image}}]}]\n"
             "print(truncate_base64_in_messages(messages) is messages)\n")
    env = {k: v for k, v in os.environ.items() if k != "MAX_BASE64_LENGTH_FOR_LOGGING"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr[-2000:]


# -- HTTP clients per event loop ------------------------------------------------------------------------------
class Pooled:
    def __init__(self, log: list[str], name: str, kind: str = "async") -> None:
        self.log, self.name = log, name
        if kind == "async":
            self.aclose = self._aclose
        elif kind == "sync":
            self.close = self._close
        elif kind == "failing":
            self.aclose = self._fail

    async def _aclose(self) -> None:
        self.log.append(f"aclose {self.name}")

    def _close(self) -> None:
        self.log.append(f"close {self.name}")

    async def _fail(self) -> None:
        raise RuntimeError("already closed")


@pytest.fixture
def pool(litellm: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    cache = SimpleNamespace(cache_dict={}, ttl_dict={})
    monkeypatch.setattr(litellm, "in_memory_llm_clients_cache", cache)
    return cache


def test_the_last_client_of_a_loop_closes_that_loops_http_clients(pool: Any) -> None:
    log: list[str] = []
    rt = LiteLLMRuntime()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        mine, other = f"-{id(loop)}", f"-{id(loop) + 1}"
        pool.cache_dict.update({f"a{mine}": Pooled(log, "a"), f"b{mine}": Pooled(log, "b", "sync"),
                                f"c{mine}": Pooled(log, "c", "failing"), f"d{other}": Pooled(log, "d"),
                                f"e{mine}": None})
        pool.ttl_dict.update({f"a{mine}": 1, f"d{other}": 1})
        rt.use_loop(loop)
        rt.use_loop(loop)
        await rt.release_loop(loop)
        assert log == [] and rt._loop_users == {id(loop): 1}  # another client still uses the loop
        await rt.release_loop(loop)
        assert rt._loop_users == {}
        assert list(pool.cache_dict) == [f"d{other}"] and list(pool.ttl_dict) == [f"d{other}"]

    asyncio.run(main())
    assert sorted(log) == ["aclose a", "close b"]


def test_releasing_a_loop_nobody_took_still_closes_its_clients(pool: Any) -> None:
    log: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        pool.cache_dict[f"a-{id(loop)}"] = Pooled(log, "a")
        await LiteLLMRuntime().release_loop(loop)

    asyncio.run(main())
    assert log == ["aclose a"]


def test_closing_without_a_client_cache_is_a_no_op(litellm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(litellm, "in_memory_llm_clients_cache", None)

    async def main() -> None:
        await _close_clients(asyncio.get_running_loop())

    asyncio.run(main())
    monkeypatch.delitem(sys.modules, "litellm")
    asyncio.run(main())


def test_a_cache_without_ttl_dict_is_closed_too(litellm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    cache = SimpleNamespace(cache_dict={})
    monkeypatch.setattr(litellm, "in_memory_llm_clients_cache", cache)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        cache.cache_dict[f"k-{id(loop)}"] = Pooled(log, "k")
        await _close_clients(loop)

    asyncio.run(main())
    assert log == ["aclose k"] and cache.cache_dict == {}


def test_clients_are_found_by_the_loop_token_the_cache_itself_uses(litellm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM 1.110 keys a loop's clients '<key>-<counter>', not '<key>-<id(loop)>': the suffix is asked of
    the cache, and matched whole ('-1' is not the end of '-11')."""
    log: list[str] = []
    cache = SimpleNamespace(cache_dict={}, ttl_dict={}, update_cache_key_with_event_loop=lambda key: f"{key}-1")
    monkeypatch.setattr(litellm, "in_memory_llm_clients_cache", cache)

    async def main() -> None:
        cache.cache_dict.update({"a-x-1": Pooled(log, "a"), "b-11": Pooled(log, "b"),
                                 f"c-{id(asyncio.get_running_loop())}": Pooled(log, "c")})
        await _close_clients(asyncio.get_running_loop())

    asyncio.run(main())
    assert log == ["aclose a"] and "b-11" in cache.cache_dict and len(cache.cache_dict) == 2
