"""Self-preference statistics: does a judge pass its own family's failures more than others'?

The yardstick is the other judges: an item counts as failed when the strict majority of the
OTHER judges gave the candidate the unfavourable verdict. On those items we measure how often the
judge under audit still passes the candidate, separately for candidates of its own family and of
other families; a judge that merely is lenient passes both more, a self-preferring judge passes
its own family more. The interval is a percentile bootstrap over questions (the sampled unit).
Pure: numpy only, no I/O.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_engine.stats.lengths import resample_counts

__all__ = ["is_pass", "JudgeAudit", "audit_judges", "rank"]


def is_pass(hit: bool, weight: float | None) -> bool:
    """The verdict favours the candidate: a rewarded item met, or a penalised / failure-rule item not hit."""
    return hit if weight is not None and weight > 0 else not hit


@dataclass(frozen=True)
class JudgeAudit:
    judge: str
    family: str
    own_items: int  # items of own-family candidates that the other judges' majority failed
    own_rate: float | None  # share of them this judge passed
    other_items: int
    other_rate: float | None
    diff: float | None  # own_rate - other_rate
    lo: float | None
    hi: float | None
    undefined_resamples: int
    points: float | None  # own-family minus other-family candidates' overall shift under this judge
    points_lo: float | None
    points_hi: float | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _rate(p: float, n: float) -> float | None:
    return p / n if n else None


def audit_judges(passes: Mapping[tuple[str, str], Mapping[str, Sequence[bool]]], judges: Sequence[str],
                 families: Mapping[str, str],
                 scores: Mapping[tuple[str, str], Mapping[str, Mapping[str, float]]] | None = None,
                 *, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05, scale: float = 100.0) -> list[JudgeAudit]:
    """passes[(candidate, judge)][question] = per-item pass flags (same items, same order, for every judge).

    `families` maps every candidate and judge name to its family; `scores[(candidate, judge)][question]`
    holds that question's ability scores (0-1), from which the overall (a macro average over abilities,
    as aggregate computes it) is recomputed inside each resample for the `points` interval.
    Questions must be the same for every (candidate, judge) of one candidate.
    """
    if len(judges) < 2:
        raise ValueError(f"a self-preference audit needs at least two judges, got {len(judges)}")
    candidates = list(dict.fromkeys(c for c, _ in passes))
    questions = sorted({q for (c, _), per_q in passes.items() for q in per_q})
    qindex = {q: i for i, q in enumerate(questions)}
    out: list[JudgeAudit] = []
    counts = resample_counts(len(questions), n_boot, seed) if questions else np.zeros((n_boot, 0))
    macro = _macro_boot(scores or {}, qindex, counts, scale)
    for j in judges:
        others = [k for k in judges if k != j]
        # per question: [own passes, own items, other passes, other items]
        tally = np.zeros((len(questions), 4))
        for c in candidates:
            col = 0 if families[c] == families[j] else 2
            for q, flags in passes[(c, j)].items():
                other_flags = [passes[(c, k)][q] for k in others]
                for i, mine in enumerate(flags):
                    fails = sum(1 for f in other_flags if not f[i])
                    if 2 * fails > len(others):
                        tally[qindex[q], col] += float(mine)
                        tally[qindex[q], col + 1] += 1.0
        tot = tally.sum(axis=0)
        own, other = _rate(tot[0], tot[1]), _rate(tot[2], tot[3])
        diff = lo = hi = None
        undefined = 0
        if own is not None and other is not None:
            diff = own - other
            boot = counts @ tally  # n_boot x 4
            ok = (boot[:, 1] > 0) & (boot[:, 3] > 0)
            undefined = int((~ok).sum())
            vals = boot[ok, 0] / boot[ok, 1] - boot[ok, 2] / boot[ok, 3]
            if len(vals):
                lo, hi = float(np.quantile(vals, alpha / 2)), float(np.quantile(vals, 1 - alpha / 2))
        pts = _points(j, judges, candidates, families, macro)
        p_lo = p_hi = None
        if pts is not None and len(pts) > 1:
            boot_pts = pts[1:][~np.isnan(pts[1:])]
            if len(boot_pts):
                p_lo, p_hi = float(np.quantile(boot_pts, alpha / 2)), float(np.quantile(boot_pts, 1 - alpha / 2))
        out.append(JudgeAudit(judge=j, family=families[j], own_items=int(tot[1]), own_rate=own,
                              other_items=int(tot[3]), other_rate=other, diff=diff, lo=lo, hi=hi,
                              undefined_resamples=undefined,
                              points=None if pts is None or np.isnan(pts[0]) else float(pts[0]),
                              points_lo=p_lo, points_hi=p_hi))
    return out


def _macro_boot(scores: Mapping[tuple[str, str], Mapping[str, Mapping[str, float]]], qindex: Mapping[str, int],
                counts: np.ndarray, scale: float) -> dict[tuple[str, str], np.ndarray]:
    """Overall per (candidate, judge): row 0 on all questions, rows 1.. in each resample (nan if empty)."""
    abilities = sorted({a for per_q in scores.values() for ab in per_q.values() for a in ab})
    aindex = {a: i for i, a in enumerate(abilities)}
    weights = np.vstack([np.ones((1, counts.shape[1])), counts])
    out: dict[tuple[str, str], np.ndarray] = {}
    for key, per_q in scores.items():
        s = np.zeros((len(qindex), len(abilities)))
        m = np.zeros_like(s)
        for q, ab in per_q.items():
            for a, v in ab.items():
                s[qindex[q], aindex[a]], m[qindex[q], aindex[a]] = v, 1.0
        sums, ns = weights @ s, weights @ m
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a resample without this candidate's questions: nan
            out[key] = np.nanmean(np.where(ns > 0, sums / np.where(ns > 0, ns, 1), np.nan), axis=1) * scale
    return out


def _points(j: str, judges: Sequence[str], candidates: Sequence[str], families: Mapping[str, str],
            macro: Mapping[tuple[str, str], np.ndarray]) -> np.ndarray | None:
    """How much more judge j lifts its own family's overall than other families', both measured
    against the mean of the other judges (a judge lenient with everyone scores 0). Element 0: the
    point value; the rest: one per resample."""
    own: list[np.ndarray] = []
    rest: list[np.ndarray] = []
    for c in candidates:
        if (c, j) not in macro or any((c, k) not in macro for k in judges):
            continue
        shift = macro[(c, j)] - np.mean([macro[(c, k)] for k in judges if k != j], axis=0)
        (own if families[c] == families[j] else rest).append(shift)
    if not own or not rest:
        return None
    return np.mean(own, axis=0) - np.mean(rest, axis=0)


def rank(scores: Mapping[str, float | None]) -> dict[str, int | None]:
    """Leaderboard rank (1 = best; ties share the better rank; None without a score)."""
    known = sorted((v for v in scores.values() if v is not None), reverse=True)
    return {k: (None if v is None else known.index(v) + 1) for k, v in scores.items()}
