"""Model calls through LiteLLM with our own retries, rate limits and a durable result cache.

Why our own retry loop: LiteLLM's retries silently need `tenacity`, and for `openai/` models the
OpenAI SDK retries too, so retries compound unpredictably. We call with `num_retries=0,
max_retries=0` and retry here: 429 / 5xx / timeouts / connection errors / malformed bodies, with
exponential backoff + full jitter, honouring Retry-After. Errors retrying cannot fix
(400/401/403/404/422, context too long) raise `FatalModelError` at once with one actionable line.

Why the cache is checked first: `import litellm` costs seconds, so a fully cached re-score never
imports it. Only accepted, successful results are cached; errors never are.

Around the client: models/entries.py (what a model is, the cache key), models/failures.py (what a failure
means), models/litellm_runtime.py (LiteLLM in this process: import, reading replies, closing clients).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Awaitable, Callable, Protocol

from rubric_engine.errors import ConfigError, FatalModelError, ModelCallError
from rubric_engine.models.bodycap import MAX_REPLY_ENV, max_reply_bytes, openai_client, served_by_openai_client
from rubric_engine.models.cache import ResultCache
from rubric_engine.models.concurrency import AUTO
from rubric_engine.models.dialects import ask_structured_in, server_of
from rubric_engine.models.entries import MessageTexts, ModelSpec, cache_key, provider_key_env
from rubric_engine.models.events import Observer, observed, retry_event
from rubric_engine.models.failures import STOPS_RUN_KINDS, Failure, classify
from rubric_engine.models.interrupt import sending, stopped
from rubric_engine.models.limits import LOCAL, LimitSource
from rubric_engine.models.litellm_runtime import RUNTIME, LiteLLMRuntime, finish_reason, parse_reply, token_logprobs
from rubric_engine.models.litellm_runtime import cached_tokens, rate_headers
from rubric_engine.models.mock import is_mock, mock_reply, mock_tokens
from rubric_engine.models.promptcache import mark_prefix, needs_marker
from rubric_engine.models.redact import MessageRedactor, redact, register_secret
from rubric_engine.models.request import Request
from rubric_engine.models.workers import WorkerPool

__all__ = ["BatchSource", "CallResult", "CallStats", "ModelClient", "preload_litellm"]


class BatchSource(Protocol):
    """What batch mode gives a client at construction (a run's models/batches.BatchRun): its own batcher, whose
    `call(kwargs, key)` answers each request from a provider batch."""

    def batcher(self, client: Any) -> Any: ...


def preload_litellm(workers: WorkerPool | None = None, runtime: LiteLLMRuntime = RUNTIME) -> None:
    """Start importing LiteLLM on a thread now, for a caller that knows calls will be made (with a pool of
    workers, workers=N: start its processes, each importing it)."""
    if workers is not None and workers.size > 0:
        workers.start()
    else:
        runtime.preload()

@dataclass
class CallResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost: float | None  # USD; None when LiteLLM has no price for the model
    cached: bool
    attempts: int  # HTTP requests made for this result (0 for a cache hit)
    finish_reason: str | None = None  # "stop", "length" (cut off), "content_filter", ... as the provider says
    cached_tokens: int = 0  # prompt tokens the provider served from its prompt cache (models/promptcache.py)
    # seconds of the successful attempt; None for a cache hit. A measurement, not part of the result's identity
    latency: float | None = field(default=None, compare=False)
    batched: bool = False  # the result came from a provider batch (batch=true, models/batches.py)
    logprobs: list[list[Any]] | None = None  # per token [token, [[alternative, logprob], ...]] (token_logprobs)


@dataclass
class CallStats:
    """Counters for one client. Tokens and cost count only requests made in this process."""

    calls: int = 0  # complete() invocations
    cache_hits: int = 0
    errors: int = 0  # complete() calls that raised ModelCallError / FatalModelError
    retries: int = 0  # extra HTTP attempts after a retryable failure
    requests: int = 0  # HTTP requests sent
    rejected: int = 0  # results the caller's accept() refused (not cached)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0  # sum over calls whose cost is known
    cost_unknown_calls: int = 0
    cached_tokens: int = 0  # prompt tokens served from the provider's prompt cache
    batched: int = 0  # results that came from a provider batch (batch=true)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ModelClient:
    """Calls one model with caching, a concurrency cap, an rpm cap and retries. See module docstring.

    Every layer is chosen here, at construction, and never attached afterwards (models/compose.py builds a run's
    clients from one `ClientLayers`): `cache` (None: off), `workers` (a run's WorkerPool: calls in its processes;
    None: in this one), `batches` (a run's models/batches.BatchRun: batch=true), `prompt_cache` (mark a shared
    prompt prefix), `notify` (one-line events), `observer` (every call's outcome, models/events.py), `runtime`
    (LiteLLM in this process), `clock` and `sleep` (so tests check pauses and spacing without wall time)."""

    def __init__(self, spec: ModelSpec, *, cache: ResultCache | None, concurrency: int | str = 8,
                 rpm: float | None = None, tpm: float | None = None,
                 max_retries: int = 4, backoff_base: float = 1.0, backoff_max: float = 60.0,
                 role: str = "candidate", clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 runtime: LiteLLMRuntime = RUNTIME, workers: WorkerPool | None = None,
                 batches: BatchSource | None = None, prompt_cache: bool = False,
                 notify: Callable[[str], None] | None = None, observer: Observer | None = None,
                 limits: LimitSource = LOCAL) -> None:
        auto = concurrency == AUTO  # adaptive (models/concurrency.py); a number keeps a plain semaphore
        for bad, what in ((not auto and not (isinstance(concurrency, int) and concurrency >= 1),
                           f"concurrency must be >= 1 or auto (got {concurrency})"),
                          (rpm is not None and rpm <= 0, f"rpm must be > 0, or null for no limit (got {rpm})"),
                          (tpm is not None and tpm <= 0, f"tpm must be > 0, or null for no limit (got {tpm})"),
                          (max_retries < 0, f"max_retries must be >= 0 (got {max_retries})")):
            if bad:
                raise ConfigError(f"{role}: {what}")
        self.spec, self.cache, self.role = spec, cache, role
        self.concurrency, self.rpm, self.max_retries = concurrency, rpm, max_retries
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.stats = CallStats()
        self.notify = notify  # one-line events: LiteLLM loading, retries, waits
        self.observer = observer  # every call's outcome and each retry (models/events.py)
        # workers=N: calls run in the run's worker processes (models/workers.py); None or size 0: in this process
        self.workers = workers if workers is not None and workers.size > 0 else None
        # places in flight, rpm / tpm room and concurrency=auto's gate (models/limits.py): this client's own, or
        # shared with every client of the same key on a Ray cluster (rubric_engine/cluster/limits.py)
        self.limits = limits.limits(spec, concurrency=concurrency, rpm=rpm, tpm=tpm, clock=clock, sleep=sleep)
        self.gate = self.limits.gate  # concurrency=auto: where the limit settled (report()); else None
        self._sleep = sleep
        self.prompt_cache = prompt_cache  # mark a shared prompt prefix for providers that cache only marked content
        self._loops: set[int] = set()
        self._answered = False  # a server answered once: later connection errors are per-question
        self._runtime = runtime
        self._redact = MessageRedactor()  # what every request sends, redacted (each text once: models/redact.py)
        self._texts = MessageTexts()  # each message's JSON in the cache keys, serialised once (models/entries.py)
        self._request: dict[str, Any] | None = None  # what every request of this client sends (built once)
        self._key: str | None = None  # the key value sent (None: LiteLLM reads the provider's variable)
        # True once this client's server refused response_format json_schema (HTTP 400; judge/structured.py says
        # so through refuse_json_schema): a fact about this endpoint, so later structured requests go without it
        self.json_schema_refused = False
        self._cap = max_reply_bytes()  # a bad $RUBRIC_ENGINE_MAX_REPLY_MB is one line before any call
        self._capped: bool | None = None  # LiteLLM serves this model with its OpenAI client: ours, capped (bodycap)
        self._openai: dict[int, Any] = {}  # event-loop id -> that client, reused by every call in the loop
        # cache key -> the answer of that request while it is in flight: an identical request waits for it
        # instead of paying again (within this process; across processes the cache answers once one has stored)
        self._in_flight: dict[tuple[int, str], asyncio.Future[CallResult | None]] = {}
        # batch=true: the run's Batcher for this client answers every call from provider batches (models/batches.py)
        self.batcher = batches.batcher(self) if batches is not None else None

    def refuse_json_schema(self) -> bool:
        """This client's server refused response_format json_schema: later structured requests go without it.
        True the first time (the caller says so once)."""
        first, self.json_schema_refused = not self.json_schema_refused, True
        return first

    async def __aenter__(self) -> "ModelClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def complete(self, messages: list[dict[str, Any]], *, response_format: dict[str, Any] | None = None,
                       accept: Callable[[str], None] | None = None,
                       cache_as: list[dict[str, Any]] | None = None,
                       repeat: int = 0, shared_prefix: int = 0) -> CallResult:
        """`send` of a free-text request of these messages (and this response_format): for a caller that holds
        no planned request (a library user, the tests)."""
        return await self.send(Request(messages, role=self.role, response_format=response_format), accept=accept,
                               cache_as=cache_as, repeat=repeat, shared_prefix=shared_prefix)

    async def send(self, request: Request, *, accept: Callable[[str], None] | None = None,
                   cache_as: list[dict[str, Any]] | None = None, repeat: int = 0,
                   shared_prefix: int = 0) -> CallResult:
        """Cached result or a fresh call of `request` (models/request.py: its messages and response_format are
        sent; a `mock/` model answers from its answer description, real models never see it). `accept(text)`
        raising rejects it: not cached, and the exception propagates with the CallResult attached as
        `exc.call_result`. accept also runs on cache hits.

        `cache_as`: the messages whose key stores the result (default the request's). A re-ask passes the
        original request, so the validated answer is found again by the original request on resume. Lookups
        use the request's messages: a re-ask is never answered from the entry whose reply it is re-asking about.
        `shared_prefix`: characters of the first user message that other calls repeat (per-criterion judging);
        with `prompt_cache` on, marked for providers that need a marker (models/promptcache.py), never keyed on."""
        if self.observer is not None:  # the run's transcripts (models/events.py): same call, its outcome reported
            return await observed(self, self.observer, request.messages, cache_as, repeat, lambda: self._complete(
                request, accept=accept, cache_as=cache_as, repeat=repeat, shared_prefix=shared_prefix))
        return await self._complete(request, accept=accept, cache_as=cache_as, repeat=repeat,
                                    shared_prefix=shared_prefix)

    async def _complete(self, request: Request, *, accept: Callable[[str], None] | None,
                        cache_as: list[dict[str, Any]] | None, repeat: int, shared_prefix: int) -> CallResult:
        messages, response_format = request.messages, request.response_format
        self.stats.calls += 1
        if is_mock(self.spec.model):  # deterministic and free: never stored in (or read from) the cache
            result = self._mock(request)
            self._accept(accept, result)
            return result
        key = cache_key(self.spec, messages, response_format, repeat, self._texts)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None and isinstance(hit.get("text"), str):
                self.stats.cache_hits += 1
                result = CallResult(redact(hit["text"]), int(hit.get("prompt_tokens") or 0),
                                    int(hit.get("completion_tokens") or 0), hit.get("cost"), True, 0,
                                    hit.get("finish_reason"), int(hit.get("cached_tokens") or 0),
                                    logprobs=hit.get("logprobs"))
                self._accept(accept, result)
                return result
        merged = not cache_as or cache_as == messages  # a re-ask is stored under another key: never merged
        here = (id(asyncio.get_running_loop()), key)  # futures belong to one event loop
        flight = self._in_flight.get(here) if merged else None
        if flight is not None:  # the same request is in flight: one call, many waiters
            shared = await asyncio.shield(flight)
            if shared is not None:  # (None: that call failed or was stopped; this one asks on its own)
                self.stats.cache_hits += 1
                result = replace(shared, cached=True, attempts=0, latency=None)
                self._accept(accept, result)
                return result
        mine = asyncio.get_running_loop().create_future() if merged and here not in self._in_flight else None
        if mine is not None:
            self._in_flight[here] = mine
        try:
            marked = self.prompt_cache and shared_prefix > 0 and needs_marker(self.spec.model)
            result = await self._call(mark_prefix(messages, shared_prefix) if marked else messages, response_format,
                                      key if self.cache is not None else None, request.answer)
            result.text = redact(result.text)  # redacted before use and before caching: a resume reads the same
        except BaseException:
            self._land(here, mine, None)
            raise
        self._land(here, mine, result)
        self._accept(accept, result)
        if self.cache is not None:
            if cache_as and cache_as != messages:
                key = cache_key(self.spec, cache_as, response_format, repeat, self._texts)
            self.cache.set(key, {"text": result.text, "prompt_tokens": result.prompt_tokens,
                                 "completion_tokens": result.completion_tokens, "cost": result.cost,
                                 "model": self.spec.model, "finish_reason": result.finish_reason,
                                 "cached_tokens": result.cached_tokens,
                                 **({"logprobs": result.logprobs} if result.logprobs else {})})
        return result

    def _land(self, here: tuple[int, str], mine: "asyncio.Future[CallResult | None] | None",
              result: CallResult | None) -> None:
        """The call this client led has ended: its waiters get the result (None: they ask on their own)."""
        if mine is not None:
            del self._in_flight[here]
            mine.set_result(result)

    async def aclose(self) -> None:
        """Close LiteLLM's HTTP clients for this loop once no other open ModelClient uses them."""
        loop = asyncio.get_running_loop()
        openai = self._openai.pop(id(loop), None)
        if openai is not None:  # ours (bodycap): LiteLLM never closes a client it was handed
            await openai.close()
        if id(loop) not in self._loops:
            return
        self._loops.discard(id(loop))
        await self._runtime.release_loop(loop)

    # -- internals -------------------------------------------------------------------------
    def _accept(self, accept: Callable[[str], None] | None, result: CallResult) -> None:
        """Run the caller's check; a rejection carries the result (`exc.call_result`) so its tokens count."""
        try:
            if accept is not None:
                accept(result.text)
        except Exception as exc:
            self.stats.rejected += 1
            try:
                exc.call_result = result  # type: ignore[attr-defined]
            except AttributeError:  # exceptions with __slots__
                pass
            raise

    def _slot(self) -> Any:
        """A place for one attempt from this client's limits (`async with` gives a Permit), the loop's LiteLLM
        clients counted as in use by this client."""
        loop = asyncio.get_running_loop()
        if id(loop) not in self._loops:
            self._loops.add(id(loop))
            self._runtime.use_loop(loop)
        return self.limits.slot(self._key)

    def _base_request(self) -> dict[str, Any]:
        """What every request of this client sends, resolved once at its first real call (the key too)."""
        if self._request is None:
            key = self._api_key()  # a missing key raises here, at every call, until it is set
            base: dict[str, Any] = {**self.spec.params, "model": self.spec.model, "timeout": self.spec.timeout,
                                    "num_retries": 0, "max_retries": 0}
            if self.spec.api_base:
                base["api_base"] = self.spec.api_base
            if key:
                base["api_key"] = key
            self._key, self._request = key, base
        return self._request

    def _api_key(self) -> str | None:
        env = self.spec.api_key_env
        if env:
            value = os.environ.get(env)
            if not value:
                self.stats.errors += 1
                raise FatalModelError(self.spec.model, f"{self.role} model '{self.spec.name}': environment variable "
                                      f"${env} is not set; export it with the API key", attempts=0)
            register_secret(value)
            return value
        if self.spec.api_base:
            # A custom endpoint gets a key only when its entry names the variable: never the provider's
            # own key from the environment (a spec or an override may point api_base anywhere).
            return "no-key"  # local OpenAI-compatible servers ignore the key but the SDK demands one
        register_secret(os.environ.get(provider_key_env(self.spec.model)))
        return None  # LiteLLM reads the provider's own env var

    def _openai_client(self) -> Any:
        """This loop's AsyncOpenAI for LiteLLM's `client=` (one per loop: its connections bind to it)."""
        loop = id(asyncio.get_running_loop())
        if self._openai.get(loop) is None:
            self._openai[loop] = openai_client(api_key=self._key, api_base=self.spec.api_base,
                                               timeout=self.spec.timeout, cap=self._cap)
        return self._openai[loop]

    def _backoff(self, attempt: int, failure: Failure) -> float:
        if failure.retry_after is not None:
            return min(failure.retry_after, self.backoff_max)
        return random.uniform(0.0, min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1)))

    def _message(self, failure: Failure) -> str:
        who = f"{self.role} model '{self.spec.name}'"
        if self.spec.api_base and not self.spec.api_key_env:  # it was sent 'no-key', never $<PROVIDER>_API_KEY
            key = (f"the endpoint {self.spec.api_base} was sent no key (placeholder 'no-key'); name the variable "
                   f"holding its key with {self.role}.api_key_env=VAR")
            auth = forbidden = key
        else:
            auth = f"set the API key in ${self.spec.key_env}"
            forbidden = f"check that the key in ${self.spec.key_env} may use this model"
        advice = {
            "auth": auth,
            "forbidden": forbidden,
            "not_found": f"check the model id '{self.spec.model}'" + (f" and api_base {self.spec.api_base}"
                                                                     if self.spec.api_base else ""),
            "context": "the prompt is longer than the model's context window; use a longer-context model",
            "reply_too_large": f"check the server, or raise ${MAX_REPLY_ENV} (MiB) if such a reply is expected",
            "too_large": "the request is larger than the server accepts (HTTP 413); shorten the prompt or "
                         "lower max_tokens",
            "quota": f"the account behind ${self.spec.key_env} has no quota left; check its plan and billing",
            "bad_request": "check the request params this provider accepts",
            "transient": "check the provider's status, or raise max_retries / lower concurrency or rpm",
            "connection": "check that the server is running and reachable" + (f" at {self.spec.api_base}"
                                                                            if self.spec.api_base else ""),
        }[failure.kind]
        return f"{who}: {failure.detail}; {advice}"

    def _mock(self, request: Request) -> CallResult:
        """An offline, deterministic answer from the request's answer description (see models/mock.py); LiteLLM is
        never imported for it."""
        text = mock_reply(self.spec.model, request)
        prompt = sum(mock_tokens(str(m.get("content", ""))) for m in request.messages)
        self.stats.requests += 1
        self.stats.prompt_tokens += prompt
        self.stats.completion_tokens += mock_tokens(text)
        return CallResult(text, prompt, mock_tokens(text), 0.0, False, 1)

    async def _call(self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None,
                    key: str | None = None, answer: Any = None) -> CallResult:
        # every text sent to any model passes the one redaction here (models/redact.py): a key one server echoed
        # into a reply never reaches another server inside a judge's or a simulated user's prompt
        kwargs = {**self._base_request(), "messages": self._redact(messages)}
        if response_format:  # in the dialect of the entry's server family (models/dialects.py)
            ask_structured_in(kwargs, server_of(self.spec.model, self.spec.server), response_format, answer)
        pool = self.workers
        if self.notify is not None and pool is None and self._runtime.announce_once():
            self.notify("loading LiteLLM for the first model call (a few seconds) ...")
        litellm = None if pool is not None else self._runtime.module()  # workers: LiteLLM is theirs, not imported here
        if self.batcher is not None and key is not None:  # batch=true: the request's id is its cache key
            return await self.batcher.call(kwargs, key)
        if litellm is not None and self._capped is None:
            self._capped = served_by_openai_client(litellm, self.spec.model, self.spec.api_base)
        client = self._openai_client() if self._capped and litellm is not None else None
        if client is not None:  # the reply body is capped while it arrives (models/bodycap.py)
            kwargs["client"] = client
        attempts = 0
        while True:
            attempts += 1
            async with self._slot() as permit:
                if stopped():  # a signal stopped the run: no request leaves, even if a cancellation was lost
                    raise asyncio.CancelledError
                if pool is not None:
                    await pool.ready()  # a worker's start-up (importing LiteLLM) is not part of a call's timeout
                self.stats.requests += 1
                started = time.monotonic()
                try:  # `timeout` is wall-clock per attempt: httpx's is per read, which a trickling server resets
                    call = self._runtime.acompletion(litellm, kwargs) if pool is None else \
                        pool.acompletion(kwargs, self._cap)  # models/workers.py: the call runs in a worker process
                    with sending():  # a signal now waits for this answer (models/interrupt.py), bounded
                        response, cost = await asyncio.wait_for(call, self.spec.timeout)
                    text, prompt_tokens, completion_tokens = parse_reply(response)
                except Exception as exc:  # noqa: BLE001 - classified below; CancelledError passes through
                    failure, error = classify(exc, self._key), exc
                    if failure.status == 429 and not failure.fatal:
                        permit.throttled()
                else:
                    self._answered = True
                    self.stats.prompt_tokens += prompt_tokens
                    self.stats.completion_tokens += completion_tokens
                    self.stats.cost += cost or 0.0
                    self.stats.cost_unknown_calls += cost is None
                    served = cached_tokens(response)
                    self.stats.cached_tokens += served
                    permit.answered(rate_headers(response), prompt_tokens + completion_tokens)
                    return CallResult(text, prompt_tokens, completion_tokens, cost, False, attempts,
                                      finish_reason(response), served, latency=round(time.monotonic() - started, 4),
                                      logprobs=token_logprobs(response))
            if failure.fatal or attempts > self.max_retries:
                self.stats.errors += 1
                if failure.kind == "connection" and not self._answered:  # no server there: every call would fail
                    err: ModelCallError = FatalModelError(self.spec.model, self._message(failure), status=failure.status,
                                                          attempts=attempts, stops_run=True)
                elif failure.fatal:
                    err = FatalModelError(self.spec.model, self._message(failure), status=failure.status,
                                          attempts=attempts, stops_run=failure.kind in STOPS_RUN_KINDS)
                else:
                    err = ModelCallError(self.spec.model, self._message(failure), status=failure.status,
                                         attempts=attempts)
                err.detail = failure.detail  # type: ignore[attr-defined]  # the provider's own words, for callers
                raise err from error
            delay = self._backoff(attempts, failure)
            if failure.retry_after is not None:
                self.limits.pause(delay)  # the provider asked everyone on this key to wait
            self.stats.retries += 1
            if self.observer is not None:
                self.observer(retry_event(self, attempts, failure.status, failure.detail, delay))
            if self.notify is not None:
                why = (f"HTTP {failure.status}" if failure.status else
                       "no connection" if failure.kind == "connection" else failure.detail[:80])
                wait = "rate limit: waiting as asked (Retry-After)" if failure.retry_after is not None else "backing off"
                self.notify(f"{self.role} '{self.spec.name}': {why}; retry {attempts}/{self.max_retries} in "
                            f"{delay:.1f}s ({wait})")
            await self._sleep(delay)
