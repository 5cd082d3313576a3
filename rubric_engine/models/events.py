"""What a model call reports to an observer: one `CallEvent` per outcome of `ModelClient.complete`, one per retry.

Why here, under the client: the client is the one place every call passes, so a run's transcripts
(run/transcripts.py) see cache hits, replies, replies the caller's `accept()` refused, errors and each retry
without the judge or the pipeline knowing about them. Who asked (the question, the candidate sample, the
conversation turn, the criterion) is not the client's business: the layers above say it with `call_context`,
a context variable that follows each asyncio task, and the event carries it. Nothing here writes a file.
The client and its CallResult are typed Any here: models/client.py imports this module (one-way imports).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.errors import ModelCallError

__all__ = ["CallEvent", "Observer", "call_context", "set_call_context", "observed", "retry_event"]

_CONTEXT: ContextVar[dict[str, Any]] = ContextVar("rubric_engine_call_context", default={})
_CURRENT: ContextVar[int] = ContextVar("rubric_engine_current_call", default=0)
_IDS = itertools.count(1)


@dataclass(slots=True)
class CallEvent:
    """One outcome of one `complete()` (kind reply, cache_hit, rejected, error) or one failed attempt that is
    retried (kind retry). `call` identifies the complete() invocation within this process: a retry carries
    the id of the call it belongs to. A re-ask (the judge asked again with what was wrong) is a call of its own:
    `reask` counts it (1, 2, ...) and `chain` is the same for every call of one request, first ask included."""

    kind: str
    call: int
    role: str
    model: str  # the entry's name
    model_id: str  # the LiteLLM id
    context: dict[str, Any] = field(default_factory=dict)  # question, sample, turn, criterion where known
    messages: list[dict[str, Any]] | None = None  # the rendered messages (None for a retry)
    repeat: int = 0
    reask: int = 0
    chain: int = 0
    text: str | None = None  # the raw reply
    parse_error: str | None = None  # why accept() refused the reply
    error: str | None = None  # the call's error (kind error) or the failed attempt's (kind retry)
    status: int | None = None  # HTTP status of the error, when there was one
    attempts: int = 0  # HTTP requests made for this outcome; for a retry: the attempt that failed
    wait: float | None = None  # a retry: seconds waited before the next attempt
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    latency: float | None = None  # seconds of the successful attempt; None for a cache hit
    cached: bool = False
    time: float = 0.0  # wall clock (epoch seconds) when the outcome was known


Observer = Callable[[CallEvent], None]


@contextmanager
def call_context(**fields: Any) -> Iterator[None]:
    """Tag every call made inside the block (and in tasks started inside it) with `fields`."""
    token = _CONTEXT.set({**_CONTEXT.get(), **fields})
    try:
        yield
    finally:
        _CONTEXT.reset(token)


def set_call_context(**fields: Any) -> None:
    """Tag every later call of the current asyncio task with `fields` (for a task that handles one unit)."""
    _CONTEXT.set({**_CONTEXT.get(), **fields})


def _base(client: Any, kind: str, call: int) -> CallEvent:
    return CallEvent(kind=kind, call=call, role=client.role, model=client.spec.name, model_id=client.spec.model,
                     context=_CONTEXT.get(), time=time.time())


def retry_event(client: Any, attempt: int, status: int | None, error: str, wait: float) -> CallEvent:
    """A failed attempt of the current call that will be retried after `wait` seconds."""
    event = _base(client, "retry", _CURRENT.get())
    event.attempts, event.status, event.error, event.wait = attempt, status, error, round(wait, 3)
    return event


async def observed(client: Any, observer: Observer, messages: list[dict[str, Any]],
                   cache_as: list[dict[str, Any]] | None, repeat: int,
                   inner: Callable[[], Awaitable[Any]]) -> Any:
    """Run one `complete()` (`inner`) and report its outcome; exceptions pass through unchanged."""
    call = next(_IDS)
    _CURRENT.set(call)  # this task's current call: _call's retries report under it
    origin = cache_as if cache_as is not None else messages
    reask = (len(messages) - len(origin)) // 2 if origin is not messages and origin != messages else 0

    def event(kind: str, result: Any) -> CallEvent:
        e = _base(client, kind, call)
        e.messages, e.repeat, e.reask, e.chain = messages, repeat, reask, id(origin)
        if result is not None:
            e.text, e.cached, e.attempts = result.text, result.cached, result.attempts
            e.prompt_tokens, e.completion_tokens, e.cost = result.prompt_tokens, result.completion_tokens, result.cost
            e.latency = getattr(result, "latency", None)
        return e

    try:
        result = await inner()
    except Exception as exc:
        got = getattr(exc, "call_result", None)
        if got is not None:  # the caller's accept() refused the reply (judge/structured.Unusable, EmptyReply, ...)
            e = event("rejected", got)
            e.parse_error = str(exc)
        elif isinstance(exc, ModelCallError):  # the call itself failed
            e = event("error", None)
            e.error, e.status, e.attempts = str(exc), exc.status, exc.attempts
        else:  # not a call's outcome (a bug, a cancellation's cousin): nothing to record
            raise
        observer(e)
        raise
    observer(event("cache_hit" if result.cached else "reply", result))
    return result
