"""The judge protocol: verdict schema, strict parsing / validation, re-asks and the response_format fallback.

Why so strict: a verdict is a list of binary hits aligned with the rubric items; a reply with one item
too few or too many, a duplicated id or a "maybe" would silently shift or invent hits. So a reply is used
only if it has exactly one boolean verdict per item (ids 1..n); otherwise the judge is re-asked with a
message saying exactly what was wrong, and after `max_reasks` re-asks the question is recorded as a judge
error (never padded, never defaulted). Invalid replies are rejected inside `ModelClient.complete`'s
`accept` hook, so they are never cached and a rerun asks again.
"""

from __future__ import annotations

import json
import re
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from .datatypes import Question
from .errors import FatalModelError, ModelCallError
from .prompts import judge_messages

if TYPE_CHECKING:  # spec.py imports nothing from here; this keeps the import graph one-way
    from .models import CallResult, ModelClient
    from .spec import BenchmarkSpec

__all__ = [
    "Verdict",
    "JudgeResult",
    "VerdictError",
    "VerdictReply",
    "CriterionVerdict",
    "verdict_schema",
    "RESPONSE_FORMAT",
    "FATAL_STATUSES",
    "parse_verdict",
    "reask_message",
    "judge_response",
    "uses_json_schema",
]

DEFAULT_MAX_REASKS = 2
FATAL_STATUSES = frozenset({401, 403, 404})  # same failure for every question: stop the run
_FORMAT = '{"criteria": [{"id": 1, "reasoning": "...", "met": true}, ...]}'


class CriterionVerdict(BaseModel):
    # One item of the verdict JSON; field order puts the reasoning before the decision. (Comments, not a
    # docstring: pydantic would send a docstring to the judge as the schema description.)
    model_config = ConfigDict(extra="forbid", title="criterion_verdict")
    id: int = Field(description="the criterion number, 1..n")
    reasoning: str = Field(description="short reasoning, written before deciding")
    met: bool = Field(description="true if the criterion applies to the response, else false")


class VerdictReply(BaseModel):
    # The whole verdict JSON: {"criteria": [...]} with one entry per rubric item, ids 1..n.
    model_config = ConfigDict(extra="forbid", title="verdict")
    criteria: list[CriterionVerdict] = Field(description="one entry per criterion, ids 1..n in order")


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """Replace $ref with the definition: some OpenAI-compatible servers' grammar engines lack $ref."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline_refs(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


def verdict_schema() -> dict[str, Any]:
    """JSON Schema of the verdict for OpenAI strict mode: every object closed, every property required."""
    schema = VerdictReply.model_json_schema()
    return _inline_refs(schema, schema.get("$defs", {}))


RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "verdict", "schema": verdict_schema(), "strict": True},
}


@dataclass(frozen=True)
class Verdict:
    index: int  # 1-based criterion number
    reasoning: str
    hit: bool


@dataclass
class JudgeResult:
    """Outcome of judging one response. verdicts is None exactly when error is set.

    attempts = judge replies asked for (1 + re-asks; HTTP retries not counted); tokens and cost are summed
    over every reply received (cost None when any reply's cost is unknown); cache_hits = replies from cache.
    """

    verdicts: list[Verdict] | None
    error: str | None
    raw_replies: list[str] = field(default_factory=list)
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    cache_hits: int = 0


class VerdictError(ValueError):
    """A judge reply that cannot be used; the message says what was wrong (it is sent back to the judge)."""


# -- parsing ------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)


def _extract_json(text: str) -> Any:
    """The one JSON object in a reply: fences stripped, surrounding prose tolerated."""
    candidates = [m.group(1) for m in _FENCE.finditer(text) if "{" in m.group(1)]
    body = candidates[0] if candidates else text
    body = body.strip()
    try:
        return json.loads(body)
    except ValueError:
        pass
    start, end = body.find("{"), body.rfind("}")
    if start < 0:
        raise VerdictError("the reply contains no JSON object")
    try:
        return json.loads(body[start:end + 1] if end > start else body[start:])
    except json.JSONDecodeError as exc:
        raise VerdictError(f"the reply is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") \
            from None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _as_bool(value: Any) -> bool | None:
    """true/false, 0/1 or "0"/"1"; anything else (e.g. "yes", 0.5) is not a decision."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return value.strip() == "1"
    return None


def _fmt_ids(ids: list[int]) -> str:
    return ", ".join(str(i) for i in ids)


def parse_verdict(text: str, n: int) -> list[Verdict]:
    """Parse and validate a reply for n criteria; returns verdicts sorted by id or raises VerdictError."""
    data = _extract_json(text)
    if not isinstance(data, dict) or not isinstance(data.get("criteria"), list):
        raise VerdictError('the JSON must be an object with a "criteria" list')
    items = data["criteria"]
    problems: list[str] = []
    verdicts: list[Verdict] = []
    for pos, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            problems.append(f"item #{pos} is not an object")
            continue
        ident = _as_int(item.get("id"))
        if ident is None:
            problems.append(f'item #{pos} has no integer "id" (got {item.get("id")!r})')
            continue
        met = _as_bool(item.get("met"))
        if met is None:
            problems.append(f'id {ident}: "met" must be true or false (got {item.get("met")!r})')
        reasoning = item.get("reasoning")
        if not isinstance(reasoning, str):
            problems.append(f'id {ident}: "reasoning" must be a string (got {reasoning!r})')
        if met is not None and isinstance(reasoning, str):
            verdicts.append(Verdict(index=ident, reasoning=reasoning, hit=met))
    ids = [_as_int(i.get("id")) for i in items if isinstance(i, dict)]
    valid_ids = [i for i in ids if i is not None]
    counts = Counter(valid_ids)
    dupes = sorted(i for i, c in counts.items() if c > 1)
    out_of_range = sorted(i for i in counts if not 1 <= i <= n)
    missing = [i for i in range(1, n + 1) if i not in counts]
    if len(items) != n:
        problems.insert(0, f"expected exactly {n} items (one per criterion), got {len(items)}")
    if missing:
        problems.append(f"missing id(s): {_fmt_ids(missing)}")
    if dupes:
        problems.append(f"duplicate id(s): {_fmt_ids(dupes)}")
    if out_of_range:
        problems.append(f"id(s) out of range 1..{n}: {_fmt_ids(out_of_range)}")
    if problems:
        shown = problems[:6] + ([f"and {len(problems) - 6} more problem(s)"] if len(problems) > 6 else [])
        raise VerdictError("; ".join(shown).replace("\n", " "))
    return sorted(verdicts, key=lambda v: v.index)


def reask_message(problem: str, n: int) -> str:
    """The user turn sent after an unusable reply: what was wrong, then the required format."""
    return (
        f"Your previous reply could not be used: {problem}. Reply again with only one JSON object of the form "
        f"{_FORMAT} containing exactly {n} items, ids 1 to {n} each exactly once (one per criterion, in "
        f'order), each with a "reasoning" string and "met" true or false. No other text.'
    )


# -- calling ------------------------------------------------------------------------------------------

_NO_JSON_SCHEMA: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()


def uses_json_schema(client: Any) -> bool:
    """False once this client's server has rejected response_format json_schema (remembered per client)."""
    return not _NO_JSON_SCHEMA.get(client, False)


async def _complete(client: "ModelClient", messages: list[dict[str, str]],
                    accept: Callable[[str], None]) -> "CallResult":
    """One judge reply: json_schema first; on HTTP 400 retry at once without response_format."""
    if not uses_json_schema(client):
        return await client.complete(messages, response_format=None, accept=accept)
    try:
        return await client.complete(messages, response_format=RESPONSE_FORMAT, accept=accept)
    except FatalModelError as exc:
        if exc.status != 400 or "context window" in str(exc):  # too long a prompt: no format would help
            raise
    try:
        result = await client.complete(messages, response_format=None, accept=accept)
    except VerdictError:
        _NO_JSON_SCHEMA[client] = True  # the server answered: it was the response_format it refused
        raise
    _NO_JSON_SCHEMA[client] = True
    return result


def _usage_of(exc: BaseException) -> Any:
    """The CallResult a rejected reply came with, if the model client attached one."""
    for name in ("result", "call_result"):
        value = getattr(exc, name, None)
        if value is not None:
            return value
    return None


async def judge_response(client: "ModelClient", spec: "BenchmarkSpec", question: Question, response: str, *,
                         max_reasks: int | None = None) -> JudgeResult:
    """Judge one response; see the module docstring. Raises FatalModelError for 401/403/404 and for calls
    refused before any request (no key): both would fail the same way for every question."""
    n = len(question.criteria)
    if max_reasks is None:
        max_reasks = getattr(spec.judge, "max_reasks", None)
        max_reasks = DEFAULT_MAX_REASKS if max_reasks is None else int(max_reasks)
    messages = judge_messages(spec, question, response)
    out = JudgeResult(verdicts=None, error=None)
    costs: list[float | None] = []

    def add(result: Any) -> None:
        out.prompt_tokens += int(getattr(result, "prompt_tokens", 0) or 0)
        out.completion_tokens += int(getattr(result, "completion_tokens", 0) or 0)
        costs.append(getattr(result, "cost", None))
        out.cache_hits += int(bool(getattr(result, "cached", False)))

    def finish(verdicts: list[Verdict] | None, error: str | None) -> JudgeResult:
        out.verdicts, out.error = verdicts, error
        out.cost = None if not costs or None in costs else float(sum(c for c in costs if c is not None))
        return out

    problem = ""
    for _ in range(max_reasks + 1):
        seen: list[str] = []

        def accept(text: str) -> None:
            seen.append(text)
            parse_verdict(text, n)

        out.attempts += 1
        try:
            result = await _complete(client, messages, accept)
        except VerdictError as exc:
            bad = seen[-1] if seen else ""
            out.raw_replies.append(bad)
            used = _usage_of(exc)
            if used is not None:
                add(used)
            problem = str(exc)
            messages = messages + [{"role": "assistant", "content": bad},
                                   {"role": "user", "content": reask_message(problem, n)}]
            continue
        except FatalModelError as exc:
            if exc.status in FATAL_STATUSES or exc.status is None:  # None: refused before sending (no key)
                raise
            return finish(None, _one_line(f"judge call failed: {exc}"))
        except ModelCallError as exc:
            return finish(None, _one_line(f"judge call failed: {exc}"))
        out.raw_replies.append(result.text)
        add(result)
        return finish(parse_verdict(result.text, n), None)
    return finish(None, _one_line(f"invalid verdict after {out.attempts} replies: {problem}"))


def _one_line(text: str) -> str:
    return " ".join(text.split())
