"""A run whose questions are chosen while it runs: waves, each decided by the records of the waves before it.

Why here and not in the runner: the runner asks the questions it is given; a `Selector` (the adaptive subset of
an item model, validity/adaptiverun.py) names the next wave from what was answered. Resume stays exact because the
waves are re-derived from the journal: `Waves.next` replays every wave whose questions all have a record (a
record read back on resume is the one the first process wrote) and returns the missing questions of the first wave
that does not, so no journalled question is asked again and the later waves are those an uninterrupted run picks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rubric_engine.datatypes import QuestionRef
from rubric_engine.scoring.aggregate import ScoredQuestion

__all__ = ["Selector", "Waves", "add_calls", "add_seconds"]


class Selector(Protocol):
    budget: int

    def identity(self) -> dict[str, Any]:
        """What decides the questions asked (part of the run's identity)."""

    def wave(self, available: Sequence[str], scored: Mapping[str, ScoredQuestion], asked: Sequence[str]) -> list[str]:
        """The next questions to ask, from the asked ones' scored values only; empty: the selection is complete."""


class Waves:
    """The waves of one run: `next()` the questions of the next wave not yet in the journal (`done`)."""

    def __init__(self, selector: Selector, questions: Sequence[QuestionRef], done: set[str],
                 scored: Mapping[str, ScoredQuestion]) -> None:
        self.selector, self.done, self.scored = selector, done, scored  # `scored` grows as questions finish
        self._refs = {q.id: q for q in questions}
        self.asked: list[str] = []

    def next(self) -> list[QuestionRef]:
        while True:
            asked = set(self.asked)
            wave = self.selector.wave(list(self._refs), {q: s for q, s in self.scored.items() if q in asked},
                                      list(self.asked))
            if not wave:
                return []
            self.asked.extend(wave)
            todo = [self._refs[q] for q in wave if q not in self.done]
            if todo:
                return todo

    def chosen(self, questions: Sequence[QuestionRef]) -> list[QuestionRef]:
        """The questions asked, in the data's order (the order every section of the summary reads them in)."""
        asked = set(self.asked)
        return [q for q in questions if q.id in asked]


def add_calls(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two waves' call counts (the pipeline's `calls`) as one: numbers summed (None, an unknown cost, stays
    None), anything else (where concurrency=auto settled) the later wave's."""
    out: dict[str, Any] = dict(a)
    for key, value in b.items():
        old = out.get(key)
        if key not in out or key == "concurrency":
            out[key] = value
        elif isinstance(value, Mapping) and isinstance(old, Mapping):
            out[key] = add_calls(old, value)
        elif isinstance(value, bool) or isinstance(old, bool):
            out[key] = bool(old) or bool(value)
        elif isinstance(value, int | float) and isinstance(old, int | float):
            out[key] = old + value
        else:  # None: an unknown amount stays unknown
            out[key] = None
    return out


def add_seconds(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> dict[str, float | None]:
    """Two waves' seconds per stage as one: summed where either wave timed the stage, None where neither did."""
    return {k: None if a.get(k) is None and b.get(k) is None else round((a.get(k) or 0) + (b.get(k) or 0), 3)
            for k in {**a, **b}}
