"""Per-question scoring: pure functions from (criteria, judge hits) to group and question scores.

Kept free of I/O and of any benchmark name so that the arithmetic can be checked by hand and
re-used by the runner, the score-only path and the leaderboard alike. Nothing here pads, cuts or
defaults: a hit list of the wrong length, a weightless scored item or an unknown formula is an
error, because a silent number is worse than no number.

How a question is scored is declared by the spec (`Aggregation`): the per-group formula, where
clipping to [0, 1] applies, whether the question score is the mean over its taxonomy groups or the
formula over all its items, and what a group without positive points does. The defaults are the
first benchmark's behaviour, so a spec that declares nothing keeps today's numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from rubric_engine.datatypes import Criterion

__all__ = [
    "FORMULAS", "RAW_FORMULAS", "EFFECTS", "FIRES_WHEN", "DEFAULT_FIRES_WHEN", "DEFAULT_SCALE", "Aggregation",
    "DEFAULT_AGGREGATION",
    "FailureRuleLike", "AbilityScore", "QuestionScore", "log_normalised", "linear", "met_over_positive",
    "score_question", "group_value", "coverage_score", "needed",
]

Formula = Callable[[float, float, float, Mapping[str, Any]], float]


def _clip01(x: float) -> float:
    return min(1.0, max(0.0, x))


def log_normalised(raw: float, lo: float, hi: float, params: Mapping[str, Any]) -> float:
    """ln(raw - lo + 1) / ln(hi - lo + 1): the log-normalised formula; 0 when the span is empty.

    log1p keeps a tiny positive span (below ~1e-16, where 1 + span == 1) from dividing by zero."""
    span = hi - lo
    if span <= 0:
        return 0.0
    return math.log1p(raw - lo) / math.log1p(span)


def linear(raw: float, lo: float, hi: float, params: Mapping[str, Any]) -> float:
    """(raw - lo) / (hi - lo): the same range as the log formula without its compression."""
    span = hi - lo
    if span <= 0:
        return 0.0
    return (raw - lo) / span


def met_over_positive(raw: float, lo: float, hi: float, params: Mapping[str, Any]) -> float:
    """raw / hi: points achieved over positive points possible (may be < 0 or, with odd data, > 1)."""
    if hi <= 0:
        return 0.0
    return raw / hi


RAW_FORMULAS: dict[str, Formula] = {
    "log_normalised": log_normalised,
    "linear": linear,
    "met_over_positive": met_over_positive,
}


def _clipped(fn: Formula) -> Formula:
    def clipped(raw: float, lo: float, hi: float, params: Mapping[str, Any]) -> float:
        return _clip01(fn(raw, lo, hi, params))
    clipped.__doc__ = f"{fn.__name__}, clipped to [0, 1] (the per-question clipping of the defaults)."
    return clipped


# The formulas as the default aggregation applies them (clipped per question); RAW_FORMULAS unclipped.
FORMULAS: dict[str, Formula] = {name: _clipped(fn) for name, fn in RAW_FORMULAS.items()}

EFFECTS: tuple[str, ...] = ("zero_question",)
# 'hit': the paper's rule. 'hit_positive_weight': an official code's rule (kept only to compare
# with published numbers): fires only when the hit item has a weight > 0.
FIRES_WHEN: tuple[str, ...] = ("hit", "hit_positive_weight")
# The spec language's defaults, in one place: the spec model and every reader of a stored spec use these.
DEFAULT_FIRES_WHEN = "hit"  # failure_rules[].fires_when
DEFAULT_SCALE = 100.0  # scoring.scale: a question score of 1 is shown as 100

QUESTION_MODES = ("mean_over_groups", "all_items", "coverage")
OVERALL_MODES = ("macro_over_groups", "mean_over_questions")
CLIP_MODES = ("question", "group", "overall", "none")
NO_POSITIVE = ("formula", "exclude", "one", "zero")


@dataclass(frozen=True)
class Aggregation:
    """How per-item hits become numbers (the spec's `scoring` keys besides the formula).

    question: the question score is the mean of its taxonomy groups (abilities), or the formula over all items.
    overall: macro mean over groups (each = mean over the questions that have it), or mean over questions.
    clip: where values are clipped to [0, 1]: every per-question value, every reported mean (each breakdown
          group and the overall), only the overall, or nowhere.
    no_positive_points: a group (or question) whose items carry no positive weight: scored by the formula,
          left out, or scored 1 or 0.
    coverage_k, coverage_tag: question "coverage" only (see coverage_score).
    """

    question: str = "mean_over_groups"
    overall: str = "macro_over_groups"
    clip: str = "question"
    no_positive_points: str = "formula"
    coverage_k: float | None = None
    coverage_tag: str | None = None

    def __post_init__(self) -> None:
        for name, allowed in (("question", QUESTION_MODES), ("overall", OVERALL_MODES), ("clip", CLIP_MODES),
                              ("no_positive_points", NO_POSITIVE)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"aggregation.{name}: unknown value {getattr(self, name)!r}; allowed: {', '.join(allowed)}")
        if (self.question == "coverage") != (self.coverage_k is not None):
            raise ValueError("aggregation.question coverage needs coverage_k, and coverage_k needs question coverage")


DEFAULT_AGGREGATION = Aggregation()


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
    """One group (ability or item tag) within one question; raw/lo/hi kept so a report can show the arithmetic."""

    raw: float  # sum of the weights of the hit items (each weight x its credit where given: the expected points)
    lo: float  # sum of the negative weights
    hi: float  # sum of the positive weights
    score: float  # after failure rules and per-question clipping (if declared)


@dataclass(frozen=True)
class QuestionScore:
    abilities: dict[str, AbilityScore]  # taxonomy groups, in order of first appearance in the criteria
    score: float | None  # None only when the question has no positive points and they are excluded
    failed_rules: tuple[str, ...]  # ids of the rules that fired, in the order the rules were given
    catastrophic: bool  # a fired rule zeroed the question
    tags: dict[str, AbilityScore] = field(default_factory=dict)  # item-tag groups (those with a value)


def needed(k: float, n: int) -> int:
    """How many criteria a coverage score needs met: k itself when it is a whole number (1 or more), else the
    fraction k of the n coverage criteria, rounded up (0.5 of 5 needs 3)."""
    if k >= 1:
        return int(k)
    return math.ceil(k * n - 1e-9)  # 0.3 * 10 is 3.0000000000000004 in binary: still 3


def coverage_score(criteria: Sequence[Criterion], hits: Sequence[bool], k: float, tag: str | None) -> float:
    """1.0 when at least k of the coverage criteria are met, else 0.0 (ClinConsensus' CACS@k for one case).
    The coverage criteria are the scored items with a positive weight (carrying `tag`, when one is given); an
    item is met when its verdict is a hit. k above the number of coverage criteria cannot be reached: 0.0."""
    mine = [h for c, h in zip(criteria, hits)
            if c.rule is None and c.weight is not None and c.weight > 0 and (tag is None or tag in c.tags)]
    if not mine:
        raise ValueError("question has no coverage criteria (scored items with a positive weight"
                         + (f" tagged {tag!r})" if tag else ")") + "; a coverage score needs at least one")
    return 1.0 if sum(mine) >= needed(k, len(mine)) else 0.0


def _rule_fires(rule: FailureRuleLike, weight: float | None) -> bool:
    if rule.fires_when == "hit":
        return True
    return weight is not None and weight > 0  # 'hit_positive_weight'


def group_value(raw: float, lo: float, hi: float, fn: Formula, params: Mapping[str, Any],
                how: Aggregation) -> float | None:
    """One group's value: the no-positive-points rule, the formula, then per-question clipping."""
    if hi <= 0 and how.no_positive_points != "formula":
        return {"exclude": None, "one": 1.0, "zero": 0.0}[how.no_positive_points]
    value = fn(raw, lo, hi, params)
    return _clip01(value) if how.clip == "question" else value


def _resolve(formula: str | Formula) -> Formula:
    if callable(formula):
        return formula
    if formula not in RAW_FORMULAS:
        raise ValueError(f"unknown scoring formula {formula!r}; known: {', '.join(sorted(RAW_FORMULAS))}")
    return RAW_FORMULAS[formula]


def _rules_by_id(rules: Sequence[FailureRuleLike]) -> dict[str, FailureRuleLike]:
    by_id: dict[str, FailureRuleLike] = {}
    for rule in rules:
        if rule.effect not in EFFECTS:
            raise ValueError(f"failure rule {rule.id!r}: unknown effect {rule.effect!r}; known: {', '.join(EFFECTS)}")
        if rule.fires_when not in FIRES_WHEN:
            raise ValueError(
                f"failure rule {rule.id!r}: unknown fires_when {rule.fires_when!r}; known: {', '.join(FIRES_WHEN)}")
        by_id[rule.id] = rule
    return by_id


def _add(acc: list[float], w: float, got: float) -> None:
    """Add one item to a group's [raw, lo, hi]: `got` is the share of its points it earned (its verdict's 1 or 0,
    or its P(met): the expected points)."""
    acc[0] += w * got
    if w < 0:
        acc[1] += w
    elif w > 0:
        acc[2] += w


def _shares(criteria: Sequence[Criterion], hits: Sequence[bool],
            credits: Sequence[float | None] | None) -> list[float]:
    """Per criterion the share of its points it earned: its credit where one is given, else its verdict (1 or 0).
    A verdict that is no boolean, or a credit that is no number in [0, 1], is refused, never read as one."""
    if credits is not None and len(credits) != len(criteria):
        raise ValueError(f"{len(credits)} credits for {len(criteria)} criteria; give one per criterion (None: its verdict)")
    out = []
    for k, (crit, hit) in enumerate(zip(criteria, hits)):
        if hit not in (True, False):
            raise ValueError(f"criterion {crit.index}: hit must be a boolean, got {hit!r}")
        credit = credits[k] if credits is not None else None
        if credit is None:
            out.append(1.0 if hit else 0.0)
        elif isinstance(credit, bool) or not isinstance(credit, (int, float)) or not 0.0 <= credit <= 1.0:
            raise ValueError(f"criterion {crit.index}: its credit (P(met), p_met) must be a number from 0 to 1, "
                             f"got {credit!r}")
        else:
            out.append(float(credit))
    return out


def score_question(
    criteria: Sequence[Criterion],
    hits: Sequence[bool],
    formula: str | Formula,
    params: Mapping[str, Any],
    rules: Sequence[FailureRuleLike],
    how: Aggregation = DEFAULT_AGGREGATION,
    credits: Sequence[float | None] | None = None,
) -> QuestionScore:
    """Score one judged question: per-group formula, failure rules, then the question score.

    `credits` (judge.verdict.use: probability): per criterion the share of its points counted instead of its
    verdict's 1 or 0, its P(met) (None at an item: its verdict counts). Only the points change: each group's raw
    is the expected raw points and the formula applies to that (not an expectation of the formula); failure rules
    and a coverage count still read the verdicts (docs/methodology.md, "Expected points")."""
    fn = _resolve(formula)
    if len(hits) != len(criteria):
        raise ValueError(f"{len(hits)} hits for {len(criteria)} criteria; the judge must give exactly one per criterion")
    got = _shares(criteria, hits, credits)
    by_id = _rules_by_id(rules)
    groups: dict[str, list[float]] = {}  # ability -> [raw, lo, hi]
    tags: dict[str, list[float]] = {}
    total = [0.0, 0.0, 0.0]
    n_scored = 0
    fired: set[str] = set()
    by_tag = {t: r for r in by_id.values() for t in getattr(r, "tags", ())}  # veto groups chosen by item tag
    for crit, hit, share in zip(criteria, hits, got):
        fired.update(by_tag[t].id for t in crit.tags if hit and t in by_tag and _rule_fires(by_tag[t], crit.weight))
        if crit.ability is not None and crit.rule is not None or (
                how.question == "mean_over_groups" and crit.ability is None and crit.rule is None):
            raise ValueError(f"criterion {crit.index} ({crit.label!r}): exactly one of ability / rule must be set")
        if crit.rule is not None:
            rule = by_id.get(crit.rule)
            if rule is None:
                raise ValueError(f"criterion {crit.index}: failure rule {crit.rule!r} is not among the rules given "
                                 f"({', '.join(by_id) or 'none'})")
            if hit and _rule_fires(rule, crit.weight):
                fired.add(rule.id)
            continue
        if crit.weight is None:
            raise ValueError(f"criterion {crit.index} ({crit.label!r}): a scored item needs a weight, got None "
                             "(an ability item needs a weight)")
        w = float(crit.weight)
        n_scored += 1
        _add(total, w, share)
        if crit.ability is not None:
            _add(groups.setdefault(crit.ability, [0.0, 0.0, 0.0]), w, share)
        for tag in dict.fromkeys(crit.tags):
            _add(tags.setdefault(tag, [0.0, 0.0, 0.0]), w, share)
    if how.question == "mean_over_groups" and not groups:
        raise ValueError("question has no ability items; every question needs at least one scored criterion")
    if not n_scored:
        raise ValueError("question has no scored items; every question needs at least one scored criterion")

    failed = tuple(r.id for r in rules if r.id in fired)
    catastrophic = any(by_id[r].effect == "zero_question" for r in failed)

    def scored(sums: dict[str, list[float]]) -> dict[str, AbilityScore]:
        out = {}
        for name, (raw, lo, hi) in sums.items():
            value = group_value(raw, lo, hi, fn, params, how)
            if value is not None:
                out[name] = AbilityScore(raw, lo, hi, 0.0 if catastrophic else value)
        return out

    abilities, tag_scores = scored(groups), scored(tags)
    if how.question == "mean_over_groups":
        score: float | None = (sum(a.score for a in abilities.values()) / len(abilities)) if abilities else None
    elif how.question == "coverage":
        score = 0.0 if catastrophic else coverage_score(criteria, hits, float(how.coverage_k or 0), how.coverage_tag)
    else:
        score = group_value(*total, fn, params, how)
        score = 0.0 if catastrophic and score is not None else score
    return QuestionScore(abilities=abilities, score=score, failed_rules=failed, catastrophic=catastrophic,
                         tags=tag_scores)
