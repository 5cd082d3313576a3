"""The pairwise verdict's judgment (judge.verdict.kind: pairwise): the games against the baseline's reply.

Why its own module: what only a comparison stores (`games`, `baseline_response`) is this variant's, so the
codec finds it here (it lists record/'s modules) and no other module knows those keys (tests/project/test_structure.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rubric_engine.record.types import NO_LAYOUT, Judgment, Layout

__all__ = ["Game", "PairwiseJudgment"]


@dataclass(frozen=True, slots=True)
class Game:
    """One game: its order (baseline_first: A = the baseline), the label read, the judge's reply, or the error."""

    order: str
    label: str | None = None
    reasoning: str | None = None
    error: str | None = None
    layout: Layout = NO_LAYOUT


@dataclass(frozen=True, slots=True)
class PairwiseJudgment(Judgment):
    """The question's games and the baseline's reply they compared the candidate's with."""

    games: tuple[Game, ...] = ()
    baseline_response: str | None = None
    kind: ClassVar[str] = "pairwise"
    owns: ClassVar[tuple[str, ...]] = ("games", "baseline_response")
    marks: ClassVar[tuple[str, ...]] = ("games", "baseline_response")
    late: ClassVar[tuple[str, ...]] = ("baseline_response", "games", "weight")

    @classmethod
    def decode(cls, obj: Mapping[str, Any], layout_of: Any) -> "PairwiseJudgment":
        return cls(games=tuple(Game(order=g.get("order"), label=g.get("label"), reasoning=g.get("reasoning"),
                                    error=g.get("error"), layout=layout_of(g, _GAME_KEYS))
                               for g in obj.get("games") or ()),
                   baseline_response=obj.get("baseline_response"))

    def encoded(self) -> dict[str, Any]:
        """This variant's record keys and values (the codec places them in the stored order)."""
        return {"games": [_game(g) for g in self.games], "baseline_response": self.baseline_response}


_GAME_KEYS = ("order", "label", "reasoning", "error")


def _game(g: Game) -> dict[str, Any]:
    values = {"order": g.order, "label": g.label, "reasoning": g.reasoning, "error": g.error}
    return {k: values[k] if k in values else g.layout.extra[k] for k in (_GAME_KEYS if g.layout is NO_LAYOUT else g.layout.keys)}
