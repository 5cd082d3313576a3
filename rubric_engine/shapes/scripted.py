"""A scripted conversation (`conversation.mode: scripted`): the data row's user turns, in order, each answered
by the candidate; the candidate writes as many replies as the row has turns.

Why here: the turn order of a scripted session and the candidate's request at each turn, which the run sends
and the dry run and `prompts` show the first of; the messages themselves are judge/dialogue.py's, the calls
run/dialogue.py's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from rubric_engine.datatypes import Question
from rubric_engine.judge.dialogue import candidate_prefix, candidate_view
from rubric_engine.models.request import Request
from rubric_engine.record.types import Record, Transcript
from rubric_engine.shapes.base import Conversation, Message, Requests, Talk

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Scripted", "Session"]


class Session(Conversation):
    """What every conversation shares: a transcript the judge sees, `prompts`' heading."""
    talks = True

    def requests(self, spec: "BenchmarkSpec", question: Question, role: str = "candidate") -> Requests:
        """The candidate's request at each turn: its prefix (rendered once per session), then the turns so far."""
        prefix = candidate_prefix(spec, question)
        return lambda said: Request(candidate_view(prefix, said), "candidate")

    def titled(self, request: Request, calls: int) -> Request:
        """The candidate's first request as `prompts` heads it, standing for `calls` calls."""
        return replace(request, title=f"candidate prompt ({self.name} conversation: the first turn; later turns add "
                                      "the replies)", calls=calls)

    def stored_transcript(self, rec: Record) -> Transcript | None:
        """The record's session (None: it never started, or answers without a transcript were judged)."""
        return rec.reply if isinstance(rec.reply, Transcript) and rec.stored("transcript") else None


class Scripted(Session):
    name = "scripted"

    def first_request(self, spec: "BenchmarkSpec", question: Question, role: str = "candidate") -> Request:
        """The candidate's first turn, standing for one call per user turn of the row."""
        first = [{"role": "user", "content": question.turns[0]}] if question.turns else []
        return self.titled(self.requests(spec, question, role)(first), len(question.turns))

    def planned_transcript(self, spec: "BenchmarkSpec", question: Question, reply: str) -> list[Message] | None:
        """The row's user turns, each answered by `reply`."""
        return [m for text in question.turns for m in ({"role": "user", "content": text},
                                                       {"role": "assistant", "content": reply})]

    async def converse(self, spec: "BenchmarkSpec", question: Question, talk: Talk) -> None:
        for text in question.turns:
            talk.user_says(text)
            await talk.candidate()
