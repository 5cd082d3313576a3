"""The judge protocol: one re-ask loop for every verdict shape, the response_format fallback, and
per-criterion judging.

Why so strict: a verdict is a list of binary hits aligned with the rubric items; a reply with one item
too few or too many, a duplicated id or a "maybe" would silently shift or invent hits. So a reply is used
only if it has exactly one boolean verdict per item; otherwise the judge is re-asked with a message saying
exactly what was wrong, and after `max_reasks` re-asks the question is recorded as a judge error (never
padded, never defaulted). Invalid replies are rejected inside `ModelClient.complete`'s `accept` hook, so
they are never cached and a rerun asks again. The verdict shape (field names; a list for all criteria in
one call, one object for one criterion per call) comes from the spec (verdicts.py).

With judge.verdict.granularity = per_criterion, each criterion is one call, each cached on its own; the
calls of one question are started together, so they pipeline under the client's concurrency limit.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from .datatypes import Question
from .errors import FatalModelError, ModelCallError
from .mockmodel import VerdictShape as MockShape
from .prompts import judge_messages
from .verdicts import DEFAULT_SHAPE, Verdict, VerdictError, VerdictShape

if TYPE_CHECKING:  # spec.py imports nothing from here; this keeps the import graph one-way
    from .models import CallResult, ModelClient
    from .spec import BenchmarkSpec

__all__ = [
    "Verdict",
    "JudgeResult",
    "VerdictError",
    "VerdictReply",
    "CriterionVerdict",
    "VerdictShape",
    "verdict_schema",
    "RESPONSE_FORMAT",
    "FATAL_STATUSES",
    "parse_verdict",
    "reask_message",
    "judge_response",
    "uses_json_schema",
    "shape_of",
]

FATAL_STATUSES = frozenset({401, 403, 404})  # same failure for every question: stop the run

VerdictReply = DEFAULT_SHAPE.model  # the default all-criteria verdict {"criteria": [{id, reasoning, met}]}
CriterionVerdict = DEFAULT_SHAPE.item_model


def verdict_schema() -> dict[str, Any]:
    """JSON Schema of the default verdict for OpenAI strict mode."""
    return DEFAULT_SHAPE.schema()


RESPONSE_FORMAT: dict[str, Any] = DEFAULT_SHAPE.response_format()


def parse_verdict(text: str, n: int) -> list[Verdict]:
    """Parse a reply in the default shape for n criteria; sorted by id, or VerdictError."""
    return DEFAULT_SHAPE.parse(text, n)


def reask_message(problem: str, n: int) -> str:
    return DEFAULT_SHAPE.reask(problem, n)


@functools.lru_cache(maxsize=32)
def _shape(shape: str, list_key: str, id_: str, reasoning: str, met: str) -> VerdictShape:
    return VerdictShape(shape, list_key, id_, reasoning, met)


def shape_of(spec: "BenchmarkSpec") -> VerdictShape:
    """The spec's verdict shape (built once per distinct declaration)."""
    v = spec.judge.verdict
    return _shape(v.shape, v.list_key, v.id, v.reasoning, v.met)


@dataclass
class JudgeResult:
    """Outcome of judging one response. verdicts is None exactly when error is set.

    attempts = judge replies asked for (1 + re-asks; HTTP retries not counted; summed over a question's
    per-criterion calls); tokens and cost are summed over every reply received (cost None when any reply's
    cost is unknown); cache_hits = replies from cache.
    """

    verdicts: list[Verdict] | None
    error: str | None
    raw_replies: list[str] = field(default_factory=list)
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    cache_hits: int = 0


# -- calling ------------------------------------------------------------------------------------------

_NO_JSON_SCHEMA: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()


def uses_json_schema(client: Any) -> bool:
    """False once this client's server has rejected response_format json_schema (remembered per client)."""
    return not _NO_JSON_SCHEMA.get(client, False)


def _mock_shape(shape: VerdictShape, n: int) -> MockShape:
    """What a valid verdict looks like, told to a `mock/` judge so it can build one (real models ignore it)."""
    fields = {shape.id: "id"} if shape.shape == "list" else {}
    fields.update({shape.reasoning: "text", shape.met: "bool"})
    return MockShape(items=n, list_key=shape.list_key if shape.shape == "list" else None, fields=fields)


async def _complete(client: "ModelClient", messages: list[dict[str, str]], accept: Callable[[str], None],
                    response_format: dict[str, Any] | None, original: list[dict[str, str]],
                    expect: MockShape | None = None, repeat: int = 0) -> "CallResult":
    """One judge reply: json_schema first; on HTTP 400 retry at once without response_format.

    Every reply is cached under the `original` request (not the re-ask conversation) so a resumed run
    asking the original request finds the validated verdict. `expect` tells a mock judge the shape.
    `repeat` > 0 is an independent re-grading with its own cache entry (jury.py)."""
    if not uses_json_schema(client):
        return await client.complete(messages, response_format=None, accept=accept, cache_as=original,
                                     expect=expect, repeat=repeat)
    try:
        return await client.complete(messages, response_format=response_format or RESPONSE_FORMAT, accept=accept,
                                     cache_as=original, expect=expect, repeat=repeat)
    except FatalModelError as exc:
        if exc.status != 400 or "context window" in str(exc):  # too long a prompt: no format would help
            raise
    try:
        result = await client.complete(messages, response_format=None, accept=accept, cache_as=original,
                                       expect=expect, repeat=repeat)
    except VerdictError:
        _NO_JSON_SCHEMA[client] = True  # the server answered: it was the response_format it refused
        raise
    _NO_JSON_SCHEMA[client] = True
    return result


def _usage_of(exc: BaseException) -> "CallResult | None":
    """The CallResult a rejected reply came with (ModelClient attaches it as `call_result`)."""
    return getattr(exc, "call_result", None)


async def judge_response(client: "ModelClient", spec: "BenchmarkSpec", question: Question, response: str, *,
                         max_reasks: int | None = None, repeat: int = 0) -> JudgeResult:
    """Judge one response; see the module docstring. Raises FatalModelError for 401/403/404 and for calls
    refused before any request (no key): both would fail the same way for every question.
    `repeat` > 0 is an independent re-grading (judge.repeats): its own cache entries (jury.py)."""
    if max_reasks is None:
        max_reasks = spec.judge.max_reasks  # the one default lives on the spec model (judge.max_reasks: 2)
    shape = shape_of(spec)
    if shape.shape == "list":
        return await _ask(client, judge_messages(spec, question, response), shape, len(question.criteria),
                          max_reasks, repeat=repeat)
    units = [_ask(client, judge_messages(spec, question, response, c.index), shape, 1, max_reasks, c.index, repeat)
             for c in question.criteria]
    return _merge(await asyncio.gather(*units))


def add_usage(out: JudgeResult, parts: list[JudgeResult]) -> None:
    """Sum the replies, attempts, tokens and cache hits of several judge results into `out`; the cost is
    unknown (None) as soon as one part's cost is unknown, never a partial sum."""
    for p in parts:
        out.raw_replies += p.raw_replies
        out.attempts += p.attempts
        out.prompt_tokens += p.prompt_tokens
        out.completion_tokens += p.completion_tokens
        out.cache_hits += p.cache_hits
    costs = [p.cost for p in parts]
    out.cost = None if None in costs else float(sum(c for c in costs if c is not None))


def _merge(parts: list[JudgeResult]) -> JudgeResult:
    """One question's result from its per-criterion results: an error if any criterion has none."""
    out = JudgeResult(verdicts=None, error=None)
    add_usage(out, parts)
    errors = [(i, p.error) for i, p in enumerate(parts, 1) if p.error]
    if errors:
        more = f" (+{len(errors) - 1} more criteria failed)" if len(errors) > 1 else ""
        out.error = f"criterion {errors[0][0]}: {errors[0][1]}{more}"
    else:
        out.verdicts = [v for p in parts for v in (p.verdicts or [])]
    return out


async def _ask(client: "ModelClient", messages: list[dict[str, str]], shape: VerdictShape, n: int,
               max_reasks: int, index: int | None = None, repeat: int = 0) -> JudgeResult:
    """The one validate-then-re-ask loop: a verdict for n criteria (or for criterion `index` alone)."""
    original = messages  # every reply is cached under the first request, re-asks included
    out = JudgeResult(verdicts=None, error=None)
    costs: list[float | None] = []
    response_format = shape.response_format()

    def add(result: "CallResult") -> None:
        out.prompt_tokens += result.prompt_tokens
        out.completion_tokens += result.completion_tokens
        costs.append(result.cost)
        out.cache_hits += int(result.cached)

    def finish(verdicts: list[Verdict] | None, error: str | None) -> JudgeResult:
        if verdicts is not None and index is not None:
            verdicts = [Verdict(index=index, reasoning=v.reasoning, hit=v.hit) for v in verdicts]
        out.verdicts, out.error = verdicts, error
        out.cost = None if not costs or None in costs else float(sum(c for c in costs if c is not None))
        return out

    problem = ""
    for _ in range(max_reasks + 1):
        seen: list[str] = []

        def accept(text: str) -> None:
            seen.append(text)
            shape.parse(text, n)

        out.attempts += 1
        try:
            result = await _complete(client, messages, accept, response_format, original, _mock_shape(shape, n),
                                     repeat)
        except VerdictError as exc:
            bad = seen[-1] if seen else ""
            out.raw_replies.append(bad)
            used = _usage_of(exc)
            if used is not None:
                add(used)
            problem = str(exc)
            messages = messages + [{"role": "assistant", "content": bad},
                                   {"role": "user", "content": shape.reask(problem, n)}]
            continue
        except FatalModelError as exc:
            if exc.stops_run:
                raise
            return finish(None, _one_line(f"judge call failed: {exc}"))
        except ModelCallError as exc:
            return finish(None, _one_line(f"judge call failed: {exc}"))
        out.raw_replies.append(result.text)
        add(result)
        return finish(shape.parse(result.text, n), None)
    return finish(None, _one_line(f"invalid verdict after {out.attempts} replies: {problem}"))


def _one_line(text: str) -> str:
    return " ".join(text.split())
