"""The anchored verdict's judgment (judge.verdict.kind: anchored): the games against each anchor, each with the
length rule it was played under and what the rule did.

Why its own module: what only an anchored comparison stores (`anchor_games`) is this variant's; the codec finds
it here (it lists record/'s modules) and no other module knows the key. The stored list is kept as written
(shapes/anchored.py writes it), so a record read and written again is the same bytes.

Each game: `anchor`, `order` (baseline_first: A = the anchor), `label`, `reasoning`, `error`, `length_rule`
(`none`, `truncate:N`, `truncate:common`, `margin:K`), `candidate_chars` and `anchor_chars` (the full replies'
lengths), `truncated` (the judge saw a cut reply), `discounted` (the margin turned a win into a tie) and
`reward` (None for a game without a label).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rubric_engine.record.types import Judgment

__all__ = ["AnchoredJudgment"]


@dataclass(frozen=True, slots=True)
class AnchoredJudgment(Judgment):
    """`stored`: the `anchor_games` list as stored."""

    stored: Any = None
    kind: ClassVar[str] = "anchored"
    owns: ClassVar[tuple[str, ...]] = ("anchor_games",)
    marks: ClassVar[tuple[str, ...]] = ("anchor_games",)
    late: ClassVar[tuple[str, ...]] = ("anchor_games", "weight")

    @property
    def games(self) -> list[Mapping[str, Any]]:
        """The games as stored ([] when no list was stored)."""
        return [g for g in self.stored if isinstance(g, Mapping)] if isinstance(self.stored, list) else []

    @classmethod
    def decode(cls, obj: Mapping[str, Any], layout_of: Any) -> "AnchoredJudgment":
        return cls(stored=obj.get("anchor_games"))

    def encoded(self) -> dict[str, Any]:
        return {"anchor_games": self.stored}
