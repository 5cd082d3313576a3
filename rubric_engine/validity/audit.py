"""`rubric-engine audit`: self-preference of judges, from runs where several judges graded the same replies.

Why from stored runs: the runs are made the ordinary way (one per candidate and judge, e.g.
`stage=score from_run=RUN judge=...`), and the audit only reads them, so it costs nothing and can be
redone on any machine. Inputs are checked strictly, because an audit over mismatched replies or
unknown families would produce a confident, meaningless number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.scoring.question import DEFAULT_SCALE
from rubric_engine.stats.selfpref import JudgeAudit, audit_judges, is_pass, rank
from rubric_engine.store import layout as rundir

__all__ = ["audit_command", "collect_grid", "USAGE"]

USAGE = "rubric-engine audit RUN_DIR [RUN_DIR...] [family.NAME=FAMILY ...] [n_boot=N] [seed=S] [out=DIR]"
_HOW = "grade one run's replies with several judges: rubric-engine stage=score from_run=RUN judge=NAME"


def _family(run: Any, role: str, given: Mapping[str, str]) -> str:
    block = run.summary.get(role) or {}
    name = str(block.get("name"))
    fam = given.get(name) or block.get("family")
    if not fam:
        raise ConfigError(f"audit: {run.dir / rundir.SUMMARY_FILE}: {role} {name!r} has no family; declare "
                          f"family: in its model entry (or {role}.family=NAME when running), or pass family.{name}=NAME to audit")
    return str(fam)


def collect_grid(runs: Sequence[Any], families: Mapping[str, str]) -> dict[str, Any]:
    """Check the runs form a full candidates x judges grid over the same replies and read its verdicts."""
    grid: dict[tuple[str, str], Any] = {}
    fam: dict[str, str] = {}
    for run in runs:
        key = (run.candidate, run.judge)
        if key in grid:
            raise ConfigError(f"audit: candidate {key[0]!r} graded by judge {key[1]!r} twice ({grid[key].dir} and "
                              f"{run.dir}); pass each (candidate, judge) run once")
        grid[key] = run
        for role, name in (("candidate", run.candidate), ("judge", run.judge)):
            f = _family(run, role, families)
            if fam.setdefault(name, f) != f:
                raise ConfigError(f"audit: {name!r} has family {fam[name]!r} in one run and {f!r} in {run.dir}; "
                                  f"pass family.{name}=NAME to settle it")
    candidates = list(dict.fromkeys(c for c, _ in grid))
    judges = list(dict.fromkeys(j for _, j in grid))
    if len(judges) < 2:
        raise ConfigError(f"audit: needs runs of at least two judges grading the same replies, got judge(s) "
                          f"{', '.join(judges)}; {_HOW}")
    missing = [f"{c} by {j}" for c in candidates for j in judges if (c, j) not in grid]
    if missing:
        raise ConfigError(f"audit: every judge must grade every candidate; missing: {', '.join(missing)}; {_HOW}")
    passes: dict[tuple[str, str], dict[str, list[bool]]] = {}
    scores: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    dropped = 0
    for c in candidates:
        first = grid[(c, judges[0])]
        replies = {s.id: s.response for s in first.samples}
        usable = None
        for j in judges:
            run = grid[(c, j)]
            for s in run.samples:
                qid = s.id
                if qid in replies and s.response != replies[qid]:
                    raise ConfigError(f"audit: runs judged on different replies: {first.dir} and {run.dir} "
                                      f"(candidate {c!r}) differ on question {qid!r}; {_HOW}")
            ok = {s.id for s in run.samples if s.score is not None}
            usable = ok if usable is None else usable & ok
        assert usable is not None
        dropped += len(replies) - len(usable)
        for j in judges:
            run = grid[(c, j)]
            per_q: dict[str, list[bool]] = {}
            for s in run.samples:
                if s.id in usable:
                    per_q[s.id] = [is_pass(bool(x.hit), x.weight) for x in s.criteria]
            passes[(c, j)] = per_q
            scores[(c, j)] = {s.id: {a: float(v["score"]) for a, v in (s.abilities or {}).items()}
                              for s in run.samples if s.id in usable}
        for qid in usable:
            sizes = {len(passes[(c, j)][qid]) for j in judges}
            if len(sizes) > 1:
                raise DataError(str(grid[(c, judges[0])].dir / rundir.SAMPLES_FILE),
                                f"question {qid!r} has {sorted(sizes)} criteria in different runs; "
                                "were they made with the same benchmark version?")
    overall = {k: r.summary.get("overall") for k, r in grid.items()}
    scale = float((runs[0].spec.get("scoring") or {}).get("scale", DEFAULT_SCALE))
    return {"candidates": candidates, "judges": judges, "families": fam, "passes": passes, "scores": scores, "scale": scale,
            "overall": overall, "dropped": dropped, "runs": {f"{c} | {j}": str(r.dir) for (c, j), r in grid.items()}}


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _paragraph(a: JudgeAudit) -> str:
    if a.own_rate is None or a.other_rate is None:
        side = "its own family" if a.own_rate is None else "another family"
        return f"{a.judge} ({a.family}): no candidate of {side} with items the other judges failed; nothing to compare."
    ci = "" if a.lo is None else f", 95% interval [{100 * a.lo:+.1f}, {100 * a.hi:+.1f}]"  # type: ignore[operator]
    rates = (f"on items the other judges' majority failed it passes {_pct(a.own_rate)} of its own family's "
             f"({a.own_items} items) vs {_pct(a.other_rate)} of other families' ({a.other_items}): "
             f"{100 * a.diff:+.1f} points{ci}")  # type: ignore[operator]
    pts = "" if a.points is None else (
        f"; relative to the other judges it moves its own family's overall {a.points:+.2f} points more than other "
        f"families'" + ("" if a.points_lo is None else f" [{a.points_lo:+.2f}, {a.points_hi:+.2f}]"))
    if a.lo is not None and a.lo > 0:
        verdict = f"{a.judge} ({a.family}) favours its own family"
    elif a.hi is not None and a.hi < 0:
        verdict = f"{a.judge} ({a.family}) is harsher on its own family"
    else:
        verdict = f"no evidence that {a.judge} ({a.family}) favours its own family (the interval includes 0)"
    return f"{verdict}: {rates}{pts}."


def _markdown(report: Mapping[str, Any]) -> str:
    lines = ["# Self-preference audit", "",
             "| judge | family | own-family pass rate on others' failures | other families | difference | 95% interval | overall points |",
             "|---|---|---:|---:|---:|---|---:|"]
    for a in report["judges"]:
        ci = "—" if a["lo"] is None else f"[{100 * a['lo']:+.1f}, {100 * a['hi']:+.1f}]"
        diff = "—" if a["diff"] is None else f"{100 * a['diff']:+.1f}"
        pts = "—" if a["points"] is None else f"{a['points']:+.2f}" + (
            "" if a["points_lo"] is None else f" [{a['points_lo']:+.2f}, {a['points_hi']:+.2f}]")
        lines.append(f"| {a['judge']} | {a['family']} | {_pct(a['own_rate'])} ({a['own_items']}) | "
                     f"{_pct(a['other_rate'])} ({a['other_items']}) | {diff} | {ci} | {pts} |")
    judges = [a["judge"] for a in report["judges"]]
    lines += ["", "## Rank of each candidate under each judge alone", "",
              "| candidate | family | " + " | ".join(judges) + " |", "|---|---|" + "---:|" * len(judges)]
    for c, row in report["ranks"].items():
        lines.append(f"| {c} | {report['families'][c]} | " + " | ".join(str(row[j] or "—") for j in judges) + " |")
    lines += ["", *report["paragraphs"], ""]
    return "\n".join(lines)


def audit_command(dirs: Sequence[Path], *, families: Mapping[str, str] | None = None, n_boot: int = 1000,
                  seed: int = 0, out: Path | None = None, console: Any = None) -> dict[str, Any]:
    """Collect the runs, audit every judge, print the tables and write audit.json / audit.md into out."""
    from rich.table import Table

    from rubric_engine.text.terminal import SafeConsole, shown

    from rubric_engine.store.runs import collect_runs

    grid = collect_grid(collect_runs([Path(d) for d in dirs]), families or {})
    audits = audit_judges(grid["passes"], grid["judges"], grid["families"], grid["scores"], n_boot=n_boot, seed=seed,
                          scale=grid["scale"])
    ranks = {j: rank({c: grid["overall"][(c, j)] for c in grid["candidates"]}) for j in grid["judges"]}
    report = {"schema_version": 1, "judges": [a.to_dict() for a in audits],
              "ranks": {c: {j: ranks[j][c] for j in grid["judges"]} for c in grid["candidates"]},
              "overall": {c: {j: grid["overall"][(c, j)] for j in grid["judges"]} for c in grid["candidates"]},
              "families": grid["families"], "paragraphs": [_paragraph(a) for a in audits],
              "questions_dropped": grid["dropped"], "runs": grid["runs"],
              "method": {"failed": "strict majority of the other judges gave the unfavourable verdict",
                         "pass": "rewarded item met, or penalised / failure-rule item not hit",
                         "bootstrap": {"n": n_boot, "seed": seed, "alpha": 0.05, "unit": "question"},
                         "points": "mean over own-family candidates of (overall under this judge - mean overall "
                                   "under the other judges), minus the same mean over other-family candidates; "
                                   "overall recomputed on the questions every judge scored"}}
    console = console or SafeConsole()
    t = Table(title="Self-preference audit: pass rate on items the other judges' majority failed")
    for col in ("Judge", "Family", "Own family", "Other families", "Difference", "95% interval", "Overall pts"):
        t.add_column(col, justify="left" if col in ("Judge", "Family") else "right")
    for a in audits:
        t.add_row(shown(a.judge), shown(a.family), f"{_pct(a.own_rate)} ({a.own_items})", f"{_pct(a.other_rate)} ({a.other_items})",
                  "—" if a.diff is None else f"{100 * a.diff:+.1f}",
                  "—" if a.lo is None else f"[{100 * a.lo:+.1f}, {100 * a.hi:+.1f}]",  # type: ignore[operator]
                  "—" if a.points is None else f"{a.points:+.2f}" + (
                      "" if a.points_lo is None else f" [{a.points_lo:+.2f}, {a.points_hi:+.2f}]"))
    console.print(t)
    r = Table(title="Leaderboard rank under each judge alone")
    r.add_column("Candidate")
    r.add_column("Family")
    for j in grid["judges"]:
        r.add_column(shown(j), justify="right")
    for c in grid["candidates"]:
        r.add_row(shown(c), shown(grid["families"][c]), *(str(ranks[j][c] or "—") for j in grid["judges"]))
    console.print(r)
    for p in report["paragraphs"]:
        console.print(p, highlight=False, markup=False, soft_wrap=True)
    if grid["dropped"]:
        console.print(f"{grid['dropped']} candidate-question pairs left out: not scored by every judge "
                      "(judge or candidate errors)", highlight=False, markup=False)
    target = Path(out) if out is not None else (Path(dirs[0]) if len(dirs) == 1 else Path("audit"))
    rundir.write_json(target / "audit.json", report)
    rundir.write_text(target / "audit.md", _markdown(report))
    console.print(f"audit written to {target} (audit.json, audit.md)", highlight=False, markup=False)
    return report
