"""The index of past runs: every run directory under some roots, with its state and headline numbers, as typed rows.

Why apart from store/runs.py: that module reads complete runs for ranking and refuses anything else; an index lists
every directory a run left, finished or not, and says what became of it from what the directory holds: `rejected`
(rejected.txt: stopped before writing anything), `running` (its lock file is held by a live process), `failed`
(error.txt, or a finished run that scored nothing), `finished` (summary.json and a complete manifest) or
`interrupted` (a manifest still `running`, a journal, or only Hydra's files, and nobody holds the lock: killed,
stopped or crashed; the same command resumes it). Nothing here renders: report/index_page.py draws the page.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.record.summary import Summary
from rubric_engine.results.leaderboard import role_totals
from rubric_engine.store.layout import (ERROR_FILE, GENERATE_JOURNAL, LOCK_FILE, MANIFEST_FILE, REJECTED_FILE,
                                        REPORT_FILE, SAMPLES_FILE, SPEC_FILE, SUMMARY_FILE, read_manifest)
from rubric_engine.store.runs import RunTaxonomy

__all__ = ["STATES", "RunEntry", "scan_runs", "lock_held"]

STATES = ("finished", "interrupted", "failed", "rejected", "running")
_MARKERS = frozenset({SUMMARY_FILE, MANIFEST_FILE, ERROR_FILE, REJECTED_FILE, SAMPLES_FILE, GENERATE_JOURNAL})


@dataclass(frozen=True)
class RunEntry:
    """One run directory as the index shows it; None where the directory holds no such number."""

    dir: Path
    state: str  # one of STATES
    reason: str  # one line: why failed / rejected, how far an interrupted or running run got ('' when finished)
    benchmark: str
    candidate: str
    candidate_model: str
    judge: str
    judge_model: str
    sweep: Path | None  # the sweep directory holding this job, None for a single run
    started: str | None  # ISO 8601 (UTC) from the manifest, else the directory's time
    overall: float | None = None
    lo: float | None = None
    hi: float | None = None
    questions: int | None = None
    scored: int | None = None
    wall_seconds: float | None = None
    cost: float | None = None  # the known part of the cost (USD); None: no role was priced
    cost_partial: bool = False  # some role's price was unknown: `cost` is a lower bound
    report: Path | None = None  # the run's report.html when it exists
    # dimension, ability, subset, scenario and breakdown tables: table title -> group -> score (the compare view)
    tables: dict[str, dict[str, float | None]] = field(default_factory=dict)


def lock_held(run_dir: Path) -> bool:
    """True when a live process holds the run's lock (store/layout.RunLock). Read without taking the lock (taking it,
    even for a moment, could refuse a run starting that instant): /proc/locks where the system has it, else
    whether the pid written in the lock file is alive."""
    path = Path(run_dir) / LOCK_FILE
    try:
        st = path.stat()
        pid_text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return False
    try:
        table = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        table = None
    if table is not None:
        for line in table.splitlines():
            parts = line.split()
            if "FLOCK" not in parts or "->" in parts:  # '->': a process waiting for a lock, not holding it
                continue
            i = parts.index("FLOCK")
            where = parts[i + 4].split(":") if len(parts) > i + 4 else []
            if len(where) != 3 or where[2] != str(st.st_ino):
                continue
            # the same inode on the same device, or (a file system that reports another device) held by the pid
            # the lock file names
            try:
                same_device = (int(where[0], 16), int(where[1], 16)) == (os.major(st.st_dev), os.minor(st.st_dev))
            except ValueError:
                same_device = False
            if same_device or parts[i + 3] == pid_text:
                return True
        return False
    if not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by someone else
    return True


def _first_line(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return "unreadable"
    return text.splitlines()[0][:300] if text else "no message"


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _journal_lines(run_dir: Path) -> tuple[int, int | None] | None:
    """(questions done, questions planned) from a run's journal (header line + one line per question)."""
    for name in (SAMPLES_FILE, GENERATE_JOURNAL):
        path = run_dir / name
        if not path.is_file():
            continue
        try:
            with path.open("rb") as fh:
                head = fh.readline()
                lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
        except OSError:
            return None
        try:
            header = json.loads(head)
        except ValueError:
            return None
        if isinstance(header, dict) and "journal" in header:
            planned = header.get("questions")
            return lines, planned if isinstance(planned, int) else None
        return None
    return None


def _role(value: Any) -> tuple[str, str]:
    """(name, model) from summary.json's {name, model} or the manifest's [name, model, api_base, revision]."""
    if isinstance(value, dict):
        return str(value.get("name", "")), str(value.get("model", ""))
    if isinstance(value, list) and value:
        return str(value[0]), str(value[1]) if len(value) > 1 and value[1] is not None else ""
    return "", ""


def _number(x: Any) -> float | None:
    """A finite number, or None (an edited summary's NaN or text is no number)."""
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return float(x) if ok else None


def _taxonomy(run_dir: Path) -> RunTaxonomy | None:
    """The run's labels (English where the spec has them) from its resolved spec; None when it cannot be read."""
    spec = _json(run_dir / SPEC_FILE)
    try:
        return RunTaxonomy.from_spec(spec, str(run_dir / SPEC_FILE)) if spec else None
    except (DataError, KeyError, TypeError, ValueError):
        return None


def _tables(summary: Summary, tax: RunTaxonomy | None) -> dict[str, dict[str, float | None]]:
    """The run's breakdowns (summary.json `breakdowns`: the spec's own tables, under their declared titles), then its
    dimension, ability, subset and scenario scores where no breakdown of that id, or grouping by that kind, holds
    them; groups under their labels where the spec gives them."""
    titles = {bid: title for bid, title, _ in tax.breakdowns} if tax else {}
    stored = summary.get("breakdowns")
    held: dict[str, Any] = stored if isinstance(stored, dict) else {}
    declared = {by for bid, _, by in tax.breakdowns if held.get(bid)} if tax else set()  # kinds shown already
    names = {**tax.labels, **tax.subset_labels, **tax.scenario_labels} if tax else {}
    out: dict[str, dict[str, float | None]] = {}
    for bid, groups in held.items():
        if isinstance(groups, dict) and groups:
            out[titles.get(str(bid), str(bid))] = {names.get(str(g), str(g)): _number(v.get("score") if isinstance(
                v, dict) else v) for g, v in groups.items()}
    for key, by in (("dimensions", "dimension"), ("abilities", "ability"), ("subsets", "subset"),
                    ("scenarios", "scenario")):
        part = summary.get(key)
        if key not in held and by not in declared and isinstance(part, dict):
            values = {"Decay %" if k == "decay_pct" else names.get(str(k), str(k)): _number(v)
                      for k, v in part.items() if k != "decay_base"}
            if values:
                out[key.capitalize()] = values
    return out


def _sweep_of(run_dir: Path) -> Path | None:
    """The sweep holding a job dir: Hydra marks a multirun job in .hydra/hydra.yaml; a leaderboard in the
    parent marks it too."""
    try:
        hydra = (run_dir / ".hydra" / "hydra.yaml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        hydra = ""
    if re.search(r"^\s*mode:\s*MULTIRUN\s*$", hydra, re.M) or (run_dir.parent / "leaderboard.json").is_file():
        return run_dir.parent
    return None


def _started(run_dir: Path, manifest: dict[str, Any], summary: Summary) -> str | None:
    value = manifest.get("started") or summary.get("created")
    if isinstance(value, str) and value:
        return value
    from datetime import datetime, timezone

    try:
        return datetime.fromtimestamp(run_dir.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")
    except OSError:
        return None


def _state(run_dir: Path, names: set[str], manifest: dict[str, Any] | None,
           summary: Summary) -> tuple[str, str]:
    """(state, reason) from what the directory holds (the module docstring says the order)."""
    if REJECTED_FILE in names:
        return "rejected", _first_line(run_dir / REJECTED_FILE)
    progress = _journal_lines(run_dir)
    done = "" if progress is None else (f"{progress[0]} of {progress[1]} questions in the journal"
                                        if progress[1] is not None else f"{progress[0]} questions in the journal")
    if lock_held(run_dir):
        return "running", done or "started"
    if ERROR_FILE in names:
        return "failed", _first_line(run_dir / ERROR_FILE)
    complete = manifest is None or manifest.get("state") == "complete"
    if summary and complete:
        c = summary.get("counts") or {}
        if summary.get("stage") != "generate" and int(c.get("scored", 0) or 0) - int(
                c.get("candidate_errors_zeroed", 0) or 0) <= 0:
            return "failed", (f"nothing was scored ({c.get('candidate_errors', 0)} candidate errors, "
                              f"{c.get('judge_errors', 0)} judge errors)")
        return "finished", ""
    return "interrupted", (f"stopped before its end ({done or 'no question finished'}); the same command resumes it")


def _entry(run_dir: Path, names: set[str]) -> RunEntry:
    summary = cast(Summary, _json(run_dir / SUMMARY_FILE)) if SUMMARY_FILE in names else Summary()
    manifest = read_manifest(run_dir)
    state, reason = _state(run_dir, names, manifest, summary)
    m = manifest or {}
    cand = _role(summary.get("candidate") or m.get("candidate"))
    judge = _role(summary.get("judge") or m.get("judge"))
    counts = summary.get("counts") or {}
    interval = summary.get("interval") or {}
    cost, partial = None, False
    if isinstance(summary.get("cost"), dict):
        roles, _ = role_totals(summary)
        known = [v for k, v in roles.items() if k != "total" and v is not None]
        cost = sum(known) if known else None
        partial = bool(known) and roles["total"] is None
    report = run_dir / REPORT_FILE
    return RunEntry(
        dir=run_dir, state=state, reason=reason, benchmark=str(summary.get("benchmark") or m.get("benchmark") or ""),
        candidate=cand[0], candidate_model=cand[1], judge=judge[0], judge_model=judge[1], sweep=_sweep_of(run_dir),
        started=_started(run_dir, m, summary), overall=_number(summary.get("overall")),
        lo=_number(interval.get("lo")), hi=_number(interval.get("hi")),
        questions=counts.get("questions") if isinstance(counts.get("questions"), int) else None,
        scored=counts.get("scored") if isinstance(counts.get("scored"), int) else None,
        wall_seconds=_number((summary.get("wall_seconds") or {}).get("total")), cost=cost, cost_partial=partial,
        report=report if REPORT_FILE in names else None,
        tables=_tables(summary, _taxonomy(run_dir) if SPEC_FILE in names else None) if summary else {})


def _is_run(names: set[str], subdirs: list[str]) -> bool:
    """A run directory: it holds a run's files, or it is a job Hydra started that left nothing else (died)."""
    return bool(names & _MARKERS) or (".hydra" in subdirs and not [d for d in subdirs if not d.startswith(".")])


def scan_runs(roots: list[Path]) -> list[RunEntry]:
    """Every run directory at or below the roots (each once; a run's own subdirectories are not searched), newest
    first. A root that is not a directory is one ConfigError."""
    seen: dict[Path, RunEntry] = {}
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            raise ConfigError(f"view: {root} is not a directory; pass directories holding runs or sweeps "
                              "(default: outputs/ and multirun/)")
        for here, subdirs, files in os.walk(root):
            if _is_run(set(files), subdirs):
                path = Path(here)
                seen.setdefault(path.resolve(), _entry(path, set(files)))
                subdirs.clear()
            else:
                subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
    return sorted(seen.values(), key=lambda e: (e.started or "", str(e.dir)), reverse=True)
