"""The score verdict's judgment (judge.verdict.kind: score): the judge's number (or its error) per candidate turn.

Why its own module: what only a score run stores (`turns`, `score_votes`) is this variant's, so the codec finds it
here (it lists record/'s modules) and no other module knows those keys (tests/project/test_structure.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rubric_engine.record.types import NO_LAYOUT, Judgment, Layout

__all__ = ["TurnScore", "ScoreJudgment"]


@dataclass(frozen=True, slots=True)
class TurnScore:
    """One score judgment: the candidate turn it grades, its number or its error (never both)."""

    turn: int
    score: float | None = None
    reasoning: str | None = None
    error: str | None = None
    expected: float | None = None  # E[score] from the judge's token log-probabilities (judge/probability.py)
    layout: Layout = NO_LAYOUT


@dataclass(frozen=True, slots=True)
class ScoreJudgment(Judgment):
    """Every judgment of the question, per turn; `votes`: graded more than once, judge -> repeat -> turns."""

    turns: tuple[TurnScore, ...] = ()
    votes: Mapping[str, list[list[float | None]]] | None = None
    kind: ClassVar[str] = "score"
    owns: ClassVar[tuple[str, ...]] = ("turns", "score_votes")
    marks: ClassVar[tuple[str, ...]] = ("turns",)
    early: ClassVar[tuple[str, ...]] = ("turns", "weight", "score_votes")

    @classmethod
    def decode(cls, obj: Mapping[str, Any], layout_of: Any) -> "ScoreJudgment":
        return cls(turns=tuple(TurnScore(turn=t.get("turn"), score=t.get("score"), reasoning=t.get("reasoning"),
                                         error=t.get("error"), expected=t.get("expected"),
                                         layout=layout_of(t, (*_TURN_KEYS, "expected")))
                               for t in obj.get("turns") or ()),
                   votes=obj.get("score_votes"))

    def encoded(self) -> dict[str, Any]:
        """This variant's record keys and values (the codec places them in the stored order)."""
        return {"turns": [_turn(t) for t in self.turns], "score_votes": self.votes}

    def written(self) -> tuple[str, ...]:
        """`score_votes` only when graded more than once."""
        return self.owns if self.votes else ("turns",)


_TURN_KEYS = ("turn", "score", "reasoning", "error")


def _turn(t: TurnScore) -> dict[str, Any]:
    values = {"turn": t.turn, "score": t.score, "reasoning": t.reasoning, "error": t.error, "expected": t.expected}
    fresh = _TURN_KEYS + (("expected",) if t.expected is not None else ())  # only where the server gave logprobs
    return {k: values[k] if k in values else t.layout.extra[k] for k in (fresh if t.layout is NO_LAYOUT else t.layout.keys)}
