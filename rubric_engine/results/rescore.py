"""`rubric-engine rescore`: recompute a run's scores from its stored verdicts, with no model call.

Why: the first experiments on a rubric benchmark change how verdicts become scores (raw counts vs
the log-normalised formula, failure rules on or off), not the verdicts themselves; paying the
judge again for that would be waste. The scores are recomputed by stats/scores.py, the very functions a
run uses, so re-scoring with the run's own formula gives back its summary exactly. LiteLLM is
never imported here.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.record.types import Record
from rubric_engine.records import SampleRecord
from rubric_engine.scoring.formulas import known_names
from rubric_engine.shapes.base import Verdict
from rubric_engine.shapes.registry import shape_for
from rubric_engine.stats.sampling import rescored_record, summary_sections
from rubric_engine.stats.scores import criteria_from_record, score_fields, score_summary
from rubric_engine.stats.selfpref import rank
from rubric_engine.store import layout as rundir

__all__ = ["rescore_run", "rescore_command", "compare_summaries", "USAGE"]

USAGE = ("rubric-engine rescore RUN_DIR [RUN_DIR...] [scoring.formula=log_normalised|linear|met_over_positive] "
         "[failure_rules=on|off] [aggregation.coverage.k=K] [out=DIR] [trust_code=true]")


def _parse_k(text: str | None) -> float | None:
    """rescore's aggregation.coverage.k= as the number a coverage block takes (checked as a spec's k is)."""
    from pydantic import ValidationError

    from rubric_engine.spec.aggregation import Coverage

    if text is None:
        return None
    try:
        return Coverage(k=int(text) if str(text).strip().lstrip("-").isdigit() else float(text)).k
    except (ValueError, ValidationError):
        raise ConfigError(f"rescore: aggregation.coverage.k={text} is not valid; use a whole number of criteria "
                          "(1 or more) or a fraction strictly between 0 and 1, e.g. aggregation.coverage.k=10") from None


def _spec(run: Any, formula: str | None, rules: bool, k: float | None = None) -> Any:
    """The run's resolved spec, validated like a run's (its formula resolved under the trust rule), with the
    formula / failure rules / coverage k asked for."""
    from rubric_engine.spec.load import load_resolved

    spec = load_resolved(run.spec, str(run.dir / rundir.SPEC_FILE), run.trust_code, formula, k)
    return spec if rules else spec.model_copy(update={"failure_rules": []})  # the resolved formula is kept


def _rescored(spec: Any, verdict: Verdict, rec: Record, rules: bool, where: str) -> SampleRecord:
    """One samples.jsonl record, as its JSON object, with its score fields recomputed from its stored verdicts."""
    if rec.samples:  # candidate.samples: every sample re-scored, then the question's means (stats/sampling.py)
        return rescored_record(rec, criteria_from_record(rec), rules, where,
                               lambda criteria, hits, p_met: score_fields(spec, criteria, hits, p_met))
    return cast(SampleRecord, verdict.rescored(spec, rec, rules, where))  # the verdict reads its own fields (shapes/)


def rescore_run(run: Any, out_dir: Path, formula: str | None = None, rules: bool = True,
                k: float | None = None) -> dict[str, Any]:
    """Re-score one loaded run (leaderboard.RunRecord) into out_dir; returns the new summary. `k`: a coverage
    spec's k instead of the run's own."""
    spec = _spec(run, formula, rules, k)
    where = str(run.dir / rundir.SAMPLES_FILE)
    verdict = shape_for(spec).verdict
    samples = [_rescored(spec, verdict, rec, rules, where) for rec in run.iter_records()]
    summary = dict(run.summary)
    try:
        summary.update(score_summary(spec, samples, scored_stage=summary.get("stage") != "generate"))
        if summary.get("stage") != "generate":  # the verdict's own section, from the rescored records (shapes/)
            summary.update(verdict.summary_section(spec, lambda: samples))
        nested = (run.summary.get("interval") or {}).get("nested")
        if nested:  # a sampled or repeated run: the same hierarchical interval and sampling block as the run's
            summary.update(summary_sections(spec, samples, criteria_from_record, samples=int(nested["candidate_samples"]),
                                            repeats=int(nested["repeats"]), rule=nested["rule"], tie=nested["tie"],
                                            rules=rules))
    except ValueError as exc:
        raise DataError(where, str(exc)) from None
    original = run.summary.get("spec_hash")
    changed = spec.scoring.formula != (run.spec.get("scoring") or {}).get("formula") or not rules or k is not None
    if changed and original:
        # other scoring rules than the run's spec: the summary must not claim that spec's hash
        summary["spec_hash"] = _rescored_hash(original, spec.scoring.formula, rules, k)
    summary["rescore"] = {"from": str(run.dir), "formula": spec.scoring.formula, "failure_rules": rules,
                          **({"coverage_k": k} if k is not None else {}),
                          "spec_hash_from": original,
                          "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                          "note": "scores recomputed from the stored verdicts; tokens, cost and calls are the original run's"}
    out_dir.mkdir(parents=True, exist_ok=True)
    identity = {"benchmark": summary.get("benchmark"), "spec_hash": summary.get("spec_hash"), "stage": "rescore",
                "rescore_of": str(run.dir), "formula": spec.scoring.formula, "failure_rules": rules}
    with rundir.RunLock(out_dir):  # one process writes a run directory, a rescore's too
        manifest = rundir.begin_run(out_dir, identity)  # running until every file is written, like a run
        resolved = {**spec.model_dump(mode="json", by_alias=True), "_files": run.spec.get("_files", [])}
        rundir.write_json(out_dir / rundir.SPEC_FILE, resolved)
        rundir.write_jsonl(out_dir / rundir.SAMPLES_FILE, samples)
        rundir.write_json(out_dir / rundir.SUMMARY_FILE, summary)
        rundir.finish_run(out_dir, manifest)
    return summary


def _rescored_hash(original: str, formula: str, rules: bool, k: float | None = None) -> str:
    """The spec hash of a re-scored summary: the original spec's hash with the rescore's own scoring rules."""
    own = {"formula": formula, "failure_rules": rules, **({"coverage_k": k} if k is not None else {})}
    text = json.dumps({"spec_hash": original, "rescore": own}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def compare_summaries(pairs: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]],
                      labels: Mapping[str, str]) -> dict[str, Any]:
    """Side by side, per run: overall, dimensions and abilities before / after with their ranks;
    across runs: each run's rank before / after."""
    runs: list[dict[str, Any]] = []
    for name, old, new in pairs:
        rows = []
        for key in ("dimensions", "abilities"):
            before, after = dict(old.get(key) or {}), dict(new.get(key) or {})
            rb, ra = rank(before), rank(after)
            for k in before:
                b, a = before[k], after.get(k)
                rows.append({"kind": "ability" if key == "abilities" else "dimension", "id": k,
                             "label": labels.get(k, k), "before": b, "after": a,
                             "delta": None if a is None or b is None else a - b,
                             "rank_before": rb[k], "rank_after": ra.get(k),
                             "moved": rb[k] != ra.get(k)})
        runs.append({"run": name, "overall_before": old.get("overall"), "overall_after": new.get("overall"),
                     "catastrophic_before": (old.get("counts") or {}).get("catastrophic"),
                     "catastrophic_after": (new.get("counts") or {}).get("catastrophic"), "rows": rows})
    rb = rank({r["run"]: r["overall_before"] for r in runs})
    ra = rank({r["run"]: r["overall_after"] for r in runs})
    for r in runs:
        r["rank_before"], r["rank_after"] = rb[r["run"]], ra[r["run"]]
    return {"runs": runs}


def _fmt(x: float | None, signed: bool = False) -> str:
    return "—" if x is None else (f"{x:+.2f}" if signed else f"{x:.2f}")


def _markdown(cmp: Mapping[str, Any], formula: str, rules: bool) -> str:
    lines = [f"# Re-scored: formula {formula}, failure rules {'on' if rules else 'off'}", ""]
    if len(cmp["runs"]) > 1:
        lines += ["| run | overall before | overall after | rank before | rank after |", "|---|---:|---:|---:|---:|"]
        lines += [f"| {r['run']} | {_fmt(r['overall_before'])} | {_fmt(r['overall_after'])} | {r['rank_before']} "
                  f"| {r['rank_after']} |" for r in cmp["runs"]]
        lines.append("")
    for r in cmp["runs"]:
        lines += [f"## {r['run']}", "", f"overall {_fmt(r['overall_before'])} -> {_fmt(r['overall_after'])}; "
                  f"catastrophic {r['catastrophic_before']} -> {r['catastrophic_after']}", "",
                  "| | id | before | after | delta | rank before | rank after |", "|---|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {row['kind']} | {row['label']} | {_fmt(row['before'])} | {_fmt(row['after'])} | "
                  f"{_fmt(row['delta'], True)} | {row['rank_before'] or '—'} | {row['rank_after'] or '—'}"
                  f"{' (moved)' if row['moved'] else ''} |" for row in r["rows"]]
        lines.append("")
    return "\n".join(lines)


def rescore_command(dirs: Sequence[Path], out: Path | None = None, formula: str | None = None,
                    rules: bool = True, console: Any = None, trust_code: bool = False,
                    coverage_k: str | None = None) -> dict[str, Any]:
    """Re-score every run under `dirs`; write each into out (or beside the one run) plus compare.md/json."""
    from rich.table import Table

    from rubric_engine.text import terminal as termtext

    from rubric_engine.store.runs import RunTaxonomy, collect_runs

    if formula is not None and ":" not in formula and formula not in known_names():
        raise ConfigError(f"rescore: unknown scoring.formula {formula!r}; known: {', '.join(known_names())}")
    k = _parse_k(coverage_k)
    runs = collect_runs([Path(d) for d in dirs], trust_code=trust_code)
    shown = formula or str((runs[0].spec.get("scoring") or {}).get("formula", "as-run"))
    tag = f"rescore-{shown}{'' if rules else '-norules'}{'' if k is None else f'-k{k}'}"
    # Default: inside each run dir (RUN_DIR/rescore-<formula>/): "next to" its summary, and never picked up
    # as an extra run when a parent sweep dir is ranked (run dirs are not searched below their summary.json).
    common = Path(os.path.commonpath([str(r.dir.resolve()) for r in runs])) if len(runs) > 1 else None
    pairs = []
    beside = out is None
    for run in runs:
        name = run.dir.name if common is None else str(run.dir.resolve().relative_to(common))
        if out is None:
            target = run.dir / tag
        else:
            target = Path(out) if common is None else Path(out) / name
        dup = sum((r.candidate, r.judge) == (run.candidate, run.judge) for r in runs) > 1
        pairs.append((f"{run.candidate} ({run.judge})" + (f" [{name}]" if dup else ""), run.summary,
                      rescore_run(run, target, formula, rules, k), target))
    if out is None:
        out = runs[0].dir / tag if common is None else (Path(dirs[0]) if len(dirs) == 1 else Path("."))
        stem = "compare" if common is None else f"{tag}-compare"
    else:
        stem = "compare"
    out = Path(out)
    tax = RunTaxonomy.from_spec(runs[0].spec, str(runs[0].dir / rundir.SPEC_FILE))
    cmp = {"formula": shown, "failure_rules": rules, "outputs": {name: str(target) for name, _, _, target in pairs},
           **compare_summaries([(name, old, new) for name, old, new, _ in pairs], tax.labels)}
    rundir.write_json(out / f"{stem}.json", cmp)
    rundir.write_text(out / f"{stem}.md", _markdown(cmp, shown, rules))
    console = console or termtext.SafeConsole()
    if len(cmp["runs"]) == 1:  # dimensions and abilities in tables of their own, as a run's console shows them
        r = cmp["runs"][0]
        console.print(f"{termtext.shown(r['run'])}: overall {_fmt(r['overall_before'])} -> "
                      f"{_fmt(r['overall_after'])} (formula {shown}, failure rules {'on' if rules else 'off'})",
                      highlight=False, markup=False, soft_wrap=True)
        for kind in dict.fromkeys(row["kind"] for row in r["rows"]):
            plural = "Dimensions" if kind == "dimension" else "Abilities"
            t = Table(title=f"{plural} (rank among the {plural.lower()})")
            for col in (kind.capitalize(), "before", "after", "delta", "rank"):
                t.add_column(col, justify="right" if col in ("before", "after", "delta", "rank") else "left")
            for row in (x for x in r["rows"] if x["kind"] == kind):
                rank = f"{row['rank_before'] or '—'} -> {row['rank_after'] or '—'}"
                t.add_row(termtext.shown(row["label"]), _fmt(row["before"]), _fmt(row["after"]),
                          _fmt(row["delta"], True), f"[bold]{rank}" if row["moved"] else rank)
            console.print(t)
    else:
        t = Table(title=f"Re-scored with formula {shown}, failure rules {'on' if rules else 'off'}")
        for col in ("Run", "overall before", "overall after", "rank", "abilities whose rank moves"):
            t.add_column(col, justify="left" if col == "Run" else "right", overflow="fold")
        for r in cmp["runs"]:
            rank = f"{r['rank_before'] or '—'} -> {r['rank_after'] or '—'}"
            t.add_row(termtext.shown(r["run"]), _fmt(r["overall_before"]), _fmt(r["overall_after"]),
                      f"[bold]{rank}" if r["rank_before"] != r["rank_after"] else rank,
                      str(sum(row["moved"] for row in r["rows"] if row["kind"] == "ability")))
        console.print(t)
    where = pairs[0][3] if len(pairs) == 1 else f"{len(pairs)} run dirs (RUN_DIR/{tag}/)" if beside else out
    console.print(f"re-scored without any model call: {where}; side by side: {out / (stem + '.md')}",
                  highlight=False, markup=False)
    return cmp
