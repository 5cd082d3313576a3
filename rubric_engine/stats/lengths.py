"""Do longer replies score higher? Spearman's rho between reply length and score, with intervals.

Why Spearman: scores are bounded and lumpy (many 0s and 1s) and lengths are skewed, so only the
order matters; ties get average ranks (as scipy.stats.spearmanr does). The interval is a
percentile bootstrap over questions, the unit that was sampled. A resample is drawn as counts per
question, and ranks inside it are computed from cumulative counts, so 1000 resamples cost a few
array operations instead of 1000 sorts. Pure: numpy only, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["spearman", "spearman_counts", "spearman_interval", "spearman_intervals", "resample_counts", "length_block", "strong_note",
           "STRONG_RHO", "TOKEN_MEASURE"]

STRONG_RHO = 0.5  # |rho| at or above this, with an interval excluding 0, is flagged as "strong"
TOKEN_MEASURE = "candidate completion tokens as reported by the provider"


def _ranks_from_counts(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Average ranks (1-based) of each original point inside each resample given by `counts` (B x n)."""
    order = np.argsort(x, kind="stable")
    uniq, start = np.unique(x[order], return_index=True)
    end = np.append(start[1:], len(x))
    sorted_counts = counts[:, order]
    cum = np.cumsum(sorted_counts, axis=1)
    below = cum[:, start] - sorted_counts[:, start]  # draws of smaller values
    total = cum[:, end - 1] - below  # draws tied with this value
    group_rank = below + (total + 1) / 2.0  # B x groups
    return group_rank[:, np.searchsorted(uniq, x)]


def _pearson_rows(w: np.ndarray, n: np.ndarray, rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    """Count-weighted Pearson correlation of ranks per row; nan where a side has no spread.

    Average ranks of N draws always have mean (N + 1) / 2, so only three weighted sums are needed."""
    m2 = n[:, 0] * ((n[:, 0] + 1) / 2.0) ** 2
    wrx = w * rx
    vx, vy, cov = (wrx * rx).sum(axis=1) - m2, (w * ry * ry).sum(axis=1) - m2, (wrx * ry).sum(axis=1) - m2
    scale = np.maximum(m2, 1.0) * 1e-12  # sums are O(N^3): a relative tolerance for "no spread"
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = cov / np.sqrt(vx * vy)
    rho[(vx <= scale) | (vy <= scale)] = np.nan
    return np.clip(rho, -1.0, 1.0)


def _spearman_many(xs: Sequence[Sequence[float]], y: Sequence[float], counts: np.ndarray) -> list[np.ndarray]:
    """rho of each x against y in each resample; y's ranks are computed once."""
    w = np.asarray(counts, dtype=float)
    if w.ndim == 1:
        w = w[None, :]
    n = w.sum(axis=1, keepdims=True)
    ry = _ranks_from_counts(np.asarray(y, dtype=float), w)
    return [_pearson_rows(w, n, _ranks_from_counts(np.asarray(x, dtype=float), w), ry) for x in xs]


def _spearman_resampled(xs: Sequence[Sequence[float]], y: Sequence[float], n_boot: int, seed: int) -> list[np.ndarray]:
    """_spearman_many over `resample_counts(len(y), n_boot, seed)`, a block of resamples at a time: every row
    is computed alone, so the values are those of the whole matrix, which is never held (n_boot x n floats,
    several times over, was 0.5 GB at 9,000 questions)."""
    parts = [_spearman_many(xs, y, block) for block in _count_blocks(len(y), n_boot, seed)]
    return [np.concatenate([p[i] for p in parts]) for i in range(len(xs))]


def spearman_counts(x: Sequence[float], y: Sequence[float], counts: np.ndarray) -> np.ndarray:
    """rho in each resample (row of `counts`: how often each point was drawn); nan where x or y is constant."""
    return _spearman_many([x], y, counts)[0]


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho with average ranks for ties; None when fewer than 3 points or a side is constant."""
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} x values but {len(y)} y values")
    if len(x) < 3:
        return None
    rho = float(spearman_counts(x, y, np.ones(len(x)))[0])
    return None if np.isnan(rho) else rho


BLOCK_CELLS = 1 << 18  # resample counts held at once (rows x questions): 2 MB of float64 per array


def _count_blocks(n: int, n_boot: int, seed: int) -> Iterator[np.ndarray]:
    """The rows of `resample_counts(n, n_boot, seed)`, a block of rows at a time. One generator draws them in
    order: numpy's Generator continues its stream across calls exactly (its bit generator keeps any half-used
    word), so the blocks are the rows of the whole matrix."""
    rng = np.random.default_rng(seed)
    rows = max(1, BLOCK_CELLS // max(1, n))
    for start in range(0, n_boot, rows):
        k = min(rows, n_boot - start)
        draws = rng.integers(0, n, size=(k, n))
        flat = (draws + (np.arange(k) * n)[:, None]).ravel()
        yield np.bincount(flat, minlength=k * n).reshape(k, n).astype(float)


def resample_counts(n: int, n_boot: int, seed: int) -> np.ndarray:
    """n_boot x n matrix: how often each of n items is drawn in each resample (with replacement)."""
    blocks = list(_count_blocks(n, n_boot, seed))
    return np.concatenate(blocks) if blocks else np.zeros((0, n))


def _interval(rho: float, values: np.ndarray, n: int, alpha: float) -> dict[str, Any]:
    ok = values[~np.isnan(values)]
    lo, hi = (float(np.quantile(ok, alpha / 2)), float(np.quantile(ok, 1 - alpha / 2))) if len(ok) else (None, None)
    return {"rho": rho, "lo": lo, "hi": hi, "n": n, "undefined_resamples": int(len(values) - len(ok))}


def spearman_intervals(xs: Sequence[Sequence[float]], y: Sequence[float], *, n_boot: int = 1000, seed: int = 0,
                       alpha: float = 0.05) -> list[dict[str, Any] | None]:
    """spearman_interval for several x against one y, on the same resamples (cheaper, and comparable)."""
    rhos = [spearman(x, y) for x in xs]
    if all(r is None for r in rhos):
        return [None] * len(xs)
    values = _spearman_resampled(xs, y, n_boot, seed)
    return [None if r is None else _interval(r, v, len(y), alpha) for r, v in zip(rhos, values)]


def spearman_interval(x: Sequence[float], y: Sequence[float], *, n_boot: int = 1000, seed: int = 0,
                      alpha: float = 0.05) -> dict[str, Any] | None:
    """{rho, lo, hi, n, undefined_resamples}; None when rho itself is undefined (too few points, no variation).

    Resamples in which a side is constant have no rho; they are counted, not filled in.
    """
    return spearman_intervals([x], y, n_boot=n_boot, seed=seed, alpha=alpha)[0]


def _strong(r: Mapping[str, Any] | None) -> bool:
    return bool(r and r["lo"] is not None and abs(r["rho"]) >= STRONG_RHO and (r["lo"] > 0 or r["hi"] < 0))


def _chars(rec: Mapping[str, Any]) -> int | None:
    """The reply's length in characters: from the text, or from a compact record's `response_chars`."""
    if isinstance(rec.get("response"), str):
        return len(rec["response"])
    return rec.get("response_chars")


def length_block(samples: Sequence[Mapping[str, Any]], abilities: Sequence[str], *, n_boot: int = 1000,
                 seed: int = 0, alpha: float = 0.05) -> dict[str, Any]:
    """summary.json's `length`: reply length (characters; tokens where recorded) against question score
    and against each ability's score, Spearman rho with a bootstrap interval over questions."""
    rows = [s for s in samples if s.get("score") is not None and _chars(s) is not None]
    chars = [float(_chars(s)) for s in rows]  # type: ignore[arg-type]
    toks = [float(((s.get("tokens") or {}).get("candidate") or {}).get("completion") or 0) for s in rows]
    have_tokens = bool(rows) and all(t > 0 for t in toks)
    measures = {"chars": chars, **({"tokens": toks} if have_tokens else {})}

    def rho(pick: Sequence[int], values: Sequence[float], k: int) -> dict[str, dict[str, Any] | None]:
        got = spearman_intervals([[v[i] for i in pick] for v in measures.values()], values, n_boot=n_boot,
                                 seed=seed + k, alpha=alpha)
        return dict(zip(measures, got))

    every = list(range(len(rows)))
    overall = rho(every, [float(rows[i]["score"]) for i in every], 0)
    per_ability: dict[str, Any] = {}
    for k, ab in enumerate(abilities, 1):
        pick = [i for i in every if ab in (rows[i].get("abilities") or {})]
        per_ability[ab] = rho(pick, [float(rows[i]["abilities"][ab]["score"]) for i in pick], k)
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
