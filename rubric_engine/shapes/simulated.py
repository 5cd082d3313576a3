"""A simulated conversation (`conversation.mode: simulated`): a user model plays the other side for up to
`conversation.max_turns` turns, ending early with its stop signal; the candidate may open.

Why here: the turn order of a simulated session, its preflight (the persona and opening render; a candidate
that opens has something to answer), and both roles' requests at each turn, which the run sends and the dry run
and `prompts` show the first of (the user's says what a valid line is: its stop signal, models/request.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from rubric_engine.datatypes import Question
from rubric_engine.errors import SpecError
from rubric_engine.judge.dialogue import candidate_prefix, simulator_view
from rubric_engine.models.request import Request, UserLines
from rubric_engine.shapes.base import Message, Requests, Talk
from rubric_engine.shapes.scripted import Session
from rubric_engine.spec.userstate import answer_fields

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Simulated", "USER_PLACEHOLDER"]

USER_PLACEHOLDER = "..."  # a simulated user's line, written by the user model during the run


class Simulated(Session):
    name = "simulated"
    simulates_user = True

    def check_session(self, spec: "BenchmarkSpec", question: Question) -> None:
        """The candidate must have something to answer when it speaks first (the persona and the opening render
        with the plan of calls)."""
        if spec.conversation.first == "candidate" and not candidate_prefix(spec, question):
            raise SpecError(str(spec.files[-1] if spec.files else spec.dir), "conversation.first",
                            "the candidate speaks first but has nothing to answer", value="candidate",
                            fix="set candidate.system (or give the data a dialogue), or use first: user")

    def requests(self, spec: "BenchmarkSpec", question: Question, role: str = "candidate") -> Requests:
        """The candidate's requests as in a scripted session; the user's: its persona and the session with the
        roles swapped, answered with a line of its own until it says the stop signal."""
        if role != "user":
            return super().requests(spec, question, role)
        conv = spec.conversation
        answer = UserLines(conv.stop, conv.max_turns, answer_fields(spec.user_state))
        return lambda said: Request(simulator_view(spec, question, said), "user", answer)

    def first_request(self, spec: "BenchmarkSpec", question: Question, role: str = "candidate") -> Request:
        """The user's persona at most max_turns times; the candidate's first turn (a placeholder user line when
        the user opens) at most max_turns times, one more when it opens."""
        conv = spec.conversation
        if role == "user":
            first = self.requests(spec, question, role)([])
            return replace(first, title="simulated user prompt (its first turn; later turns add the conversation)",
                           calls=conv.max_turns)
        opening = [] if conv.first == "candidate" else [{"role": "user", "content": USER_PLACEHOLDER}]
        return self.titled(self.requests(spec, question, role)(opening), conv.max_turns + (conv.first == "candidate"))

    def planned_transcript(self, spec: "BenchmarkSpec", question: Question, reply: str) -> list[Message] | None:
        """A session run to max_turns (the candidate's opening first when it speaks first), each user line a
        placeholder, each candidate reply `reply`."""
        conv = spec.conversation
        opening = [{"role": "assistant", "content": reply}] if conv.first == "candidate" else []
        return opening + [m for _ in range(conv.max_turns) for m in ({"role": "user", "content": USER_PLACEHOLDER},
                                                                      {"role": "assistant", "content": reply})]

    async def converse(self, spec: "BenchmarkSpec", question: Question, talk: Talk) -> None:
        conv = spec.conversation
        if conv.first == "candidate":
            await talk.candidate()
        for _ in range(conv.max_turns):
            if not await talk.user():
                break
            await talk.candidate()
        else:
            talk.cut()
