"""The plan of one question's calls: per role, the requests a run sends for it (as they will be sent, the replies
a run fills in shown as placeholders) and how many calls each stands for, asked of the question's shape.

Why one function: the dry run (run/callplan.py counts and prices these requests), `prompts` (prints them), the
template preflight (renders them) and the run (sends them, through the same strategy methods) each needed "what
will be sent"; worked out four times, they disagreed (a judge shown every rubric item where the engine checks
some, a per-turn score counted once). Built here once, they cannot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rubric_engine.datatypes import Question
from rubric_engine.judge.checked import judged_question
from rubric_engine.judge.prompts import candidate_messages
from rubric_engine.shapes.base import Message, Shape

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Request", "QuestionCalls", "question_calls", "REPLY_PLACEHOLDER", "BASELINE_PLACEHOLDER"]

REPLY_PLACEHOLDER = "<<<CANDIDATE REPLY: filled in by the run>>>"
BASELINE_PLACEHOLDER = "<<<BASELINE REPLY: filled in by the run>>>"


@dataclass(frozen=True)
class Request:
    """One request as it will be sent, `prompts`' words for it, and how many calls it stands for (a
    conversation's turns: its first request counted once per turn)."""
    title: str
    messages: list[Message]
    calls: int = 1


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
    messages, turns = conv.first_request(spec, question, "candidate")
    candidate = Request(f"candidate prompt{conv.shown_title()}", messages, turns)
    user = None
    if conv.simulates_user:
        messages, turns = conv.first_request(spec, question, "user")
        user = Request("simulated user prompt (its first turn; later turns add the conversation)", messages, turns)
    shown = judged_question(question) if judged and spec.judge is not None else None
    judge: tuple[Request, ...] = ()
    if shown is not None:  # checked items are never sent: the judge sees the rest, numbered 1..m, as in a run
        transcript = conv.planned_transcript(spec, question, reply)
        judge = tuple(Request(f"judge prompt ({title})", m)
                      for title, m in verdict.judge_requests(spec, shown, reply, transcript))
    baseline = Request("baseline prompt", candidate_messages(spec, question)) if verdict.compares else None
    return QuestionCalls(candidate, user, judge, baseline, len(shown.criteria) if shown is not None else 0)
