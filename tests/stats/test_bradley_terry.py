"""Bradley-Terry ratings (stats/bradley_terry.py) checked against scikit-learn's LogisticRegression fitted as
LMSYS fits its arena ratings, against a textbook two-player case, and end to end: a sweep of pairwise runs
gets the ranking in leaderboard.json, .csv and .md.
"""

from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from rubric_engine.stats.bradley_terry import Game, bootstrap_ratings, fit_ratings
from test_cli import run_cli

from conftest import DATA


def lmsys_ratings(battles: list[tuple[str, str, str]], anchor: str) -> dict[str, float]:
    """LMSYS's construction: one row per battle with +ln(10) for model_a and -ln(10) for model_b, the data
    doubled so a tie is one win and one loss (a decisive battle twice the same), no intercept, no penalty,
    400 x coefficient + 1000, shifted so `anchor` is 1000."""
    players = sorted({p for a, b, _ in battles for p in (a, b)})
    idx = {p: i for i, p in enumerate(players)}
    x = np.zeros((2 * len(battles), len(players)))
    y = np.zeros(2 * len(battles))
    for copy in range(2):
        for n, (a, b, winner) in enumerate(battles):
            r = copy * len(battles) + n
            x[r, idx[a]], x[r, idx[b]] = math.log(10), -math.log(10)
            y[r] = 1.0 if winner == "a" or (winner == "tie" and copy == 0) else 0.0
    lr = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-10, max_iter=10_000)  # no penalty
    lr.fit(x, y)
    elo = 400 * lr.coef_[0] + 1000
    return {p: float(elo[i] - elo[idx[anchor]] + 1000) for p, i in idx.items()}


def as_games(battles: list[tuple[str, str, str]]) -> list[Game]:
    return [Game(a, b, {"a": 1.0, "b": 0.0, "tie": 0.5}[w], {"a": 0.0, "b": 1.0, "tie": 0.5}[w]) for a, b, w in battles]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_matches_scikit_learn_as_lmsys(seed: int) -> None:
    rng = random.Random(seed)
    players = ["base", "m1", "m2", "m3", "m4"]
    strength = {p: rng.uniform(-1, 1) for p in players}
    battles = []
    for _ in range(400):
        a, b = rng.sample(players, 2)
        p = 1 / (1 + 10 ** (strength[b] - strength[a]))
        u = rng.random()
        battles.append((a, b, "tie" if abs(u - p) < 0.1 else "a" if u < p else "b"))
    ours = fit_ratings(as_games(battles), "base")
    ref = lmsys_ratings(battles, "base")
    assert ours["base"] == 1000
    for p in players:
        assert ours[p] == pytest.approx(ref[p], abs=1e-3)


def test_textbook_two_players() -> None:
    """A beats B in 3 of 4 games: P(A) = 3/4 = 1 / (1 + 10^(-d/400)), so d = 400 log10(3) = 190.85."""
    ratings = fit_ratings([Game("A", "B", 3.0, 1.0)], "B")
    assert ratings["B"] == 1000 and ratings["A"] == pytest.approx(1000 + 400 * math.log10(3), abs=1e-9)
    tied = fit_ratings([Game("A", "B", 1.0, 1.0)], "B")  # as many ties / wins as losses: equal ratings
    assert tied["A"] == pytest.approx(1000, abs=1e-9)


def test_all_wins_has_no_finite_rating() -> None:
    ratings = fit_ratings([Game("A", "B", 2.0, 0.0), Game("C", "B", 1.0, 1.0)], "B")
    assert ratings["A"] is None and ratings["C"] == pytest.approx(1000)
    spans = bootstrap_ratings({"q1": [Game("A", "B", 1.0, 0.0)], "q2": [Game("A", "B", 0.0, 1.0)]}, "B", n=50)
    assert spans["A"] == (None, None)  # some resamples are all wins, others all losses: unbounded both ways


def test_bootstrap_is_seeded_and_brackets_the_fit() -> None:
    rng = random.Random(5)
    per_q = {f"q{i}": [Game("A", "B", w := rng.choice([0.0, 0.5, 1.0, 3.0]), (3.0 if w == 0 else 1.0) - min(w, 1.0))]
             for i in range(60)}
    a = bootstrap_ratings(per_q, "B", n=200, seed=7)
    assert a == bootstrap_ratings(per_q, "B", n=200, seed=7) and a != bootstrap_ratings(per_q, "B", n=200, seed=8)
    point = fit_ratings([g for gs in per_q.values() for g in gs], "B")["A"]
    lo, hi = a["A"]
    assert lo is not None and hi is not None and lo < point < hi  # type: ignore[operator]


@pytest.mark.slow
def test_sweep_leaderboard_has_the_bradley_terry_ranking(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "sweep"
    res = run_cli(["-m", f"benchmark={DATA / 'pairwise_mini_spec'}", f"data.path={DATA / 'pairwise_mini.jsonl'}",
                   "candidate=mock", "candidate.model=mock/a,mock/b,mock/c", "judge=mock", "progress=none",
                   "bootstrap.samples=300", "bootstrap.seed=4", f"hydra.sweep.dir={out}"], env)
    assert res.returncode == 0, res.stderr
    lb = json.loads((out / "leaderboard.json").read_text())
    bt = lb["bradley_terry"]
    assert bt["baseline"] == "base-hard+base-creative" and bt["anchor"] == 1000
    by_label = {x["label"]: x for x in bt["ratings"]}
    assert by_label["base-hard+base-creative"]["baseline"] and by_label["base-hard+base-creative"]["rating"] == 1000
    for row in lb["rows"]:  # against one baseline only, the fit is the win rate's logit: 400 log10(p / (1 - p))
        p = row["overall"] / 100
        assert by_label[row["label"]]["rating"] == pytest.approx(1000 + 400 * math.log10(p / (1 - p)), abs=1e-6)
    ratings = [x["rating"] for x in bt["ratings"]]
    assert ratings == sorted(ratings, reverse=True)
    rows = list(csv.DictReader((out / "leaderboard.csv").open()))
    assert all(float(r["bt_rating"]) == pytest.approx(by_label[r["label"]]["rating"]) for r in rows)
    assert "## Bradley-Terry (base-hard+base-creative = 1000)" in (out / "leaderboard.md").read_text()
    assert "Bradley-Terry" in (out / "report.html").read_text()
