"""A provider's batch API through LiteLLM's files and batches functions: which providers have one, upload,
create, find, poll and fetch, each retried like a model call, and what a batched reply costs.

Why apart from the batcher: these are the only lines that speak to LiteLLM's `acreate_file`, `acreate_batch`,
`aretrieve_batch`, `alist_batches` and `afile_content`; the batcher (models/batches.py) only decides what to
send when. Which providers LiteLLM serves was read from its `batches/main.py` and `files/main.py`: creating a
batch works for OpenAI and OpenAI-compatible servers (`openai/` with an `api_base`, `hosted_vllm/`,
`litellm_proxy/`), Azure, Vertex AI and Bedrock; Anthropic batches can be retrieved but not created there.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, Awaitable, Callable

from rubric_engine.errors import ConfigError, FatalModelError
from rubric_engine.models.entries import ModelSpec, provider_of
from rubric_engine.models.failures import classify
from rubric_engine.models.interrupt import stopped
from rubric_engine.models.mock import is_mock

__all__ = ["BATCH_PROVIDERS", "batchable", "check_batchable", "BatchAPI", "batch_cost"]

# providers LiteLLM can upload a batch file to and create a batch for (its batches/main.py, files/main.py)
BATCH_PROVIDERS = frozenset({"openai", "hosted_vllm", "litellm_proxy", "azure", "vertex_ai", "bedrock"})
_NEEDS_MODEL = frozenset({"vertex_ai", "bedrock"})  # LiteLLM picks their file / batch transformation by model
ENDPOINT = "/v1/chat/completions"


def batchable(model: str) -> bool:
    """LiteLLM can send this model's calls through its provider's batch API."""
    return not is_mock(model) and provider_of(model) in BATCH_PROVIDERS


def check_batchable(models: Any, cache_enabled: bool) -> None:
    """batch=true: every model of the run has a batch API through LiteLLM, and the call cache is on; else one
    line (ConfigError, exit 2) before any call."""
    if not cache_enabled:
        raise ConfigError("batch=true keeps every batched answer in the call cache before it is used; "
                          "drop cache.enabled=false or run without batch=true")
    for spec in models:
        if spec is None:
            continue
        if is_mock(spec.model):
            raise ConfigError(f"batch=true: {spec.role or 'model'} {spec.name} ({spec.model}) is answered offline by "
                              "the engine, with no batch API; run it without batch=true")
        provider = provider_of(spec.model)
        if provider not in BATCH_PROVIDERS:
            raise ConfigError(f"batch=true: {spec.role or 'model'} {spec.name} ({spec.model}): LiteLLM has no batch "
                              f"API for provider '{provider}' (batches go to {', '.join(sorted(BATCH_PROVIDERS))}); "
                              "run without batch=true")


def batch_cost(litellm: Any, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD at the provider's batch price (LiteLLM's `batch_cost_calculator`: its `*_batches` rates, else half the
    synchronous rate); None when LiteLLM has no price for the model (never 0)."""
    try:
        litellm.get_model_info(model=model)
        from litellm.cost_calculator import batch_cost_calculator
        from litellm.types.utils import Usage

        usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                      total_tokens=prompt_tokens + completion_tokens)
        prompt, completion = batch_cost_calculator(usage, model)
    except Exception:  # noqa: BLE001 - an unmapped model: unknown cost is None, never 0
        return None
    return float(prompt) + float(completion)


class BatchAPI:
    """One model's batch endpoint: LiteLLM's files and batches functions with its credentials, each call retried
    on 429 / 5xx / timeouts (`max_retries`, exponential backoff); a failure retrying cannot fix, or one that
    outlived the retries, stops the run (FatalModelError) with one line: the same command re-attaches."""

    def __init__(self, spec: ModelSpec, litellm: Any, base: dict[str, Any], *, max_retries: int, role: str,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.spec, self.role, self._litellm, self._sleep = spec, role, litellm, sleep
        self.provider = provider_of(spec.model)
        self.max_retries = max_retries
        # files of up to 150 MB go up and come down: at least 10 minutes, wall-clock, per attempt
        self._timeout = max(spec.timeout, 600.0)
        self._creds: dict[str, Any] = {"custom_llm_provider": self.provider, "max_retries": 0,
                                       "timeout": self._timeout}
        for name in ("api_base", "api_key", "api_version"):
            if base.get(name):
                self._creds[name] = base[name]
        if self.provider in _NEEDS_MODEL:
            self._creds["model"] = spec.model
        self._key = base.get("api_key")

    def body_model(self) -> str:
        """The model name a batch line's body carries (the provider's own name, without LiteLLM's prefix)."""
        return self.spec.model.split("/", 1)[1] if "/" in self.spec.model else self.spec.model

    async def upload(self, name: str, data: bytes) -> str:
        got = await self._retried("upload a batch file", lambda: self._litellm.acreate_file(
            file=(name, data, "application/jsonl"), purpose="batch", **self._creds))
        return str(got.id)

    async def create(self, file_id: str, tag: str) -> Any:
        """Create the batch of `file_id`; after a failed attempt (a timeout or a 5xx may come after the provider
        created it) the batch is looked up by its file before another create, so it is never created twice."""
        tried = False

        async def attempt() -> Any:
            nonlocal tried
            found = await self.find(file_id) if tried else None
            tried = True
            return found if found is not None else await self._litellm.acreate_batch(
                completion_window="24h", endpoint=ENDPOINT, input_file_id=file_id,
                metadata={"rubric_engine": tag}, **self._creds)

        return await self._retried("create a batch", attempt)

    async def retrieve(self, batch_id: str) -> Any:
        # batch_ignore_default_logging: LiteLLM's own success logging would otherwise download a completed batch's
        # output file a second time and parse it to price it (a line it cannot parse printed its traceback); the
        # engine reads and prices the output itself (batchjournal.read_lines, batch_cost)
        return await self._retried(f"poll batch {batch_id}", lambda: self._litellm.aretrieve_batch(
            batch_id=batch_id, litellm_metadata={"batch_ignore_default_logging": True}, **self._creds))

    async def find(self, file_id: str, pages: int = 20) -> Any | None:
        """The batch created from `file_id`, if one was (a crash may have come between create and the journal)."""
        after: str | None = None
        for _ in range(pages):
            kw = {"limit": 100, **({"after": after} if after else {})}
            page = await self._retried("list batches", lambda: self._litellm.alist_batches(**kw, **self._creds))
            data = list(getattr(page, "data", None) or (page.get("data", []) if isinstance(page, dict) else []))
            for batch in data:
                if _field(batch, "input_file_id") == file_id:
                    return batch
            more = getattr(page, "has_more", None) if not isinstance(page, dict) else page.get("has_more")
            if not data or not more:
                return None
            after = str(_field(data[-1], "id"))
        return None

    async def content(self, file_id: str) -> bytes:
        got = await self._retried(f"fetch file {file_id}", lambda: self._litellm.afile_content(
            file_id=file_id, **self._creds))
        data = getattr(got, "content", got)
        return data if isinstance(data, bytes) else str(data).encode("utf-8")

    async def _retried(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
        attempts = 0
        while True:
            attempts += 1
            if stopped():  # a signal stopped the run: nothing more leaves (the same command re-attaches)
                raise asyncio.CancelledError
            try:
                return await asyncio.wait_for(call(), self._timeout)
            except Exception as exc:  # noqa: BLE001 - classified; CancelledError passes through
                failure = classify(exc, self._key)
                if failure.fatal or attempts > self.max_retries:
                    # the run stops (the batches in flight keep running at the provider and are billed): never
                    # a per-question error for a request that may still be answered
                    advice = "check the provider's status, or raise max_retries" if not failure.fatal else \
                        "check the model's batch API access"
                    raise FatalModelError(self.spec.model, f"{self.role} model '{self.spec.name}': batch API: cannot "
                                          f"{what}: {failure.detail}; {advice}, then run the same command (it "
                                          "re-attaches to the batches in flight)", status=failure.status,
                                          attempts=attempts, stops_run=True) from exc
                delay = failure.retry_after if failure.retry_after is not None else \
                    random.uniform(0.0, min(60.0, 2.0 ** (attempts - 1)))
                await self._sleep(delay)


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
