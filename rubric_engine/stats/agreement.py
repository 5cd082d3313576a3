"""Agreement statistics between binary raters (a judge, people): pure numpy, no I/O, no UI.

Why a module of its own: the judge-human check (`agree`) and any judge-vs-judge comparison need
the same numbers, and they must be checkable against textbook values and reference packages.

Two raters on binary items are summarised by a 2x2 table (n11, n10, n01, n00): a met & b met,
a met & b not, a not & b met, neither. `b` is the reference (a human, or the human majority), so
false-pass = n10 / (n10 + n00) and false-fail = n01 / (n11 + n01). Every statistic is computed
from the table, vectorised over a leading axis, so a cluster bootstrap (resampling questions, not
items, because the items of one conversation are not independent) costs one matrix product.
An undefined statistic is NaN inside this module and None (with a note) in what it returns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "STATS",
    "table",
    "cluster_tables",
    "pair_statistics",
    "pair_summary",
    "bootstrap_weights",
    "krippendorff_alpha",
    "multi_rater_alpha",
    "majority",
    "kendall_tau",
    "mean_difference",
]

MIN_CLUSTERS = 5  # fewer questions than this: no bootstrap interval at all
STATS = ("raw", "chance_floor", "cohen_kappa", "gwet_ac1", "krippendorff_alpha", "false_pass", "false_fail")


def table(a: Sequence[bool], b: Sequence[bool]) -> np.ndarray:
    """The 2x2 counts (n11, n10, n01, n00) of two equally long label lists."""
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if x.shape != y.shape:
        raise ValueError(f"label lists differ in length: {x.size} vs {y.size}")
    return np.array([np.sum(x & y), np.sum(x & ~y), np.sum(~x & y), np.sum(~x & ~y)], dtype=float)


def cluster_tables(a: Sequence[bool], b: Sequence[bool], clusters: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """One 2x2 table per cluster (question), in first-seen order of the clusters."""
    order: dict[str, int] = {}
    for c in clusters:
        order.setdefault(c, len(order))
    out = np.zeros((len(order), 4))
    for x, y, c in zip(a, b, clusters):
        out[order[c], (0 if y else 1) if x else (2 if y else 3)] += 1
    return list(order), out


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def pair_statistics(t: np.ndarray) -> dict[str, np.ndarray]:
    """Every statistic of STATS from tables of shape (..., 4); NaN where undefined.

    chance_floor is the raw agreement of a constant rater that always gives the reference's
    (b's) more common label: with most items "not met", a judge that always says no scores this.
    kappa: (po - pe) / (1 - pe) with pe from each rater's own marginals (undefined when pe = 1).
    AC1: Gwet's pe = 2 pi (1 - pi), pi the mean of the two raters' met rates (two categories).
    alpha: Krippendorff's nominal alpha for two raters with no missing value, in closed form from
    the coincidence matrix: 1 - (n - 1) (n10 + n01) / (n_met n_not), n = 2N values.
    """
    t = np.asarray(t, dtype=float)
    n11, n10, n01, n00 = (t[..., i] for i in range(4))
    n = n11 + n10 + n01 + n00
    po = _div(n11 + n00, n)
    pa, pb = _div(n11 + n10, n), _div(n11 + n01, n)
    pe_k = pa * pb + (1 - pa) * (1 - pb)
    kappa = _div(po - pe_k, 1 - pe_k)
    kappa = np.where(np.isclose(pe_k, 1.0), np.nan, kappa)
    pi = (pa + pb) / 2
    pe_g = 2 * pi * (1 - pi)
    ac1 = _div(po - pe_g, 1 - pe_g)
    v_met, v_not = 2 * n11 + n10 + n01, 2 * n00 + n10 + n01
    alpha = 1 - _div((2 * n - 1) * (n10 + n01), v_met * v_not)
    alpha = np.where(v_met * v_not > 0, alpha, np.nan)
    return {
        "raw": po,
        "chance_floor": np.maximum(pb, 1 - pb),
        "cohen_kappa": kappa,
        "gwet_ac1": ac1,
        "krippendorff_alpha": alpha,
        "false_pass": _div(n10, n10 + n00),
        "false_fail": _div(n01, n11 + n01),
    }


def bootstrap_weights(n_clusters: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_clusters) counts: how often each cluster is drawn in each bootstrap replicate."""
    rng = np.random.default_rng(seed)
    if n_clusters == 0 or n_boot <= 0:
        return np.zeros((max(n_boot, 0), n_clusters))
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_boot).astype(float)


def _interval(values: np.ndarray, level: float = 0.95) -> list[float] | None:
    """Percentile interval over the replicates where the statistic is defined (None if under 20)."""
    v = values[np.isfinite(values)]
    if v.size < 20:
        return None
    lo, hi = np.percentile(v, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return [float(lo), float(hi)]


def _num(x: Any) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x


def pair_summary(tables: np.ndarray, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Point estimates, 95% cluster-bootstrap intervals and plain-language notes for one pair.

    `tables`: per-cluster 2x2 counts (n_clusters, 4); the bootstrap resamples clusters.
    """
    tables = np.asarray(tables, dtype=float).reshape(-1, 4)
    total = tables.sum(axis=0)
    n = int(total.sum())
    point = pair_statistics(total)
    out: dict[str, Any] = {"n": n, "questions": int(np.sum(tables.sum(axis=1) > 0))}
    out["prevalence_a"] = _num(_div(total[0] + total[1], total.sum()))
    out["prevalence_b"] = _num(_div(total[0] + total[2], total.sum()))
    out.update({k: _num(v) for k, v in point.items()})
    out["disagreements"] = {"a_met_b_not": int(total[1]), "a_not_b_met": int(total[2])}
    w = bootstrap_weights(len(tables), n_boot, seed)
    boot = pair_statistics(w @ tables) if n else {}
    few = len(tables) < MIN_CLUSTERS
    out["ci"] = {k: _interval(boot[k]) if n and not few else None for k in STATS if k != "chance_floor"}
    notes = []
    if n == 0:
        notes.append("no item labelled by both")
    elif out["cohen_kappa"] is None:
        notes.append("kappa undefined: both raters gave every item the same label; read AC1 instead")
    if n and out["false_pass"] is None:
        notes.append("false-pass undefined: the reference marked no item 'not met'")
    if n and out["false_fail"] is None:
        notes.append("false-fail undefined: the reference marked no item 'met'")
    if n and few:
        notes.append(f"only {len(tables)} question(s): no interval (needs {MIN_CLUSTERS}+)")
    elif n and len(tables) < 20:
        notes.append(f"only {len(tables)} questions: intervals are rough")
    out["notes"] = notes
    return out


def krippendorff_alpha(matrix: np.ndarray) -> float | None:
    """Nominal alpha of a raters x units matrix (NaN = missing), from the `krippendorff` package;
    None where undefined (fewer than two values in use, or no unit rated twice)."""
    import krippendorff

    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] < 2:
        return None
    paired = np.sum(np.isfinite(m), axis=0) >= 2
    if not paired.any():
        return None
    sub = m[:, paired]
    domain = np.unique(sub[np.isfinite(sub)])
    if domain.size < 2:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        value = krippendorff.alpha(reliability_data=sub, value_domain=domain, level_of_measurement="nominal")
    return _num(value)


def multi_rater_alpha(matrix: np.ndarray, clusters: Sequence[str], n_boot: int = 1000,
                      seed: int = 0) -> dict[str, Any]:
    """Krippendorff's alpha over any number of raters (missing allowed) with a cluster bootstrap."""
    m = np.asarray(matrix, dtype=float)
    point = krippendorff_alpha(m)
    keys = list(dict.fromkeys(clusters))
    cols = {k: [i for i, c in enumerate(clusters) if c == k] for k in keys}
    w = bootstrap_weights(len(keys), n_boot, seed)
    reps = []
    for row in w:
        idx = [i for k, times in zip(keys, row) for i in cols[k] * int(times)]
        value = krippendorff_alpha(m[:, idx]) if idx else None
        reps.append(np.nan if value is None else value)
    return {"n_raters": int(m.shape[0]) if m.ndim == 2 else 0, "units": int(m.shape[1]) if m.ndim == 2 else 0,
            "krippendorff_alpha": point, "ci": _interval(np.array(reps, dtype=float)) if reps else None}


def majority(labels: Sequence[bool]) -> bool | None:
    """The majority label of several raters; None on a tie (counted by the caller, never guessed)."""
    yes = sum(1 for x in labels if x)
    no = len(labels) - yes
    return None if yes == no else yes > no


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b (ties corrected); None when either side is constant or n < 3."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size < 3 or a.size != b.size:
        return None
    da = np.sign(a[:, None] - a[None, :])
    db = np.sign(b[:, None] - b[None, :])
    iu = np.triu_indices(a.size, 1)
    s = float(np.sum(da[iu] * db[iu]))
    n_a, n_b = float(np.sum(da[iu] != 0)), float(np.sum(db[iu] != 0))
    return None if n_a == 0 or n_b == 0 else s / math.sqrt(n_a * n_b)


def mean_difference(pairs: Mapping[str, Sequence[tuple[float, float]]], n_boot: int = 1000,
                    seed: int = 0) -> dict[str, Any]:
    """Mean of (x - y) over units grouped by cluster, with a cluster-bootstrap 95% interval."""
    keys = list(pairs)
    sums = np.array([sum(x - y for x, y in pairs[k]) for k in keys], dtype=float)
    counts = np.array([len(pairs[k]) for k in keys], dtype=float)
    if counts.sum() == 0:
        return {"n": 0, "mean": None, "ci": None}
    w = bootstrap_weights(len(keys), n_boot, seed)
    reps = _div(w @ sums, w @ counts)
    return {"n": int(counts.sum()), "mean": float(sums.sum() / counts.sum()), "ci": _interval(reps)}
