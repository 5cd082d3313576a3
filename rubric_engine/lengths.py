"""Do longer replies score higher? Spearman's rho between reply length and score, with intervals.

Why Spearman: scores are bounded and lumpy (many 0s and 1s) and lengths are skewed, so only the
order matters; ties get average ranks (as scipy.stats.spearmanr does). The interval is a
percentile bootstrap over questions, the unit that was sampled. A resample is drawn as counts per
question, and ranks inside it are computed from cumulative counts, so 1000 resamples cost a few
array operations instead of 1000 sorts. Pure: numpy only, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["spearman", "spearman_counts", "spearman_interval", "resample_counts", "length_block", "strong_note",
           "STRONG_RHO", "TOKEN_MEASURE"]

STRONG_RHO = 0.5  # |rho| at or above this, with an interval excluding 0, is flagged as "strong"
TOKEN_MEASURE = "candidate completion tokens as reported by the provider"


def _ranks_from_counts(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Average ranks (1-based) of each original point inside each resample given by `counts` (B x n)."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    uniq, start = np.unique(xs, return_index=True)
    end = np.append(start[1:], len(x))
    cum = np.concatenate([np.zeros((counts.shape[0], 1)), np.cumsum(counts[:, order], axis=1)], axis=1)
    below = cum[:, start]
    total = cum[:, end] - below
    group_rank = below + (total + 1.0) / 2.0  # B x groups
    return group_rank[:, np.searchsorted(uniq, x)]


def spearman_counts(x: Sequence[float], y: Sequence[float], counts: np.ndarray) -> np.ndarray:
    """rho in each resample (row of `counts`: how often each point was drawn); nan where x or y is constant."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    w = np.asarray(counts, dtype=float)
    if w.ndim == 1:
        w = w[None, :]
    rx, ry = _ranks_from_counts(xa, w), _ranks_from_counts(ya, w)
    n = w.sum(axis=1, keepdims=True)
    dx = rx - (w * rx).sum(axis=1, keepdims=True) / n
    dy = ry - (w * ry).sum(axis=1, keepdims=True) / n
    vx, vy = (w * dx * dx).sum(axis=1), (w * dy * dy).sum(axis=1)
    cov = (w * dx * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = cov / np.sqrt(vx * vy)
    rho[(vx <= 1e-12) | (vy <= 1e-12)] = np.nan
    return np.clip(rho, -1.0, 1.0)


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho with average ranks for ties; None when fewer than 3 points or a side is constant."""
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} x values but {len(y)} y values")
    if len(x) < 3:
        return None
    rho = float(spearman_counts(x, y, np.ones(len(x)))[0])
    return None if np.isnan(rho) else rho


def resample_counts(n: int, n_boot: int, seed: int) -> np.ndarray:
    """n_boot x n matrix: how often each of n items is drawn in each resample (with replacement)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(n_boot, n))
    counts = np.zeros((n_boot, n))
    np.add.at(counts, (np.arange(n_boot)[:, None], draws), 1.0)
    return counts


def spearman_interval(x: Sequence[float], y: Sequence[float], *, n_boot: int = 1000, seed: int = 0,
                      alpha: float = 0.05) -> dict[str, Any] | None:
    """{rho, lo, hi, n, undefined_resamples}; None when rho itself is undefined (too few points, no variation).

    Resamples in which a side is constant have no rho; they are counted, not filled in.
    """
    rho = spearman(x, y)
    if rho is None:
        return None
    values = spearman_counts(x, y, resample_counts(len(x), n_boot, seed))
    ok = values[~np.isnan(values)]
    lo, hi = (float(np.quantile(ok, alpha / 2)), float(np.quantile(ok, 1 - alpha / 2))) if len(ok) else (None, None)
    return {"rho": rho, "lo": lo, "hi": hi, "n": len(x), "undefined_resamples": int(len(values) - len(ok))}


def _strong(r: Mapping[str, Any] | None) -> bool:
    return bool(r and r["lo"] is not None and abs(r["rho"]) >= STRONG_RHO and (r["lo"] > 0 or r["hi"] < 0))


def length_block(samples: Sequence[Mapping[str, Any]], abilities: Sequence[str], *, n_boot: int = 1000,
                 seed: int = 0, alpha: float = 0.05) -> dict[str, Any]:
    """summary.json's `length`: reply length (characters; tokens where recorded) against question score
    and against each ability's score, Spearman rho with a bootstrap interval over questions."""
    rows = [s for s in samples if s.get("score") is not None and isinstance(s.get("response"), str)]
    chars = [float(len(s["response"])) for s in rows]
    toks = [float(((s.get("tokens") or {}).get("candidate") or {}).get("completion") or 0) for s in rows]
    have_tokens = bool(rows) and all(t > 0 for t in toks)
    measures = {"chars": chars, **({"tokens": toks} if have_tokens else {})}

    def rho(pick: Sequence[int], values: Sequence[float], measure: list[float], k: int) -> dict[str, Any] | None:
        return spearman_interval([measure[i] for i in pick], values, n_boot=n_boot, seed=seed + k, alpha=alpha)

    every = list(range(len(rows)))
    overall = {m: rho(every, [float(rows[i]["score"]) for i in every], v, 0) for m, v in measures.items()}
    per_ability: dict[str, Any] = {}
    for k, ab in enumerate(abilities, 1):
        pick = [i for i in every if ab in (rows[i].get("abilities") or {})]
        vals = [float(rows[i]["abilities"][ab]["score"]) for i in pick]
        per_ability[ab] = {m: rho(pick, vals, v, k) for m, v in measures.items()}
    strong = [m for m, r in overall.items() if _strong(r)]
    return {
        "unit": "question", "questions": len(rows),
        "mean_chars": float(np.mean(chars)) if chars else None,
        "mean_tokens": float(np.mean(toks)) if have_tokens else None,
        "token_measure": TOKEN_MEASURE if have_tokens else None,
        "note": None if have_tokens else "tokens not recorded for every scored reply (e.g. a score-only run "
                                         "from an answers file): characters only",
        "overall": overall, "abilities": per_ability,
        "strong": strong,  # measures whose |rho| >= STRONG_RHO with an interval excluding 0
        "bootstrap": {"n": n_boot, "seed": seed, "alpha": alpha, "method": "percentile, questions resampled"},
    }


def strong_note(label: str, block: Mapping[str, Any] | None) -> str | None:
    """The leaderboard's line for a run whose question score and reply length correlate strongly."""
    if not block or not block.get("strong"):
        return None
    parts = []
    for m in block["strong"]:
        r = block["overall"][m]
        parts.append(f"{'characters' if m == 'chars' else 'tokens'} rho {r['rho']:+.2f} [{r['lo']:+.2f}, {r['hi']:+.2f}]")
    return (f"length: {label}: question score and reply length correlate strongly ({'; '.join(parts)}, "
            f"n={block['questions']}); longer replies {'gain' if block['overall'][block['strong'][0]]['rho'] > 0 else 'lose'}")
