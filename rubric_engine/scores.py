"""From stored verdicts to scores: the one path a run and `rescore` share.

Why a module of its own: `rubric-engine rescore` recomputes a run's scores from its samples.jsonl
without any model call, and must give exactly the numbers a run gives. So both the runner and
rescore call these two functions; there is no second copy of the per-question scoring or of the
aggregation. Pure: no I/O, no UI, no model client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from .aggregate import aggregate, scored_from_samples
from .datatypes import Criterion
from .lengths import length_block
from .scoring import score_question

__all__ = ["score_fields", "score_summary", "criteria_from_record", "EMPTY_SCORES"]

EMPTY_SCORES: dict[str, Any] = {"overall": None, "abilities": {}, "dimensions": {}, "subsets": {}, "scenarios": {}}


def score_fields(spec: Any, criteria: Sequence[Criterion], hits: Sequence[bool]) -> dict[str, Any]:
    """A samples.jsonl record's score fields (abilities, score, failed_rules, catastrophic) from one verdict."""
    qs = score_question(criteria, hits, spec.scoring.formula, spec.scoring.params, spec.failure_rules)
    return {"abilities": {a: {"raw": s.raw, "lo": s.lo, "hi": s.hi, "score": s.score} for a, s in qs.abilities.items()},
            "score": qs.score, "failed_rules": list(qs.failed_rules), "catastrophic": qs.catastrophic}


def criteria_from_record(rec: Mapping[str, Any]) -> list[Criterion]:
    """The Criterion objects a samples.jsonl record stored: every Criterion field the record holds
    (lists become tuples); verdict keys (reasoning, hit) and unknown keys are not criterion fields."""
    names = {f.name for f in fields(Criterion)}
    out = []
    for c in rec.get("criteria") or []:
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in c.items() if k in names}
        kw.update(index=int(c["index"]), label=str(c.get("label", "")), text=str(c.get("text", "")),
                  weight=c.get("weight"))
        out.append(Criterion(**kw))
    return out


def score_summary(spec: Any, samples: Sequence[Mapping[str, Any]], *, scored_stage: bool = True,
                  n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """summary.json's score keys: overall .. scenarios, counts and the length analysis.

    `spec` is a BenchmarkSpec; `scored_stage` is False for stage=generate (nothing was judged).
    """
    scored = scored_from_samples(samples)
    decay = spec.report.decay
    agg = aggregate(scored, spec.dimensions_map(), decay=(decay.from_, decay.to, decay.base) if decay else None,
                    scale=spec.scoring.scale) if scored_stage else dict(EMPTY_SCORES)
    return {
        **agg,
        "counts": {"questions": len(samples), "scored": len(scored),
                   "judge_errors": sum(1 for s in samples if s.get("judge_error")),
                   "candidate_errors": sum(1 for s in samples if s.get("candidate_error")),
                   "catastrophic": sum(1 for s in scored if s.catastrophic)},
        "length": length_block(samples, spec.ability_ids(), n_boot=n_boot, seed=seed) if scored_stage else None,
    }
