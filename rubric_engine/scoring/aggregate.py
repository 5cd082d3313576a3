"""From per-question scores to the benchmark's headline numbers and its breakdown tables.

Every reported number goes through ONE grouping function, `breakdown`: a question contributes to a
group either whole (its subset, scenario or example tags) or through one of its item groups (an
ability, a taxonomy level, an item tag), and each group's score is the spec's overall statistic
(`overall`) re-run on what the group holds. So an ability score, a dimension score, a subset score and
a tag score (as simple-evals computes tag scores) all mean the same thing under one declared `Aggregation`:

- overall = macro_over_groups: mean over abilities of (mean over the questions containing the ability);
- overall = mean_over_questions: mean of the question scores, each counted `weight` times (1 unless a
  question's score pools several judgments: MT-Bench's valid turns, Arena-Hard's game scores), so the
  overall is the mean over every judgment while questions stay the unit a bootstrap resamples;
- clip = group / overall: the mean is clipped to [0, 1] (every group's, or only the overall).

A group with no question is None and left out of every mean; nothing is filled in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from rubric_engine.datatypes import Question
from rubric_engine.record.codec import decode
from rubric_engine.record.types import Record
from rubric_engine.scoring.question import DEFAULT_AGGREGATION, Aggregation, QuestionScore

__all__ = ["ScoredQuestion", "NO_SCENARIO", "BREAKDOWN_KINDS", "aggregate", "ability_ids", "scenario_order", "overall",
           "breakdown", "breakdowns", "scored_from_samples", "scored_question", "group_members"]

NO_SCENARIO = "(none)"  # where questions with an empty scenario label are reported
BREAKDOWN_KINDS = ("ability", "dimension", "subset", "scenario", "item_tag", "example_tag")


@dataclass(frozen=True)
class ScoredQuestion:
    id: str
    subset: str
    scenario: str
    abilities: Mapping[str, float]  # taxonomy group (ability) id -> score, after failure rules
    score: float  # question score
    catastrophic: bool
    tags: tuple[str, ...] = ()  # question-level (example) tags
    item_tags: Mapping[str, float] = field(default_factory=dict)  # item tag -> this question's score on it
    weight: float = 1.0  # judgments the score pools (record `weight`); a mean over questions counts it this often


def scored_question(question: Question, qs: QuestionScore) -> ScoredQuestion | None:
    """The typed result of scoring one question, as aggregation reads it (None: no score, e.g. no positive
    points under no_positive_points=exclude)."""
    if qs.score is None:
        return None
    return ScoredQuestion(question.id, question.subset, question.scenario,
                          {a: s.score for a, s in qs.abilities.items()}, qs.score, qs.catastrophic,
                          question.tags, {t: s.score for t, s in qs.tags.items()})


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _pooled(scored: Sequence[ScoredQuestion]) -> float | None:
    """The mean over questions, each counted `weight` times: sum(w * s) / sum(w)."""
    total = sum(q.weight for q in scored)
    return sum(q.score * q.weight for q in scored) / total if scored else None


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def scenario_order(names: Iterable[str]) -> list[str]:
    """Scenario groups as every table shows them: sorted, the unlabelled ones ("(none)") last."""
    return sorted(names, key=lambda s: (s == NO_SCENARIO, s))


def ability_ids(dimensions: Mapping[str, Sequence[str]]) -> list[str]:
    """Every ability of the taxonomy once, in declaration order."""
    return list(dict.fromkeys(a for abilities in dimensions.values() for a in abilities))


def _statistic(scored: Sequence[ScoredQuestion], ids: Sequence[str], how: Aggregation, clip: bool) -> float | None:
    """The declared overall statistic on `scored` (0-1 scale); `ids` are the groups a macro mean runs over."""
    if how.overall == "mean_over_questions":
        value = _pooled(scored)
    else:
        known = set(ids)
        sums: dict[str, list[float]] = {a: [] for a in ids}
        for q in scored:
            for ability, v in q.abilities.items():
                if ability not in known:
                    raise ValueError(f"question {q.id!r} has ability {ability!r} that is not in the taxonomy; "
                                     f"known: {', '.join(ids)}")
                sums[ability].append(v)
        value = _mean([m for m in (_mean(v) for v in sums.values()) if m is not None])
    return value if value is None or not clip else _clip(value)


def overall(scored: Sequence[ScoredQuestion], dimensions: Mapping[str, Sequence[str]],
            how: Aggregation = DEFAULT_AGGREGATION) -> float | None:
    """The overall score (0-1) alone; None when nothing was scored."""
    return _statistic(scored, ability_ids(dimensions), how, how.clip in ("group", "overall"))


def _item_view(q: ScoredQuestion, name: str, value: float) -> ScoredQuestion:
    """The question seen through one of its item groups: that group is all it holds."""
    return ScoredQuestion(q.id, q.subset, q.scenario, {name: value}, value, q.catastrophic, q.tags, {})


def _views(q: ScoredQuestion, by: str, dimensions: Mapping[str, Sequence[str]],
           prefix: str) -> Iterable[tuple[str, Sequence[str], ScoredQuestion]]:
    """(group, the groups a macro mean runs over inside it, the question's view) for one question."""
    ids = ability_ids(dimensions)
    if by == "ability":
        for a, v in q.abilities.items():
            yield a, [a], _item_view(q, a, v)
    elif by == "item_tag":
        for t, v in q.item_tags.items():
            if t.startswith(prefix):
                yield t, [t], _item_view(q, t, v)
    elif by == "dimension":
        for d, members in dimensions.items():
            part = {a: q.abilities[a] for a in members if a in q.abilities}
            if part:
                score = sum(part.values()) / len(part)
                yield d, members, ScoredQuestion(q.id, q.subset, q.scenario, part, score, q.catastrophic, q.tags, {})
    elif by == "subset":
        if q.subset:
            yield q.subset, ids, q
    elif by == "scenario":
        yield q.scenario or NO_SCENARIO, ids, q
    elif by == "example_tag":
        for t in dict.fromkeys(q.tags):
            if t.startswith(prefix):
                yield t, ids, q
    else:
        raise ValueError(f"unknown breakdown kind {by!r}; known: {', '.join(BREAKDOWN_KINDS)}")


def breakdown(scored: Sequence[ScoredQuestion], by: str, dimensions: Mapping[str, Sequence[str]],
              how: Aggregation = DEFAULT_AGGREGATION, prefix: str = "", *, scale: float = 1.0) -> dict[str, float | None]:
    """The one grouping function: each group's score is the overall statistic on what the group holds.

    Taxonomy groups (ability, dimension) list every declared group, None where no question has it.
    """
    buckets: dict[str, tuple[Sequence[str], list[ScoredQuestion]]] = {}
    for q in scored:
        for group, ids, view in _views(q, by, dimensions, prefix):
            buckets.setdefault(group, (ids, []))[1].append(view)
    names: list[str] = list(buckets)
    if by == "ability":
        names = ability_ids(dimensions) + [n for n in names if n not in set(ability_ids(dimensions))]
    elif by == "dimension":
        names = list(dimensions)
    elif by == "scenario":
        names = scenario_order(names)
    elif by in ("item_tag", "example_tag"):
        names = sorted(names)
    out: dict[str, float | None] = {}
    for name in names:
        ids, views = buckets.get(name, ((), []))
        value = _statistic(views, ids, how, how.clip == "group") if views else None
        out[name] = None if value is None else value * scale
    return out


def _scaled(x: float | None, scale: float) -> float | None:
    return None if x is None else x * scale


def aggregate(
    scored: Sequence[ScoredQuestion],
    dimensions: Mapping[str, Sequence[str]],
    *,
    decay: tuple[str, str, str] | None = None,
    scale: float = 100.0,
    how: Aggregation = DEFAULT_AGGREGATION,
) -> dict[str, Any]:
    """Overall, per-ability, per-dimension, per-subset and per-scenario scores (all times `scale`).

    The fixed keys of summary.json; each table is a `breakdown`. decay = (from, to, base):
    decay_pct = (subset[from] - subset[to]) / subset[base] * 100, with the base reported next to it.
    """
    subsets: dict[str, Any] = breakdown(scored, "subset", dimensions, how, scale=scale)
    if decay is not None:
        src, dst, base = decay
        a, b, c = subsets.get(src), subsets.get(dst), subsets.get(base)
        subsets["decay_pct"] = None if a is None or b is None or not c else (a - b) / c * 100.0
        subsets["decay_base"] = base
    return {
        "overall": _scaled(overall(scored, dimensions, how), scale),
        "abilities": breakdown(scored, "ability", dimensions, how, scale=scale) if dimensions else {},
        "dimensions": breakdown(scored, "dimension", dimensions, how, scale=scale),
        "subsets": subsets,
        "scenarios": breakdown(scored, "scenario", dimensions, how, scale=scale),
    }


def breakdowns(scored: Sequence[ScoredQuestion], declared: Iterable[tuple[str, str, str]],
               dimensions: Mapping[str, Sequence[str]], how: Aggregation = DEFAULT_AGGREGATION,
               scale: float = 100.0) -> dict[str, dict[str, float | None]]:
    """{breakdown id: {group: score}} for the spec's declared (id, kind, prefix) breakdowns."""
    return {bid: breakdown(scored, by, dimensions, how, prefix, scale=scale) for bid, by, prefix in declared}


_NEEDED = "a samples.jsonl record needs id, subset, scenario, abilities, score, catastrophic"
_NEEDED_KEYS = frozenset({"id", "subset", "scenario", "abilities", "score", "catastrophic"})


def _field(record: Record, key: str, value: Any, where: str) -> Any:
    if not record.stored(key):
        raise ValueError(f"{where}: missing key {key!r}; {_NEEDED}")
    return value


def _scores(groups: Any, key: str, where: str) -> dict[str, float]:
    groups = groups or {}
    if not isinstance(groups, Mapping):
        raise ValueError(f"{where}: {key!r} must be a mapping of group -> {{raw, lo, hi, score}}")
    out: dict[str, float] = {}
    for name, detail in groups.items():
        if not isinstance(detail, Mapping) or not isinstance(detail.get("score"), (int, float)):
            raise ValueError(f"{where}: {key}.{name}.score must be a number, got {detail!r}")
        out[name] = float(detail["score"])
    return out


def scored_from_samples(samples: Iterable[Record | Mapping[str, Any]]) -> list[ScoredQuestion]:
    """ScoredQuestions from samples.jsonl records (decoded Records, or their JSON objects: a run's compact
    values); records with score null (errors) are skipped.

    The caller counts the skipped records (candidate / judge errors) so they are never averaged in.
    """
    out: list[ScoredQuestion] = []
    for n, item in enumerate(samples, 1):
        rec = item if isinstance(item, Record) else decode(item)
        if not _NEEDED_KEYS <= rec.layout.present:  # the first missing key named, in this order
            _field(rec, "score", rec.score, f"sample record {n}")
            if rec.score is None:
                continue
            where = f"sample record {n} (id {rec.id!r})"
            _scores(_field(rec, "abilities", rec.abilities, where), "abilities", where)
            for key in ("id", "subset", "scenario", "catastrophic"):
                _field(rec, key, None, where)
        score = rec.score
        if score is None:
            continue
        where = f"sample record {n} (id {rec.id!r})"
        out.append(ScoredQuestion(
            id=str(rec.id), subset=rec.subset or "", scenario=rec.scenario or "",
            abilities=_scores(rec.abilities, "abilities", where), score=float(score),
            catastrophic=bool(rec.catastrophic), tags=tuple(rec.tags),
            item_tags=_scores(rec.item_tags, "item_tags", where), weight=_weight(rec.weight, where)))
    return out


def _weight(w: Any, where: str) -> float:
    """A record's `weight` (absent: 1): a positive, finite number of pooled judgments."""
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w <= 0:
        raise ValueError(f"{where}: weight must be a positive number (the judgments its score pools), got {w!r}")
    return float(w)


def group_members(scored: Sequence[ScoredQuestion], by: str, dimensions: Mapping[str, Sequence[str]],
                  prefix: str = "") -> dict[str, list[str]]:
    """Question ids per group of a breakdown, by the same rule `breakdown` groups them: the counts a
    report prints beside each score, so a score of 40 on 2 questions never reads like one on 200."""
    out: dict[str, list[str]] = {}
    for q in scored:
        for group, _, _ in _views(q, by, dimensions, prefix):
            out.setdefault(group, []).append(q.id)
    return out
