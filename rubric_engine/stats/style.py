"""Style and length control: does a model win or score by how it writes rather than by what it says?

Why two models: a pairwise win rate and a rubric score can both reward a longer or more formatted reply. For
pairwise games the control is Arena-Hard's: the Bradley-Terry logistic regression gets, beside the players'
columns, one column per style feature of the game, and the players' coefficients are then their ratings with
style held at the games' average. A feature is the two replies' counts as a normalised difference,
(a - b) / (a + b + 1) (a = the candidate's count, b = the baseline's), standardised over the games fitted
(mean 0, population standard deviation 1); a feature that does not vary in the fit (no reply has a header) has
no coefficient and is left out of it. The features (`STYLE_FEATURES`): reply length in characters, markdown
headers (`#` to `######` at a line start), list items (numbered or `-`/`*`/`+` at a line start) and bold spans
(`**x**` or `__x__`), the markdown counted with fenced code blocks removed. Arena-Hard counts length in
tokenizer tokens; the normalised difference of two lengths hardly depends on the unit, and characters need no
tokenizer download.

For rubric scores the control is a linear regression of each question's score on its reply length across the
runs compared: one intercept per run, one common slope, the length centred on the mean over every (run,
question) pair, fitted by weighted least squares (a question's weight as in the mean). Each run's intercept is
its adjusted mean: what it would score at the common mean length. Pure numpy, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["STYLE_FEATURES", "style_counts", "style_matrix", "length_adjusted"]

STYLE_FEATURES = ("length", "headers", "lists", "bold")

_FENCE = re.compile(r"```[^`]*```")
_PATTERNS = {
    "headers": re.compile(r"^#{1,6}\s", re.MULTILINE),
    "lists": re.compile(r"^\s*(?:\d+\.|[-*+])\s", re.MULTILINE),
    "bold": re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__"),
}


def style_counts(reply: str) -> dict[str, int]:
    """The reply's length in characters and its markdown counts (code blocks removed first)."""
    prose = _FENCE.sub("", reply)
    return {"length": len(reply), **{k: len(p.findall(prose)) for k, p in _PATTERNS.items()}}


def style_matrix(pairs: Sequence[tuple[Mapping[str, int], Mapping[str, int]]]) -> tuple[np.ndarray, list[str]]:
    """(rows x features, the features kept) for (candidate counts, baseline counts) per game: normalised
    differences, standardised; a feature without spread is dropped (no coefficient can be fitted for it)."""
    cand = np.array([[a[f] for f in STYLE_FEATURES] for a, _ in pairs], dtype=float).reshape(len(pairs), -1)
    base = np.array([[b[f] for f in STYLE_FEATURES] for _, b in pairs], dtype=float).reshape(len(pairs), -1)
    diff = (cand - base) / (cand + base + 1.0)
    sd = diff.std(axis=0) if len(pairs) else np.zeros(len(STYLE_FEATURES))
    keep = [i for i in range(len(STYLE_FEATURES)) if sd[i] > 1e-12]
    z = (diff[:, keep] - diff[:, keep].mean(axis=0)) / sd[keep]
    return z, [STYLE_FEATURES[i] for i in keep]


def length_adjusted(groups: Sequence[Sequence[tuple[float, float, float]]]) -> tuple[list[float], float, float] | None:
    """Per group (run) of (length, score, weight) points: (adjusted means, slope per length unit, the common
    mean length). None when no run's lengths vary (no slope can be fitted) or a group is empty.

    The least-squares fit with one intercept per group and a common slope is solved in closed form (the
    within-group estimator): slope = sum w (x - mean_g x)(y - mean_g y) / sum w (x - mean_g x)^2, and a group's
    intercept at the common mean length L is mean_g y - slope (mean_g x - L)."""
    if not groups or any(not g for g in groups):
        return None
    g = np.repeat(np.arange(len(groups)), [len(x) for x in groups])
    x, y, w = np.array([p for grp in groups for p in grp], dtype=float).T
    sw = np.bincount(g, w)
    mx, my = np.bincount(g, w * x) / sw, np.bincount(g, w * y) / sw
    dx = x - mx[g]
    sxx = float(np.sum(w * dx * dx))
    if sxx <= 1e-12 * max(1.0, float(np.sum(w * x * x))):  # no length varies within a run: no slope
        return None
    slope = float(np.sum(w * dx * (y - my[g]))) / sxx
    mean_len = float(np.sum(w * x) / np.sum(w))
    return [float(v) for v in my - slope * (mx - mean_len)], slope, mean_len
