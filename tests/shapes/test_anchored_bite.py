"""Anchored pairwise's arithmetic (scoring/anchored.py) in-process, for the mutation tool: every label's reward
in both orders, the margin's edges on both sides, truncation's edges, the question value, the rating against
hand values (one anchor: the closed form; two anchors: the likelihood's slope zero) and the bootstrap interval
against numpy's percentiles on the same draws; the spec block's refusals."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from rubric_engine.scoring.anchored import TRUNCATED, Outcome, fit_rating, outcome, question_value, rating_interval, shown

# (label, order) -> the candidate's reward: game 1 (baseline_first) has the anchor as A
REWARDS = {("A>>B", "candidate_first"): 1.0, ("A>B", "candidate_first"): 0.5, ("A=B", "candidate_first"): 0.0,
           ("B>A", "candidate_first"): -0.5, ("B>>A", "candidate_first"): -1.0,
           ("A>>B", "baseline_first"): -1.0, ("A>B", "baseline_first"): -0.5, ("A=B", "baseline_first"): 0.0,
           ("B>A", "baseline_first"): 0.5, ("B>>A", "baseline_first"): 1.0}


@pytest.mark.parametrize(("label", "order"), list(REWARDS))
def test_every_label_rewards_as_wildbench_without_a_length_rule(label: str, order: str) -> None:
    o = outcome(label, order, 3, "none", None, 10_000, 1)
    assert o.reward == REWARDS[(label, order)] and not o.discounted
    assert o.score == {1.0: 1.0, 0.5: 1.0, 0.0: 0.5, -0.5: 0.0, -1.0: 0.0}[o.reward]
    assert o.weight == (3.0 if ">>" in label else 1.0)


def test_the_margin_at_its_edges_on_both_sides() -> None:
    # the candidate wins plainly: discounted only when it is longer by more than K
    assert outcome("A>B", "candidate_first", 1, "margin", 5, 15, 10) == Outcome(0.5, 1.0, 1.0, False)
    assert outcome("A>B", "candidate_first", 1, "margin", 5, 16, 10) == Outcome(0.0, 0.5, 1.0, True)
    # the anchor wins plainly: discounted only when the anchor is longer by more than K
    assert outcome("A>B", "baseline_first", 1, "margin", 5, 10, 15) == Outcome(-0.5, 0.0, 1.0, False)
    assert outcome("A>B", "baseline_first", 1, "margin", 5, 10, 16) == Outcome(0.0, 0.5, 1.0, True)
    # the shorter reply winning is never discounted, nor a strong win, nor a tie
    assert outcome("A>B", "baseline_first", 1, "margin", 5, 100, 10).reward == -0.5
    assert outcome("B>>A", "baseline_first", 2, "margin", 0, 100, 10) == Outcome(1.0, 1.0, 2.0, False)
    assert outcome("A=B", "baseline_first", 2, "margin", 0, 100, 10) == Outcome(0.0, 0.5, 1.0, False)
    # K = 0: any length advantage discounts a plain win; other rules never do
    assert outcome("B>A", "baseline_first", 1, "margin", 0, 11, 10).discounted
    assert not outcome("B>A", "baseline_first", 1, "truncate", 0, 11, 10).discounted
    with pytest.raises(ValueError):
        outcome("A>A", "baseline_first", 1, "none", None, 1, 1)


def test_truncation_at_its_edges() -> None:
    assert shown("truncate", 3, "abc", "abcd") == ("abc", "abc" + TRUNCATED)
    assert shown("truncate", 4, "abc", "abcd") == ("abc", "abcd")
    assert shown("truncate", None, "abcde", "abc") == ("abc" + TRUNCATED, "abc")
    assert shown("truncate", None, "abc", "abc") == ("abc", "abc")
    assert shown("none", 1, "abc", "abcd") == ("abc", "abcd")


def test_question_value_is_the_mean_reward_and_the_game_count() -> None:
    games = [Outcome(1.0, 1.0, 3.0, False), Outcome(-0.5, 0.0, 1.0, False), Outcome(0.0, 0.5, 1.0, True)]
    assert question_value(games) == (pytest.approx(0.5 / 3), 3.0)


def test_rating_by_hand() -> None:
    # one anchor rated 1000, 3 wins of 4: 1000 + 400 log10(3)
    assert fit_rating([(1000.0, 1.0, 1.0)] * 3 + [(1000.0, 0.0, 1.0)]) == pytest.approx(1000 + 400 * math.log10(3))
    # a weight counts as that many games; another scale and base
    assert fit_rating([(0.0, 1.0, 3.0), (0.0, 0.0, 1.0)], per=100, base=math.e) == pytest.approx(100 * math.log(3))
    # two anchors: at the fitted r the expected wins equal the wins
    games = [(1200.0, 1.0, 1.0), (1200.0, 0.0, 1.0), (800.0, 1.0, 1.0), (800.0, 1.0, 1.0), (800.0, 0.5, 1.0)]
    r = fit_rating(games)
    assert r is not None
    expected = sum(w / (1 + 10 ** ((a - r) / 400)) for a, _, w in games)
    assert expected == pytest.approx(sum(s * w for _, s, w in games), abs=1e-9)
    assert 800 < r < 1200
    # far outside the anchors' range: the bracket widens
    assert fit_rating([(0.0, 1.0, 1e6), (0.0, 0.0, 1.0)]) == pytest.approx(400 * 6, rel=1e-9)
    assert fit_rating([(0.0, 0.0, 1.0)]) is None and fit_rating([(0.0, 0.5, 0.0)]) is None
    # anchors a million points apart: no overflow, the candidate between them
    far = fit_rating([(0.0, 1.0, 1.0), (0.0, 0.0, 1.0), (1e6, 0.0, 1.0), (1e6, 1.0, 1.0)])
    assert far is not None and 0 < far < 1e6


def test_rating_interval_is_numpys_percentiles_of_the_same_resamples() -> None:
    rng = random.Random(3)
    questions = [[(1000.0 + 100 * rng.randrange(3), rng.choice([0.0, 0.5, 1.0]), 1.0) for _ in range(4)]
                 for _ in range(12)]
    low, high, unbounded = rating_interval(questions, 60, seed=5)
    draw = random.Random(5)
    fits = []
    for _ in range(60):
        picked = [g for _ in questions for g in questions[draw.randrange(len(questions))]]
        r = fit_rating(picked)
        if r is not None:
            fits.append(r)
    assert unbounded == 60 - len(fits)
    assert (low, high) == pytest.approx((np.percentile(fits, 2.5), np.percentile(fits, 97.5)))
    # a resample with no finite rating is counted, and too many leave no interval
    all_won = [[(1000.0, 1.0, 1.0)]] * 5 + [[(1000.0, 0.0, 1.0)]]
    low, high, unbounded = rating_interval(all_won, 40, seed=1)
    assert unbounded > 0
    assert (low is None) == (unbounded * 2 > 40)


@pytest.mark.parametrize(("block", "says"), [
    ({"files": {}}, "at least 1"),
    ({"files": {"a": {"path": "a.jsonl"}}, "length": {"rule": "margin"}}, "margin needs chars"),
    ({"files": {"a": {"path": "a.jsonl"}}, "length": {"rule": "none", "chars": 3}}, "applies to rule truncate"),
    ({"files": {"a": {"path": "a.jsonl"}}, "length": {"rule": "truncate", "chars": 0}}, "would show the judge"),
    ({"files": {"a b": {"path": "a.jsonl"}}}, "letters, digits"),
    ({"files": {"a": {"path": "a.jsonl", "sha256": "xyz"}}}, "sha256"),
    ({"files": {"a": {"path": "a.jsonl"}}, "scale": {"base": 1}}, "greater than 1")])
def test_the_anchors_block_refuses(block: dict, says: str) -> None:
    from pydantic import ValidationError

    from rubric_engine.spec.anchors import Anchors

    with pytest.raises(ValidationError) as err:
        Anchors.model_validate(block)
    assert says in str(err.value)


def test_the_length_rule_line_and_the_rated_anchors() -> None:
    from rubric_engine.spec.anchors import Anchors

    b = Anchors.model_validate({"files": {"a": {"path": "a", "rating": 5}, "b": {"path": "b"}},
                                "length": {"rule": "truncate"}})
    assert b.length.line() == "truncate:common" and b.rated() == {"a": 5.0}
    assert Anchors.model_validate({"files": {"a": {"path": "a"}}}).length.line() == "none"
    assert Anchors.model_validate({"files": {"a": {"path": "a"}}, "length": {"rule": "margin", "chars": 0}}
                                  ).length.line() == "margin:0"
