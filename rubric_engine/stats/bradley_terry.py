"""Bradley-Terry ratings from pairwise games, with a bootstrap over questions; the baseline anchored.

Why our own fit: it is the logistic regression LMSYS uses (one row per game, +1 for one player's column and
-1 for the other's, no intercept, the outcome a win or a loss, a tie counted as half a win and half a loss),
fitted by Newton's method on a few players, so it needs only numpy. Ratings are on the Elo scale
(`scale` / ln(10) x the log-odds coefficient: 400 points = 10:1 odds) and anchored: the anchor player (the
baseline) is fixed at `anchor` (1000), which identifies the fit exactly as shifting LMSYS's fitted ratings
does. tests/stats/test_bradley_terry.py checks it against scikit-learn's LogisticRegression and a two-player case.

A game enters with a weight (a strong verdict counts `strong_weight` times, as in the win rate), so a
question enters as its candidate's win weight and loss weight against the baseline. A player that won or
lost every game has no finite rating: None, never a made-up number.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Game", "fit_ratings", "fit_with_covariates", "covariate_design", "fit_design", "to_ratings", "bootstrap_ratings", "ANCHOR", "SCALE"]

ANCHOR, SCALE = 1000.0, 400.0


@dataclass(frozen=True)
class Game:
    """`a` against `b`: `win` = a's win weight, `loss` = a's loss weight (a tie adds half of its weight to each)."""

    a: str
    b: str
    win: float
    loss: float


def fit_ratings(games: Sequence[Game], anchor_player: str, *, anchor: float = ANCHOR, scale: float = SCALE,
                iterations: int = 100) -> dict[str, float | None]:
    """Maximum-likelihood ratings of every player in `games`; `anchor_player` is fixed at `anchor`. A player
    whose games are all wins or all losses (no finite maximum) is None."""
    players = sorted({g.a for g in games} | {g.b for g in games} | {anchor_player})
    record = _records(games, players)
    unbounded = {p for p in players if p != anchor_player and min(record[p]) <= 0}
    free = [p for p in players if p != anchor_player and p not in unbounded]
    out: dict[str, float | None] = {p: None for p in unbounded}
    out[anchor_player] = anchor
    if not free:
        return out
    beta, _ = _newton(_design(games, free, unbounded, None), *_outcomes(games, unbounded), iterations)
    for i, p in enumerate(free):
        out[p] = anchor + scale / math.log(10) * float(beta[i])
    return out


def fit_with_covariates(games: Sequence[Game], covariates: np.ndarray | Sequence[Sequence[float]],
                        anchor_player: str, *, anchor: float = ANCHOR, scale: float = SCALE
                        ) -> tuple[dict[str, float | None], list[float]] | None:
    """Ratings fitted together with one coefficient per covariate column (`covariates[i]` is game i's row,
    a's side minus b's): the logistic regression of `fit_ratings` with the covariate columns appended, no
    intercept, no penalty. Returns (ratings, coefficients on the log-odds scale per covariate unit); None when
    the fit has no finite maximum: a player won or lost every game, or the covariates separate wins from losses
    (Newton's method does not converge). Style control never drops a player or a game to make one exist."""
    players = sorted({g.a for g in games} | {g.b for g in games} | {anchor_player})
    free = [p for p in players if p != anchor_player]
    record = _records(games, players)
    if not free or any(min(record[p]) <= 0 for p in free):
        return None
    x, wins, total = covariate_design(games, covariates, free)
    beta = fit_design(x, wins, total)
    return None if beta is None else to_ratings(beta, free, anchor_player, anchor=anchor, scale=scale)


def covariate_design(games: Sequence[Game], covariates: np.ndarray | Sequence[Sequence[float]],
                     free: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(design, win weights, game weights): a row per game, the `free` players' columns then the covariates
    (built once, a bootstrap then draws its rows)."""
    z = np.asarray(covariates, dtype=float).reshape(len(games), -1)
    return (_design(games, free, set(), z), *_outcomes(games, set()))


def fit_design(x: np.ndarray, wins: np.ndarray, total: np.ndarray) -> np.ndarray | None:
    """The coefficients of a prepared design, or None where Newton's method does not converge (no finite
    maximum)."""
    beta, converged = _newton(x, wins, total)
    return beta if converged else None


def to_ratings(beta: np.ndarray, free: Sequence[str], anchor_player: str, *, anchor: float = ANCHOR,
               scale: float = SCALE) -> tuple[dict[str, float | None], list[float]]:
    """(ratings on the Elo scale with the anchor, the remaining coefficients) from fitted coefficients whose
    first len(free) belong to the `free` players."""
    ratings: dict[str, float | None] = {anchor_player: anchor}
    for i, p in enumerate(free):
        ratings[p] = anchor + scale / math.log(10) * float(beta[i])
    return ratings, [float(b) for b in beta[len(free):]]


def _records(games: Sequence[Game], players: Sequence[str]) -> dict[str, tuple[float, float]]:
    """(won, lost) weight of every player."""
    won = {p: 0.0 for p in players}
    lost = {p: 0.0 for p in players}
    for g in games:
        won[g.a] += g.win
        lost[g.a] += g.loss
        won[g.b] += g.loss
        lost[g.b] += g.win
    return {p: (won[p], lost[p]) for p in players}


def _design(games: Sequence[Game], free: Sequence[str], unbounded: set[str], z: np.ndarray | None) -> np.ndarray:
    """One row per game kept (no unbounded player): +1 in a's column, -1 in b's (the anchor has none), then
    the game's covariates."""
    col = {p: i for i, p in enumerate(free)}
    keep = [i for i, g in enumerate(games) if g.a not in unbounded and g.b not in unbounded]
    x = np.zeros((len(keep), len(free)))
    for r, i in enumerate(keep):
        g = games[i]
        if g.a in col:
            x[r, col[g.a]] += 1.0
        if g.b in col:
            x[r, col[g.b]] -= 1.0
    return x if z is None else np.hstack([x, z[keep]])


def _outcomes(games: Sequence[Game], unbounded: set[str]) -> tuple[np.ndarray, np.ndarray]:
    rows = [g for g in games if g.a not in unbounded and g.b not in unbounded]
    return np.array([g.win for g in rows]), np.array([g.win + g.loss for g in rows])


def _newton(x: np.ndarray, wins: np.ndarray, total: np.ndarray, iterations: int = 100) -> tuple[np.ndarray, bool]:
    """Maximum-likelihood coefficients of the binomial logistic regression (no intercept) by Newton's method
    on the concave log-likelihood, and whether it converged (it does not where the data separate wins from
    losses: the coefficients then grow without bound)."""
    beta = np.zeros(x.shape[1])
    for _ in range(iterations):
        with np.errstate(over="ignore"):
            p = 1.0 / (1.0 + np.exp(-(x @ beta)))
        grad = x.T @ (wins - total * p)
        hess = (x * (total * p * (1 - p))[:, None]).T @ x
        step = np.linalg.solve(hess + 1e-12 * np.eye(x.shape[1]), grad)
        beta += step
        if float(np.max(np.abs(step))) < 1e-9 * max(1.0, float(np.max(np.abs(beta)))):
            return beta, True
    return beta, False


def bootstrap_ratings(per_question: Mapping[str, Sequence[Game]], anchor_player: str, *, n: int = 1000,
                      seed: int = 0, alpha: float = 0.05) -> dict[str, tuple[float | None, float | None]]:
    """(lo, hi) percentile interval of each player's rating: questions resampled with replacement (every
    player's games of a drawn question come with it), the ratings refitted. A resample in which a player has
    no finite rating makes its interval unbounded on that side (None)."""
    ids = sorted(per_question)
    rng = random.Random(seed)
    draws: dict[str, list[float]] = {}
    unbounded: dict[str, set[str]] = {}
    for _ in range(n):
        games = [g for q in (rng.choice(ids) for _ in ids) for g in per_question[q]]
        for p, r in fit_ratings(games, anchor_player).items():
            if r is None:
                unbounded.setdefault(p, set()).add("hi" if _all_won(games, p) else "lo")
            else:
                draws.setdefault(p, []).append(r)
    players = {g.a for gs in per_question.values() for g in gs} | {g.b for gs in per_question.values() for g in gs}
    out: dict[str, tuple[float | None, float | None]] = {}
    for p in sorted(players):
        values = np.array(draws.get(p, []))
        side = unbounded.get(p, set())
        lo = None if "lo" in side or not len(values) else float(np.quantile(values, alpha / 2))
        hi = None if "hi" in side or not len(values) else float(np.quantile(values, 1 - alpha / 2))
        out[p] = (lo, hi)
    return out


def _all_won(games: Sequence[Game], player: str) -> bool:
    lost = sum(g.loss for g in games if g.a == player) + sum(g.win for g in games if g.b == player)
    return lost <= 0
