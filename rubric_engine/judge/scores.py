"""Scores on a scale: the judge answers one number in a declared range, per reply or per candidate turn.

Why strict: a verdict is one number read from one place, the JSON field `judge.verdict.field` (sent as a
json_schema like the criteria verdict) or, for a judge without structured output, group 1 of
`judge.verdict.pattern` (e.g. `[[8]]`; a list of patterns is tried in order and the first that matches decides,
as FastChat reads `[[8]]` and, failing that, `[8]`). No number, two different numbers, a non-number or a value outside
[min, max] is re-asked through the one structured-output loop (judge/structured.py) with what was wrong, then
recorded as that turn's judge error; never clipped, rounded or defaulted.

`judge.scope` says what one judgment grades: `conversation` (the whole exchange, graded once, with the last
reply as `response`), `last_turn` (the same call, asked about the last reply), `each_turn` (one call per
candidate turn k, the prompt showing the conversation through reply k as `transcript`, `turn` = k, and the
turn's own reference as `reference` when the data gives one per turn), `turn` (that one call for the candidate
turn `judge.turn` only; a session that ended sooner is the question's judge error, with no call). A failed turn
is recorded and counted; the other turns keep their scores. Repeats and jurors are combined per turn by the mean of their scores; a
turn any of whose calls failed is a failed turn (never scored on the remaining votes). Each judgment's request is
`score_request`'s (the plan of calls renders the same, shapes/score.py), carrying the scale's values as what a
valid answer looks like (models/request.Number).
"""

from __future__ import annotations

import asyncio
import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rubric_engine.datatypes import Question
from rubric_engine.judge.grading import JudgeResult, add_usage
from rubric_engine.judge.prompts import PROMPT_ERRORS, judge_messages, unrenderable
from rubric_engine.judge.probability import expected_score, json_value, pattern_prefix
from rubric_engine.judge.structured import ask_structured
from rubric_engine.models.events import set_call_context
from rubric_engine.judge.verdicts import VerdictError, extract_json
from rubric_engine.models.request import Number, Request
from rubric_engine.records import TurnScoreRecord
from rubric_engine.scoring.checks import compile_re2

if TYPE_CHECKING:
    from rubric_engine.models.client import ModelClient
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["ScoreShape", "ScoreVerdict", "TurnScore", "ScoreResult", "score_shape", "judge_scores", "combine_scores",
           "turn_units", "score_request", "score_requests"]

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class ScoreVerdict:
    score: float
    reasoning: str


@dataclass
class TurnScore:
    """One judgment: the candidate turn it grades (1-based), its score or its error, never both."""

    turn: int
    score: float | None
    reasoning: str | None = None
    error: str | None = None
    expected: float | None = None  # E[score] over the score tokens' log-probabilities (judge/probability.py)

    def record(self) -> TurnScoreRecord:
        return {"turn": self.turn, "score": self.score, "reasoning": self.reasoning, "error": self.error}


@dataclass
class ScoreResult(JudgeResult):
    """A question's score judgments. `verdicts` stays None (there are no criteria); `error` is set only when
    no turn got a score. `votes[judge][repeat]` keeps every call's turn scores when graded more than once."""

    turns: list[TurnScore] = field(default_factory=list)
    score_votes: dict[str, list[list[float | None]]] = field(default_factory=dict)


def _fmt(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class ScoreShape:
    """How the spec asks for a number: range, JSON field (or pattern) and the reasoning field."""

    lo: float
    hi: float
    field: str = "score"
    reasoning: str = "reasoning"
    pattern: str | tuple[str, ...] | None = None  # several: tried in order, the first that matches decides

    def _patterns(self) -> tuple[str, ...]:
        return (self.pattern,) if isinstance(self.pattern, str) else self.pattern or ()

    def _check(self, value: float) -> float:
        if not math.isfinite(value) or not self.lo <= value <= self.hi:
            raise VerdictError(f"the score {_fmt(value)} is outside the scale {_fmt(self.lo)} to {_fmt(self.hi)}")
        return value

    def parse(self, text: str) -> ScoreVerdict:
        """The one number of a reply, or VerdictError worded for the judge."""
        if self.pattern is not None:
            found: list[str] = []
            for pattern in self._patterns():  # a fallback is read only when every pattern before it finds nothing
                found = [m.group(1) for m in compile_re2(pattern).finditer(text)]  # RE2: linear time
                if found:
                    break
            if not found:
                raise VerdictError("the reply has no rating in the required format "
                                   f"(pattern {' or '.join(self._patterns())})")
            numbers = []
            for raw in found:
                if raw is None or not _NUMBER.fullmatch(raw.strip()):
                    raise VerdictError(f"the rating {raw!r} is not a number")
                numbers.append(float(raw))
            if len(set(numbers)) > 1:
                raise VerdictError(f"the reply gives {len(set(numbers))} different ratings "
                                   f"({', '.join(map(_fmt, dict.fromkeys(numbers)))}); give exactly one")
            return ScoreVerdict(self._check(numbers[0]), text)
        data = extract_json(text, self.field)
        if not isinstance(data, dict) or self.field not in data:
            raise VerdictError(f'the JSON must be one object with a "{self.field}" number')
        value, why = data[self.field], data.get(self.reasoning, "")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise VerdictError(f'"{self.field}" must be a number (got {value!r})')
        if not isinstance(why, str):
            raise VerdictError(f'"{self.reasoning}" must be a string (got {why!r})')
        return ScoreVerdict(self._check(float(value)), why)

    def reask(self, problem: str) -> str:
        """The user turn sent after an unusable reply: what was wrong, then the required format."""
        scale = f"a number from {_fmt(self.lo)} to {_fmt(self.hi)}"
        if self.pattern is not None:
            return (f"Your previous reply could not be used: {problem}. Reply again: your explanation, then exactly "
                    f"one rating, {scale}, in the required format (e.g. [[{_fmt(self.hi)}]]).")
        return (f"Your previous reply could not be used: {problem}. Reply again with only one JSON object of the "
                f'form {{"{self.reasoning}": "...", "{self.field}": {_fmt(self.hi)}}}: "{self.field}" {scale}. '
                "No other text.")

    def response_format(self) -> dict[str, Any] | None:
        """A json_schema for the JSON field; None for a pattern (the judge writes free text)."""
        if self.pattern is not None:
            return None
        schema = {"type": "object", "additionalProperties": False, "required": [self.reasoning, self.field],
                  "properties": {self.reasoning: {"type": "string"}, self.field: {"type": "number"}}}
        return {"type": "json_schema", "json_schema": {"name": "score", "strict": True, "schema": schema}}

    def answer(self) -> Number:
        """What a valid answer looks like, carried by the judge's request (models/request.py): a whole number on
        the scale (the low end when the scale holds none), in the JSON field or written where the pattern reads."""
        values = tuple(range(math.ceil(self.lo), math.floor(self.hi) + 1)) or (self.lo,)
        return Number(values, self.field if self.pattern is None else None, self.reasoning, self._read)

    def _read(self, text: str) -> float:
        return self.parse(text).score


@functools.lru_cache(maxsize=32)
def _shape(lo: float, hi: float, field_: str, reasoning: str, pattern: str | tuple[str, ...] | None) -> ScoreShape:
    return ScoreShape(lo, hi, field_, reasoning, pattern)


def score_shape(spec: "BenchmarkSpec") -> ScoreShape:
    v = spec.judge.verdict
    assert v.min is not None and v.max is not None  # spec/scales.py refuses a score verdict without its range
    pattern = tuple(v.pattern) if isinstance(v.pattern, list) else v.pattern  # hashable, for the cache
    return _shape(float(v.min), float(v.max), v.field, v.reasoning, pattern)


Transcript = Sequence[Mapping[str, str]]
Unit = tuple[int, str, list[dict[str, str]], dict[str, Any]]  # the turn, the reply graded, what is shown, extras


def turn_units(spec: "BenchmarkSpec", question: Question, response: str,
               transcript: Transcript | None) -> list[Unit]:
    """(turn, the reply graded, the transcript shown, extra template variables) for each judgment the scope
    asks for: one per candidate reply under each_turn, the chosen one under turn, else one for the whole
    exchange."""
    whole = [{"role": t["role"], "content": t["content"]} for t in transcript or ()]
    replies = [i for i, t in enumerate(whole) if t["role"] == "assistant"]
    refs = question.references
    if spec.judge.scope == "turn":  # the chosen turn alone, shown as each_turn shows it ([] when never reached)
        replies = replies[spec.judge.turn - 1:spec.judge.turn]
    if spec.judge.scope not in ("each_turn", "turn") or not replies:
        n = max(1, len(replies))
        extra: dict[str, Any] = {"turn": n, "references": list(refs)}
        if refs and spec.judge.scope == "last_turn":
            extra["reference"] = refs[n - 1] if n <= len(refs) else question.reference
        return [(n, response, whole, extra)]
    units = []
    for k, pos in enumerate(replies, start=spec.judge.turn if spec.judge.scope == "turn" else 1):
        extra = {"turn": k, "references": list(refs), "reference": refs[k - 1] if k <= len(refs) else question.reference}
        units.append((k, whole[pos]["content"], whole[:pos + 1], extra))
    return units


def score_request(spec: "BenchmarkSpec", question: Question, unit: Unit) -> Request:
    """The judge's request for one judgment (`turn_units`): its messages, the score's response_format and what a
    valid answer looks like."""
    turn, reply, shown, extra = unit
    shape = score_shape(spec)
    return Request(judge_messages(spec, question, reply, transcript=shown, extra=extra), "judge", shape.answer(),
                   shape.response_format(), f"a score on the scale, turn {turn}", context={"turn": turn})


def score_requests(spec: "BenchmarkSpec", question: Question, response: str,
                   transcript: Transcript | None) -> list[Request]:
    """Every judge request of one grading, one per judgment the scope asks for (the score verdict's
    judge_requests, shapes/score.py); a run renders them one by one (`judge_scores`: a turn whose prompt cannot be
    made is that turn's error)."""
    return [score_request(spec, question, unit) for unit in turn_units(spec, question, response, transcript)]


async def _one(client: "ModelClient", spec: "BenchmarkSpec", question: Question, unit: Unit,
               repeat: int) -> tuple[TurnScore, JudgeResult]:
    turn = unit[0]
    set_call_context(turn=turn)  # this task's calls grade turn `turn` (the run's transcripts say so)
    shape = score_shape(spec)
    try:
        request = score_request(spec, question, unit)
    except PROMPT_ERRORS as exc:  # this turn's prompt only: its error, before any call; the run goes on
        return TurnScore(turn, None, None, unrenderable(exc)), JudgeResult(verdicts=None, error=unrenderable(exc))
    got = await ask_structured(client, request, shape.parse, reask=shape.reask, max_reasks=spec.judge.max_reasks,
                               what="score", role="judge", repeat=repeat)
    usage = JudgeResult(verdicts=None, error=got.error, raw_replies=got.replies, attempts=got.attempts,
                        prompt_tokens=got.prompt_tokens, completion_tokens=got.completion_tokens, cost=got.cost,
                        cache_hits=got.cache_hits, paths={got.path: 1} if got.path else {})
    if got.value is None:
        return TurnScore(turn, None, None, got.error), usage
    before = json_value(shape.field) if shape.pattern is None else pattern_prefix(shape.pattern)
    expected = expected_score(got.logprobs, before, shape.answer().values) if got.logprobs and before else None
    # judge.verdict.use: probability scores the expected value where the server gave one, the number written else
    score = expected if expected is not None and spec.judge.verdict.use == "probability" else got.value.score
    return TurnScore(turn, score, got.value.reasoning, expected=expected), usage


async def judge_scores(client: "ModelClient", spec: "BenchmarkSpec", question: Question, response: str,
                       transcript: Transcript | None = None, repeat: int = 0) -> ScoreResult:
    """Every judgment the scope asks for, started together (they pipeline under the client's concurrency).
    Raises FatalModelError only when it stops the run, as judge_response does."""
    k, n = spec.judge.turn, sum(1 for t in transcript or () if t["role"] == "assistant")
    if spec.judge.scope == "turn" and k is not None and n < k:  # a session that ended before the chosen turn
        error = f"judge.turn {k}: the conversation has only {n} candidate turn(s)"  # recorded, counted; no call
        return ScoreResult(verdicts=None, error=error, turns=[TurnScore(k, None, None, error)])
    units = turn_units(spec, question, response, transcript)
    done = await asyncio.gather(*(_one(client, spec, question, unit, repeat) for unit in units))
    out = ScoreResult(verdicts=None, error=None, turns=[t for t, _ in done])
    add_usage(out, [u for _, u in done])
    out.raw_replies = [r for _, u in done if u.error for r in u.raw_replies]  # kept for the failed turns only
    _settle(out)
    return out


def _settle(out: ScoreResult) -> None:
    """The question is a judge error only when no turn got a score (the turns say which failed and why)."""
    failed = [t for t in out.turns if t.error]
    if failed and len(failed) == len(out.turns):
        more = f" (+{len(failed) - 1} more turns failed)" if len(failed) > 1 else ""
        out.error = f"turn {failed[0].turn}: {failed[0].error}{more}" if len(out.turns) > 1 else failed[0].error


def combine_scores(results: Sequence[ScoreResult], names: Sequence[str], repeats: int) -> ScoreResult:
    """Judges x repeats for one question: per turn, the mean of every call's score; a turn any call failed
    is a failed turn, with the first failure as its error."""
    out = ScoreResult(verdicts=None, error=None)
    add_usage(out, list(results))
    for j, name in enumerate(names):
        out.score_votes[name] = [[t.score for t in r.turns] for r in results[j * repeats:(j + 1) * repeats]]
    for pos, first in enumerate(results[0].turns):
        votes = [(n, r.turns[pos]) for n, r in zip([n for n in names for _ in range(repeats)], results)]
        bad = [(n, t) for n, t in votes if t.error]
        if bad:
            more = f" (+{len(bad) - 1} more failed calls)" if len(bad) > 1 else ""
            out.turns.append(TurnScore(first.turn, None, None, f"judge {bad[0][0]}: {bad[0][1].error}{more}"))
        else:
            scores = [t.score for _, t in votes if t.score is not None]
            means = [t.expected for _, t in votes if t.expected is not None]
            out.turns.append(TurnScore(first.turn, sum(scores) / len(scores), first.reasoning,
                                       expected=sum(means) / len(means) if len(means) == len(votes) else None))
    _settle(out)
    return out

