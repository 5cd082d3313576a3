"""From stored run directories to a leaderboard (ranking, intervals, paired differences, files).

Everything here reads only what a run left on disk (summary.json, samples.jsonl and
spec.resolved.json), so a leaderboard can be rebuilt after a sweep crashed half-way, on another
machine, or without the benchmark installed. The headline numbers are the runs' own summaries;
the intervals come from resampling the questions in samples.jsonl and re-running the aggregation.
Writing and printing a built leaderboard lives in leaderboard_output.py (its public names are re-exported here).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rubric_engine.aggregate import ScoredQuestion, scored_from_samples
from rubric_engine.bootstrap import bootstrap_overall, paired_difference
from rubric_engine.judge_noise import pair_noise
from rubric_engine import nested_runs
from rubric_engine.scoring import DEFAULT_AGGREGATION, Aggregation
from rubric_engine.errors import ConfigError, DataError
from rubric_engine.leaderboard_output import fmt, print_leaderboard, write_leaderboard  # re-exported
from rubric_engine.rundir import MANIFEST_FILE, SAMPLES_FILE, SPEC_FILE, SUMMARY_FILE, read_manifest

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "Taxonomy", "RunRecord", "Row", "PairDiff", "Leaderboard", "find_run_dirs", "failed_jobs", "load_run",
    "collect_runs", "build_leaderboard", "compare", "write_leaderboard", "print_leaderboard",
    "leaderboard_command", "leaderboard_main", "fmt",
]

_COUNTS = ("questions", "scored", "judge_errors", "candidate_errors", "catastrophic")
_RERUN = "re-run or re-score this run directory"
_ERROR_FILE = "error.txt"  # what the CLI leaves in a sweep job dir whose run failed


@dataclass(frozen=True)
class Taxonomy:
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

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], where: str) -> "Taxonomy":
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
        return cls(
            dimensions=dims, labels=labels,
            subsets=list(dict.fromkeys([*subsets, *data_subsets])),
            subset_labels={s: en(v, s) for s, v in subsets.items()},
            scenario_labels={s: en(v, s) for s, v in (report.get("scenarios") or {}).items()},
            # "from_" too: a spec dumped without by_alias writes the pydantic field name
            decay=(decay.get("from", decay.get("from_")), decay["to"], decay["base"]) if decay else None,
            scale=float((spec.get("scoring") or {}).get("scale", 100.0)),
            how=Aggregation(**agg), has_rules=bool(spec.get("failure_rules")),
            has_subsets=bool(subsets or data_subsets),
            breakdowns=tuple((b["id"], en(b, b["id"]), b["by"]) for b in report.get("breakdowns") or []),
        )

    def label(self, key: str) -> str:
        return self.labels.get(key, key)


@dataclass
class RunRecord:
    """One run directory as read from disk (candidate / judge: the display names in summary.json)."""

    dir: Path
    summary: dict[str, Any]
    spec: dict[str, Any]
    samples: list[dict[str, Any]]
    benchmark: str = ""
    candidate: str = ""
    judge: str = ""

    def __post_init__(self) -> None:
        s = self.summary
        self.benchmark = self.benchmark or str(s.get("benchmark", ""))
        self.candidate = self.candidate or str(s["candidate"]["name"])
        self.judge = self.judge or str(s["judge"]["name"])


@dataclass
class Row:
    """One leaderboard row; numbers on the spec's scale (0-100), None where there is no number."""

    label: str  # display name: the candidate, plus the run dir name when (candidate, judge) repeats
    candidate: str
    candidate_model: str
    judge: str
    judge_model: str
    run_dir: str
    overall: float | None
    ci_lo: float | None
    ci_hi: float | None
    dimensions: dict[str, float | None]
    abilities: dict[str, float | None]
    subsets: dict[str, float | None]
    decay_pct: float | None
    decay_base: str | None
    scenarios: dict[str, float | None]
    counts: dict[str, int]
    cost: dict[str, float | None]  # candidate, judge, total (total None unless both prices were known)
    stage: str
    breakdowns: dict[str, dict[str, float | None]] = field(default_factory=dict)  # summary.json "breakdowns"
    rank: int = 0
    run: RunRecord | None = field(default=None, repr=False, compare=False)
    scored: list[ScoredQuestion] = field(default_factory=list, repr=False, compare=False)

    def cost_text(self) -> str:
        """Total cost for tables; '+ ?' marks an unknown part, so a partial sum never passes as the whole."""
        known = [v for v in (self.cost["candidate"], self.cost["judge"]) if v is not None]
        if not known:
            return "—"
        return fmt(sum(known), 4) + (" + ?" if len(known) < 2 else "")

    def to_dict(self) -> dict[str, Any]:
        skip = {"run", "scored"}
        return {k: v for k, v in self.__dict__.items() if k not in skip}


@dataclass(frozen=True)
class PairDiff:
    """overall(a) - overall(b) on the questions both scored, with a paired bootstrap interval."""

    a: str
    b: str
    diff: float | None
    lo: float | None
    hi: float | None
    excludes_zero: bool
    questions: int
    error: str | None = None
    noise: float | None = None  # judge-noise SD of the difference (judge-only bootstrap); None: unmeasured
    within_noise: bool = False  # the judge-noise-only interval includes 0 (docs/judge-noise.md)
    noise_lo: float | None = None  # the judge-noise-only interval of the difference (gradings resampled alone)
    noise_hi: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Leaderboard:
    benchmark: str
    benchmark_version: str
    taxonomy: Taxonomy
    rows: list[Row]
    pairs: list[PairDiff]
    n_boot: int
    seed: int
    alpha: float
    warnings: list[str] = field(default_factory=list)

    def row(self, label: str) -> Row:
        for r in self.rows:
            if r.label == label:
                return r
        raise ConfigError(f"no leaderboard row named {label!r}; rows: {', '.join(r.label for r in self.rows)}")

    def to_dict(self) -> dict[str, Any]:
        t = self.taxonomy
        return {
            "schema_version": 1, "benchmark": self.benchmark, "benchmark_version": self.benchmark_version,
            "bootstrap": {"n": self.n_boot, "seed": self.seed, "alpha": self.alpha, "unit": "question",
                          "method": "percentile interval; questions resampled with replacement, aggregate re-run"},
            "taxonomy": {"dimensions": t.dimensions, "labels": t.labels, "subsets": t.subsets},
            "decay": dict(zip(("from", "to", "base"), t.decay)) if t.decay else None,
            "rows": [r.to_dict() for r in self.rows], "pairs": [p.to_dict() for p in self.pairs],
            "warnings": self.warnings,
            "length_notes": _length_notes(self),
        }


def _length_notes(lb: "Leaderboard") -> list[str]:
    from rubric_engine.leaderboard_output import length_notes

    return length_notes(lb)


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
            if _ERROR_FILE in files:
                first = (Path(here) / _ERROR_FILE).read_text(encoding="utf-8", errors="replace").strip()
                out.append(f"{here}: run failed, not ranked ({first.splitlines()[0] if first else 'no message'})")
            elif started and not subdirs:  # e.g. a Ray or joblib worker killed mid-job (out of memory)
                out.append(f"{here}: run did not finish (no {SUMMARY_FILE}: still running, or its process died), "
                           "not ranked")
    return sorted(out, key=lambda w: _natural(Path(w)))


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(str(path), f"missing {what}", fix=_RERUN) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(str(path), f"not valid JSON ({exc})", fix=_RERUN) from None
    if not isinstance(data, dict):
        raise DataError(str(path), f"expected a JSON object, got {type(data).__name__}")
    return data


def _read_spec(run_dir: Path, summary: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved spec stored with the run; the installed benchmark only as a fallback."""
    path = run_dir / SPEC_FILE
    if path.exists():
        return _read_json(path, "resolved spec")
    try:
        from rubric_engine.spec import load_spec  # lazily: only for runs that lack their resolved spec

        return load_spec(str(summary.get("benchmark"))).resolved()
    except Exception as exc:  # noqa: BLE001 - whatever failed, the fix is the same
        raise DataError(str(path), f"missing, and benchmark {summary.get('benchmark')!r} could not be loaded ({exc})",
                        fix="restore the run's spec.resolved.json or install the benchmark") from None


def load_run(run_dir: Path) -> RunRecord:
    """Read and check one run dir; every problem names the file (and line) to fix."""
    run_dir = Path(run_dir)
    spath = run_dir / SUMMARY_FILE
    summary = _read_json(spath, SUMMARY_FILE)
    for key in ("benchmark", "candidate", "judge", "overall", "counts"):
        if key not in summary:
            raise DataError(str(spath), f"missing key {key!r}", fix=_RERUN)
    for key in ("candidate", "judge"):
        if not isinstance(summary[key], dict) or "name" not in summary[key]:
            raise DataError(str(spath), f"{key}.name is missing", fix=_RERUN)
    samples: list[dict[str, Any]] = []
    sample_path = run_dir / SAMPLES_FILE
    try:
        with sample_path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(str(sample_path), f"not valid JSON ({exc.msg})", line=n) from None
                if not isinstance(rec, dict):
                    raise DataError(str(sample_path), "expected a JSON object", line=n)
                samples.append(rec)
    except FileNotFoundError:
        raise DataError(str(sample_path), "missing; intervals need the per-question scores",
                        fix="re-score this run directory") from None
    return RunRecord(dir=run_dir, summary=summary, spec=_read_spec(run_dir, summary), samples=samples)


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


def collect_runs(dirs: Sequence[Path], allow_mixed_specs: bool = False) -> list[RunRecord]:
    """All complete runs under the given dirs (each once), all of one benchmark and one spec hash."""
    if not dirs:
        raise ConfigError("no directories given; pass run directories or sweep directories")
    seen: dict[Path, None] = {}
    for d in dirs:
        for run_dir in find_run_dirs(Path(d)):
            if _complete(run_dir):
                seen.setdefault(run_dir.resolve(), None)
    if not seen:
        raise ConfigError("no complete run to rank: " + "; ".join(incomplete_runs(dirs)))
    runs = [load_run(p) for p in seen]
    hashes = {r.summary.get("spec_hash") for r in runs} - {None}
    if len(hashes) > 1 and not allow_mixed_specs:
        listing = "; ".join(f"{r.dir}: {str(r.summary.get('spec_hash'))[:12]}" for r in runs)
        raise ConfigError(f"these runs used different versions of the spec (rules or prompts differ), so their "
                          f"scores are not comparable ({listing}); rank one version at a time, or pass "
                          "allow_mixed_specs=true to rank them anyway")
    names = sorted({r.benchmark for r in runs})
    if len(names) > 1:
        listing = "; ".join(f"{r.dir}: {r.benchmark}" for r in runs)
        raise ConfigError(f"runs of different benchmarks cannot share a leaderboard ({listing}); "
                          "pass the directories of one benchmark at a time")
    return runs


def _scored(run: RunRecord) -> list[ScoredQuestion]:
    try:
        return scored_from_samples(run.samples)
    except ValueError as exc:
        raise DataError(str(run.dir / SAMPLES_FILE), str(exc)) from None


def _labels(runs: Sequence[RunRecord]) -> list[str]:
    """Candidate names; the run dir name added where (candidate, judge) repeats (path if names clash)."""
    keys = [(r.candidate, r.judge) for r in runs]
    names = [r.dir.name for r in runs]
    if len(set(names)) < len(names):
        common = Path(os.path.commonpath([str(r.dir) for r in runs]))
        names = [str(r.dir.relative_to(common)) or r.dir.name for r in runs]
    return [f"{r.candidate} [{n}]" if keys.count(k) > 1 else r.candidate for r, k, n in zip(runs, keys, names)]


def _row(run: RunRecord, label: str, tax: Taxonomy, n_boot: int, seed: int, alpha: float,
         warnings: list[str]) -> Row:
    s = run.summary
    scored = _scored(run)
    lo = hi = None
    point = None
    if scored and nested_runs.is_nested(run):  # samples or repeated gradings: the hierarchical bootstrap
        point, lo, hi = nested_runs.row_interval(run, n_boot, seed, alpha, tax.scale)
    elif scored:
        try:
            point, lo, hi = bootstrap_overall(scored, tax.dimensions, n=n_boot, seed=seed, alpha=alpha,
                                              scale=tax.scale, how=tax.how)
        except ValueError as exc:  # e.g. an ability the run's own taxonomy does not know
            raise DataError(str(run.dir / SAMPLES_FILE), str(exc), fix=_RERUN) from None
    if (point is None) != (s.get("overall") is None) or (
            point is not None and not math.isclose(point, s["overall"], rel_tol=1e-9, abs_tol=1e-6)):
        warnings.append(f"{run.dir / SUMMARY_FILE}: overall {s.get('overall')} differs from {point} recomputed "
                        f"from {SAMPLES_FILE}; re-score the run (the table shows the summary's number)")
    sub = dict(s.get("subsets") or {})
    decay_pct, decay_base = sub.pop("decay_pct", None), sub.pop("decay_base", None)
    cost = dict(s.get("cost") or {})
    parts = (cost.get("candidate"), cost.get("judge"))
    return Row(
        label=label, candidate=run.candidate, candidate_model=str(s["candidate"].get("model", "")),
        judge=run.judge, judge_model=str(s["judge"].get("model", "")), run_dir=str(run.dir),
        overall=s.get("overall"), ci_lo=lo, ci_hi=hi,
        dimensions=dict(s.get("dimensions") or {}), abilities=dict(s.get("abilities") or {}),
        subsets=sub, decay_pct=decay_pct, decay_base=decay_base or (tax.decay[2] if tax.decay else None),
        scenarios=dict(s.get("scenarios") or {}),
        counts={k: int((s.get("counts") or {}).get(k, 0)) for k in _COUNTS},
        cost={"candidate": parts[0], "judge": parts[1], "total": None if None in parts else sum(parts)},
        stage=str(s.get("stage", "")), run=run, scored=scored, breakdowns=dict(s.get("breakdowns") or {}),
    )


def compare(lb: Leaderboard, a: str | Row, b: str | Row, *, n_boot: int | None = None,
            seed: int | None = None) -> PairDiff:
    """Paired bootstrap difference of any two rows (same question draws for both models)."""
    ra = a if isinstance(a, Row) else lb.row(a)
    rb = b if isinstance(b, Row) else lb.row(b)
    if ra.run and rb.run and (nested_runs.is_nested(ra.run) or nested_runs.is_nested(rb.run)):
        try:
            h = nested_runs.pair_difference(ra.run, rb.run, lb.n_boot if n_boot is None else n_boot,
                                            lb.seed if seed is None else seed, lb.alpha, lb.taxonomy.scale)
        except ValueError as exc:
            return PairDiff(ra.label, rb.label, None, None, None, False, 0, error=str(exc))
        return PairDiff(ra.label, rb.label, h["diff"], h["lo"], h["hi"], bool(h["excludes_zero"]), int(h["questions"]),
                        noise=h["noise"], within_noise=bool(h["within_noise"]), noise_lo=h["noise_lo"],
                        noise_hi=h["noise_hi"])
    try:
        d = paired_difference(ra.scored, rb.scored, lb.taxonomy.dimensions,
                              n=lb.n_boot if n_boot is None else n_boot, seed=lb.seed if seed is None else seed,
                              alpha=lb.alpha, scale=lb.taxonomy.scale, how=lb.taxonomy.how)
    except ValueError as exc:
        return PairDiff(ra.label, rb.label, None, None, None, False, 0, error=str(exc))
    noise = pair_noise(ra.run.summary, rb.run.summary) if ra.run and rb.run else None
    return PairDiff(ra.label, rb.label, d["diff"], d["lo"], d["hi"], bool(d["excludes_zero"]), int(d["questions"]),
                    noise=noise, within_noise=noise is not None and d["diff"] is not None and abs(d["diff"]) < noise)


def build_leaderboard(runs: Sequence[RunRecord], *, n_boot: int = 1000, seed: int = 0,
                      alpha: float = 0.05) -> Leaderboard:
    """One row per run, best overall first, plus paired differences of adjacent ranks."""
    if not runs:
        raise ConfigError("no runs to rank")
    tax = Taxonomy.from_spec(runs[0].spec, str(runs[0].dir / SPEC_FILE))
    warnings: list[str] = []
    for r in runs[1:]:
        other = Taxonomy.from_spec(r.spec, str(r.dir / SPEC_FILE))
        if other.dimensions != tax.dimensions:
            raise ConfigError(f"{r.dir / SPEC_FILE}: taxonomy differs from {runs[0].dir / SPEC_FILE}; "
                              "rank runs of one benchmark version together")
    for key in ("benchmark_version", "data_sha256", "questions"):
        values = {str(r.summary.get(key, (r.summary.get("counts") or {}).get(key))) for r in runs}
        if len(values) > 1:
            warnings.append(f"runs differ in {key} ({', '.join(sorted(values))}); scores may not be comparable")
    rows = [_row(r, lab, tax, n_boot, seed, alpha, warnings) for r, lab in zip(runs, _labels(runs))]
    rows.sort(key=lambda r: (r.overall is None, -(r.overall or 0.0), r.label))
    for i, r in enumerate(rows, 1):
        prev = rows[i - 2] if i > 1 else None
        # equal overall scores share a rank (1, 2, 2, 4): the order within a tie is only alphabetical
        r.rank = prev.rank if prev is not None and prev.overall == r.overall else i
        if r.counts["judge_errors"] or r.counts["candidate_errors"]:
            warnings.append(f"{r.label}: {r.counts['judge_errors']} judge errors and {r.counts['candidate_errors']} "
                            f"candidate errors are left out of its scores ({r.counts['scored']}/"
                            f"{r.counts['questions']} scored)")
    lb = Leaderboard(benchmark=runs[0].benchmark, benchmark_version=str(runs[0].summary.get("benchmark_version", "")),
                     taxonomy=tax, rows=rows, pairs=[], n_boot=n_boot, seed=seed, alpha=alpha, warnings=warnings)
    lb.pairs = [compare(lb, a, b) for a, b in zip(rows, rows[1:])]
    lb.warnings += [f"{p.a} vs {p.b}: {p.error}" for p in lb.pairs if p.error]
    return lb


def leaderboard_command(dirs: Sequence[Path], out_dir: Path | None = None, *, n_boot: int = 1000, seed: int = 0,
                        console: "Console | None" = None, allow_mixed_specs: bool = False,
                        agreement: Path | None = None) -> tuple[Leaderboard, dict[str, Path]]:
    """CLI and end-of-sweep entry: collect, rank, write, print. Default out_dir: the one dir given
    (where the end-of-sweep callback writes too), else ./leaderboard for several dirs."""
    from rich.console import Console

    dirs = [Path(d) for d in dirs]
    lb = build_leaderboard(collect_runs(dirs, allow_mixed_specs), n_boot=n_boot, seed=seed)
    lb.warnings[:0] = failed_jobs(dirs) + incomplete_runs(dirs)
    target = Path(out_dir) if out_dir is not None else (dirs[0] if len(dirs) == 1 else Path("leaderboard"))
    from rubric_engine.html_views import find_agreement

    if agreement is not None and not Path(agreement).is_file():
        raise ConfigError(f"leaderboard: agreement={agreement}: no such file; pass the agreement.json written by "
                          "`rubric-engine agree`")
    files = write_leaderboard(lb, target, agreement=agreement or find_agreement([target, *dirs]))
    console = console or Console()
    print_leaderboard(lb, console)
    console.print(f"leaderboard written to {target} (report: {files['html']})", highlight=False, markup=False)
    return lb, files


def leaderboard_main(argv: Sequence[str]) -> int:
    """`rubric-engine leaderboard DIR [DIR...] [out=DIR] [bootstrap.samples=N] [bootstrap.seed=N] [agreement=FILE]`.
    Errors raise ConfigError (the shared key=value style of cliargs)."""
    from .cliargs import COMMANDS, parse

    parsed = parse(COMMANDS["leaderboard"], argv)
    opts = parsed.options

    def integer(key: str, default: int, least: int) -> int:
        try:
            value = int(opts.get(key) or default)
        except ValueError:
            raise ConfigError(f"leaderboard: {key}={opts[key]!r} is not an integer") from None
        if value < least:
            raise ConfigError(f"leaderboard: {key} must be at least {least}, got {value}")
        return value

    out = Path(opts["out"]).expanduser() if opts.get("out") else None
    leaderboard_command([Path(d) for d in parsed.positionals], out,
                        n_boot=integer("bootstrap.samples", 1000, 1), seed=integer("bootstrap.seed", 0, 0),
                        allow_mixed_specs=str(opts.get("allow_mixed_specs", "false")).lower() in ("true", "1", "yes"),
                        agreement=Path(opts["agreement"]).expanduser() if opts.get("agreement") else None)
    return 0
