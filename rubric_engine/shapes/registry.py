"""The registry of evaluation shapes: the spec's names (`conversation.mode`, `judge.verdict.kind`) mapped to
their strategies, looked up once per run (`shape_for(spec)`), and the template preflight that asks both.

Why one place: a new shape is its module (shapes/<name>.py), one line here and its name in the spec schema's
Literal (spec/schema.py); nothing else learns its name (tests/project/test_structure.py holds every other module to it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rubric_engine.datatypes import Question
from rubric_engine.errors import DataError
from rubric_engine.shapes.anchored import Anchored
from rubric_engine.shapes.base import Conversation, Shape, Verdict
from rubric_engine.shapes.criteria import Criteria
from rubric_engine.shapes.pairwise import Pairwise
from rubric_engine.shapes.plan import REPLY_PLACEHOLDER, question_calls
from rubric_engine.shapes.rating import Rating
from rubric_engine.shapes.score import Score
from rubric_engine.shapes.scripted import Scripted
from rubric_engine.shapes.simulated import Simulated
from rubric_engine.shapes.single import Single
from rubric_engine.shapes.userstate import UserStateVerdict
from rubric_engine.spec.facts import stored_verdict_kind, verdict_kind

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["CONVERSATIONS", "VERDICTS", "shape_for", "stored_shape", "check_templates"]

CONVERSATIONS: dict[str, Conversation] = {c.name: c for c in (Single(), Scripted(), Simulated())}
VERDICTS: dict[str, Verdict] = {v.name: v for v in (Criteria(), Score(), Pairwise(), Rating(),
                                                            UserStateVerdict(), Anchored())}


def shape_for(spec: "BenchmarkSpec") -> Shape:
    """The spec's two strategies (spec/facts.verdict_kind: a judge-less kind's block, the judge's kind, or
    criteria for a spec without either: every item checked)."""
    return Shape(CONVERSATIONS[spec.conversation.mode], VERDICTS[verdict_kind(spec)])


def stored_shape(resolved: Mapping[str, Any], where: str) -> Shape:
    """The shape of a stored run, from its resolved spec as plain data (spec.resolved.json), for a reader that
    holds no loaded spec (the report). A key the spec left out has the schema's default; `where` names the file."""
    kind = stored_verdict_kind(resolved)
    mode = (resolved.get("conversation") or {}).get("mode") or Single.name
    if kind not in VERDICTS or mode not in CONVERSATIONS:
        raise DataError(where, f"the run's spec names verdict kind {kind!r} and conversation mode {mode!r}; this "
                               f"version knows kinds {', '.join(VERDICTS)} and modes {', '.join(CONVERSATIONS)}",
                        fix="read the run with the rubric-engine version that made it")
    return Shape(CONVERSATIONS[mode], VERDICTS[kind])


def check_templates(spec: "BenchmarkSpec", questions: Sequence[Question], n: int = 3) -> None:
    """Every template rendered against the first `n` questions before any paid call: an undefined variable or a
    sandbox violation is a SpecError with file and line at `validate` time (or at a run's start), not after the
    candidate's replies were bought. What is rendered is the plan of calls (shapes/plan.py: every role's request,
    as the dry run counts them and `prompts` prints them); then what a conversation checks beyond rendering."""
    shape = shape_for(spec)
    first = list(questions)[:n]
    for question in first:
        if spec.judge is not None and not question_calls(spec, shape, question).judge:
            # every item of this question is checked by the engine (no judge call): its template still renders
            shape.verdict.judge_requests(spec, question, REPLY_PLACEHOLDER,
                                         shape.conversation.planned_transcript(spec, question, REPLY_PLACEHOLDER))
    for question in first:
        shape.conversation.check_session(spec, question)
