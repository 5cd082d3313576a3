"""Bradley-Terry ratings and their intervals, pinned on small cases worked out by hand: closed-form ratings
(against one baseline the fit is the logit of the win share: 1000 + 400 log10(W / L)), the bootstrap's unit
(questions, never games: questions whose own games balance out give a point interval), its percentiles
against a restatement with `statistics.quantiles`, the unbounded sides, and leaderboard.json's section (rows,
the baseline's row, order, warnings). In-process, so bench/mutation.py sees them; the console-script check of
the section is tests/stats/test_bradley_terry.py's sweep test.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

import pytest

from rubric_engine.results.bradley_terry import baseline_of, bradley_terry_section
from rubric_engine.scoring.aggregate import ScoredQuestion
from rubric_engine.stats.bradley_terry import Game, bootstrap_ratings, fit_ratings


def elo(wins: float, losses: float) -> float:
    """A player's rating against the anchor (1000) alone: P(win) = W / (W + L) = 1 / (1 + 10^(-d / 400))."""
    return 1000 + 400 * math.log10(wins / losses)


# -- the fit -------------------------------------------------------------------------------------------------

def test_two_players_against_the_anchor_are_closed_form() -> None:
    # A 3:1 against B, C 1:3 against B: A = 1000 + 400 log10 3 = 1190.85, C = 1000 - 190.85 = 809.15
    r = fit_ratings([Game("A", "B", 3, 1), Game("C", "B", 1, 3)], "B")
    assert r == {"A": pytest.approx(1190.848501887865, abs=1e-9), "B": 1000.0,
                 "C": pytest.approx(809.151498112135, abs=1e-9)}


def test_the_anchor_can_be_either_side_of_a_game() -> None:
    # the same games written from the baseline's side: B 1:3 against A is A 3:1 against B
    assert fit_ratings([Game("B", "A", 1, 3)], "B")["A"] == pytest.approx(elo(3, 1), abs=1e-9)


def test_a_chain_through_a_third_player() -> None:
    # C ties B 2:2 (C = 1000), A beats C 3:1 (A = C + 190.85); A never met B
    r = fit_ratings([Game("C", "B", 2, 2), Game("A", "C", 3, 1)], "B")
    assert r["C"] == pytest.approx(1000, abs=1e-9) and r["A"] == pytest.approx(elo(3, 1), abs=1e-9)


def test_anchor_and_scale() -> None:
    # anchor 1500, scale 173.7: 1500 + 173.7 / ln 10 x ln 3
    r = fit_ratings([Game("A", "B", 3, 1)], "B", anchor=1500, scale=173.7)
    assert r["B"] == 1500 and r["A"] == pytest.approx(1500 + 173.7 * math.log(3) / math.log(10), abs=1e-9)


def test_unbounded_players_are_none_and_their_games_left_out() -> None:
    """A won its only game (against C): no finite rating; C's rating comes from its other games alone
    (2:2 against B, so 1000) - A's game kept in would pull C down."""
    r = fit_ratings([Game("A", "C", 1, 0), Game("C", "B", 2, 2)], "B")
    assert r["A"] is None and r["C"] == pytest.approx(1000, abs=1e-9)
    lost = fit_ratings([Game("A", "B", 0, 2), Game("C", "B", 1, 3)], "B")
    assert lost["A"] is None and lost["C"] == pytest.approx(elo(1, 3), abs=1e-9)
    assert fit_ratings([], "B") == {"B": 1000.0}


def test_a_tie_is_half_a_win_and_half_a_loss() -> None:
    # one win and two ties: W = 1 + 0.5 + 0.5 = 2, L = 0 + 0.5 + 0.5 = 1 -> 1000 + 400 log10 2 = 1120.41
    games = [Game("A", "B", 1, 0), Game("A", "B", 0.5, 0.5), Game("A", "B", 0.5, 0.5)]
    assert fit_ratings(games, "B")["A"] == pytest.approx(elo(2, 1), abs=1e-9)


# -- the bootstrap: questions are the unit ------------------------------------------------------------------

def test_questions_whose_games_balance_give_a_point_interval() -> None:
    """Each question holds one win and one loss of A: every resample of questions has W = L, so A = 1000 in
    each and the interval is (1000, 1000). Resampling games instead would draw unbalanced sets."""
    per_q = {f"q{i}": [Game("A", "B", 1, 0), Game("A", "B", 0, 1)] for i in range(12)}
    lo, hi = bootstrap_ratings(per_q, "B", n=200, seed=1)["A"]
    assert lo == pytest.approx(1000, abs=1e-6) and hi == pytest.approx(1000, abs=1e-6)


def test_a_question_brings_every_players_games() -> None:
    """A and C have the same result in each question (both win or both lose): in every resample their win
    shares are equal, so are their ratings, and so are both ends of their intervals."""
    per_q = {f"q{i}": [Game("A", "B", w, 1 - w), Game("C", "B", w, 1 - w)]
             for i, w in enumerate([1, 0, 1, 1, 0, 1, 0, 0, 1, 0] * 2)}
    spans = bootstrap_ratings(per_q, "B", n=300, seed=2)
    assert spans["A"] == pytest.approx(spans["C"], abs=1e-6) and spans["A"][0] < spans["A"][1]  # type: ignore[operator]


def test_percentiles_equal_a_restated_bootstrap() -> None:
    """The restatement: questions sorted by id, n resamples each drawing len(ids) ids with random.Random(seed)'s
    choice, A's rating in each from the closed form (one opponent), then the 2.5th and 97.5th percentiles by
    linear interpolation (statistics.quantiles' inclusive method)."""
    rng0 = random.Random(9)
    per_q = {f"q{i:02d}": [Game("A", "B", w := rng0.choice([0, 1, 3, 0.5]), {0: 1, 1: 0, 3: 0, 0.5: 0.5}[w])]
             for i in range(25)}
    n, seed = 400, 5
    ids, rng, values = sorted(per_q), random.Random(seed), []
    for _ in range(n):
        drawn = [rng.choice(ids) for _ in ids]
        w = sum(per_q[q][0].win for q in drawn)
        lost = sum(per_q[q][0].loss for q in drawn)
        assert w > 0 and lost > 0  # (this seed's resamples are all bounded)
        values.append(elo(w, lost))
    cuts = statistics.quantiles(values, n=40, method="inclusive")
    lo, hi = bootstrap_ratings(per_q, "B", n=n, seed=seed)["A"]
    assert lo == pytest.approx(cuts[0], abs=1e-6) and hi == pytest.approx(cuts[-1], abs=1e-6)
    cuts90 = statistics.quantiles(values, n=20, method="inclusive")
    lo90, hi90 = bootstrap_ratings(per_q, "B", n=n, seed=seed, alpha=0.1)["A"]
    assert lo90 == pytest.approx(cuts90[0], abs=1e-6) and hi90 == pytest.approx(cuts90[-1], abs=1e-6)


def test_unbounded_sides() -> None:
    """Mostly wins: some resamples are all wins (no upper end: hi None) and none all losses (lo finite);
    mostly losses: the mirror."""
    wins = {f"q{i}": [Game("A", "B", 1 if i else 0, 0 if i else 1)] for i in range(4)}  # 3 wins, 1 loss
    lo, hi = bootstrap_ratings(wins, "B", n=200, seed=0)["A"]
    assert hi is None and lo is not None
    losses = {f"q{i}": [Game("A", "B", 0 if i else 1, 1 if i else 0)] for i in range(4)}
    lo, hi = bootstrap_ratings(losses, "B", n=200, seed=0)["A"]
    assert lo is None and hi is not None
    # the baseline, as the anchor, is in every resample at 1000
    assert bootstrap_ratings(wins, "B", n=20)["B"] == (1000.0, 1000.0)


def test_seed_and_n_are_used() -> None:
    rng0 = random.Random(3)
    per_q = {f"q{i}": [Game("A", "B", w := rng0.random(), 1 - w)] for i in range(30)}
    a = bootstrap_ratings(per_q, "B", n=100, seed=1)
    assert a == bootstrap_ratings(per_q, "B", n=100, seed=1) != bootstrap_ratings(per_q, "B", n=100, seed=2)
    assert a != bootstrap_ratings(per_q, "B", n=101, seed=1)


# -- leaderboard.json's section ------------------------------------------------------------------------------

def sq(qid: str, score: float, weight: float = 1.0) -> ScoredQuestion:
    return ScoredQuestion(qid, "", "", {}, score, False, weight=weight)


def test_section_hand_computed() -> None:
    """m1: q1 0.75 x 4 (3 won, 1 lost), q2 0.5 x 2 (1, 1): W 4, L 2 -> 1000 + 400 log10 2 = 1120.41.
    m2: q1 0.25 x 4 (1, 3), q2 0.5 x 2 (1, 1): W 2, L 4 -> 879.59. Ordered by rating, the baseline between."""
    warnings: list[str] = []
    rows = [("m2", "base", [sq("q1", 0.25, 4), sq("q2", 0.5, 2)]), ("m1", "base", [sq("q1", 0.75, 4), sq("q2", 0.5, 2)])]
    bt = bradley_terry_section(rows, n_boot=50, seed=0, alpha=0.05, warnings=warnings)
    assert bt is not None and warnings == []
    assert [(x["label"], x["baseline"]) for x in bt["ratings"]] == [("m1", False), ("base", True), ("m2", False)]
    by = {x["label"]: x for x in bt["ratings"]}
    assert by["m1"]["rating"] == pytest.approx(elo(4, 2), abs=1e-9)
    assert by["m2"]["rating"] == pytest.approx(elo(2, 4), abs=1e-9)
    assert by["base"] == {"label": "base", "rating": 1000.0, "lo": 1000.0, "hi": 1000.0, "baseline": True}
    assert (bt["baseline"], bt["anchor"], bt["scale"]) == ("base", 1000.0, 400.0)
    assert bt["method"] == ("logistic regression (Bradley-Terry) on every game against base, ties as half, strong "
                            "verdicts counted as in the win rate; base fixed at 1000, 400 points = 10:1 odds; "
                            "interval: questions resampled")
    # the interval is the bootstrap over the questions both runs share, with the section's n, seed and alpha
    per_q = {"q1": [Game("m2", "\x00baseline", 1, 3), Game("m1", "\x00baseline", 3, 1)],
             "q2": [Game("m2", "\x00baseline", 1, 1), Game("m1", "\x00baseline", 1, 1)]}
    spans = bootstrap_ratings(per_q, "\x00baseline", n=50, seed=0, alpha=0.05)
    assert (by["m1"]["lo"], by["m1"]["hi"]) == spans["m1"] and (by["m2"]["lo"], by["m2"]["hi"]) == spans["m2"]


def test_section_alpha_and_seed_reach_the_bootstrap() -> None:
    rng0 = random.Random(1)
    scored = [sq(f"q{i}", rng0.choice([0.0, 0.5, 1.0, 0.75]), 2) for i in range(30)]
    def span(**kw: Any) -> tuple[Any, Any]:
        bt = bradley_terry_section([("m", "b", scored)], warnings=[], **kw)
        row = next(x for x in bt["ratings"] if x["label"] == "m")  # type: ignore[index]
        return row["lo"], row["hi"]
    base = span(n_boot=200, seed=0, alpha=0.05)
    assert span(n_boot=200, seed=0, alpha=0.3) != base and span(n_boot=200, seed=1, alpha=0.05) != base
    lo, hi = base
    narrow_lo, narrow_hi = span(n_boot=200, seed=0, alpha=0.3)
    assert lo <= narrow_lo <= narrow_hi <= hi


def test_a_candidate_named_as_the_baseline_is_still_rated() -> None:
    """A run labelled 'base' against the baseline 'base': its own rating (3:1 -> 1190.85), the baseline's row
    apart at 1000."""
    bt = bradley_terry_section([("base", "base", [sq("q1", 0.75, 4)])], n_boot=10, seed=0, alpha=0.05, warnings=[])
    assert bt is not None
    got = [(x["label"], x["baseline"], x["rating"]) for x in bt["ratings"]]
    assert got == [("base", False, pytest.approx(elo(3, 1), abs=1e-9)), ("base", True, 1000.0)]


def test_no_section_without_one_common_baseline() -> None:
    warnings: list[str] = []
    assert bradley_terry_section([], n_boot=10, seed=0, alpha=0.05, warnings=warnings) is None
    assert bradley_terry_section([("m", None, [sq("q", 0.5)]), ("n", "b", [sq("q", 0.5)])], n_boot=10, seed=0,
                                 alpha=0.05, warnings=warnings) is None
    assert warnings == []  # a criteria run among them: no ranking, nothing to warn about
    assert bradley_terry_section([("m", "b2", [sq("q", 0.5)]), ("n", "b1", [sq("q", 0.5)])], n_boot=10, seed=0,
                                 alpha=0.05, warnings=warnings) is None
    assert warnings == ["pairwise runs against different baselines (b1, b2): no Bradley-Terry ranking; rank runs of "
                        "one baseline together"]


def test_a_run_that_won_every_game_is_unrated_with_a_warning_and_listed_last() -> None:
    warnings: list[str] = []
    rows = [("perfect", "b", [sq("q1", 1.0, 2), sq("q2", 1.0, 2)]), ("m", "b", [sq("q1", 0.25, 4), sq("q2", 0.5, 2)])]
    bt = bradley_terry_section(rows, n_boot=20, seed=0, alpha=0.05, warnings=warnings)
    assert bt is not None
    assert [(x["label"], x["rating"] is None) for x in bt["ratings"]] == [("b", False), ("m", False), ("perfect", True)]
    assert warnings == ["perfect: won or lost every game against b: no finite Bradley-Terry rating"]
    perfect = bt["ratings"][-1]
    assert (perfect["lo"], perfect["hi"]) == (None, None)


def test_equal_ratings_are_ordered_by_label() -> None:
    rows = [("zeta", "b", [sq("q1", 0.5, 2)]), ("alpha", "b", [sq("q1", 0.5, 2)])]
    bt = bradley_terry_section(rows, n_boot=10, seed=0, alpha=0.05, warnings=[])
    assert [x["label"] for x in bt["ratings"]] == ["alpha", "b", "zeta"]  # type: ignore[index]


def test_baseline_of() -> None:
    assert baseline_of({"pairwise": {"baseline": {"name": "gpt-4o"}}}) == "gpt-4o"
    assert baseline_of({"pairwise": {"baseline": {"name": 7}}}) == "7"
    assert baseline_of({"pairwise": {}}) is None and baseline_of({}) is None and baseline_of(None) is None
    assert baseline_of({"pairwise": None}) is None and baseline_of({"pairwise": {"baseline": None}}) is None


# -- written against the survivors of `python bench/mutation.py stats.bradley_terry` / `results.bradley_terry` --

def test_a_player_seen_only_as_the_second_side_is_rated() -> None:
    """C is always `b`: its wins and losses are summed over every game it is in, whichever comes last (C 1:1
    against the anchor B and against A, A 1:1 against B: everyone at 1000)."""
    for last_two in ([Game("A", "C", 0, 1), Game("A", "C", 1, 0)], [Game("A", "C", 1, 0), Game("A", "C", 0, 1)]):
        r = fit_ratings([Game("A", "B", 1, 1), Game("B", "C", 1, 1), *last_two], "B")
        assert r["A"] == pytest.approx(1000, abs=1e-9) and r["C"] == pytest.approx(1000, abs=1e-9), r


def test_newton_converges_in_a_few_undamped_steps() -> None:
    # Newton's method on this concave likelihood reaches the closed form within 8 steps (a damped step would not)
    r = fit_ratings([Game("A", "B", 3, 1), Game("C", "B", 1, 4)], "B", iterations=8)
    assert r["A"] == pytest.approx(elo(3, 1), abs=1e-9) and r["C"] == pytest.approx(elo(1, 4), abs=1e-9)


def test_bootstrap_defaults_are_1000_resamples_seed_0() -> None:
    rng0 = random.Random(4)
    per_q = {f"q{i}": [Game("A", "B", w := rng0.random(), 1 - w)] for i in range(12)}
    assert bootstrap_ratings(per_q, "B") == bootstrap_ratings(per_q, "B", n=1000, seed=0, alpha=0.05)
    assert bootstrap_ratings(per_q, "B") != bootstrap_ratings(per_q, "B", n=999, seed=0)
    assert bootstrap_ratings(per_q, "B") != bootstrap_ratings(per_q, "B", n=1000, seed=1)


def test_the_unbounded_side_of_a_player_seen_only_as_b() -> None:
    """C (always `b`) loses 7 of 8 questions: resamples of only losses leave no lower end; none is all wins."""
    per_q = {f"q{i}": [Game("A", "C", 1, 0) if i else Game("A", "C", 0, 1)] for i in range(8)}
    lo, hi = bootstrap_ratings(per_q, "A", n=200, seed=0)["C"]
    assert lo is None and hi is not None


def test_small_loss_weights_still_make_the_lower_side_unbounded() -> None:
    """Losses of weight 0.1 (a resample of only losses has lost 0.8 in all, below one game): still no lower end."""
    per_q = {f"q{i}": [Game("A", "B", 1, 0) if i == 0 else Game("A", "B", 0, 0.1)] for i in range(8)}
    lo, hi = bootstrap_ratings(per_q, "B", n=200, seed=0)["A"]
    assert lo is None and hi is not None


def test_section_interval_is_the_bootstrap_with_the_given_n_and_seed() -> None:
    rng0 = random.Random(8)
    scored = [sq(f"q{i}", rng0.choice([0.0, 0.25, 0.5, 0.75, 1.0]), 2) for i in range(30)]
    bt = bradley_terry_section([("m", "b", scored)], n_boot=150, seed=3, alpha=0.05, warnings=[])
    per_q = {q.id: [Game("m", "\x00baseline", q.score * 2, (1 - q.score) * 2)] for q in scored}
    row = next(x for x in bt["ratings"] if x["label"] == "m")  # type: ignore[index]
    assert (row["lo"], row["hi"]) == bootstrap_ratings(per_q, "\x00baseline", n=150, seed=3, alpha=0.05)["m"]


def test_a_run_with_no_scored_question_is_unrated() -> None:
    warnings: list[str] = []
    bt = bradley_terry_section([("m", "b", [sq("q1", 0.75, 4)]), ("none", "b", [])], n_boot=20, seed=0, alpha=0.05,
                               warnings=warnings)
    row = next(x for x in bt["ratings"] if x["label"] == "none")  # type: ignore[index]
    assert (row["rating"], row["lo"], row["hi"]) == (None, None, None)
    assert warnings == ["none: won or lost every game against b: no finite Bradley-Terry rating"]
    empty = bradley_terry_section([("none", "b", [])], n_boot=20, seed=0, alpha=0.05, warnings=[])
    assert [(x["label"], x["rating"]) for x in empty["ratings"]] == [("b", 1000.0), ("none", None)]  # type: ignore[index]
