"""A single reply (`conversation.mode: single`): the candidate answers the data's dialogue once.

Why a module: the base class's defaults (shapes/base.Conversation) are this shape's behaviour; here is where
the one request is rendered, for the run (run/pipeline.py sends it) and for the plan of calls (the preflight, the
dry run and `prompts`) alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rubric_engine.datatypes import Question
from rubric_engine.judge.prompts import candidate_messages
from rubric_engine.models.request import Request
from rubric_engine.shapes.base import Conversation, Requests

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Single"]


class Single(Conversation):
    """One candidate call per reply; a simulated user is never asked (its role has nothing to say)."""
    name = "single"

    def requests(self, spec: "BenchmarkSpec", question: Question, role: str = "candidate") -> Requests:
        """The one request, whatever was said (nothing: a single reply has no session)."""
        request = Request(candidate_messages(spec, question), "candidate", title="candidate prompt")
        return lambda said: request

    def first_request(self, spec: "BenchmarkSpec", question: Question, role: str = "candidate") -> Request:
        return self.requests(spec, question, role)([])
