"""The summary sections of scores on a scale: per-turn means and the intervals of every group table.

Why apart from stats/scores.py: these sections exist only for `judge.verdict.kind: score`. The turn-k mean is
the mean over questions of their valid turn-k scores (FastChat's per-turn table, failed judgments left out);
the overall and every whole-question group are the spec's weighted means (scoring/scalar.py gives each
question the number of its valid turns as its weight, so the overall is the pooled mean over every valid
judgment). Each interval resamples questions (1000 resamples, seed 0, 95% percentile), as the overall's does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rubric_engine.scoring.aggregate import ScoredQuestion, group_members
from rubric_engine.scoring.question import Aggregation
from rubric_engine.stats.bootstrap import bootstrap_stats

__all__ = ["score_sections", "turn_pairs"]

_MEAN = Aggregation(question="all_items", overall="mean_over_questions", clip="none")


def turn_pairs(turns: Sequence[Any]) -> list[list[Any]]:
    """[turn, score or None] for each judgment of a record (what the summary needs of its `turns`); pairs
    already made (a running run's compact records) are returned as they are."""
    return [[int(t["turn"]), None if t.get("error") else t.get("score")] if isinstance(t, Mapping) else list(t)
            for t in turns]


def _interval(scored: Sequence[ScoredQuestion], how: Aggregation, scale: float, n: int, seed: int) -> dict[str, Any]:
    stats = bootstrap_stats(scored, {}, n, seed, scale=scale, how=how)
    return {"lo": stats["lo"], "hi": stats["hi"], "std": stats["std"]}


def _turn_table(samples: Sequence[Mapping[str, Any]], scale: float, n: int, seed: int) -> dict[str, Any]:
    per: dict[int, list[ScoredQuestion]] = {}
    errors: dict[int, int] = {}
    for rec in samples:
        for turn, score in turn_pairs(rec.get("turns") or []):
            if score is None:
                errors[turn] = errors.get(turn, 0) + 1
                continue
            per.setdefault(turn, []).append(ScoredQuestion(str(rec.get("id", "")), "", "", {}, float(score), False))
    table: dict[str, Any] = {}
    for turn in sorted(set(per) | set(errors)):
        got = per.get(turn, [])
        row: dict[str, Any] = {"mean": sum(q.score for q in got) / len(got) * scale if got else None,
                               "judgments": len(got), "errors": errors.get(turn, 0)}
        if got:
            row.update(_interval(got, _MEAN, scale, n, seed))
        table[str(turn)] = row
    return table


def score_sections(spec: Any, samples: Sequence[Mapping[str, Any]], scored: Sequence[ScoredQuestion],
                   n: int = 1000, seed: int = 0) -> dict[str, Any]:
    """`turns` (per-turn means with intervals), `group_intervals` (an interval per group of the scenario table
    and of every declared breakdown), `scale` (the declared range and scope) and `turn_errors` (failed
    judgments, for the counts), for a score verdict's summary."""
    scale, how = spec.scoring.scale, spec.aggregation_rule()
    by_id = {q.id: q for q in scored}
    tables: dict[str, dict[str, Any]] = {}
    kinds = ([("scenarios", "scenario", "")] if spec.data.fields.scenario else []) + spec.declared_breakdowns()
    for name, by, prefix in [(k[0], k[1], k[2]) for k in kinds]:
        members = group_members(scored, by, {}, prefix)
        tables[name] = {g: {"questions": len(ids), **_interval([by_id[i] for i in ids], how, scale, n, seed)}
                        for g, ids in members.items()}
    v = spec.judge.verdict
    turns = _turn_table(samples, scale, n, seed)
    return {"scale": {"min": v.min, "max": v.max, "scope": spec.judge.scope}, "turns": turns,
            "group_intervals": tables, "turn_errors": sum(row["errors"] for row in turns.values())}
