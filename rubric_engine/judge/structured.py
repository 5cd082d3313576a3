"""The one structured-output loop: ask for a structured reply, parse it, re-ask with what was wrong.

Why one loop for the judge and `localize`: a reply that does not parse must be re-asked with exactly what
was wrong and must never be cached (a rerun asks again); once a reply parses, it is cached under the
ORIGINAL request, re-asks included, so a resumed run asking the original request pays for nothing. After
`max_reasks` re-asks the unit is recorded as failed (`Outcome.error`, with every reply kept), never given a
default value. The parser is any function raising ValueError with a message meant for the model
(VerdictError, TranslationError and pydantic's ValidationError all are). The structured request goes in the
dialect of the entry's server family (models/dialects.py). A server refusing it (HTTP 400/422 naming the
parameter) is asked again at once in plain text, and that client is then never sent it again; an empty
structured reply is asked again once in plain text. A plain reply is read by the caller's tolerant parser when
it gives one. Each accepted reply records its path (`Outcome.path`: structured, plain or reasked).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rubric_engine.errors import FatalModelError, ModelCallError
from rubric_engine.models.dialects import REFUSAL
from rubric_engine.models.failures import error_bodies
from rubric_engine.models.redact import redact
from rubric_engine.models.request import Request

if TYPE_CHECKING:
    from rubric_engine.models.client import CallResult, ModelClient

__all__ = ["Outcome", "Unusable", "ask_structured", "uses_json_schema", "one_line", "PATHS"]

PATHS = ("structured", "plain", "reasked")  # how an accepted reply was obtained (Outcome.path)

T = TypeVar("T")
Messages = list[dict[str, str]]


@dataclass
class Outcome(Generic[T]):
    """One structured request's result: `value` is None exactly when `error` is set.

    attempts = replies asked for (1 + re-asks; HTTP retries not counted); tokens and cost are summed over
    every reply received, rejected ones included (cost None when no reply came or any reply's cost is
    unknown); cache_hits = replies from the cache; cached = the accepted reply came from the cache."""

    value: T | None = None
    error: str | None = None
    replies: list[str] = field(default_factory=list)
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    cache_hits: int = 0
    cached: bool = False
    path: str | None = None  # the accepted reply's path: "structured", "plain" or "reasked" (PATHS)
    logprobs: list[list[Any]] | None = None  # the accepted reply's token log-probabilities, when the server sent them


class Unusable(Exception):
    """A reply the parser refused, raised inside ModelClient.complete's `accept=` so it is never cached.
    ModelClient attaches the reply's CallResult as `call_result` (its tokens and cost still count)."""

    call_result: "CallResult | None" = None

    def __init__(self, problem: str, text: str) -> None:
        super().__init__(problem)
        self.problem, self.text = problem, text


def uses_json_schema(client: "ModelClient") -> bool:
    """False once this client's server has rejected response_format json_schema (ModelClient remembers it)."""
    return not client.json_schema_refused


def one_line(text: str) -> str:
    return " ".join(text.split())


async def _complete(client: "ModelClient", request: Request, accept: Callable[[str], None], original: Messages,
                    repeat: int, shared_prefix: int = 0,
                    plain: Callable[[str], None] | None = None) -> "tuple[CallResult, str]":
    """One reply, cached under `original`, and the path it took: "structured" (asked in the server's dialect,
    models/dialects.py) or "plain" (asked without a format: the server refused it with a 400/422 naming it, is
    known to refuse it, or answered the structured request with nothing). A plain reply is read by `plain`
    (a tolerant parser) when given."""
    plain = plain or accept
    if request.response_format is not None and not uses_json_schema(client):
        request = replace(request, response_format=None)
    send = functools.partial(client.send, cache_as=original, repeat=repeat, shared_prefix=shared_prefix)
    if request.response_format is None:
        return await send(request, accept=plain), "plain"
    empty = None
    try:
        return await send(request, accept=accept), "structured"
    except Unusable as exc:
        if exc.text.strip():
            raise
        empty = exc.call_result  # constrained decoding that produced nothing: once more in plain text
    except FatalModelError as exc:
        # only a 400/422 naming the format: any other (a filter, a bad param) would switch structured output
        # off for the rest of the run, and with it every later cache key
        words = redact(" ".join([str(getattr(exc, "detail", "") or exc), *map(str, error_bodies(exc)[:1])]))
        if exc.status not in (400, 422) or "context window" in str(exc) or not REFUSAL.search(words):
            raise
        _refused(client, words)  # at once: the requests queued behind this one go in plain text
    result = await send(replace(request, response_format=None), accept=plain)
    if empty is not None:  # the empty reply's tokens and cost count too
        cost = None if None in (empty.cost, result.cost) else (empty.cost or 0.0) + (result.cost or 0.0)
        result = replace(result, prompt_tokens=result.prompt_tokens + empty.prompt_tokens, cost=cost,
                         completion_tokens=result.completion_tokens + empty.completion_tokens)
    return result, "plain"


def _refused(client: "ModelClient", why: str) -> None:
    """Stop sending the structured request to this client's server, saying so once (replies are still validated)."""
    if client.refuse_json_schema() and client.notify is not None:
        client.notify(f"{client.role} '{client.spec.name}': the server refused structured output "
                      f"({one_line(why)[:160]}); asking without it from now on")


async def ask_structured(client: "ModelClient", request: Request | Messages, parse: Callable[[str], T], *,
                         reask: Callable[[str], str], max_reasks: int, what: str = "reply", role: str = "model",
                         response_format: dict[str, Any] | None = None,
                         repeat: int = 0, shared_prefix: int = 0,
                         lenient: Callable[[str], T] | None = None) -> Outcome[T]:
    """Ask `request` (models/request.py: a planned request carries its response_format and what a valid answer
    looks like; a bare message list is sent with `response_format`), parse with `parse`, and re-ask up to
    `max_reasks` times with `reask(problem)` as the next user turn. Raises FatalModelError only when it stops the
    run (bad key, no access, unknown model); every other failure is the Outcome's error. `repeat` > 0 is an
    independent re-ask of the same request with its own cache entry (judge.repeats). `shared_prefix`: see
    ModelClient.send (per-criterion judging's repeated prompt prefix). `lenient`: the parser of a reply asked in
    plain text (almost-right free text: judge/tolerant.py); `parse` reads the rest."""
    if not isinstance(request, Request):
        request = Request(request, role=client.role, response_format=response_format)
    messages = original = request.messages  # every accepted reply is cached under the first request, re-asks too
    out: Outcome[T] = Outcome()
    costs: list[float | None] = []

    def add(result: "CallResult") -> None:
        out.prompt_tokens += result.prompt_tokens
        out.completion_tokens += result.completion_tokens
        costs.append(result.cost)
        out.cache_hits += int(result.cached)

    def finish(error: str | None) -> Outcome[T]:
        out.error = error
        out.cost = None if not costs or None in costs else float(sum(c for c in costs if c is not None))
        return out

    problem = ""
    for _ in range(max_reasks + 1):
        parsed: list[T] = []

        def accept(text: str, read: Callable[[str], T] = parse) -> None:
            try:
                parsed.append(read(text))
            except ValueError as exc:
                raise Unusable(str(exc), text) from None

        out.attempts += 1
        try:
            result, path = await _complete(client, replace(request, messages=messages), accept, original, repeat,
                                           shared_prefix, functools.partial(accept, read=lenient or parse))
        except Unusable as exc:
            out.replies.append(exc.text)
            if exc.call_result is not None:
                add(exc.call_result)
            problem = exc.problem
            messages = messages + [{"role": "assistant", "content": exc.text},
                                   {"role": "user", "content": reask(problem)}]
            continue
        except FatalModelError as exc:
            if exc.stops_run:
                raise
            return finish(one_line(f"{role} call failed: {exc}"))
        except ModelCallError as exc:
            return finish(one_line(f"{role} call failed: {exc}"))
        out.replies.append(result.text)
        add(result)
        out.value, out.cached = parsed[-1], result.cached
        out.path, out.logprobs = "reasked" if out.attempts > 1 else path, result.logprobs
        return finish(None)
    return finish(one_line(f"invalid {what} after {out.attempts} replies: {problem}"))
