"""Style and length control (stats/style.py, stats/bradley_terry.py's fit_with_covariates) checked against
references: the covariate fit against scikit-learn's LogisticRegression on the same design (no intercept, no
penalty), the features against Arena-Hard's construction restated (counts from its markdown rules, normalised
difference with +1, standardised), and the length adjustment against the textbook within-group estimator.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from rubric_engine.stats.bradley_terry import Game, fit_ratings, fit_with_covariates
from rubric_engine.stats.style import length_adjusted, style_counts, style_matrix


def sklearn_fit(games: list[Game], z: np.ndarray, anchor: str) -> tuple[dict[str, float], list[float]]:
    """The same regression by scikit-learn: a game's win weight as a y=1 row and its loss weight as a y=0 row
    (sample weights), +ln(10)/-ln(10) in the players' columns so 400 x coefficient is the Elo rating."""
    players = sorted({p for g in games for p in (g.a, g.b)} - {anchor})
    col = {p: i for i, p in enumerate(players)}
    rows, ys, ws = [], [], []
    for g, f in zip(games, z):
        x = np.zeros(len(players) + z.shape[1])
        for p, sign in ((g.a, 1.0), (g.b, -1.0)):
            if p in col:
                x[col[p]] = sign * math.log(10)
        x[len(players):] = f
        for y, w in ((1.0, g.win), (0.0, g.loss)):
            if w > 0:
                rows.append(x)
                ys.append(y)
                ws.append(w)
    lr = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-12, max_iter=100_000)
    lr.fit(np.array(rows), np.array(ys), sample_weight=np.array(ws))
    coef = lr.coef_[0]
    return ({p: 1000 + 400 * float(coef[i]) for p, i in col.items()} | {anchor: 1000.0},
            [float(c) for c in coef[len(players):]])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_covariate_fit_matches_scikit_learn(seed: int) -> None:
    rng = random.Random(seed)
    players = ["base", "m1", "m2", "m3"]
    strength = {p: rng.uniform(-1, 1) for p in players}
    games, feats = [], []
    for _ in range(300):
        a = rng.choice(players[1:])
        f = [rng.gauss(0, 1), rng.gauss(0, 1)]
        p = 1 / (1 + math.exp(-(strength[a] - strength["base"] + 0.8 * f[0] - 0.3 * f[1])))
        w = rng.choice([1.0, 3.0])
        u = rng.random()
        games.append(Game(a, "base", w * (u < p) + 0.5 * w * (abs(u - p) < 0.05), w * (u >= p)))
        feats.append(f)
    z = np.array(feats)
    fit = fit_with_covariates(games, z, "base")
    assert fit is not None
    ratings, coefs = fit
    ref_ratings, ref_coefs = sklearn_fit(games, z, "base")
    assert ratings["base"] == 1000
    for p in players:
        assert ratings[p] == pytest.approx(ref_ratings[p], abs=1e-3)
    assert coefs == pytest.approx(ref_coefs, abs=1e-5)
    assert coefs[0] == pytest.approx(0.8, abs=0.5)  # the simulated effect is recovered, sign included


def test_without_covariates_the_fit_is_the_plain_one() -> None:
    games = [Game("A", "B", 3.0, 1.0), Game("C", "B", 1.0, 2.0)]
    fit = fit_with_covariates(games, np.zeros((2, 0)), "B")
    assert fit is not None and fit[1] == []
    plain = fit_ratings(games, "B")
    assert fit[0] == pytest.approx({k: v for k, v in plain.items()})


def test_no_finite_maximum_has_no_covariate_fit() -> None:
    assert fit_with_covariates([Game("A", "B", 1.0, 0.0)], np.ones((1, 1)), "B") is None  # all wins
    # A wins exactly the games where its reply is longer: the length coefficient has no finite maximum
    games = [Game("A", "B", 1.0, 0.0), Game("A", "B", 1.0, 0.0), Game("A", "B", 0.0, 1.0), Game("A", "B", 0.0, 1.0)]
    assert fit_with_covariates(games, np.array([[1.0], [0.5], [-0.5], [-1.0]]), "B") is None
    assert fit_with_covariates(games, np.array([[1.0], [-0.5], [0.5], [-1.0]]), "B") is not None  # overlap: finite


def test_style_counts_follow_arena_hard_markdown_rules() -> None:
    reply = ("# Title\n## Part\n#not a header\n- one\n* two\n  + three\n1. first\n10. tenth\n"
             "Some **bold** and __also__ but **not\nbold** and ***x*** here.\n"
             "```\n# inside code\n- inside code\n**inside**\n```\n")
    assert style_counts(reply) == {"length": len(reply), "headers": 2, "lists": 5, "bold": 3}


def test_style_matrix_is_the_normalised_standardised_difference() -> None:
    rng = random.Random(3)
    pairs = [({"length": rng.randint(0, 900), "headers": rng.randint(0, 4), "lists": rng.randint(0, 9), "bold": 0},
              {"length": rng.randint(0, 900), "headers": rng.randint(0, 4), "lists": rng.randint(0, 9), "bold": 0})
             for _ in range(40)]
    z, kept = style_matrix(pairs)
    assert kept == ["length", "headers", "lists"]  # no reply has bold: no spread, no column
    for j, f in enumerate(kept):  # Arena-Hard: (a - b) / (a + b + 1), minus the mean, over the population SD
        d = [(a[f] - b[f]) / (a[f] + b[f] + 1) for a, b in pairs]
        mean = sum(d) / len(d)
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / len(d))
        assert list(z[:, j]) == pytest.approx([(x - mean) / sd for x in d], abs=1e-12)


def test_length_adjustment_is_least_squares_with_one_intercept_per_run() -> None:
    """Against numpy's weighted least squares on the dummy design: one intercept per run, the slope on the
    length centred at the common weighted mean."""
    rng = random.Random(9)
    groups = [[(rng.uniform(0.1, 2), rng.random(), rng.choice([1.0, 2.0, 3.0])) for _ in range(n)]
              for n in (15, 22, 9)]
    adjusted, slope, mean_len = length_adjusted(groups)  # type: ignore[misc]
    pts = [(i, x, y, w) for i, g in enumerate(groups) for x, y, w in g]
    w = np.array([p[3] for p in pts])
    xs = np.array([p[1] for p in pts])
    center = float(np.sum(w * xs) / np.sum(w))
    design = np.zeros((len(pts), 4))
    design[np.arange(len(pts)), [p[0] for p in pts]] = 1
    design[:, 3] = xs - center
    ref = np.linalg.lstsq(design * np.sqrt(w)[:, None], np.array([p[2] for p in pts]) * np.sqrt(w), rcond=None)[0]
    assert mean_len == pytest.approx(center, abs=1e-12) and slope == pytest.approx(ref[3], abs=1e-10)
    assert adjusted == pytest.approx(list(ref[:3]), abs=1e-10)


def test_length_adjustment_by_hand() -> None:
    """Run A: lengths 1, 3 scoring 0.2, 0.6; run B: lengths 2, 4 scoring 0.5, 0.9. Within each run the score
    rises 0.2 per unit, so slope 0.2; common mean length 2.5; A's mean (2, 0.4) -> 0.4 + 0.2 x 0.5 = 0.5,
    B's mean (3, 0.7) -> 0.7 - 0.2 x 0.5 = 0.6."""
    fit = length_adjusted([[(1, 0.2, 1), (3, 0.6, 1)], [(2, 0.5, 1), (4, 0.9, 1)]])
    assert fit is not None
    assert fit[0] == pytest.approx([0.5, 0.6]) and fit[1] == pytest.approx(0.2) and fit[2] == pytest.approx(2.5)
    assert length_adjusted([[(1, 0.2, 1)], [(2, 0.5, 1)]]) is None  # no length varies within a run: no slope
