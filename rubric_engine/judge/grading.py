"""The judge protocol: verdicts through the one structured-output loop, and per-criterion judging.

Why so strict: a verdict is a list of binary hits aligned with the rubric items; a reply with one item
too few or too many, a duplicated id or a "maybe" would silently shift or invent hits. So a reply is used
only if it has exactly one boolean verdict per item; otherwise the judge is re-asked with a message saying
exactly what was wrong, and after `max_reasks` re-asks the question is recorded as a judge error (never
padded, never defaulted). The loop (re-asks, caching under the original request, the response_format
fallback) is judge/structured.py's, shared with `localize`; the verdict shape (field names; a list for all
criteria in one call, one object for one criterion per call) comes from the spec (judge/verdicts.py).

With judge.verdict.granularity = per_criterion, each criterion is one call, each cached on its own; the
calls of one question are started together, so they pipeline under the client's concurrency limit. The requests
are `criteria_requests` (each typed, models/request.py, with what a valid verdict looks like: a `mock/` judge
answers from that); a run's panel passes its verdict's judge_requests instead (shapes/), the plan of calls the dry
run prices, so what is sent is what was planned.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rubric_engine.datatypes import Question
from rubric_engine.judge.prompts import PROMPT_ERRORS, judge_messages, unrenderable
from rubric_engine.judge.probability import met_probabilities
from rubric_engine.judge.structured import ask_structured
from rubric_engine.judge.tolerant import lenient
from rubric_engine.judge.verdicts import DEFAULT_SHAPE, Verdict, VerdictShape
from rubric_engine.models.events import call_context
from rubric_engine.models.promptcache import shared_prefix
from rubric_engine.models.request import Request

if TYPE_CHECKING:  # spec/schema.py imports nothing from here; this keeps the import graph one-way
    from rubric_engine.models.client import ModelClient
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["JudgeResult", "RESPONSE_FORMAT", "verdict_schema", "parse_verdict", "judge_response", "add_usage",
           "shape_of", "criteria_requests", "Planner", "WHOLE"]


def verdict_schema() -> dict[str, Any]:
    """JSON Schema of the default verdict for OpenAI strict mode."""
    return DEFAULT_SHAPE.schema()


RESPONSE_FORMAT: dict[str, Any] = DEFAULT_SHAPE.response_format()


def parse_verdict(text: str, n: int) -> list[Verdict]:
    """Parse a reply in the default shape for n criteria; sorted by id, or VerdictError."""
    return DEFAULT_SHAPE.parse(text, n)


@functools.lru_cache(maxsize=32)
def _shape(shape: str, list_key: str, id_: str, reasoning: str, met: str, probability: str | None) -> VerdictShape:
    return VerdictShape(shape, list_key, id_, reasoning, met, probability)


def shape_of(spec: "BenchmarkSpec") -> VerdictShape:
    """The spec's verdict shape (built once per distinct declaration)."""
    v = spec.judge.verdict
    return _shape(v.shape, v.list_key, v.id, v.reasoning, v.met, v.probability)


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
    paths: dict[str, int] = field(default_factory=dict)  # verdict replies per path (judge/structured.py PATHS)
    judge_paths: dict[str, dict[str, int]] = field(default_factory=dict)  # the same per judge (judge/panels.py)


# -- calling ------------------------------------------------------------------------------------------

Transcript = Sequence[Mapping[str, str]]
Planner = Callable[[Question, str, "Transcript | None"], list[Request]]  # a reply's judge requests (shapes/)
WHOLE = "all criteria in one call"  # `prompts`' title of a request that grades the whole rubric


def criteria_requests(spec: "BenchmarkSpec", question: Question, response: str,
                      transcript: Transcript | None = None) -> list[Request]:
    """Every judge request of one grading of `response` by criteria, in the order they are sent: the whole rubric
    in one request, or one per item (judge.verdict.granularity per_criterion), each with its title, its
    response_format and what a valid verdict looks like (the criteria verdict's judge_requests, shapes/base.py)."""
    shape = shape_of(spec)
    fmt = shape.response_format()
    if shape.shape == "list":
        return [Request(judge_messages(spec, question, response, transcript=transcript), "judge",
                        shape.answer(len(question.criteria)), fmt, WHOLE, context={"criterion": None})]
    n = len(question.criteria)
    return [Request(judge_messages(spec, question, response, c.index, transcript), "judge", shape.answer(1), fmt,
                    f"criterion {c.index} of {n}", context={"criterion": c.index}) for c in question.criteria]


async def judge_response(client: "ModelClient", spec: "BenchmarkSpec", question: Question, response: str, *,
                         max_reasks: int | None = None, repeat: int = 0,
                         transcript: Sequence[Mapping[str, str]] | None = None,
                         plan: Planner | None = None) -> JudgeResult:
    """Judge one response; see the module docstring. Raises FatalModelError for 401/403/404 and for calls
    refused before any request (no key): both would fail the same way for every question.
    `repeat` > 0 is an independent re-grading (judge.repeats): its own cache entries (judge/panels.py).
    `transcript`: a conversation's turns, for the judge template's `transcript` (judge/prompts.py).
    `plan`: the verdict's requests for a reply (a run's panel passes its shape's judge_requests, the plan of calls
    the dry run prices); by default `criteria_requests`."""
    if max_reasks is None:
        max_reasks = spec.judge.max_reasks  # the one default lives on the spec model (judge.max_reasks: 2)
    shape = shape_of(spec)
    try:
        requests = (plan or functools.partial(criteria_requests, spec))(question, response, transcript)
    except PROMPT_ERRORS as exc:  # this row's prompt only: its error, before any call; the run goes on
        return JudgeResult(verdicts=None, error=unrenderable(exc))
    counts = spec.judge.verdict.use == "probability"  # each reply also counted by what its verdicts count
    if requests and requests[0].context.get("criterion") is None:  # the whole rubric in one request
        return await _ask(client, requests[0], shape, len(question.criteria), max_reasks, repeat=repeat, counts=counts)
    shared = shared_prefix([_first_user(r.messages) for r in requests])  # what every criterion's prompt repeats
    return _merge(await asyncio.gather(*(_ask(client, r, shape, 1, max_reasks, repeat, shared, counts)
                                         for r in requests)))


def _first_user(messages: list[dict[str, str]]) -> str:
    return next((str(m["content"]) for m in messages if m.get("role") == "user"), "")


def add_usage(out: JudgeResult, parts: list[JudgeResult]) -> None:
    """Sum the replies, attempts, tokens and cache hits of several judge results into `out`; the cost is
    unknown (None) as soon as one part's cost is unknown, never a partial sum."""
    for p in parts:
        out.raw_replies += p.raw_replies
        out.attempts += p.attempts
        out.prompt_tokens += p.prompt_tokens
        out.completion_tokens += p.completion_tokens
        out.cache_hits += p.cache_hits
        for path, count in p.paths.items():
            out.paths[path] = out.paths.get(path, 0) + count
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


def _with_probabilities(verdicts: list[Verdict], shape: VerdictShape, text: str,
                        logprobs: list[list[Any]]) -> list[Verdict]:
    """Each verdict with its P(met), matched by the order the reply wrote the items; unchanged when the values
    found do not match the items one to one (a tolerant parse of `met: yes` writes no JSON value)."""
    found = met_probabilities(logprobs, shape.met)
    try:
        ids = shape.written_ids(text)
    except (ValueError, KeyError, TypeError):
        return verdicts
    if len(found) != len(ids):
        return verdicts
    p = dict(zip(ids, found))
    return [replace(v, p_met=p.get(v.index)) for v in verdicts]


async def _ask(client: "ModelClient", request: Request, shape: VerdictShape, n: int, max_reasks: int,
               repeat: int = 0, shared_prefix: int = 0, counts: bool = False) -> JudgeResult:
    """A verdict for n criteria (or for the request's criterion alone) through the one structured-output loop.
    `counts` (judge.verdict.use: probability): the reply is counted a second time among the paths, `probability`
    when every verdict it gave carries a P(met), else `verdict` (its verdicts count 1 or 0)."""
    index = request.context.get("criterion")
    with call_context(**request.context):  # the transcripts name the criterion (None: all in one call)
        got = await ask_structured(client, request, lambda text: shape.parse(text, n),
                                   reask=lambda problem: shape.reask(problem, n), max_reasks=max_reasks,
                                   what="verdict", role="judge", repeat=repeat, shared_prefix=shared_prefix,
                                   lenient=lenient(shape, n))
    verdicts = got.value
    if verdicts is not None and got.logprobs:  # P(met) beside each verdict (judge/probability.py)
        verdicts = _with_probabilities(verdicts, shape, got.replies[-1], got.logprobs)
    if verdicts is not None and index is not None:
        verdicts = [replace(v, index=index) for v in verdicts]
    return JudgeResult(verdicts=verdicts, error=got.error, raw_replies=got.replies, attempts=got.attempts,
                       prompt_tokens=got.prompt_tokens, completion_tokens=got.completion_tokens, cost=got.cost,
                       cache_hits=got.cache_hits, paths=_paths(got.path, verdicts if counts else None))


def _paths(path: str | None, counted: list[Verdict] | None) -> dict[str, int]:
    """One reply's paths: how it was read (judge/structured.py) and, for `counted` verdicts, what they count."""
    out = {path: 1} if path else {}
    if path and counted is not None:
        out["probability" if counted and all(v.p_met is not None for v in counted) else "verdict"] = 1
    return out
