"""From stored verdicts to scores: the one path a run and `rescore` share.

Why a module of its own: `rubric-engine rescore` recomputes a run's scores from its samples.jsonl
without any model call, and must give exactly the numbers a run gives. So both the runner and
rescore call these functions; there is no second copy of the per-question scoring (the spec's
formula, params, failure rules and aggregation rule) nor of the aggregation (summary keys overall ..
scenarios, breakdowns, interval, aggregation, counts, length). Pure: no I/O, no UI, no model client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from rubric_engine.datatypes import Criterion
from rubric_engine.errors import DataError
from rubric_engine.record.codec import decode
from rubric_engine.record.types import Record
from rubric_engine.records import GroupScore, SampleRecord
from rubric_engine.scoring.aggregate import ScoredQuestion, aggregate, breakdowns, scored_from_samples
from rubric_engine.scoring.checks import CheckProblem, parse_check
from rubric_engine.scoring.question import QuestionScore, score_question
from rubric_engine.stats.bootstrap import bootstrap_stats
from rubric_engine.stats.dialogues import dialogue_section
from rubric_engine.spec.facts import facts_of
from rubric_engine.stats.lengths import length_block
from rubric_engine.stats.turns import score_sections

_CRITERION_FIELDS = ("ability", "rule")  # the stored item's fields a Criterion takes besides index .. tags, check

__all__ = ["question_score", "credits", "group_scores", "record_fields", "score_fields", "rescored_fields", "score_summary", "criteria_from_record", "zero_fields",
           "EMPTY_SCORES", "INTERVAL_SAMPLES", "INTERVAL_SEED", "unread_choices"]

EMPTY_SCORES: dict[str, Any] = {"overall": None, "abilities": {}, "dimensions": {}, "subsets": {}, "scenarios": {}}
INTERVAL_SAMPLES, INTERVAL_SEED = 1000, 0


def question_score(spec: Any, criteria: Sequence[Criterion], hits: Sequence[bool],
                   credit: Sequence[float | None] | None = None) -> QuestionScore:
    """One judged question scored under the spec: its formula, params, failure rules and aggregation rule;
    `credit`: per criterion the share of its points counted instead of its verdict (`credits`)."""
    return score_question(criteria, hits, spec.formula(), spec.scoring.params, spec.failure_rules,
                          spec.aggregation_rule(), credit)


def credits(spec: Any, p_met: Sequence[Any]) -> list[Any] | None:
    """What each criterion counts besides its verdict, from its P(met) (`p_met`, None where it has none): under
    judge.verdict.use: probability on a criteria verdict, P(met) itself (the expected points; None: its verdict
    counts: a check, a reply without log-probabilities); else None (every verdict counts 1 or 0)."""
    return list(p_met) if facts_of(spec).expected_points else None


def group_scores(scores: Mapping[str, Any]) -> dict[str, GroupScore]:
    """A question's scores per ability (or item tag) as the record stores them."""
    return {a: {"raw": s.raw, "lo": s.lo, "hi": s.hi, "score": s.score} for a, s in scores.items()}


def record_fields(qs: QuestionScore) -> SampleRecord:
    """A samples.jsonl record's score fields: abilities, item_tags (when any), score, failed_rules, catastrophic."""
    out: SampleRecord = {"abilities": group_scores(qs.abilities)}
    if qs.tags:
        out["item_tags"] = group_scores(qs.tags)
    out.update({"score": qs.score, "failed_rules": list(qs.failed_rules), "catastrophic": qs.catastrophic})
    return out


def score_fields(spec: Any, criteria: Sequence[Criterion], hits: Sequence[bool],
                 p_met: Sequence[Any] | None = None) -> SampleRecord:
    """record_fields of question_score: what `rescore` writes back into a stored record (`p_met`: the items'
    stored P(met), counted where the spec says so: `credits`)."""
    return record_fields(question_score(spec, criteria, hits, credits(spec, p_met) if p_met is not None else None))


def rescored_fields(spec: Any, rec: Record, out: dict[str, Any], rules: bool, where: str) -> dict[str, Any]:
    """`out` (the stored record `rec` as its JSON object) with its score fields recomputed from the stored
    per-criterion verdicts; unchanged for a record never judged (a counted error). `rules` False leaves the
    failure-rule items out."""
    hits = [c.hit for c in rec.criteria]
    if rec.judge_error or rec.candidate_error or all(h is None for h in hits):
        return out  # never judged (a counted error): stays unscored
    criteria = criteria_from_record(rec)
    if any(h not in (True, False) for h in hits):
        raise DataError(where, f"question {rec.id!r} has a score but a criterion without a verdict",
                        fix="re-score the run from its answers (stage=score from_run=...)")
    p_met = [c.p_met for c in rec.criteria]
    if not rules:
        keep = [i for i, c in enumerate(criteria) if c.rule is None]
        criteria, hits, p_met = [criteria[i] for i in keep], [hits[i] for i in keep], [p_met[i] for i in keep]
    out.pop("item_tags", None)  # written again by score_fields when the question has item tags
    try:
        out.update(score_fields(spec, criteria, [bool(h) for h in hits], p_met))  # every hit is true or false (above)
    except ValueError as exc:
        raise DataError(where, f"question {rec.id!r}: {exc}") from None
    return out


def zero_fields(spec: Any, criteria: Sequence[Criterion]) -> SampleRecord:
    """A question whose candidate failed for good, under `aggregation.candidate_errors: zero`: the score
    fields of a reply that met no criterion (the same groups, lo and hi), every group's score and the
    question's 0, no rule fired; `zeroed` says why. {} when such a reply has no score either (no positive
    points, excluded): the question stays unscored."""
    qs = question_score(spec, criteria, [False] * len(criteria))
    if qs.score is None:
        return {}
    out: SampleRecord = {"abilities": group_scores({a: replace(g, score=0.0) for a, g in qs.abilities.items()})}
    if qs.tags:
        out["item_tags"] = group_scores({t: replace(g, score=0.0) for t, g in qs.tags.items()})
    out.update({"score": 0.0, "failed_rules": [], "catastrophic": False, "zeroed": "candidate_error"})
    return out


def unread_choices(rec: Record | Mapping[str, Any]) -> int:
    """A multiple-choice record's replies from which no option letter could be read (each candidate sample's);
    a run's compact totals carry the count as `no_choice`."""
    if isinstance(rec, Record):
        return sum(1 for e in rec.entries() if e.stored("choice") and e.choice is None)
    if "no_choice" in rec:
        return int(rec["no_choice"])
    entries = rec["samples"] if "samples" in rec else [rec]
    return sum(1 for e in entries if "choice" in e and e["choice"] is None)


def criteria_from_record(rec: Record | Mapping[str, Any]) -> list[Criterion]:
    """The Criterion objects a samples.jsonl record stored (a decoded Record, or its JSON object): every
    Criterion field the item holds (verdict fields, reasoning and hit, are not criterion fields)."""
    typed = rec if isinstance(rec, Record) else decode(rec)
    out = []
    for c in typed.criteria:
        if c.index is None:
            raise KeyError("index")
        kw: dict[str, Any] = {name: getattr(c, name) for name in _CRITERION_FIELDS if c.layout.has(name)}
        kw.update(index=int(c.index), label=str(c.label), text=str(c.text), weight=c.weight,
                  tags=tuple(c.tags))
        if c.check is not None:  # an engine-checked item, typed again (its stored result is its `hit`)
            try:
                kw["check"] = parse_check(c.check, allow_choice=True, allow_code=True)
            except CheckProblem as exc:
                raise DataError("samples.jsonl", f"question {typed.id!r}, criterion {c.index}: check: {exc}",
                                fix="restore the record's check as the run wrote it") from None
        out.append(Criterion(**kw))
    return out


def _interval(spec: Any, scored: Sequence[ScoredQuestion]) -> dict[str, Any] | None:
    """The overall's 95% percentile bootstrap interval and bootstrap std (1000 resamples, seed 0)."""
    if not scored:
        return None
    stats = bootstrap_stats(scored, spec.dimensions_map(), INTERVAL_SAMPLES, INTERVAL_SEED, scale=spec.scoring.scale,
                            how=spec.aggregation_rule())
    return {"samples": INTERVAL_SAMPLES, "seed": INTERVAL_SEED, "alpha": 0.05, "lo": stats["lo"], "hi": stats["hi"],
            "std": stats["std"]}


def score_summary(spec: Any, samples: Sequence[Mapping[str, Any]], *, scored_stage: bool = True,
                  scored: Sequence[ScoredQuestion] | None = None, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """summary.json's score keys: overall .. scenarios, breakdowns, interval, aggregation, counts, length.

    `spec` is a BenchmarkSpec; `scored_stage` is False for stage=generate (nothing was judged). `scored`:
    the typed results when the caller has them (the runner); else they are read from the records, which
    hold the same values (rescore)."""
    if scored is None:
        scored = scored_from_samples(samples)
    decay, how, dims = spec.report.decay, spec.aggregation_rule(), spec.dimensions_map()
    agg = aggregate(scored, dims, decay=(decay.from_, decay.to, decay.base) if decay else None,
                    scale=spec.scoring.scale, how=how) if scored_stage else dict(EMPTY_SCORES)
    if not spec.data.fields.scenario:  # no scenario column: no scenario table (not one "(none)" row)
        agg["scenarios"] = {}
    out = {
        **agg,
        "breakdowns": breakdowns(scored, spec.declared_breakdowns(), dims, how, spec.scoring.scale)
        if scored_stage else {},
        "interval": _interval(spec, scored) if scored_stage else None,
        "aggregation": {"formula": spec.scoring.formula, "question": how.question, "overall": how.overall,
                        "clip": how.clip, "no_positive_points": how.no_positive_points,
                        "candidate_errors": spec.aggregation.candidate_errors,
                        **({"coverage": spec.aggregation.coverage.model_dump(mode="json")}
                           if spec.aggregation.coverage else {})},
        "counts": {"questions": len(samples), "scored": len(scored),
                   "judge_errors": sum(1 for s in samples if s.get("judge_error")),
                   "candidate_errors": sum(1 for s in samples if s.get("candidate_error")),
                   "catastrophic": sum(1 for s in scored if s.catastrophic),
                   "truncated": sum(1 for s in samples if s.get("truncated")),
                   # multiple choice: replies from which no option letter could be read (scored as wrong)
                   **({"no_choice": sum(unread_choices(s) for s in samples)} if spec.data.fields.choices else {}),
                   # questions left out for having no positive points (only where the spec excludes them)
                   **({"unscored": sum(1 for o in samples if o.get("score") is None and not o.get("judge_error")
                                       and not o.get("candidate_error") and scored_stage)}
                      if how.no_positive_points == "exclude" else {}),
                   # candidate errors scored 0 (counted in candidate_errors too), where the spec says so
                   **({"candidate_errors_zeroed": sum(1 for o in samples if o.get("zeroed"))}
                      if spec.aggregation.candidate_errors == "zero" else {})},
        "length": length_block(samples, spec.ability_ids(), n_boot=n_boot, seed=seed) if scored_stage else None,
    }
    if spec.failure_rules and scored_stage:  # each failure rule (veto group): the scored questions it zeroed
        out["vetoes"] = {r.id: sum(1 for o in samples if o.get("score") is not None and r.id in (o.get("failed_rules") or ()))
                         for r in spec.failure_rules}  # (a question where several rules fired counts under each)
    if spec.data.expand is not None and scored_stage:  # one question per turn: dialogues weigh equally
        out["dialogues"] = dialogue_section(scored, [str(s["id"]) for s in samples], spec.scoring.scale,
                                            INTERVAL_SAMPLES, INTERVAL_SEED)
        out["overall"], out["interval"] = out["dialogues"]["overall"], out["dialogues"]["interval"]
    if facts_of(spec).scale_sections and scored_stage:  # scores on a scale: per-turn means, group intervals (stats/turns.py)
        sections = score_sections(spec, samples, scored, INTERVAL_SAMPLES, INTERVAL_SEED)
        out["counts"]["turn_errors"] = sections.pop("turn_errors")
        out.update(sections)
    return out
