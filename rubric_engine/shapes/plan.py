"""The plan of one question's calls: per role, the requests a run sends for it (as they will be sent, the replies
a run fills in shown as placeholders), each typed (models/request.py: messages, role, response_format, `prompts`'
title, what a valid answer looks like) with how many calls it stands for, asked of the question's shape.

Why one function over the strategies' own methods: the dry run (run/callplan.py counts and prices these
requests), `prompts` (prints them), the template preflight (renders them) and the run each needed "what will be
sent"; worked out apart, they disagreed (a judge shown every rubric item where the engine checks some, a per-turn
score counted once). The run sends what the same methods return (Conversation.requests for the candidate and a
simulated user, Verdict.judge_requests through the panel, Verdict.baseline_request), so they cannot.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from rubric_engine.datatypes import Question
from rubric_engine.judge.checked import judged_question
from rubric_engine.models.request import Request
from rubric_engine.shapes.base import Shape

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Request", "QuestionCalls", "question_calls", "REPLY_PLACEHOLDER", "BASELINE_PLACEHOLDER"]

REPLY_PLACEHOLDER = "<<<CANDIDATE REPLY: filled in by the run>>>"
BASELINE_PLACEHOLDER = "<<<BASELINE REPLY: filled in by the run>>>"


@dataclass(frozen=True)
class QuestionCalls:
    """One question's requests per role. `judge`: every call of one grading of one reply, in the order the run
    makes them (none: every item is checked by the engine, or no judge); `user`: a simulated user's first
    request; `baseline`: a comparison's baseline model's request (when the run calls one)."""
    candidate: Request
    user: Request | None
    judge: tuple[Request, ...]
    baseline: Request | None
    items: int = 0  # the rubric items the judge is shown (those the engine checks are not)


def question_calls(spec: "BenchmarkSpec", shape: Shape, question: Question, reply: str = REPLY_PLACEHOLDER,
                   judged: bool = True) -> QuestionCalls:
    """The requests of `question` under `shape`, the candidate's reply `reply` (a placeholder unless known).
    `judged` False: no judge request is rendered (a spec without a judge, or a stage that calls none)."""
    conv, verdict = shape.conversation, shape.verdict
    candidate = conv.first_request(spec, question, "candidate")
    user = conv.first_request(spec, question, "user") if conv.simulates_user else None
    shown = judged_question(question) if judged and spec.judge is not None else None
    judge: tuple[Request, ...] = ()
    if shown is not None:  # checked items are never sent: the judge sees the rest, numbered 1..m, as in a run
        transcript = conv.planned_transcript(spec, question, reply)
        judge = tuple(replace(r, title=f"judge prompt ({r.title})")
                      for r in verdict.judge_requests(spec, shown, reply, transcript))
    baseline = verdict.baseline_request(spec, question)
    return QuestionCalls(candidate, user, judge, baseline, len(shown.criteria) if shown is not None else 0)
