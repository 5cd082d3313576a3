"""Vote combination: several verdicts on one criterion (a judge's repeats, or a jury's judges) made one.

Why in scoring: a run combines votes before scoring, and the statistics that re-fold stored votes (judge
noise, candidate sampling) must combine them exactly the same way; one pure function serves both, so the
statistics need nothing of the judge stack that casts the votes.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["RULES", "TIES", "combine"]

RULES = ("majority", "any", "all")
TIES = ("not_met", "met")


def combine(votes: Sequence[bool], rule: str = "majority", tie: str = "not_met") -> bool:
    """The combined verdict of several votes on one criterion (repeats of one judge, or the judges).

    majority: more than half met; an exact tie is decided by `tie` (not_met by default). any: one met
    vote suffices. all: every vote must be met."""
    if not votes:
        raise ValueError("combine() needs at least one vote")
    if rule == "any":
        return any(votes)
    if rule == "all":
        return all(votes)
    met = sum(1 for v in votes if v)
    if 2 * met == len(votes):
        return tie == "met"
    return 2 * met > len(votes)
