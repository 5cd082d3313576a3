"""The one structured-output loop: ask for a structured reply, parse it, re-ask with what was wrong.

Why one loop for the judge and `localize`: a reply that does not parse must be re-asked with exactly what
was wrong and must never be cached (a rerun asks again); once a reply parses, it is cached under the
ORIGINAL request, re-asks included, so a resumed run asking the original request pays for nothing. After
`max_reasks` re-asks the unit is recorded as failed (`Outcome.error`, with every reply kept), never given a
default value. The parser is any function raising ValueError with a message meant for the model
(VerdictError, TranslationError and pydantic's ValidationError all are). A server refusing
`response_format` json_schema (HTTP 400) is asked again at once without it, and that client is then
never sent json_schema again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rubric_engine.errors import FatalModelError, ModelCallError
from rubric_engine.models.request import Request

if TYPE_CHECKING:
    from rubric_engine.models.client import CallResult, ModelClient

__all__ = ["Outcome", "Unusable", "ask_structured", "uses_json_schema", "one_line"]

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
                    repeat: int, shared_prefix: int = 0) -> "CallResult":
    """One reply, cached under `original`: json_schema first; on HTTP 400 at once without response_format."""
    if request.response_format is not None and not uses_json_schema(client):
        request = replace(request, response_format=None)
    if request.response_format is None:
        return await client.send(request, accept=accept, cache_as=original, repeat=repeat, shared_prefix=shared_prefix)
    try:
        return await client.send(request, accept=accept, cache_as=original, repeat=repeat, shared_prefix=shared_prefix)
    except FatalModelError as exc:
        # only a 400 naming the format: any other 400 (a filter, a bad param) would switch structured output
        # off for the rest of the run, and with it every later cache key
        words = str(getattr(exc, "detail", "") or exc)
        if exc.status != 400 or "context window" in str(exc) or not _NAMES_FORMAT.search(words):
            raise
        refusal = words
    try:
        result = await client.send(replace(request, response_format=None), accept=accept, cache_as=original,
                                   repeat=repeat, shared_prefix=shared_prefix)
    except Unusable:
        _refused(client, refusal)  # the server answered: it was the response_format it refused
        raise
    _refused(client, refusal)
    return result


_NAMES_FORMAT = re.compile(r"response[_ ]?format|json[_ ]?schema|structured[_ ]output|guided[_ ]json", re.I)


def _refused(client: "ModelClient", why: str) -> None:
    """Stop sending json_schema to this client's server, saying so once (replies are still validated)."""
    if client.refuse_json_schema() and client.notify is not None:
        client.notify(f"{client.role} '{client.spec.name}': the server refused response_format json_schema "
                      f"(HTTP 400: {one_line(why)[:160]}); asking without it from now on")


async def ask_structured(client: "ModelClient", request: Request | Messages, parse: Callable[[str], T], *,
                         reask: Callable[[str], str], max_reasks: int, what: str = "reply", role: str = "model",
                         response_format: dict[str, Any] | None = None,
                         repeat: int = 0, shared_prefix: int = 0) -> Outcome[T]:
    """Ask `request` (models/request.py: a planned request carries its response_format and what a valid answer
    looks like; a bare message list is sent with `response_format`), parse with `parse`, and re-ask up to
    `max_reasks` times with `reask(problem)` as the next user turn. Raises FatalModelError only when it stops the
    run (bad key, no access, unknown model); every other failure is the Outcome's error. `repeat` > 0 is an
    independent re-ask of the same request with its own cache entry (judge.repeats). `shared_prefix`: see
    ModelClient.send (per-criterion judging's repeated prompt prefix)."""
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

        def accept(text: str) -> None:
            try:
                parsed.append(parse(text))
            except ValueError as exc:
                raise Unusable(str(exc), text) from None

        out.attempts += 1
        try:
            result = await _complete(client, replace(request, messages=messages), accept, original, repeat,
                                     shared_prefix)
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
        return finish(None)
    return finish(one_line(f"invalid {what} after {out.attempts} replies: {problem}"))
