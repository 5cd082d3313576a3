"""`item_budget=N` with `item_model=FILE`: the questions of a run chosen while it runs, wave after wave.

Why waves and why a pure function of the records: the calls of a run stay parallel only if several questions are
asked at once, so the run asks a wave of about its concurrency, then picks the next wave at the ability the answers
so far give (stats/subsetpick.next_for_estimate, the rule `estimate score ... adaptive=K` uses between runs). A run
killed at any moment must resume to the same selection without asking again what its journal holds: every wave is
derived from the waves before it and their journalled records alone (`wave`), so the runner re-derives the
finished waves on resume, asks what is missing of the first unfinished one and goes on. The selection's identity
(the item model's content hash, the budget, the wave size) is part of the run's identity: a resume with another
model, budget or wave would choose other questions, so it is another run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_engine.errors import ConfigError
from rubric_engine.scoring.aggregate import ScoredQuestion
from rubric_engine.stats.irt import estimate_ability
from rubric_engine.stats.subset import Bank, item_values
from rubric_engine.stats.subsetpick import next_for_estimate

__all__ = ["AdaptiveSelection", "budget_of"]


def budget_of(value: Any, questions: int) -> int:
    """`item_budget=`: a number of questions (>= 1) or a share of the item model's (0 < share < 1)."""
    try:
        share = float(value)
    except (TypeError, ValueError):
        share = float("nan")
    if not share > 0 or (share >= 1 and share != int(share)):
        raise ConfigError(f"item_budget={value} is not a budget: give a number of questions, at least 1, or a share "
                          "of the item model's questions between 0 and 1 (item_budget=0.2)")
    return max(1, round(share * questions)) if share < 1 else min(int(share), questions)


class AdaptiveSelection:
    """The waves of an adaptive run: `wave(available, scored, asked)` names the next one (empty once the budget is
    asked or no question is left)."""

    def __init__(self, bank: Bank, by_group: bool, budget: int, wave: int, model_path: Path) -> None:
        self.bank, self.by_group, self.budget, self.size = bank, by_group, budget, max(1, wave)
        self._index = {q: g for g, q in enumerate(bank.questions)}
        self._digest = hashlib.sha256(model_path.read_bytes()).hexdigest()

    def identity(self) -> dict[str, Any]:
        """What decides the questions asked: part of the run's identity (run/identity.py)."""
        return {"item_model_sha256": self._digest, "item_budget": self.budget, "wave": self.size}

    def theta(self, scored: Mapping[str, ScoredQuestion], asked: Sequence[str]) -> float:
        """The ability estimated from the asked questions' scored values (an errored question gives none)."""
        items = item_values([scored[q] for q in asked if q in scored], self.by_group)
        seen = [j for j, k in enumerate(self.bank.keys) if k in items]
        if not seen:
            return 0.0
        return estimate_ability(np.array([items[self.bank.keys[j]] for j in seen]), self.bank.fit.a[seen],
                                self.bank.fit.b[seen])[0]

    def wave(self, available: Sequence[str], scored: Mapping[str, ScoredQuestion], asked: Sequence[str]) -> list[str]:
        """The next wave: up to `size` questions of `available` (the run's selection) not in `asked`, chosen one
        after another by the least expected variance at the ability the asked questions' records give."""
        return self._pick(available, asked, self.theta(scored, asked), min(self.size, self.budget - len(asked)))

    def planned(self, available: Sequence[str]) -> list[str]:
        """`budget` questions picked at the prior's ability: what a dry run counts (a run's own depend on its
        answers; their number is the same)."""
        return self._pick(available, [], 0.0, self.budget)

    def _pick(self, available: Sequence[str], asked: Sequence[str], theta: float, n: int) -> list[str]:
        room = set(available)
        taken = [self._index[q] for q in asked if q in self._index]
        outside = [g for q, g in self._index.items() if q not in room]  # not in the run's selection: never picked
        out: list[str] = []
        while len(out) < n and (g := next_for_estimate(self.bank, theta, taken, exclude=outside)) is not None:
            taken.append(g)
            out.append(self.bank.questions[g])
        return out
