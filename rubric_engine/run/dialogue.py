"""Conversations with the candidate: scripted user turns from the data, or a simulated user, turn by turn.

Why apart from the pipeline: the pipeline takes a question through generate -> judge; for a conversation the
generate step is many calls, each depending on the replies before it. Every turn is one `ModelClient` call,
cached under its full message list: a killed run re-runs the question and replays each finished turn from the
cache (the same replies, so the same next requests), paying only for the turns it had not reached. Each turn's
request is its conversation's (shapes/: Conversation.requests, the method the plan of calls renders the first
turn with), its messages built in judge/dialogue.py.

A simulated user's reply becomes its turn as the verdict reads it (shapes/base.UserLines, `Verdict.user_lines`):
by default its words and the stop signal; a verdict that reads more (a hidden state, shapes/userstate.py) says
what a valid reply is: an invalid one is asked for once more (with the verdict's words why) and a second
invalid one is the question's user_error. The candidate is sent the user's words only.

A candidate failure at turn k propagates with `exc.turn = k` (the pipeline records it as the question's
candidate error, "turn k: ..."); the transcript so far stays on the outcome and goes into the record. A failed
or empty simulator reply is the question's `user_error` (recorded, counted, never judged).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pathlib import Path

from rubric_engine.datatypes import Question, StatedTurn, Turn
from rubric_engine.errors import AnswersError, FatalModelError, ModelCallError
from rubric_engine.models.client import CallResult, ModelClient
from rubric_engine.models.events import call_context
from rubric_engine.models.request import Request
from rubric_engine.models.redact import redact
from rubric_engine.run.record import Outcome
from rubric_engine.shapes.base import Conversation, Requests, Talk, UserLines, Verdict
from rubric_engine.shapes.registry import shape_for
from rubric_engine.spec.limits import MAX_REPLY_CHARS
from rubric_engine.spec.schema import BenchmarkSpec
from rubric_engine.store.layout import ANSWERS_FILE, iter_jsonl

__all__ = ["converse", "given_transcripts", "within_cap", "OversizedReply"]

class EmptyUserReply(ModelCallError):
    """The simulated user answered with no text: the session cannot go on (recorded, never cached)."""

    def __str__(self) -> str:
        return "the simulated user returned an empty reply"


class BadUserLine(ModelCallError):
    """The simulated user's reply is not valid as its verdict reads it (UserLines.check says why): asked once
    more, never cached."""

    def __init__(self, invalid: str, why: str) -> None:
        self.why, self.sentence = why, f"{invalid}: {why}"
        super().__init__("user", self.sentence, attempts=1)

    def __str__(self) -> str:
        return self.sentence


class OversizedReply(ModelCallError):
    """A reply past MAX_REPLY_CHARS (spec/limits.py): that question's error, never cached, never retried (the same
    request would buy the same runaway reply again), and never quoted into a judge prompt it could not fit."""

    def __init__(self, who: str, size: int) -> None:
        self.sentence = (f"the {who} returned a reply of {size} characters, over the limit of {MAX_REPLY_CHARS} "
                         "a reply may have; the question is not judged")
        super().__init__(who, self.sentence, attempts=1)

    def __str__(self) -> str:
        return self.sentence


def within_cap(who: str, text: str) -> None:
    """Refuse a reply too long to judge (the accept check of every candidate and simulated user call)."""
    if len(text) > MAX_REPLY_CHARS:
        raise OversizedReply(who, len(text))


def _accept_user(text: str) -> None:
    if not text.strip():
        raise EmptyUserReply("user", "the simulated user returned an empty reply", attempts=1)
    within_cap("simulated user", text)


def _add(o: Outcome, res: CallResult, role: str) -> None:
    """One call's tokens, cost (None once any call is unpriced: never a made-up zero) and cache hit."""
    if role == "user":
        tokens, cost, cached = o.user_tokens or (0, 0), o.user_cost, o.user_cached
    else:
        tokens, cost, cached = o.cand_tokens, o.cand_cost, o.cand_cached
    tokens = (tokens[0] + res.prompt_tokens, tokens[1] + res.completion_tokens)
    first = not (o.user_calls if role == "user" else o.cand_calls)
    cost = res.cost if first else (None if cost is None or res.cost is None else cost + res.cost)
    if role == "user":
        o.user_tokens, o.user_cost, o.user_cached, o.user_calls = tokens, cost, cached + int(res.cached), o.user_calls + 1
    else:
        o.cand_tokens, o.cand_cost, o.cand_cached, o.cand_calls = tokens, cost, cached + int(res.cached), o.cand_calls + 1


def _said(o: Outcome, said: list[dict[str, Any]], turn: Turn) -> None:
    """Append a turn to the transcript and to its messages, kept side by side so that no turn's request rebuilds
    the whole conversation (a long conversation stays linear in its turns, apart from what each request sends).
    A user's hidden state rides on its message as `state`: the simulator's view shows it, the candidate's drops
    it (judge/dialogue.py)."""
    assert o.transcript is not None
    o.transcript.append(turn)
    state = getattr(turn, "state", None)
    said.append({"role": turn.role, "content": turn.content, **({"state": state} if state is not None else {})})


async def _candidate_turn(o: Outcome, cand: ModelClient, request: Requests, said: list[dict[str, Any]],
                          accept: Callable[[str], None], repeat: int) -> None:
    """The candidate answers the conversation so far; its reply is appended to the transcript."""
    turn = o.cand_calls + 1  # every earlier candidate call of this conversation was a turn answered
    try:
        with call_context(turn=turn):  # the transcripts name the turn
            res = await cand.send(request(said), accept=accept, repeat=repeat)
    except ModelCallError as exc:  # FatalModelError included: the pipeline decides whether it stops the run
        exc.turn = turn  # type: ignore[attr-defined]
        o.response = None  # an unfinished conversation has no last reply to judge (its turns are in the transcript)
        got = getattr(exc, "call_result", None)
        if isinstance(got, CallResult):
            _add(o, got, "candidate")  # a rejected (empty) reply still cost its tokens
        raise
    _add(o, res, "candidate")
    o.truncated = o.truncated or res.finish_reason == "length"
    o.response = res.text
    _said(o, said, Turn("assistant", res.text))


def _user_accept(lines: UserLines) -> Callable[[str], None]:
    """The check of a simulated user's reply: some text within the cap, valid as its verdict reads it."""
    def accept(text: str) -> None:
        _accept_user(text)
        why = lines.check(text)
        if why is not None:
            raise BadUserLine(lines.invalid, why)
    return accept


async def _user_send(user: ModelClient, request: Request, lines: UserLines, repeat: int) -> list[CallResult]:
    """The user's calls of one turn, the accepted reply last: an invalid reply is asked for once more, with the
    bad reply and why (a failure carries the rejected replies as `exc.paid`, so their tokens count)."""
    accept = _user_accept(lines)
    try:
        return [await user.send(request, accept=accept, repeat=repeat)]
    except BadUserLine as exc:
        got = getattr(exc, "call_result", None)
        if not isinstance(got, CallResult):
            raise
        again = replace(request, messages=lines.reask(request.messages, got.text, exc.why))
        try:
            return [got, await user.send(again, accept=accept, repeat=repeat)]
        except ModelCallError as second:
            second.paid = [got]  # type: ignore[attr-defined]
            raise


async def _user_turn(lines: UserLines, o: Outcome, user: ModelClient, request: Requests,
                     said: list[dict[str, Any]], repeat: int) -> bool:
    """The simulated user speaks; False when the session is over (as its reply is read: its stop signal, a stop
    rule its state meets; or its failure)."""
    turn = sum(t.role == "user" for t in o.transcript or ()) + 1
    try:
        with call_context(turn=turn):  # the transcripts name the turn
            results = await _user_send(user, request(said), lines, repeat)
    except ModelCallError as exc:
        if isinstance(exc, FatalModelError) and exc.stops_run:
            raise
        for got in [*getattr(exc, "paid", []), getattr(exc, "call_result", None)]:
            if isinstance(got, CallResult):
                _add(o, got, "user")
        o.user_error = f"simulated user, turn {turn}: {redact(str(exc))}"
        return False
    for got in results:
        _add(o, got, "user")
    said_turn, ended = lines.read(results[-1].text)
    if said_turn is not None:
        _said(o, said, said_turn)
    if ended is not None:
        o.ended = ended
    return ended is None


async def converse(spec: BenchmarkSpec, q: Question, o: Outcome, cand: ModelClient, user: ModelClient | None,
                   accept: Callable[[str], None], repeat: int = 0, conversation: Conversation | None = None,
                   verdict: Verdict | None = None) -> None:
    """Run one conversation into `o` (transcript, response = the last reply, tokens, cost, cache hits, ended).
    The session's turn order is its conversation's (shapes/scripted.py, shapes/simulated.py), a user's reply read
    as its verdict reads it (`user_lines`); the run's plan passes both, else the spec's. This module makes each
    turn's call."""
    conversation = conversation or shape_for(spec).conversation
    lines = (verdict or shape_for(spec).verdict).user_lines(spec)
    cand_request = conversation.requests(spec, q, "candidate")  # the candidate's prefix rendered once
    said: list[dict[str, Any]] = []
    o.transcript = []
    if conversation.simulates_user:
        o.user_tokens = (0, 0)
    user_request = conversation.requests(spec, q, "user") if conversation.simulates_user else None

    async def user_turn() -> bool:
        assert user is not None and user_request is not None  # run/plan.py: a conversation that asks its user has one
        return await _user_turn(lines, o, user, user_request, said, repeat)

    def cut() -> None:
        o.ended = "max_turns"

    talk = Talk(user_says=lambda text: _said(o, said, Turn("user", text)),
                candidate=lambda: _candidate_turn(o, cand, cand_request, said, accept, repeat), user=user_turn,
                cut=cut)
    await conversation.converse(spec, q, talk)
    if o.response is None and o.user_error is None:
        o.user_error = "the simulated user ended the session before the candidate replied"


def given_transcripts(answers: str | None, from_run: str | None, id_field: str) -> dict[str, list[Turn]]:
    """The `transcript` of each row of an answers file (answers= or from_run's answers.jsonl), for judging a
    conversation again without talking again; a row without one is judged on its `response` alone."""
    path = Path(answers) if answers else Path(str(from_run)) / ANSWERS_FILE
    out: dict[str, list[Turn]] = {}
    for n, row in iter_jsonl(path):
        turns = row.get("transcript")
        if turns is None:
            continue
        if not isinstance(turns, list) or not all(isinstance(t, dict) and t.get("role") in ("user", "assistant")
                                                  and isinstance(t.get("content"), str) for t in turns):
            raise AnswersError(f"{path}: row {n}: 'transcript' must be a list of {{role: user|assistant, content: "
                               "text}; fix the row or drop its transcript")
        out[str(row.get(id_field))] = [StatedTurn(t["role"], t["content"], t["state"]) if isinstance(t.get("state"), dict)
                                       else Turn(t["role"], t["content"]) for t in turns]  # a user's hidden state kept
    return out
