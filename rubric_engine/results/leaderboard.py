"""Ranking stored runs: rows, bootstrap intervals and paired differences of a leaderboard.

The headline numbers are the runs' own summaries; the intervals come from resampling the questions
(the compact per-question scores runs.load_run streams out of samples.jsonl) and re-running the
aggregation. Reading run directories lives in store/runs.py; writing, printing and the command in
report/leaderboard.py, which imports this module (as html_report and html_views do), never the
other way round: no import circle (tests/project/test_structure.py checks it).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.record.summary import Summary
from rubric_engine.results import intervals as nested_runs
from rubric_engine.results.bradley_terry import baseline_of, bradley_terry_section
from rubric_engine.results.judges import judge_order, judges_section
from rubric_engine.results.style import length_section, style_section
from rubric_engine.scoring.aggregate import ScoredQuestion
from rubric_engine.stats.bootstrap import bootstrap_stats, paired_difference
from rubric_engine.stats.dialogues import dialogue_section, paired_dialogues
from rubric_engine.stats.noise import pair_noise
from rubric_engine.store.layout import RERUN, SAMPLES_FILE, SPEC_FILE, SUMMARY_FILE
from rubric_engine.store.runs import (RunRecord, RunTaxonomy, collect_runs, failed_jobs, find_run_dirs, incomplete_runs,
                                      load_run)

__all__ = [
    "Row", "PairDiff", "Leaderboard", "build_leaderboard", "compare", "fmt", "length_notes",
    # reading runs lives in store/runs.py; these names stay importable from here
    "RunTaxonomy", "RunRecord", "find_run_dirs", "failed_jobs", "incomplete_runs", "load_run", "collect_runs",
]

_COUNTS = ("questions", "scored", "judge_errors", "candidate_errors", "catastrophic")


def fmt(x: float | None, digits: int = 2) -> str:
    """One number format for every text output; a missing number is shown as a dash, never as 0."""
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


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
    # every role's cost (candidate, judge, then baseline / user when the run called one) and total (None unless
    # every role's price was known)
    cost: dict[str, float | None]
    stage: str
    breakdowns: dict[str, dict[str, float | None]] = field(default_factory=dict)  # summary.json "breakdowns"
    candidate_errors: str = "exclude"  # the run's policy for candidate calls that failed for good
    # the run left out (errors, unscored) questions another ranked run scored: its score is not like for like
    not_like_for_like: bool = False
    rank: int = 0
    # every role's tokens {prompt, completion} and their "total", as summary.json's `tokens` has them
    tokens: dict[str, dict[str, int]] = field(default_factory=dict)
    run: RunRecord | None = field(default=None, repr=False, compare=False)
    vetoes: dict[str, int] = field(default_factory=dict)  # summary.json "vetoes": failure rule -> questions zeroed
    scored: list[ScoredQuestion] = field(default_factory=list, repr=False, compare=False)
    # the label without its judge part: what a table with a Judge column shows (== label with one judge)
    name: str = ""

    def cost_text(self) -> str:
        """Total cost for tables; '+ ?' marks an unknown part, so a partial sum never passes as the whole."""
        parts = [v for k, v in self.cost.items() if k != "total"]
        known = [v for v in parts if v is not None]
        if not known:
            return "—"
        return fmt(sum(known), 4) + (" + ?" if len(known) < len(parts) else "")

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
    taxonomy: RunTaxonomy
    rows: list[Row]
    pairs: list[PairDiff]
    n_boot: int
    seed: int
    alpha: float
    warnings: list[str] = field(default_factory=list)
    bradley_terry: dict[str, Any] | None = None  # pairwise runs against one baseline (results/bradley_terry.py)
    judges: dict[str, Any] | None = None  # several judges: rankings side by side, tau (results/judges.py)
    style_control: dict[str, Any] | None = None  # style_control=true (results/style.py)
    length_control: dict[str, Any] | None = None  # length_control=true (results/style.py)

    def row(self, label: str) -> Row:
        for r in self.rows:
            if r.label == label:
                return r
        raise ConfigError(f"no leaderboard row named {label!r}; rows: {', '.join(r.label for r in self.rows)}")

    def to_dict(self) -> dict[str, Any]:
        t = self.taxonomy
        method = "percentile interval; questions resampled with replacement, aggregate re-run"
        nested = [r.label for r in self.rows if r.run is not None and nested_runs.is_nested(r.run)]
        if nested:  # say which rows' intervals also carry sampling / judge noise (docs/judge-noise.md)
            method += (f"; for {', '.join(nested)} (candidate samples or repeated gradings) hierarchical: questions, "
                       "then each question's samples, then their gradings resampled")
        return {
            "schema_version": 1, "benchmark": self.benchmark, "benchmark_version": self.benchmark_version,
            "bootstrap": {"n": self.n_boot, "seed": self.seed, "alpha": self.alpha, "unit": "question",
                          "method": method},
            "taxonomy": {"dimensions": t.dimensions, "labels": t.labels, "subsets": t.subsets},
            "decay": dict(zip(("from", "to", "base"), t.decay)) if t.decay else None,
            "rows": [r.to_dict() for r in self.rows], "pairs": [p.to_dict() for p in self.pairs],
            "warnings": self.warnings,
            "length_notes": length_notes(self),
            **({"bradley_terry": self.bradley_terry} if self.bradley_terry is not None else {}),
            **({"judges": self.judges} if self.judges is not None else {}),
            **({"style_control": self.style_control} if self.style_control is not None else {}),
            **({"length_control": self.length_control} if self.length_control is not None else {}),
        }


def length_notes(lb: Leaderboard) -> list[str]:
    """One line per run whose score and reply length correlate strongly (summary.json's `length`)."""
    from rubric_engine.stats.lengths import strong_note

    notes = (strong_note(r.label, r.run.summary.get("length") if r.run else None) for r in lb.rows)
    return [n for n in notes if n]


def _scored(run: RunRecord) -> list[ScoredQuestion]:
    if run.scored_error is not None:
        raise DataError(str(run.dir / SAMPLES_FILE), run.scored_error)
    return run.scored


def _labels(runs: Sequence[RunRecord]) -> list[tuple[str, str]]:
    """(label, name) per run: the name is the candidate, with the run dir name added where (candidate, judge)
    repeats (path if names clash); with several judges the label adds the judge, so every label is one row."""
    keys = [(r.candidate, r.judge) for r in runs]
    names = [r.dir.name for r in runs]
    if len(set(names)) < len(names):
        common = Path(os.path.commonpath([str(r.dir) for r in runs]))
        names = [str(r.dir.relative_to(common)) or r.dir.name for r in runs]
    shown = [f"{r.candidate} [{n}]" if keys.count(k) > 1 else r.candidate for r, k, n in zip(runs, keys, names)]
    if len({r.judge for r in runs}) < 2:
        return [(x, x) for x in shown]
    return [(f"{x} [judge {r.judge}]", x) for r, x in zip(runs, shown)]


def _row(run: RunRecord, label: tuple[str, str], tax: RunTaxonomy, n_boot: int, seed: int, alpha: float,
         warnings: list[str]) -> Row:
    s = run.summary
    scored = _scored(run)
    lo = hi = None
    point = None
    if scored and nested_runs.is_nested(run):  # samples or repeated gradings: the hierarchical bootstrap
        point, lo, hi = nested_runs.row_interval(run, n_boot, seed, alpha, tax.scale)
    elif scored and s.get("dialogues"):  # one question per turn (data.expand): dialogues resampled
        d = dialogue_section(scored, [q.id for q in scored], tax.scale, n_boot, seed, alpha)
        point, lo, hi = d["overall"], d["interval"]["lo"], d["interval"]["hi"]
    elif scored:
        try:
            st = bootstrap_stats(scored, tax.dimensions, n=n_boot, seed=seed, alpha=alpha, scale=tax.scale, how=tax.how)
            point, lo, hi = st["point"], st["lo"], st["hi"]
        except ValueError as exc:  # e.g. an ability the run's own taxonomy does not know
            raise DataError(str(run.dir / SAMPLES_FILE), str(exc), fix=RERUN) from None
    stored = s.get("overall")
    if (point is None) != (stored is None) or (
            point is not None and stored is not None and not math.isclose(point, stored, rel_tol=1e-9, abs_tol=1e-6)):
        warnings.append(f"{run.dir / SUMMARY_FILE}: overall {s.get('overall')} differs from {point} recomputed "
                        f"from {SAMPLES_FILE}; re-score the run (the table shows the summary's number)")
    sub = dict(s.get("subsets") or {})
    decay_pct, decay_base = sub.pop("decay_pct", None), sub.pop("decay_base", None)
    cost, tokens = role_totals(s)
    counts: Mapping[str, Any] = s.get("counts") or {}
    return Row(
        label=label[0], name=label[1], candidate=run.candidate, candidate_model=str(s["candidate"].get("model", "")),
        judge=run.judge, judge_model=str((s["judge"] or {}).get("model", "")), run_dir=str(run.dir),
        overall=s.get("overall"), ci_lo=lo, ci_hi=hi,
        dimensions=dict(s.get("dimensions") or {}), abilities=dict(s.get("abilities") or {}),
        subsets=sub, decay_pct=decay_pct, decay_base=decay_base or (tax.decay[2] if tax.decay else None),
        scenarios=dict(s.get("scenarios") or {}),
        counts={k: int(counts.get(k, 0)) for k in _COUNTS},
        cost=cost, tokens=tokens,
        stage=str(s.get("stage", "")), run=run, scored=scored, breakdowns=dict(s.get("breakdowns") or {}),
        candidate_errors=str((s.get("aggregation") or {}).get("candidate_errors", "exclude")),
        vetoes={str(k): int(v) for k, v in (s.get("vetoes") or {}).items()},
    )


def role_totals(summary: Summary) -> tuple[dict[str, float | None], dict[str, dict[str, int]]]:
    """Cost and tokens of every role the run called (candidate, judge, then baseline, user, ...) with their
    totals: the cost total is None unless every role was priced (an unknown part is never a made-up zero)."""
    cost = dict(summary.get("cost") or {})
    roles = list(dict.fromkeys(["candidate", "judge", *cost]))
    out: dict[str, float | None] = {r: cost.get(r) for r in roles}
    out["total"] = None if any(v is None for v in out.values()) else sum(v for v in out.values() if v is not None)
    tokens = {r: {"prompt": int(t.get("prompt", 0)), "completion": int(t.get("completion", 0))}
              for r, t in (summary.get("tokens") or {}).items() if isinstance(t, dict)}
    tokens["total"] = {k: sum(t[k] for t in tokens.values()) for k in ("prompt", "completion")}
    return out, tokens


def _mark_unlike(rows: Sequence[Row], warnings: list[str]) -> None:
    """Mark the rows that left out questions another row scored (candidate errors under `exclude`, judge
    errors, unscored questions): their scores are over other question sets, not like for like."""
    sets = [r.run.excluded if r.run else set() for r in rows]
    if len(rows) < 2 or all(x == sets[0] for x in sets):
        return
    common = set.intersection(*sets)
    for r, x in zip(rows, sets):
        if x - common:
            r.not_like_for_like = True
            warnings.append(f"{r.label} (scored count marked *): {len(x - common)} question(s) left out of its scores were scored "
                            f"for another model (candidate_errors: {r.candidate_errors}); the comparison is not like "
                            "for like")


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
        n, sd = lb.n_boot if n_boot is None else n_boot, lb.seed if seed is None else seed
        d = paired_dialogues(ra.scored, rb.scored, n, sd, lb.alpha, lb.taxonomy.scale) if ra.run and \
            ra.run.summary.get("dialogues") else paired_difference(ra.scored, rb.scored, lb.taxonomy.dimensions, n=n,
                                                                   seed=sd, alpha=lb.alpha, scale=lb.taxonomy.scale,
                                                                   how=lb.taxonomy.how)  # data.expand: dialogues
    except ValueError as exc:
        return PairDiff(ra.label, rb.label, None, None, None, False, 0, error=str(exc))
    noise = pair_noise(ra.run.summary, rb.run.summary) if ra.run and rb.run else None
    return PairDiff(ra.label, rb.label, d["diff"], d["lo"], d["hi"], bool(d["excludes_zero"]), int(d["questions"]),
                    noise=noise, within_noise=noise is not None and d["diff"] is not None and abs(d["diff"]) < noise)


def build_leaderboard(runs: Sequence[RunRecord], *, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05,
                      style_control: bool = False, length_control: bool = False) -> Leaderboard:
    """One row per run, ranked per judge (best overall first), plus paired differences of adjacent ranks under
    the same judge, and with several judges their rankings side by side (results/judges.py); on request the
    style-controlled ranking and the length-adjusted scores beside the raw ones (results/style.py)."""
    if not runs:
        raise ConfigError("no runs to rank")
    tax = RunTaxonomy.from_spec(runs[0].spec, str(runs[0].dir / SPEC_FILE))
    warnings: list[str] = []
    for r in runs[1:]:
        other = RunTaxonomy.from_spec(r.spec, str(r.dir / SPEC_FILE))
        if other.dimensions != tax.dimensions:
            raise ConfigError(f"{r.dir / SPEC_FILE}: taxonomy differs from {runs[0].dir / SPEC_FILE}; "
                              "rank runs of one benchmark version together")
    for key in ("benchmark_version", "data_sha256", "questions"):
        values = {str(r.summary.get(key, (r.summary.get("counts") or {}).get(key))) for r in runs}
        if len(values) > 1:
            warnings.append(f"runs differ in {key} ({', '.join(sorted(values))}); scores may not be comparable")
    rows = [_row(r, lab, tax, n_boot, seed, alpha, warnings) for r, lab in zip(runs, _labels(runs))]
    # ranked per judge (one judge: one ranking); judges in the order their runs were found
    judges = judge_order([r.judge for r in rows])
    rows.sort(key=lambda r: (judges.index(r.judge), r.overall is None, -(r.overall or 0.0), r.label))
    for i, row in enumerate(rows):
        prev = rows[i - 1] if i and rows[i - 1].judge == row.judge else None
        first = next(j for j, x in enumerate(rows) if x.judge == row.judge)
        # equal overall scores share a rank (1, 2, 2, 4): the order within a tie is only alphabetical
        row.rank = prev.rank if prev is not None and prev.overall == row.overall else i - first + 1
        zeroed = int(((row.run.summary if row.run else {}).get("counts") or {}).get("candidate_errors_zeroed", 0))
        if zeroed:
            warnings.append(f"{row.label}: {zeroed} candidate errors are scored 0 (candidate_errors: zero)")
        if row.counts["judge_errors"] or row.counts["candidate_errors"] - zeroed:
            warnings.append(f"{row.label}: {row.counts['judge_errors']} judge errors and "
                            f"{row.counts['candidate_errors'] - zeroed} candidate errors are left out of its scores "
                            f"({row.counts['scored']}/{row.counts['questions']} scored)")
    _mark_unlike(rows, warnings)
    lb = Leaderboard(benchmark=runs[0].benchmark, benchmark_version=str(runs[0].summary.get("benchmark_version", "")),
                     taxonomy=tax, rows=rows, pairs=[], n_boot=n_boot, seed=seed, alpha=alpha, warnings=warnings)
    # adjacent ranks under the same judge: a candidate is never compared with itself under another judge
    lb.pairs = [compare(lb, a, b) for a, b in zip(rows, rows[1:]) if a.judge == b.judge]
    lb.bradley_terry = bradley_terry_section([(r.label, baseline_of(r.run.summary if r.run else None), r.scored)
                                              for r in rows], n_boot=n_boot, seed=seed, alpha=alpha,
                                             warnings=lb.warnings)
    lb.warnings += [f"{p.a} vs {p.b}: {p.error}" for p in lb.pairs if p.error]
    lb.judges = judges_section(rows, tax, n_boot=n_boot, seed=seed, alpha=alpha, warnings=lb.warnings)
    entries = [(r.label, r.run, r.scored) for r in rows if r.run is not None]
    if style_control:
        lb.style_control = style_section(entries, lb.bradley_terry, n_boot=n_boot, seed=seed, alpha=alpha,
                                         warnings=lb.warnings)
    if length_control:
        lb.length_control = length_section(entries, scale=tax.scale, n_boot=n_boot, seed=seed, alpha=alpha,
                                           warnings=lb.warnings)
    return lb
