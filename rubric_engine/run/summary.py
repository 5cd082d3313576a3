"""The run's summary.json from the compact totals the journal folded in.

Why apart from the runner: the summary is the stable output (docs/outputs.md); one function
builds it from `runstream.Totals`, whether the run was resumed or not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rubric_engine.errors import DataError
from rubric_engine.record.summary import Summary
from rubric_engine.run import stream as runstream
from rubric_engine.run.plan import RunPlan
from rubric_engine.run.settings import RunSettings
from rubric_engine.scoring.aggregate import ScoredQuestion
from rubric_engine.spec.schema import BenchmarkSpec
from rubric_engine.stats.scores import score_summary
from rubric_engine.store import layout as rundir

NO_JUDGE: dict[str, Any] = {"name": "none", "model": None, "family": None}  # every item checked by the engine



def build_summary(settings: RunSettings, plan: RunPlan, spec: BenchmarkSpec, dataset: Any,
                  totals: runstream.Totals, scored: Sequence[ScoredQuestion],
                  calls: Mapping[str, Any], compact: Sequence[Mapping[str, Any]]) -> Summary:
    judged, judge_spec = plan.judged, plan.judges[0] if plan.judges else None  # none: every item is checked
    cand = settings.candidate
    summary: Summary = {
        "schema_version": rundir.SUMMARY_SCHEMA_VERSION,
        "benchmark": spec.name, "benchmark_version": spec.version, "data_sha256": dataset.sha256,
        "data_trust": dataset.trust,
        # data.path= as given (absolute), None for the spec's own data: stage=score from_run= reuses it
        "data_path": str(Path(settings.data_path).absolute()) if settings.data_path else None,
        "candidate": {"name": cand.name, "model": cand.model, "family": cand.family} if cand else _answers_candidate(settings),
        "judge": ({"name": judge_spec.name, "model": judge_spec.model, "family": judge_spec.family} if judge_spec
                  else NO_JUDGE) if judged else None,
        # the same path `rescore` takes from samples.jsonl (stats/scores.py): one aggregation, never two; the
        # journal's compact per-question values stand in for the records
        **score_summary(spec, compact, scored_stage=judged, scored=scored),  # type: ignore[typeddict-item]
        "tokens": totals.tokens,
        "cost": totals.costs(),
        "calls": dict(calls),
        "selection": {"subset": settings.subset, "limit": settings.limit, "ids": list(settings.ids) if settings.ids else None},
        "stage": plan.stage,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if totals.verdict_paths:  # how each judge's verdicts were obtained (judge/structured.py: structured, plain, reasked)
        summary["verdict_paths"] = {k: dict(v) for k, v in totals.verdict_paths.items()}
    if plan.user is not None:  # a simulated conversation: its simulated user, and how its sessions went
        summary["user"] = {"name": plan.user.name, "model": plan.user.model, "family": plan.user.family}
        summary["counts"].update({"user_errors": totals.user_errors, "cut_at_max_turns": totals.cut_at_max_turns})
    return summary


def _answers_candidate(settings: RunSettings) -> dict[str, Any]:
    """Score-only runs: from_run keeps the earlier run's candidate (name, model, family), so several
    judges re-grading one run's replies stay attributable to the same candidate; else the file's name."""
    if settings.from_run:
        try:
            prior = rundir.read_summary(Path(settings.from_run)).get("candidate")
        except DataError:  # an unreadable earlier summary: name the candidate after the directory
            prior = None
        if isinstance(prior, dict) and prior.get("name"):
            return {"name": str(prior["name"]), "model": prior.get("model"), "family": prior.get("family")}
    return {"name": _answers_name(settings), "model": None, "family": None}


def _answers_name(settings: RunSettings) -> str:
    src = settings.from_run or settings.answers or "answers"
    return Path(src).stem if settings.answers else Path(src).name
