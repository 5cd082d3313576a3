"""Judge sweeps: each judge's ranking of the candidates side by side, and the rank correlation between judges.

Why apart from results/leaderboard.py: a sweep over judges (`candidate=a,b judge=x,y,z`) is a set of rankings,
one per judge, not one ranking of (candidate, judge) pairs; this module groups a built leaderboard's rows by judge
and adds what only several judges give: how far they agree on the order (Kendall's tau-b between every two judges'
rankings, with a bootstrap interval over questions, stats/rankcorr.py). A leaderboard with one judge has no
section (None).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from rubric_engine.scoring.aggregate import ScoredQuestion
from rubric_engine.stats.rankcorr import tau_interval

if TYPE_CHECKING:
    from rubric_engine.store.runs import RunTaxonomy

__all__ = ["judge_order", "judges_section", "METHOD"]

METHOD = ("Kendall's tau-b between two judges' rankings of the candidates both ranked (ties corrected, as "
          "scipy.stats.kendalltau), from their overall scores on the questions every one of those runs scored; "
          "percentile bootstrap interval: questions resampled with replacement, the same draws for every candidate "
          "under both judges, both rankings recomputed in each resample")


class Row(Protocol):
    """What this module reads of a leaderboard row (results/leaderboard.Row, which imports this module)."""

    label: str
    candidate: str
    judge: str
    rank: int
    overall: float | None
    scored: list[ScoredQuestion]


def judge_order(judges: Sequence[str]) -> list[str]:
    """The judges in the order their first run was found (a sweep's job order), each once."""
    return list(dict.fromkeys(judges))


def judges_section(rows: Sequence[Row], tax: "RunTaxonomy", *, n_boot: int, seed: int, alpha: float,
                   warnings: list[str]) -> dict[str, Any] | None:
    """{judges, candidates, table, tau, method} for a leaderboard of several judges; None for one judge.

    table: one entry per candidate, {candidate, by_judge: {judge: {label, rank, overall}}}; tau: one entry per
    pair of judges, {a, b, tau, lo, hi, candidates, questions, undefined, error}. A candidate run twice under one
    judge is ambiguous in a ranking of candidates: the first row is used and a warning says so."""
    judges = judge_order([r.judge for r in rows])
    if len(judges) < 2:
        return None
    cells: dict[str, dict[str, Row]] = {}
    for r in rows:
        by_judge = cells.setdefault(r.candidate, {})
        if r.judge in by_judge:
            warnings.append(f"judge {r.judge}: candidate {r.candidate} has several runs ({by_judge[r.judge].label}, "
                            f"{r.label}); the judges' side-by-side table and rank correlations use the first")
            continue
        by_judge[r.judge] = r
    candidates = sorted(cells, key=lambda c: (sum(x.rank for x in cells[c].values()) / len(cells[c]), c))
    table = [{"candidate": c, "by_judge": {j: {"label": x.label, "rank": x.rank, "overall": x.overall}
                                           for j, x in cells[c].items()}} for c in candidates]
    taus = []
    for i, a in enumerate(judges):
        for b in judges[i + 1:]:
            both = [c for c in candidates if a in cells[c] and b in cells[c] and cells[c][a].scored and cells[c][b].scored]
            entry: dict[str, Any] = {"a": a, "b": b, "tau": None, "lo": None, "hi": None, "candidates": len(both),
                                     "questions": 0, "undefined": 0, "error": None}
            try:
                entry.update(tau_interval([cells[c][a].scored for c in both], [cells[c][b].scored for c in both],
                                          tax.dimensions, n=n_boot, seed=seed, alpha=alpha, scale=tax.scale, how=tax.how))
            except ValueError as exc:
                entry["error"] = str(exc)
                warnings.append(f"rank correlation of judges {a} and {b}: {exc}")
            if entry["undefined"]:
                warnings.append(f"rank correlation of judges {a} and {b}: tau is undefined in {entry['undefined']} of "
                                f"{n_boot} resamples (a judge tied every candidate); the interval is over the others")
            taus.append(entry)
    return {"judges": judges, "candidates": candidates, "table": table, "tau": taus, "method": METHOD}
