"""Robustness statistics of a judge's verdicts: pure functions, no I/O (validity/robustness.py calls them).

Why a module of its own: the order and granularity checks re-judge the same items under a changed prompt and
compare; what is compared (hit rate by shown position, flips, agreement and kappa) must be checkable against
textbook values and reference packages without any model call. Intervals: Wilson's score interval for a
proportion (hit rate at one position), the question-cluster bootstrap of stats/agreement.py for agreement,
kappa and the flip rate (the items of one question are not independent).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from rubric_engine.stats.agreement import cluster_tables, pair_summary

__all__ = ["Rejudged", "wilson", "permutation", "position_rates", "compare_verdicts"]

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile


@dataclass(frozen=True)
class Rejudged:
    """One criterion judged twice: as in the run (`original`) and under the check (`new`), shown at
    `position` (1-based) of `shown` criteria in the changed prompt."""

    qid: str
    index: int
    original: bool
    new: bool
    position: int
    shown: int


def wilson(hits: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson's score interval for hits / n (None when n is 0)."""
    if n <= 0:
        return None
    p = hits / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def permutation(n: int, seed: int, qid: str) -> list[int]:
    """A seeded order of 1..n for question `qid`, never the listed order when n > 1 (a check that leaves
    a question's order as it was would measure nothing there)."""
    order = list(range(1, n + 1))
    if n < 2:
        return order
    rng = random.Random(f"{seed}:{qid}")
    while order == sorted(order):
        rng.shuffle(order)
    return order


def position_rates(rows: Sequence[Rejudged]) -> list[dict[str, object]]:
    """Hit rate of the re-judged verdicts by shown position (1, 2, ...) and for the last listed criterion,
    each with its Wilson 95% interval, and the original verdicts' rate on the same items for reference."""
    groups: dict[str, list[Rejudged]] = {}
    for r in sorted(rows, key=lambda r: r.position):
        groups.setdefault(str(r.position), []).append(r)
    last = [r for r in rows if r.position == r.shown and r.shown > 1]
    if last:
        groups["last"] = last
    out = []
    for pos, rs in groups.items():
        hits = sum(r.new for r in rs)
        ci = wilson(hits, len(rs))
        out.append({"position": pos, "n": len(rs), "hit_rate": hits / len(rs), "ci": list(ci) if ci else None,
                    "original_hit_rate": sum(r.original for r in rs) / len(rs)})
    return out


def compare_verdicts(rows: Sequence[Rejudged], n_boot: int = 1000, seed: int = 0) -> dict[str, object]:
    """Agreement of the new verdicts with the original ones: raw agreement, Cohen's kappa (with 95%
    question-cluster bootstrap intervals, stats/agreement.py) and the flip rate (1 - agreement) with its
    interval, plus the flips in each direction."""
    _, tables = cluster_tables([r.new for r in rows], [r.original for r in rows], [r.qid for r in rows])
    s = pair_summary(tables, n_boot=n_boot, seed=seed)
    raw, ci = s.get("raw"), (s.get("ci") or {}).get("raw")
    return {"n": s["n"], "questions": s["questions"], "agreement": raw, "agreement_ci": ci,
            "cohen_kappa": s.get("cohen_kappa"), "kappa_ci": (s.get("ci") or {}).get("cohen_kappa"),
            "flip_rate": None if raw is None else 1 - raw,
            "flip_rate_ci": None if ci is None else [1 - ci[1], 1 - ci[0]],
            "flips": {"met_now_not_before": s["disagreements"]["a_met_b_not"],
                      "not_now_met_before": s["disagreements"]["a_not_b_met"]},
            "notes": s["notes"]}
