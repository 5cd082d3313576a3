"""The rating verdict's judgment (a spec's `rating:` block): the reference ratings, every pass read from the reply
and which pass is the question's score.

Why its own module: what only a rating run stores (`rating`) is this variant's; the codec finds it here (it lists
record/'s modules) and no other module knows the key outside shapes/rating.py (tests/project/test_structure.py).
The stored object is kept as it was written (shapes/rating.py writes it, `rescore` rewrites it), so a record read
and written again is the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rubric_engine.record.types import Judgment

__all__ = ["RatingJudgment"]


@dataclass(frozen=True, slots=True)
class RatingJudgment(Judgment):
    """`reference`: the row's reference ratings as read; `passes`: per pass its `ratings`, `score` and `error`;
    `scored`: the index of the pass that is the question's score (None: a record stored without one)."""

    stored: Any = None  # the `rating` object as stored (kept whole: written back as read)
    kind: ClassVar[str] = "rating"
    owns: ClassVar[tuple[str, ...]] = ("rating",)
    marks: ClassVar[tuple[str, ...]] = ("rating",)
    early: ClassVar[tuple[str, ...]] = ("rating",)

    @property
    def read(self) -> bool:
        """Whether a rating object was stored (a record of a reply never read holds none)."""
        return isinstance(self.stored, Mapping)

    @classmethod
    def decode(cls, obj: Mapping[str, Any], layout_of: Any) -> "RatingJudgment":
        return cls(stored=obj.get("rating"))

    def encoded(self) -> dict[str, Any]:
        """This variant's record key and value (the codec places it in the stored order)."""
        return {"rating": self.stored}
