"""`rubric-engine pilot`: the pilot gate of building a benchmark, over a few models' runs of it.

Why: before a rubric is released someone has to ask whether it separates models at all (a published
benchmark's first version had under 20% discriminating criteria). The numbers are `items`'s (validity/itemsdiag.compute_items:
no-signal and saturated criteria, the proposed hard set); this module only turns them into a gate with
declared thresholds, so the same runs give the same verdict to anyone who re-checks, and writes pilot.json
and pilot.md. No model is called.

- discriminating share: criteria with judged replies that are not "no signal" (saturated, dead or flat), over
  criteria with judged replies; must be >= min_discriminating.
- saturated share: criteria flagged saturated (pass rate >= 95%) over the same; must be <= max_saturated.
- hard set: `items`'s proposal for hard=FRACTION; must hold at least min_hard of the questions it aimed at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError
from rubric_engine.spec.gates import PilotGate
from rubric_engine.store.layout import write_json, write_text
from rubric_engine.store.runs import collect_runs
from rubric_engine.validity.itemsdiag import ItemsResult
from rubric_engine.validity.items_report import items_command

__all__ = ["declared", "pilot_gate", "pilot_command", "USAGE"]

USAGE = """usage: rubric-engine pilot RUN_DIR [RUN_DIR ...] [min_discriminating=0.5] [max_saturated=0.2] [hard=0.3]
                            [min_hard=1.0] [out=DIR]

The pilot gate: over runs of a few candidates on the benchmark, the share of criteria that discriminate
(not saturated, dead or flat, as `items` defines them), the share saturated, and the proposed hard set,
each checked against the threshold the spec declares (`release.pilot` in benchmark.yaml: min_discriminating,
max_saturated, hard, min_hard), an option given here overriding it for this check. Writes pilot.json and pilot.md to out= (default RUN_DIR/pilot), beside `items`'s
report of the same runs (items.md, items.csv, items.html, items.json, hard_set.ids: what to fix first).
Exit 0 when every check passes, 1 when one fails (each failed check is named), 2 for bad input.
"""


def declared(dirs: Sequence[Path], options: Mapping[str, float]) -> PilotGate:
    """The thresholds the runs' spec declares (`release.pilot`, as the run resolved it), options overriding."""
    spec = collect_runs([Path(d) for d in dirs])[0].spec
    block = dict(((spec.get("release") or {}).get("pilot") or {}))
    try:
        return PilotGate.model_validate({**block, **options})
    except ValueError as exc:
        bad = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())  # type: ignore[attr-defined]
        raise ConfigError(f"pilot: a threshold is not valid ({bad}); use a fraction from 0 to 1, e.g. "
                          "min_discriminating=0.5") from None


def _share(num: int, den: int) -> float | None:
    return num / den if den else None


def pilot_gate(result: ItemsResult, t: PilotGate) -> dict[str, Any]:
    """The gate's checks from `items`'s result: each with its value, threshold and verdict."""
    judged = [c for c in result.criteria if c.replies]
    disc = _share(sum(not c.no_signal for c in judged), len(judged))
    sat = _share(sum(c.flag == "saturated" for c in judged), len(judged))
    hard = result.hard
    found = _share(len(hard.ids), hard.target) if hard is not None else None
    checks = [
        {"check": "discriminating criteria", "value": disc, "rule": ">=", "threshold": t.min_discriminating,
         "passed": disc is not None and disc >= t.min_discriminating},
        {"check": "saturated criteria", "value": sat, "rule": "<=", "threshold": t.max_saturated,
         "passed": sat is not None and sat <= t.max_saturated},
        {"check": "hard set found", "value": found, "rule": ">=", "threshold": t.min_hard,
         "passed": found is not None and found >= t.min_hard}]
    return {"benchmark": result.benchmark, "runs": result.runs, "models": result.models, "replies": result.replies,
            "skipped": result.skipped, "criteria": len(result.criteria), "judged_criteria": len(judged),
            "hard_set": list(hard.ids) if hard is not None else [], "checks": checks,
            "passed": all(c["passed"] for c in checks), "warnings": result.warnings,
            "thresholds": t.model_dump()}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _markdown(gate: dict[str, Any]) -> str:
    lines = [f"# Pilot gate: {gate['benchmark']}", "",
             f"{len(gate['models'])} model(s), {gate['replies']} judged replies ({gate['skipped']} left out), "
             f"{gate['judged_criteria']} of {gate['criteria']} criteria judged.", "",
             "| check | value | rule | passed |", "|---|---|---|---|"]
    lines += [f"| {c['check']} | {_pct(c['value'])} | {c['rule']} {_pct(c['threshold'])} | "
              f"{'yes' if c['passed'] else 'NO'} |" for c in gate["checks"]]
    lines += ["", f"Proposed hard set ({len(gate['hard_set'])}): {', '.join(gate['hard_set']) or 'none'}", "",
              f"Verdict: {'PASS' if gate['passed'] else 'FAIL'}"]
    lines += [f"- warning: {w}" for w in gate["warnings"]]
    return "\n".join(lines) + "\n"


def pilot_command(dirs: Sequence[Path], out: Path, t: PilotGate) -> dict[str, Any]:
    """Compute the gate over run (or sweep) directories and write pilot.json and pilot.md to `out`, beside
    `items`'s own report of the same runs (items.md, .csv, .html, .json, hard_set.ids), which it reads."""
    result = items_command(dirs, out, hard=t.hard)
    gate = pilot_gate(result, t)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "pilot.json", gate)
    write_text(out / "pilot.md", _markdown(gate))
    return gate
