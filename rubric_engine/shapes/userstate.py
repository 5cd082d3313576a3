"""Judging by the simulated user's own hidden state (a spec's `user_state:` block; SAGE, "sentient agent as a
judge"): the question's score is a declared number field of the user's final state. No judge model is called.

Why here: the session is the simulated conversation's (shapes/simulated.py); this verdict reads each user reply
(`StatedLines`, the `user_lines` hook run/dialogue.py asks: the state validated, a bad one asked for once more,
the block's stop rule), and reads the trajectory back from the transcript's user turns (each keeps its state beside its words, `state`), writing it to
the record (`states`, record/userstate.py) and scoring the last state. A transcript whose user turn holds no
state (one read back from an answers file) is the question's judge error, one line, never scored.

Record (`states`): `[{"turn": k, <field>: value, ...}, ...]`, one per user turn; `score` is the last one's
`user_state.field`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rubric_engine.datatypes import Question, StatedTurn, Turn
from rubric_engine.errors import ConfigError
from rubric_engine.judge.grading import JudgeResult
from rubric_engine.models.request import Request
from rubric_engine.record.codec import encode
from rubric_engine.record.types import Judged, Record
from rubric_engine.record.userstate import UserStateJudgment
from rubric_engine.shapes.base import Judging, UserLines, Verdict
from rubric_engine.spec.userstate import BadState, UserState as Block, read_state, reasked, stops

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["UserStateVerdict", "StatedLines", "StateResult", "trajectory"]


@dataclass
class StateResult(JudgeResult):
    """The states read from a session's user turns, in order. `verdicts` stays None."""
    states: list[dict[str, Any]] = field(default_factory=list)
    score: float | None = None  # the last state's scored field


def _block(spec: "BenchmarkSpec") -> Block:
    block = spec.user_state
    assert block is not None, "the user_state verdict of a spec without a user_state block"
    return block


def trajectory(transcript: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each user turn's state (run/dialogue.py validated it), `turn` numbered from 1 (BadState: a user turn
    without one, named)."""
    out = []
    for k, turn in enumerate((t for t in transcript if t.get("role") == "user"), start=1):
        state = turn.get("state")
        if not isinstance(state, Mapping):
            raise BadState(f"user turn {k} has no state")
        out.append({"turn": k, **state})
    return out


class StatedLines(UserLines):
    """A user's reply is its line then its state (spec/userstate.read_state): a reply without a valid state is asked
    for once more with why; the turn keeps the state; a stop rule the state meets ends the session (`state`)."""
    invalid = "the simulated user's state is not valid"

    def __init__(self, block: Block, stop: str) -> None:
        super().__init__(stop)
        self.block = block

    def check(self, text: str) -> str | None:
        try:
            read_state(self.block, text, self.stop)
        except BadState as exc:
            return str(exc)
        return None

    def reask(self, messages: list[dict[str, Any]], bad: str, why: str) -> list[dict[str, Any]]:
        return reasked(messages, bad, why)

    def read(self, text: str) -> tuple[Turn | None, str | None]:
        line, state = read_state(self.block, text, self.stop)
        ended = "stop" if self.stop in text else ("state" if stops(self.block, state) else None)
        return StatedTurn("user", line, state), ended  # the state is the transcript's, never the candidate's


class UserStateVerdict(Verdict):
    """The verdict of a spec with a `user_state:` block."""
    name = "user_state"
    criterion_votes = False

    def check_plan(self, spec: "BenchmarkSpec", samples: int) -> None:
        if samples > 1:
            raise ConfigError(f"samples={samples} with a user_state: block is not supported: a session scores "
                              "once per question (run the benchmark again for another)")

    def user_lines(self, spec: "BenchmarkSpec") -> UserLines:
        return StatedLines(_block(spec), spec.conversation.stop)

    async def judge(self, j: Judging, question: Question, response: str, first_repeat: int = 0,
                    transcript: Sequence[Mapping[str, str]] | None = None) -> tuple[JudgeResult, dict[int, Any]]:
        try:
            states = trajectory(transcript or ())
        except BadState as exc:
            return StateResult(None, f"no valid user state: {exc}"), {}
        if not states:
            return StateResult(None, "the session has no user turn, so no state to score"), {}
        return StateResult(None, None, states=states, score=float(states[-1][_block(j.spec).field])), {}

    def question_score(self, spec: "BenchmarkSpec", question: Question, result: JudgeResult) -> Any:
        """None: the score is written with the states (judged)."""
        return None

    def judged(self, spec: "BenchmarkSpec", result: JudgeResult | None, clip: Callable[[str], str]) -> Judged:
        """The trajectory (`states`) and the question's score: the last state's field (`score_field`)."""
        if not isinstance(result, StateResult) or not result.states:
            return Judged()
        return Judged(UserStateJudgment(list(result.states)), result.score)

    def rescored(self, spec: "BenchmarkSpec", rec: Record, rules: bool, where: str) -> dict[str, Any]:
        """The score again from the stored trajectory's last state (nothing is read again)."""
        obj, judgment = encode(rec), rec.judgment
        if not isinstance(judgment, UserStateJudgment) or not judgment.states:
            return obj
        return {**obj, "score": float(judgment.states[-1][_block(spec).field])}

    def judge_requests(self, spec: "BenchmarkSpec", question: Question, reply: str,
                       transcript: Sequence[Mapping[str, str]] | None) -> list[Request]:
        """None: the simulated user's state is the verdict."""
        return []

    def scoring_line(self, spec: "BenchmarkSpec") -> str:
        b = _block(spec)
        rules = " or ".join(b.stop_when) or "none"
        return (f"scoring: the simulated user's hidden state (no judge): fields {', '.join(b.fields)}; the session "
                f"stops when {rules}; question score = the final state's {b.field}")
