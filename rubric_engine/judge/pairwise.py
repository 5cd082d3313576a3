"""Pairwise judging: the baseline's reply, then one judge call per game (both orders), through the one loop.

Why here: under `judge.verdict.kind: pairwise` a question is judged by comparing the candidate's reply with
a baseline's (an answers file, or a `baseline` model called once per question and cached like every call).
Each game is one cached request (`game_requests`, which the plan of calls renders too) through
judge/structured.ask_structured: the label is read with the
declared pattern(s) from the declared labels (scoring/pairwise.py); an unreadable, ambiguous or undeclared
label is re-asked, then the game is recorded as failed, and a question with a failed game is a judge error
(recorded, counted, never scored on its other game). The record fields (`games`, `baseline_response`,
`score`, `weight`) are built here too, as pure data; the shape's strategy (shapes/pairwise.py) adds them to
the record with the baseline's tokens, cost and cache hits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from rubric_engine.datatypes import Question
from rubric_engine.errors import FatalModelError, ModelCallError
from rubric_engine.judge.grading import JudgeResult
from rubric_engine.judge.prompts import PROMPT_ERRORS, candidate_messages, pair_messages, unrenderable
from rubric_engine.judge.structured import ask_structured
from rubric_engine.models.events import set_call_context
from rubric_engine.models.redact import redact
from rubric_engine.models.request import Labels, Request
from rubric_engine.record.pairwise import Game as StoredGame
from rubric_engine.record.pairwise import PairwiseJudgment
from rubric_engine.record.types import Judged
from rubric_engine.records import SampleRecord
from rubric_engine.scoring.pairwise import ORDERS, patterns_of, question_value, read_label, written_form

if TYPE_CHECKING:
    from rubric_engine.models.client import ModelClient
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["BaselineReply", "Game", "PairResult", "baseline_reply", "baseline_request", "game_requests", "judge_pair",
           "pair_fields", "pair_judged"]


@dataclass
class BaselineReply:
    """The baseline's reply to one question (text None exactly when error is set) and what it cost."""

    text: str | None
    error: str | None = None
    tokens: tuple[int, int] = (0, 0)
    cost: float | None = None
    cached: int = 0


@dataclass(frozen=True)
class Game:
    order: str  # baseline_first (A = baseline, B = candidate) or candidate_first
    label: str | None
    reasoning: str | None  # the judge's accepted reply
    error: str | None


@dataclass
class PairResult(JudgeResult):
    """A question's pairwise result: `verdicts` is [] when every game has a label (None with an error)."""

    games: list[Game] = field(default_factory=list)
    baseline: BaselineReply | None = None


def _accept(text: str) -> None:
    if not text.strip():
        raise ModelCallError("baseline", "the baseline returned an empty reply", attempts=1)


def baseline_request(spec: "BenchmarkSpec", question: Question) -> Request:
    """The baseline model's request: the messages a single reply's candidate gets."""
    return Request(candidate_messages(spec, question), "baseline", title="baseline prompt")


async def baseline_reply(client: "ModelClient | None", answers: Mapping[str, str] | None, spec: "BenchmarkSpec",
                         question: Question) -> BaselineReply:
    """From the answers (loaded and checked complete before the run), or the baseline model's cached reply to
    the same messages the candidate gets."""
    if client is None:
        text = (answers or {}).get(question.id)
        return BaselineReply(text, None if text else "no baseline answer for this question")
    try:
        res = await client.send(baseline_request(spec, question), accept=_accept)
    except FatalModelError as exc:
        if exc.stops_run:
            raise
        return BaselineReply(None, redact(str(exc)))
    except ModelCallError as exc:
        return BaselineReply(None, redact(str(exc)))
    return BaselineReply(res.text, None, (res.prompt_tokens, res.completion_tokens), res.cost, int(res.cached))


def _reask(problem: str, written: list[str]) -> str:
    return (f"Your verdict could not be read: {problem}. Reply again and end with exactly one of: "
            f"{', '.join(written)}.")


_GAMES = {"baseline_first": "game 1: the baseline's reply as A",
          "candidate_first": "game 2 (position swap): the candidate's reply as A"}


def game_requests(spec: "BenchmarkSpec", question: Question, response: str, baseline: str) -> list[Request]:
    """One judge request per game, in the order they are played (the baseline's reply as A first, then, with
    judge.verdict.swap, the candidate's), each with the labels as the judge must write them (the pairwise
    verdict's judge_requests, shapes/pairwise.py)."""
    v = spec.judge.verdict
    patterns = patterns_of(v.pattern)
    written = Labels(tuple(written_form(lab, patterns) or lab for lab in v.labels))
    return [Request(pair_messages(spec, question, *((baseline, response) if o == "baseline_first"
                                                    else (response, baseline))),
                    "judge", written, title=f"pairwise, {_GAMES[o]}", context={"order": o})
            for o in (ORDERS if v.swap else ORDERS[:1])]


async def judge_pair(client: "ModelClient", spec: "BenchmarkSpec", question: Question, response: str,
                     base: BaselineReply) -> PairResult:
    """Every game of one question, started together (they pipeline under the judge client's concurrency)."""
    out = PairResult(verdicts=None, error=None, baseline=base)
    if base.text is None:
        out.error = f"baseline: {base.error}"
        return out
    v = spec.judge.verdict
    patterns, labels = patterns_of(v.pattern), list(v.labels)
    try:
        requests = game_requests(spec, question, response, str(base.text))
    except PROMPT_ERRORS as exc:  # this row's prompt only: its error, before any call; the run goes on
        out.error = unrenderable(exc)
        return out
    orders = [str(r.context["order"]) for r in requests]

    async def game(request: Request) -> Any:
        set_call_context(**request.context)  # this game's task: the run's transcripts name the order
        answer = request.answer
        assert isinstance(answer, Labels)
        return await ask_structured(client, request, lambda text: read_label(text, patterns, labels),
                                    reask=lambda problem: _reask(problem, list(answer.written)),
                                    max_reasks=spec.judge.max_reasks, what="verdict", role="judge")

    results = await asyncio.gather(*(game(r) for r in requests))
    costs = [r.cost for r in results]
    for order, r in zip(orders, results):
        out.games.append(Game(order, r.value, r.replies[-1] if r.value is not None else None, r.error))
        out.raw_replies += r.replies
        out.attempts += r.attempts
        out.prompt_tokens += r.prompt_tokens
        out.completion_tokens += r.completion_tokens
        out.cache_hits += r.cache_hits
        if r.path:  # how the game's label was obtained (judge/structured.py)
            out.paths[r.path] = out.paths.get(r.path, 0) + 1
    out.judge_paths = {client.spec.name: dict(out.paths)} if out.paths else {}
    out.cost = None if None in costs else float(sum(c for c in costs if c is not None))
    failed = [(i, g) for i, g in enumerate(out.games, 1) if g.error]
    if failed:
        i, g = failed[0]
        more = f" (+{len(failed) - 1} more failed games)" if len(failed) > 1 else ""
        out.error = f"game {i} ({g.order}): {g.error}{more}"
    else:
        out.verdicts = []
    return out


def pair_judged(spec: "BenchmarkSpec", jr: PairResult, clip: Any = str) -> Judged:
    """What a comparison adds to a record: its games and the baseline's reply and, when every game has a label,
    the question's score (the weighted mean of its games from the candidate's side) and `weight` (their count).
    `clip` bounds a kept judge reply."""
    base = jr.baseline
    judgment = PairwiseJudgment(
        tuple(StoredGame(g.order, g.label, redact(clip(g.reasoning)) if g.reasoning else None,
                         redact(g.error) if g.error else None) for g in jr.games),
        redact(base.text) if base else None)
    if jr.error is not None:
        return Judged(judgment)
    score, weight = question_value([(g.order, str(g.label)) for g in jr.games], spec.judge.verdict.strong_weight)
    return Judged(judgment, score, weight)


def pair_fields(spec: "BenchmarkSpec", jr: PairResult, clip: Any = str) -> SampleRecord:
    """pair_judged as record fields: baseline_response, games and, when scored, the score fields (with the empty
    item fields a score-only record has)."""
    judged = pair_judged(spec, jr, clip)
    out = cast(SampleRecord, judged.judgment.encoded())
    if judged.weight is not None:
        out.update({"abilities": {}, "score": judged.score, "weight": judged.weight, "failed_rules": [],
                    "catastrophic": False})
    return out
