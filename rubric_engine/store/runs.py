"""Stored runs: reading run directories back (the summary, the resolved spec, samples.jsonl).

Why apart from store/layout.py: store/layout.py is the format a run writes; this module is what every later reader
(leaderboard, review, agree, audit, rescore) needs from it, with one rule for which directories are runs,
which are complete, and which failed. Samples are streamed from disk on demand (`RunRecord.iter_records`)
rather than held per run, so ranking many large runs keeps only compact per-question scores in memory.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping, Sequence

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.record.codec import decode
from rubric_engine.record.summary import Summary
from rubric_engine.record.types import Record
from rubric_engine.scoring.aggregate import ScoredQuestion, scored_from_samples
from rubric_engine.scoring.question import DEFAULT_AGGREGATION, DEFAULT_SCALE, Aggregation
from rubric_engine.store.layout import (ANSWERS_FILE, ERROR_FILE, MANIFEST_FILE, REJECTED_FILE, RERUN, SAMPLES_FILE,
                                        SPEC_FILE, SUMMARY_FILE, iter_jsonl, read_json, read_manifest,
                                        read_summary)

__all__ = ["RunTaxonomy", "RunRecord", "find_run_dirs", "failed_jobs", "incomplete_runs", "load_run", "collect_runs",
           "read_dialogues"]



@dataclass(frozen=True)
class RunTaxonomy:
    """What the reports need from the resolved spec, with English labels (ids where none)."""

    dimensions: dict[str, list[str]]
    labels: dict[str, str]  # dimension / ability id -> display label
    subsets: list[str]  # in report order
    subset_labels: dict[str, str]
    scenario_labels: dict[str, str]  # data label -> display label
    decay: tuple[str, str, str] | None  # (from, to, base)
    scale: float
    how: Aggregation = DEFAULT_AGGREGATION  # the spec's declared aggregation (bootstrap re-runs it)
    has_rules: bool = True  # the spec has failure rules (else no catastrophic column)
    has_subsets: bool = True  # the spec declares subsets (else no subset table or chart)
    breakdowns: tuple[tuple[str, str, str], ...] = ()  # (id, title, by) of the spec's report.breakdowns
    rules: tuple[tuple[str, str], ...] = ()  # (id, label) of the spec's failure rules (veto groups)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], where: str) -> "RunTaxonomy":
        def en(obj: Any, default: str) -> str:  # obj: {labels: {en: ..}} or {en: ..} directly
            labels = obj.get("labels", obj) if isinstance(obj, Mapping) else None
            return str(labels.get("en") or default) if isinstance(labels, Mapping) else default

        try:
            dims: dict[str, list[str]] = {}
            labels: dict[str, str] = {}
            for d in (spec["taxonomy"] or {"dimensions": []})["dimensions"]:
                dims[d["id"]] = [a["id"] for a in d["abilities"]]
                labels[d["id"]] = en(d, d["id"])
                labels.update({a["id"]: en(a, a["id"]) for a in d["abilities"]})
        except (KeyError, TypeError) as exc:
            raise DataError(where, f"taxonomy.dimensions is missing or malformed ({exc!r})",
                            fix="re-run the benchmark so the run directory holds a complete resolved spec") from None
        report = spec.get("report") or {}
        subsets = report.get("subsets") or {}
        data_subsets = (spec.get("data") or {}).get("subsets") or list(subsets)
        decay = report.get("decay")
        agg = {k: v for k, v in (spec.get("aggregation") or {}).items()
               if k in ("question", "overall", "clip", "no_positive_points")}
        cov = (spec.get("aggregation") or {}).get("coverage")
        if cov:  # question: coverage (spec/aggregation.py)
            agg.update(coverage_k=cov["k"], coverage_tag=cov.get("tag"))
        return cls(
            dimensions=dims, labels=labels,
            subsets=list(dict.fromkeys([*subsets, *data_subsets])),
            subset_labels={s: en(v, s) for s, v in subsets.items()},
            scenario_labels={s: en(v, s) for s, v in (report.get("scenarios") or {}).items()},
            # "from_" too: a spec dumped without by_alias writes the pydantic field name
            decay=(decay.get("from", decay.get("from_")), decay["to"], decay["base"]) if decay else None,
            scale=float((spec.get("scoring") or {}).get("scale", DEFAULT_SCALE)),
            how=Aggregation(**agg), has_rules=bool(spec.get("failure_rules")),
            has_subsets=bool(subsets or data_subsets),
            breakdowns=tuple((b["id"], en(b, b["id"]), b["by"]) for b in report.get("breakdowns") or []),
            rules=tuple((r["id"], en(r, r["id"])) for r in spec.get("failure_rules") or []),
        )

    def label(self, key: str) -> str:
        return self.labels.get(key, key)



@dataclass
class RunRecord:
    """One run directory as read from disk (candidate / judge: the display names in summary.json).

    `samples.jsonl` is not held: `iter_records()` streams it, decoded (the leaderboard builds its compact
    per-question scores that way), and `samples` reads it whole once, for readers that need every record."""

    dir: Path
    summary: Summary  # summary.json, typed (record/summary.py)
    spec: dict[str, Any]
    benchmark: str = ""
    candidate: str = ""
    judge: str = ""
    # compact per-question arrays, filled by one streaming pass over samples.jsonl (read_compact)
    scored: list[ScoredQuestion] = field(default_factory=list, repr=False)
    lengths: list[tuple[int, float]] = field(default_factory=list, repr=False)  # (reply chars, score 0-1)
    records: int = 0  # records in samples.jsonl (scored or not)
    excluded: set[str] = field(default_factory=set, repr=False)  # ids of the records without a score (errors)
    scored_error: str | None = None  # why the records could not be read as scores (raised when ranking)
    trust_code: bool = False  # the reader trusts a module:function scoring formula (re-scoring, intervals)

    def __post_init__(self) -> None:
        s = self.summary
        self.benchmark = self.benchmark or str(s.get("benchmark", ""))
        self.candidate = self.candidate or str(s["candidate"]["name"])
        self.judge = self.judge or str(s["judge"]["name"])

    @property
    def samples_path(self) -> Path:
        return self.dir / SAMPLES_FILE

    def iter_records(self) -> Iterator[Record]:
        """samples.jsonl one typed record at a time (record/codec.py decodes each line); a bad line raises
        DataError naming file and line: a question recorded twice (it would count twice), a criterion weight
        that is not a bounded number, a verdict that is not true / false / null (the file is editable, so what
        scoring reads again is checked here)."""
        seen: set[str] = set()
        where = str(self.samples_path)
        for line, obj in iter_jsonl(self.samples_path, error=DataError, fix=""):
            rec = decode(obj, where, line, RERUN)
            qid = str(rec.id)
            if qid in seen:
                raise DataError(where, f"question {qid!r} is recorded twice", line=line,
                                fix="remove the duplicate line, or re-run into a new directory")
            seen.add(qid)
            yield rec

    def read_compact(self) -> None:
        """One pass over samples.jsonl: every line checked, and only what ranking, intervals, paired
        differences and the length chart need is kept (ScoredQuestions and (length, score) pairs)."""
        lengths: list[tuple[int, float]] = []
        excluded: set[str] = set()
        count = 0

        def records() -> Iterator[Record]:
            nonlocal count
            for rec in self.iter_records():
                count += 1
                score, reply = rec.score, rec.response
                if isinstance(score, (int, float)) and not isinstance(score, bool) and isinstance(reply, str):
                    lengths.append((len(reply), float(score)))
                if score is None:
                    excluded.add(str(rec.id))
                yield rec

        stream = records()
        try:
            self.scored = scored_from_samples(stream)
        except ValueError as exc:  # a record that is no score: raised when this run is ranked
            self.scored, self.scored_error = [], str(exc)
            for _ in stream:  # every line is still checked, so a broken file is named at load time
                pass
        self.lengths, self.records, self.excluded = lengths, count, excluded

    @cached_property
    def samples(self) -> list[Record]:
        """Every record of samples.jsonl, read once (review, agree, audit need them all)."""
        return list(self.iter_records())


def _natural(p: Path) -> list[Any]:
    """Sort key so sweep job dirs 2 < 10."""
    return [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", str(p))]


def find_run_dirs(root: Path) -> list[Path]:
    """Run dirs at or below root (a dir holding summary.json is a run; its inside is not searched)."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"{root}: not a directory; pass run directories (holding {SUMMARY_FILE}) "
                          "or sweep directories")
    found: list[Path] = []
    for here, subdirs, files in os.walk(root):
        if SUMMARY_FILE in files:
            found.append(Path(here))
            subdirs.clear()
        else:
            subdirs[:] = [d for d in subdirs if not d.startswith(".")]
    if not found:
        raise ConfigError(f"{root}: no {SUMMARY_FILE} in this directory or below; pass a run directory "
                          f"(it holds {SUMMARY_FILE}) or a sweep directory containing run directories")
    return sorted(found, key=_natural)


def failed_jobs(dirs: Sequence[Path]) -> list[str]:
    """Warnings for job dirs that hold error.txt but no summary.json: a failed job must not vanish
    from a sweep's leaderboard without a word."""
    out: list[str] = []
    for root in dirs:
        for here, subdirs, files in os.walk(root):
            started = ".hydra" in subdirs  # Hydra writes it when a job starts, before our code runs
            subdirs[:] = [d for d in subdirs if not d.startswith(".")]
            if SUMMARY_FILE in files:
                continue
            if REJECTED_FILE in files:
                first = (Path(here) / REJECTED_FILE).read_text(encoding="utf-8", errors="replace").strip()
                out.append(f"{here}: rejected: {first.splitlines()[0] if first else 'no message'} (not ranked)")
            elif ERROR_FILE in files:
                first = (Path(here) / ERROR_FILE).read_text(encoding="utf-8", errors="replace").strip()
                out.append(f"{here}: run failed, not ranked ({first.splitlines()[0] if first else 'no message'})")
            elif started and not subdirs:  # e.g. a Ray or joblib worker killed mid-job (out of memory)
                out.append(f"{here}: run did not finish (no {SUMMARY_FILE}: still running, or its process died), "
                           "not ranked")
    return sorted(out, key=lambda w: _natural(Path(w)))


def _read_spec(run_dir: Path, summary: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved spec stored with the run; the installed benchmark only as a fallback."""
    path = run_dir / SPEC_FILE
    if path.exists():
        return read_json(path, "resolved spec")
    try:
        from rubric_engine.spec.load import load_spec  # lazily: only for runs that lack their resolved spec

        return load_spec(str(summary.get("benchmark"))).resolved()
    except Exception as exc:  # noqa: BLE001 - whatever failed, the fix is the same
        raise DataError(str(path), f"missing, and benchmark {summary.get('benchmark')!r} could not be loaded ({exc})",
                        fix="restore the run's spec.resolved.json or install the benchmark") from None


_OBJECTS = ("candidate", "judge", "abilities", "dimensions", "subsets", "scenarios", "breakdowns", "interval",
            "aggregation", "counts", "length", "tokens", "cost", "calls", "selection", "wall_seconds")
_FLAT = ("abilities", "dimensions", "subsets", "scenarios", "counts", "cost")  # name -> score, count or cost
_TEXT_LEAVES = frozenset({"decay_base"})  # the one string among them


def _check_shape(path: Path, summary: Mapping[str, Any]) -> None:
    """summary.json is a file anyone can edit: its sections are objects and the scores, counts and costs
    that ranking reads are finite numbers (or null), checked once here, so a tampered value is one line
    naming the key rather than a traceback. Sections with free-form parts (breakdowns, interval.nested,
    length) are checked as objects only."""
    def bad(key: str, value: Any, want: str) -> DataError:
        return DataError(str(path), f"{key} is {json.dumps(value)[:60]}, not {want}", fix=RERUN)

    def number(v: Any) -> bool:
        return v is None or (isinstance(v, (int, float)) and math.isfinite(v))

    for key in _OBJECTS:
        if summary.get(key) is not None and not isinstance(summary[key], dict):
            raise bad(key, summary[key], "an object")
    if not number(summary.get("overall")):
        raise bad("overall", summary.get("overall"), "a finite number or null")
    leaves = [(f"{key}.{k}", v) for key in _FLAT for k, v in (summary.get(key) or {}).items() if k not in _TEXT_LEAVES]
    leaves += [(f"interval.{k}", v) for k, v in (summary.get("interval") or {}).items() if k in ("lo", "hi", "std")]
    leaves += [(f"tokens.{role}", v) for role, v in (summary.get("tokens") or {}).items() if not isinstance(v, dict)]
    leaves += [(f"tokens.{role}.{k}", v) for role, d in (summary.get("tokens") or {}).items() if isinstance(d, dict)
               for k, v in d.items()]
    for key, value in leaves:
        if not number(value):
            raise bad(key, value, "a finite number or null")


def load_run(run_dir: Path, trust_code: bool = False) -> RunRecord:
    """Read and check one run dir; every problem names the file (and line) to fix. trust_code: a module:function
    scoring formula may be imported when the run's scores are rebuilt (as for the run itself)."""
    run_dir = Path(run_dir)
    spath = run_dir / SUMMARY_FILE
    summary = read_summary(run_dir)
    for key in ("benchmark", "candidate", "judge", "overall", "counts"):
        if key not in summary:
            raise DataError(str(spath), f"missing key {key!r}", fix=RERUN)
    for key in ("candidate", "judge"):
        if not isinstance(summary[key], dict) or "name" not in summary[key]:
            raise DataError(str(spath), f"{key}.name is missing", fix=RERUN)
    _check_shape(spath, summary)
    manifest = read_manifest(run_dir)
    if manifest is not None and manifest.get("spec_hash") != summary.get("spec_hash") and "rescore" not in summary:
        raise DataError(str(run_dir / MANIFEST_FILE), f"spec_hash {str(manifest.get('spec_hash'))[:12]} differs from "
                        f"summary.json's {str(summary.get('spec_hash'))[:12]}: the directory's files were edited",
                        fix=RERUN)
    if not (run_dir / SAMPLES_FILE).is_file():
        raise DataError(str(run_dir / SAMPLES_FILE), "missing; intervals need the per-question scores",
                        fix="re-score this run directory")
    run = RunRecord(dir=run_dir, summary=summary, spec=_read_spec(run_dir, summary), trust_code=trust_code)
    run.read_compact()
    return run


def incomplete_runs(dirs: Sequence[Path]) -> list[str]:
    """'not ranked' lines for run dirs whose manifest does not say complete (killed, or being written)."""
    out: list[str] = []
    for d in dirs:
        for here, subdirs, files in os.walk(d):
            subdirs[:] = [x for x in subdirs if not x.startswith(".")]
            if MANIFEST_FILE in files:
                state = (read_manifest(Path(here)) or {}).get("state")
                if state != "complete":
                    out.append(f"{here}: run {state or 'without a state'}, not ranked (its files may be partial)")
    return sorted(out, key=lambda w: _natural(Path(w)))


def _complete(run_dir: Path) -> bool:
    manifest = read_manifest(run_dir)
    return manifest is None or manifest.get("state") == "complete"  # None: a run made before manifests


def collect_runs(dirs: Sequence[Path], allow_mixed_specs: bool = False, trust_code: bool = False,
                 skipped: list[str] | None = None) -> list[RunRecord]:
    """All complete runs under the given dirs (each once), all of one benchmark and one spec hash. `skipped`: a
    run directory that cannot be read (damaged files, no permission) is left out with one line added there, as
    long as another run is left to rank; without it (None) the first such directory is the error."""
    if not dirs:
        raise ConfigError("no directories given; pass run directories or sweep directories")
    seen: dict[Path, None] = {}
    for d in dirs:
        for run_dir in find_run_dirs(Path(d)):
            if _complete(run_dir):
                seen.setdefault(run_dir.resolve(), None)
    if not seen:
        raise ConfigError("no complete run to rank: " + "; ".join(incomplete_runs(dirs)))
    runs = _readable(list(seen), trust_code, skipped)
    names = sorted({r.benchmark for r in runs})
    if len(names) > 1:  # before the spec versions: two benchmarks are never two versions of one spec
        by_name = {n: [str(r.dir) for r in runs if r.benchmark == n] for n in names}
        listing = "; ".join(f"{n}: {len(d)} run{'s' if len(d) != 1 else ''} ({', '.join(d[:2])}"
                            f"{', ...' if len(d) > 2 else ''})" for n, d in by_name.items())
        raise ConfigError(f"these are runs of {len(names)} different benchmarks, {' and '.join(names)}, which cannot "
                          f"share a leaderboard ({listing}); pass the directories of one benchmark at a time")
    hashes = {r.summary.get("spec_hash") for r in runs} - {None}
    if len(hashes) > 1 and not allow_mixed_specs:
        listing = "; ".join(f"{r.dir}: {str(r.summary.get('spec_hash'))[:12]}" for r in runs)
        raise ConfigError(f"these runs of {names[0]} used different versions of its spec (rules or prompts differ), "
                          f"so their scores are not comparable ({listing}); rank one version at a time, or pass "
                          "allow_mixed_specs=true to rank them anyway")
    return runs


def _readable(dirs: list[Path], trust_code: bool, skipped: list[str] | None) -> list[RunRecord]:
    """Each run directory read and checked; with `skipped`, one that fails is a line there instead of the end."""
    runs, first = [], None
    for run_dir in dirs:
        try:
            runs.append(load_run(run_dir, trust_code))
        except (DataError, OSError) as exc:
            if skipped is None:
                raise
            first = first or exc
            skipped.append(f"{run_dir}: left out, unreadable: {str(exc).splitlines()[0] if str(exc) else exc!r}")
    if not runs and first is not None:
        raise first
    return runs


def read_dialogues(run: RunRecord) -> dict[str, list[tuple[str, str, str]]]:
    """Question dialogues from the run's answers.jsonl (the benchmark's own rows), per the spec's fields:
    question id -> (role, role label, text) per turn. The one reader of answers.jsonl for review and report."""
    data = run.spec.get("data") or {}
    f = data.get("fields") or {}
    roles = data.get("roles") or {}
    id_f, dia_f = f.get("id", "id"), f.get("dialogue", "dialogue")
    role_f, text_f = f.get("turn_role", "role"), f.get("turn_content", "content")
    out: dict[str, list[tuple[str, str, str]]] = {}
    path = run.dir / ANSWERS_FILE
    if not path.is_file():
        return out
    user = next((k for k, v in roles.items() if v == "user"), "user")
    for _, row in iter_jsonl(path, error=DataError, fix=""):
        turns = row.get(dia_f)
        if isinstance(turns, str) and turns.strip():  # a plain-text prompt: one user turn, as the loader reads it
            out[str(row.get(id_f))] = [(user, "user", turns)]
        elif isinstance(turns, list):
            out[str(row.get(id_f))] = [(str(t.get(role_f, "")), str(roles.get(t.get(role_f), "")), str(t.get(text_f, "")))
                                       for t in turns if isinstance(t, dict)]
    return out
