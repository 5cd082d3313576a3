"""A scripted conversation (`conversation.mode: scripted`): the data row's user turns, in order, each answered
by the candidate; the candidate writes as many replies as the row has turns.

Why here: the turn order of a scripted session and what the dry run and `prompts` show of it; the messages
themselves are judge/dialogue.py's, the calls run/dialogue.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rubric_engine.datatypes import Question
from rubric_engine.judge.dialogue import candidate_prefix, candidate_view
from rubric_engine.record.types import Record, Transcript
from rubric_engine.shapes.base import Conversation, Message, Talk

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Scripted", "Session"]


class Session(Conversation):
    """What every conversation shares: a transcript the judge sees, `prompts`' heading."""
    talks = True

    def shown_title(self) -> str:
        return f" ({self.name} conversation: the first turn; later turns add the replies)"

    def stored_transcript(self, rec: Record) -> Transcript | None:
        """The record's session (None: it never started, or answers without a transcript were judged)."""
        return rec.reply if isinstance(rec.reply, Transcript) and rec.stored("transcript") else None


class Scripted(Session):
    name = "scripted"

    def first_request(self, spec: "BenchmarkSpec", question: Question, role: str = "candidate") -> tuple[list[Message], int]:
        """The candidate's first turn and one call per user turn of the row."""
        first = [{"role": "user", "content": question.turns[0]}] if question.turns else []
        return candidate_view(candidate_prefix(spec, question), first), len(question.turns)

    def planned_transcript(self, spec: "BenchmarkSpec", question: Question, reply: str) -> list[Message] | None:
        """The row's user turns, each answered by `reply`."""
        return [m for text in question.turns for m in ({"role": "user", "content": text},
                                                       {"role": "assistant", "content": reply})]

    async def converse(self, spec: "BenchmarkSpec", question: Question, talk: Talk) -> None:
        for text in question.turns:
            talk.user_says(text)
            await talk.candidate()
