"""LiteLLM in this process: imported once (on a thread while start-up runs, or at the first real call),
configured once, read through one function per reply, and its HTTP clients closed per event loop.

Why one object: importing LiteLLM is process-wide and costs seconds, so whether it is loading, whether
the 'loading LiteLLM' line was shown, and which event loops still have open model clients are facts
about the process, not about one ModelClient. They live on `RUNTIME`, the one `LiteLLMRuntime`; the
clients share it. Nothing here runs per call except `module()` (a field read once loaded) and the
reply readers.

Before the import: `LITELLM_LOCAL_MODEL_COST_MAP=True` (the shipped price map, no network fetch),
`MAX_BASE64_LENGTH_FOR_LOGGING=0` (no per-message copy for a logging payload nobody reads) and
`LITELLM_MODE=PRODUCTION`, because in its default DEV mode LiteLLM's import runs python-dotenv's
`load_dotenv()`, which loads a `.env` found above LiteLLM's install directory (a project checkout with
its venv inside) or, from a notebook, `python -c` or under a debugger, in the working directory: keys
and settings the user never gave the engine. All three are `setdefault`: a user who sets them keeps theirs.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import os
import sys
import threading
from typing import Any

from rubric_engine.models.failures import Malformed
from rubric_engine.models.pricing import ModelPricing
from rubric_engine.text.surrogates import LONE_SURROGATE

__all__ = ["LiteLLMRuntime", "RUNTIME", "parse_reply", "finish_reason", "token_logprobs", "reply_cost", "cached_tokens", "rate_headers",
           "configure"]

# MAX_BASE64_LENGTH_FOR_LOGGING=0: LiteLLM then keeps its logging payload's messages as they are instead of
# walking and copying every message of every request to shorten base64 images in a copy no callback reads
# (0.7 us a message, a fifth of LiteLLM's per-message work: a conversation's request repeats every turn).
# What is sent is the same either way; LiteLLM reads the variable once, at import.
_ENV_BEFORE_IMPORT = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION",
                      "MAX_BASE64_LENGTH_FOR_LOGGING": "0"}
# What LiteLLM's first acompletion imports lazily (~470 modules, 0.5 s of CPU measured on the development
# machine: the proxy's types through its prompt helpers, and the OpenAI SDK's resources when its client
# is first used). Imported with LiteLLM instead, so the first call of a run costs what later ones do
# (bench/bench_run.py, docs/scaling.md). A name missing in another LiteLLM version is skipped.
_FIRST_CALL_MODULES = ("litellm.proxy.openai_files_endpoints.common_utils", "openai.resources.chat")


class LiteLLMRuntime:
    """The process's LiteLLM: lazy import, optional preloading, per-loop client bookkeeping."""

    def __init__(self) -> None:
        self._module: Any = None
        self._preload: threading.Thread | None = None
        self._announced = False  # the 'loading LiteLLM' line is shown once per process
        self._loop_users: dict[int, int] = {}  # event-loop id -> open ModelClients that made real calls in it
        self._lock = threading.Lock()
        self._pricing: dict[tuple[str, str], ModelPricing] = {}  # (model, its params) -> looked up once
        # The command line sets this (cli/main.py): the cyclic GC is paused while LiteLLM imports (its
        # import triggers full collections that find nothing, 0.8 s of CPU measured) and the objects
        # alive after it are frozen out of later collections. Off for Python callers: the GC is theirs.
        self.quiet_gc = False

    @property
    def loading(self) -> bool:
        """True while a first call would wait for LiteLLM's import (not yet imported, or still importing)."""
        if self._module is not None:
            return False
        return "litellm" not in sys.modules or (self._preload is not None and self._preload.is_alive())

    def preload(self) -> None:
        """Start importing LiteLLM in a daemon thread, for a caller that knows calls will be made.

        Imports are thread-safe (per-module import locks), so `module()` in the event loop simply waits
        for the module the thread is loading. Idempotent."""
        with self._lock:
            if self._preload is None and self._module is None and "litellm" not in sys.modules:
                _prepare_environment()
                self._preload = threading.Thread(target=self.module, name="litellm-import", daemon=True)
                self._preload.start()

    def announce_once(self) -> bool:
        """True the first time it is asked while LiteLLM is still loading: show the one 'loading' line."""
        if self._announced or not self.loading:
            return False
        self._announced = True
        return True

    def module(self) -> Any:
        """The configured `litellm` module (imported on first use, then a field read)."""
        if self._module is not None:
            return self._module
        if "litellm" not in sys.modules:
            _prepare_environment()
        quiet = self.quiet_gc and gc.isenabled()
        if quiet:
            gc.disable()
        try:
            import litellm  # noqa: PLC0415 - deliberate lazy import (seconds of start-up)

            configure(litellm)
            for name in _FIRST_CALL_MODULES:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001 - a warm-up only: the first call imports what it needs
                    pass
        finally:
            if quiet:
                gc.freeze()
                gc.enable()
        self._module = litellm
        return litellm

    def pricing(self, litellm: Any, model: str, params: dict[str, Any]) -> ModelPricing:
        """The model's pricing (models/pricing.py), looked up once per model and params in this process."""
        key = (model, repr(sorted(params.items(), key=lambda kv: kv[0])))
        found = self._pricing.get(key)
        if found is None:
            found = self._pricing[key] = ModelPricing(litellm, model, params)
        return found

    async def acompletion(self, litellm: Any, kwargs: dict[str, Any]) -> tuple[Any, float | None]:
        """One `litellm.acompletion` (the engine's one call site of it) and the reply's cost (None: unknown).
        The model's per-token prices go with the call (LiteLLM's documented custom pricing), so LiteLLM skips
        its per-call price lookups; the cost is then computed here from the reply's tokens (models/pricing.py)."""
        pricing = self.pricing(litellm, kwargs["model"], {k: v for k, v in kwargs.items() if k in _PRICED_PARAMS})
        response = await litellm.acompletion(**kwargs, **pricing.kwargs)
        return response, reply_cost(litellm, response, pricing)

    def use_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """A client starts making real calls in `loop`."""
        self._loop_users[id(loop)] = self._loop_users.get(id(loop), 0) + 1

    async def release_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """A client is done with `loop`; the last one closes LiteLLM's HTTP clients bound to it."""
        left = self._loop_users.get(id(loop), 1) - 1
        if left > 0:
            self._loop_users[id(loop)] = left
            return
        self._loop_users.pop(id(loop), None)
        await _close_clients(loop)


RUNTIME = LiteLLMRuntime()
# the request params that change which prices apply (models/pricing.py)
_PRICED_PARAMS = frozenset({"service_tier", "web_search_options", "tools", "input_cost_per_token",
                            "output_cost_per_token", "cache_read_input_token_cost"})


def configure(litellm: Any) -> None:
    """LiteLLM's process-wide settings, once after its import: no debug output, no logging below ERROR, no
    callbacks (the engine keeps its own journal, transcripts and costs). Only public settings: LiteLLM still
    builds its logging payload per call (it has no switch for that). `turn_off_message_logging` is left
    off on purpose: with no callback there is nothing to redact, and setting it makes LiteLLM deep-copy
    and redact every call's logging payload (~6% of the engine's CPU per call, measured with py-spy)."""
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    for name in ("callbacks", "success_callback", "failure_callback", "input_callback", "service_callback",
                 "_async_success_callback", "_async_failure_callback", "_async_input_callback"):
        if isinstance(getattr(litellm, name, None), list):
            getattr(litellm, name).clear()
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _prepare_environment() -> None:
    for name, value in _ENV_BEFORE_IMPORT.items():
        os.environ.setdefault(name, value)


async def _close_clients(loop: asyncio.AbstractEventLoop) -> None:
    """Close and forget LiteLLM's cached HTTP clients bound to `loop` (litellm #13251)."""
    litellm = sys.modules.get("litellm")
    cache = getattr(litellm, "in_memory_llm_clients_cache", None) if litellm is not None else None
    if cache is None:
        return
    token = _loop_token(cache, loop)
    for key in [k for k in list(getattr(cache, "cache_dict", {})) if str(k).rpartition("-")[2] == token]:
        client = cache.cache_dict.pop(key, None)
        getattr(cache, "ttl_dict", {}).pop(key, None)
        close = getattr(client, "aclose", None) or getattr(client, "close", None)
        try:
            result = close() if callable(close) else None
            if asyncio.iscoroutine(result):
                await result
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass


def _loop_token(cache: Any, loop: asyncio.AbstractEventLoop) -> str:
    """The part after the last '-' of the keys LiteLLM caches `loop`'s clients under.

    Asked of the cache itself (`update_cache_key_with_event_loop`), because releases differ: up to
    1.106 it was `id(loop)`, from 1.110 a per-loop counter. Only a cache without that method (or a
    loop that is not the running one) falls back to `id(loop)`."""
    scoped = getattr(cache, "update_cache_key_with_event_loop", None)
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if callable(scoped) and running is loop:
        try:
            suffix = str(scoped(""))
        except Exception:  # noqa: BLE001 - an unexpected cache: fall back to the old scheme
            suffix = ""
        if suffix.startswith("-"):
            return suffix[1:]
    return str(id(loop))


def finish_reason(response: Any) -> str | None:
    choices = getattr(response, "choices", None) or [None]
    value = getattr(choices[0], "finish_reason", None)
    return str(value) if value else None


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


TokenLogprobs = list[list[Any]]  # per generated token: [token, [[alternative, logprob], ...]] (the chosen one first)


def token_logprobs(response: Any) -> TokenLogprobs | None:
    """The reply's token log-probabilities as plain data (cached with the reply), or None when the server sent
    none: each generated token with its `top_logprobs` alternatives (the token itself first when it is absent)."""
    choices = getattr(response, "choices", None) or [None]
    content = _get(_get(choices[0], "logprobs"), "content")
    if not isinstance(content, list) or not content:
        return None
    out: TokenLogprobs = []
    for item in content:
        token, logprob = _get(item, "token"), _get(item, "logprob")
        if not isinstance(token, str) or not isinstance(logprob, (int, float)):
            return None
        top = [[_get(t, "token"), float(_get(t, "logprob"))] for t in _get(item, "top_logprobs") or []
               if isinstance(_get(t, "token"), str) and isinstance(_get(t, "logprob"), (int, float))]
        if not any(t == token for t, _ in top):
            top.insert(0, [token, float(logprob)])
        out.append([token, top])
    return out


def parse_reply(response: Any) -> tuple[str, int, int]:
    """(text, prompt_tokens, completion_tokens); raises Malformed when there is no usable choice."""
    choices = getattr(response, "choices", None)
    if not choices:
        raise Malformed("malformed response: no choices")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise Malformed("malformed response: choice without a message")
    content = getattr(message, "content", None)
    if content is None:
        text = ""  # empty completion: the caller decides what that means
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "".join(p.get("text", "") if isinstance(p, dict) else str(getattr(p, "text", "")) for p in content)
    else:
        raise Malformed(f"malformed response: content is {type(content).__name__}")
    if LONE_SURROGATE.search(text):  # valid JSON, not valid Unicode: cannot be cached or written
        raise Malformed(f"malformed response: the reply holds {len(LONE_SURROGATE.findall(text))} unpaired UTF-16 "
                        "surrogate(s) (\\ud800-\\udfff), which is not valid Unicode")
    usage = getattr(response, "usage", None)
    return text, int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)


def reply_cost(litellm: Any, response: Any, pricing: ModelPricing | None = None) -> float | None:
    """USD cost, or None when unknown: from the model's pricing when given (models/pricing.py), else the figure
    LiteLLM stamped on the response (hidden params; a reply from a worker process carries the worker's)."""
    if pricing is not None:
        try:
            return pricing.cost(litellm, response)
        except Exception:  # noqa: BLE001 - a reply without usable usage: the cost is unknown, never 0
            return None
    hidden = getattr(response, "_hidden_params", None)
    if isinstance(hidden, dict) and "response_cost" in hidden:
        value = hidden["response_cost"]
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    try:
        value = litellm.completion_cost(completion_response=response)
    except Exception:  # noqa: BLE001 - unmapped models raise; unknown cost is None, never 0
        return None
    return float(value) if isinstance(value, (int, float)) else None


def cached_tokens(response: Any) -> int:
    """Prompt tokens the provider served from its prompt cache: `usage.prompt_tokens_details.cached_tokens`
    (OpenAI-style; LiteLLM also fills it from Anthropic's count) else `usage.cache_read_input_tokens` (Anthropic,
    as LiteLLM passes it); 0 when the reply says nothing."""
    usage = getattr(response, "usage", None)
    details = getattr(usage, "prompt_tokens_details", None)
    for value in (getattr(details, "cached_tokens", None) if details is not None else None,
                  getattr(usage, "cache_read_input_tokens", None)):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def rate_headers(response: Any) -> dict[str, str]:
    """The provider's response headers as LiteLLM keeps them (`_hidden_params["additional_headers"]`, names
    lower-cased); {} when there are none."""
    hidden = getattr(response, "_hidden_params", None)
    headers = hidden.get("additional_headers") if isinstance(hidden, dict) else None
    return {str(k).lower(): str(v) for k, v in headers.items()} if isinstance(headers, dict) else {}
