"""The user-state verdict's judgment (a spec's `user_state:` block): the simulated user's hidden state turn by
turn, the trajectory whose last state is the question's score.

Why its own module: what only a user-state run stores (`states`) is this variant's; the codec finds it here (it
lists record/'s modules). The stored list is kept as written (shapes/userstate.py writes it), so a record read and
written again is the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rubric_engine.record.types import Judgment

__all__ = ["UserStateJudgment"]


@dataclass(frozen=True, slots=True)
class UserStateJudgment(Judgment):
    """`stored`: the `states` list as stored, one object per simulated user turn: `turn` (1-based) and the
    declared fields of the state that turn."""

    stored: Any = None
    kind: ClassVar[str] = "user_state"
    owns: ClassVar[tuple[str, ...]] = ("states",)
    marks: ClassVar[tuple[str, ...]] = ("states",)
    early: ClassVar[tuple[str, ...]] = ("states",)

    @property
    def states(self) -> list[Mapping[str, Any]]:
        """The trajectory as stored ([] when no list was stored)."""
        return [s for s in self.stored if isinstance(s, Mapping)] if isinstance(self.stored, list) else []

    @classmethod
    def decode(cls, obj: Mapping[str, Any], layout_of: Any) -> "UserStateJudgment":
        return cls(stored=obj.get("states"))

    def encoded(self) -> dict[str, Any]:
        return {"states": self.stored}
