"""Per-question scoring: pure functions from (criteria, judge hits) to ability and question scores.

Kept free of I/O and of any benchmark name so that the arithmetic can be checked by hand and
re-used by the runner, the score-only path and the leaderboard alike. Nothing here pads, cuts or
defaults: a hit list of the wrong length, a weightless ability item or an unknown formula is an
error, because a silent number is worse than no number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

from rubric_engine.datatypes import Criterion

__all__ = [
    "FORMULAS",
    "EFFECTS",
    "FIRES_WHEN",
    "FailureRuleLike",
    "AbilityScore",
    "QuestionScore",
    "log_normalised",
    "linear",
    "met_over_positive",
    "score_question",
]

Formula = Callable[[float, float, float, Mapping[str, Any]], float]


def _clip01(x: float) -> float:
    """Keep float round-off (non-integer weights) from leaving [0, 1]; exact for integer weights."""
    return min(1.0, max(0.0, x))


def log_normalised(raw: float, lo: float, hi: float, params: Mapping[str, Any]) -> float:
    """ln(raw - lo + 1) / ln(hi - lo + 1): the paper's eq. 1; 0 when the span is empty."""
    span = hi - lo
    if span <= 0:
        return 0.0
    # log1p, not log(x + 1): for a span below ~1e-16, span + 1.0 rounds to 1.0 and log() gives 0 (ZeroDivisionError)
    return _clip01(math.log1p(raw - lo) / math.log1p(span))


def linear(raw: float, lo: float, hi: float, params: Mapping[str, Any]) -> float:
    """(raw - lo) / (hi - lo): the same range as eq. 1 without the log's compression."""
    span = hi - lo
    if span <= 0:
        return 0.0
    return _clip01((raw - lo) / span)


def met_over_positive(raw: float, lo: float, hi: float, params: Mapping[str, Any]) -> float:
    """clip(raw / hi, 0, 1): HealthBench-style points achieved over points possible."""
    if hi <= 0:
        return 0.0
    return _clip01(raw / hi)


FORMULAS: dict[str, Formula] = {
    "log_normalised": log_normalised,
    "linear": linear,
    "met_over_positive": met_over_positive,
}

EFFECTS: tuple[str, ...] = ("zero_question",)
# 'hit': the paper's rule. 'hit_positive_weight': the official code's rule (kept only to compare
# with published numbers): fires only when the hit item has a weight > 0.
FIRES_WHEN: tuple[str, ...] = ("hit", "hit_positive_weight")


class FailureRuleLike(Protocol):
    """What score_question needs from a failure rule (the spec's model satisfies it)."""

    @property
    def id(self) -> str: ...

    @property
    def effect(self) -> str: ...

    @property
    def fires_when(self) -> str: ...


@dataclass(frozen=True)
class AbilityScore:
    """One ability within one question; raw/lo/hi are kept so a report can show the arithmetic."""

    raw: float  # sum of the weights of the hit items
    lo: float  # sum of the negative weights
    hi: float  # sum of the positive weights
    score: float  # in [0, 1], after failure rules


@dataclass(frozen=True)
class QuestionScore:
    abilities: dict[str, AbilityScore]  # in order of first appearance in the criteria
    score: float  # mean of the ability scores, in [0, 1]
    failed_rules: tuple[str, ...]  # ids of the rules that fired, in the order the rules were given
    catastrophic: bool  # a fired rule zeroed the question


def _rule_fires(rule: FailureRuleLike, weight: float | None) -> bool:
    """Whether one hit item of `rule` with this weight makes the rule fire."""
    if rule.fires_when == "hit":
        return True
    return weight is not None and weight > 0  # 'hit_positive_weight'


def score_question(
    criteria: Sequence[Criterion],
    hits: Sequence[bool],
    formula: str,
    params: Mapping[str, Any],
    rules: Sequence[FailureRuleLike],
) -> QuestionScore:
    """Score one judged question: per-ability formula, then failure rules, then the mean."""
    if formula not in FORMULAS:
        raise ValueError(f"unknown scoring formula {formula!r}; known: {', '.join(sorted(FORMULAS))}")
    if len(hits) != len(criteria):
        raise ValueError(
            f"{len(hits)} hits for {len(criteria)} criteria; the judge must give exactly one per criterion"
        )
    by_id: dict[str, FailureRuleLike] = {}
    for rule in rules:
        if rule.effect not in EFFECTS:
            raise ValueError(f"failure rule {rule.id!r}: unknown effect {rule.effect!r}; known: {', '.join(EFFECTS)}")
        if rule.fires_when not in FIRES_WHEN:
            raise ValueError(
                f"failure rule {rule.id!r}: unknown fires_when {rule.fires_when!r}; known: {', '.join(FIRES_WHEN)}"
            )
        by_id[rule.id] = rule

    sums: dict[str, list[float]] = {}  # ability -> [raw, lo, hi]
    fired: set[str] = set()
    for crit, hit in zip(criteria, hits):
        if hit not in (True, False):
            raise ValueError(f"criterion {crit.index}: hit must be a boolean, got {hit!r}")
        if (crit.ability is None) == (crit.rule is None):
            raise ValueError(f"criterion {crit.index} ({crit.label!r}): exactly one of ability / rule must be set")
        if crit.rule is not None:
            rule = by_id.get(crit.rule)
            if rule is None:
                raise ValueError(
                    f"criterion {crit.index}: failure rule {crit.rule!r} is not among the rules given "
                    f"({', '.join(by_id) or 'none'})"
                )
            if hit and _rule_fires(rule, crit.weight):
                fired.add(rule.id)
            continue
        if crit.weight is None:
            raise ValueError(f"criterion {crit.index} ({crit.label!r}): an ability item needs a weight, got None")
        acc = sums.setdefault(crit.ability, [0.0, 0.0, 0.0])  # type: ignore[arg-type]
        w = float(crit.weight)
        if hit:
            acc[0] += w
        if w < 0:
            acc[1] += w
        elif w > 0:
            acc[2] += w
    if not sums:
        raise ValueError("question has no ability items; every question needs at least one scored criterion")

    failed = tuple(r.id for r in rules if r.id in fired)
    catastrophic = any(by_id[r].effect == "zero_question" for r in failed)
    fn = FORMULAS[formula]
    abilities = {
        name: AbilityScore(raw, lo, hi, 0.0 if catastrophic else fn(raw, lo, hi, params))
        for name, (raw, lo, hi) in sums.items()
    }
    score = 0.0 if catastrophic else sum(a.score for a in abilities.values()) / len(abilities)
    return QuestionScore(abilities=abilities, score=score, failed_rules=failed, catastrophic=catastrophic)
