"""Pooled means: a question whose score averages several judgments counts with that many (`weight`).

Why: MT-Bench's overall is the mean over every valid turn judgment and Arena-Hard's win rate the mean over
every game score, not a mean of per-question means; with questions still the unit the bootstrap resamples.
The numbers here are worked by hand or restated with the standard library, never with the engine's own code.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest

from rubric_engine.scoring.aggregate import ScoredQuestion, aggregate, breakdown, overall, scored_from_samples
from rubric_engine.scoring.question import Aggregation
from rubric_engine.stats.bootstrap import bootstrap_stats, paired_difference

POOLED = Aggregation(question="all_items", overall="mean_over_questions", clip="none")


def q(i: str, score: float, weight: float = 1.0, scenario: str = "", tags: tuple[str, ...] = (),
      item_tags: dict[str, float] | None = None) -> ScoredQuestion:
    return ScoredQuestion(i, "", scenario, {}, score, False, tags, item_tags or {}, weight=weight)


def test_the_overall_pools_judgments_by_hand() -> None:
    # q1: turns 8 and 6 (mean 7, 2 judgments); q2: one valid turn, 4 -> pooled (8 + 6 + 4) / 3 = 6
    scored = [q("q1", 7.0, 2), q("q2", 4.0, 1)]
    assert overall(scored, {}, POOLED) == pytest.approx(6.0)
    assert aggregate(scored, {}, scale=1.0, how=POOLED)["overall"] == pytest.approx(6.0)


def test_whole_question_groups_pool_item_groups_do_not() -> None:
    scored = [q("q1", 7.0, 2, scenario="math", tags=("cat:math",), item_tags={"turn:1": 8.0, "turn:2": 6.0}),
              q("q2", 4.0, 1, scenario="math", tags=("cat:math",), item_tags={"turn:1": 4.0}),
              q("q3", 9.0, 2, scenario="writing", tags=("cat:writing",), item_tags={"turn:1": 9.0, "turn:2": 9.0})]
    assert breakdown(scored, "scenario", {}, POOLED) == pytest.approx({"math": 6.0, "writing": 9.0})
    assert breakdown(scored, "example_tag", {}, POOLED, "cat:") == pytest.approx({"cat:math": 6.0, "cat:writing": 9.0})
    # a turn table: each question's turn score is one judgment, whatever the question's weight
    assert breakdown(scored, "item_tag", {}, POOLED, "turn:") == pytest.approx({"turn:1": 7.0, "turn:2": 7.5})


def test_unit_weights_give_the_plain_mean_exactly() -> None:
    scored = [q(f"q{i}", s) for i, s in enumerate([0.1, 0.7, 0.35, 0.9])]
    assert overall(scored, {}, POOLED) == sum([0.1, 0.7, 0.35, 0.9]) / 4


def test_records_carry_the_weight_and_default_to_one() -> None:
    base = {"subset": "", "scenario": "", "abilities": {}, "catastrophic": False}
    got = scored_from_samples([{**base, "id": "a", "score": 7.0, "weight": 2},
                               {**base, "id": "b", "score": 4.0},
                               {**base, "id": "c", "score": None, "weight": 2}])
    assert [(s.id, s.weight) for s in got] == [("a", 2.0), ("b", 1.0)]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "2", True])
def test_a_bad_weight_is_refused_naming_the_record(bad: object) -> None:
    rec = {"id": "x7", "subset": "", "scenario": "", "abilities": {}, "catastrophic": False, "score": 1.0,
           "weight": bad}
    with pytest.raises(ValueError, match=r"x7.*weight"):
        scored_from_samples([rec])


def _weighted(draw: list[int], qs: list[ScoredQuestion]) -> float:
    return sum(qs[i].score * qs[i].weight for i in draw) / sum(qs[i].weight for i in draw)


def test_the_bootstrap_resamples_questions_and_pools_inside_each_resample() -> None:
    rng = random.Random(5)
    qs = [q(f"q{i}", rng.choice([0.0, 0.5, 1.0, 0.875]), rng.choice([1, 2, 4, 6])) for i in range(40)]
    got = bootstrap_stats(qs, {}, n=300, seed=11, scale=100.0, how=POOLED)
    draws = random.Random(11)
    values = sorted(_weighted(draws.choices(range(len(qs)), k=len(qs)), qs) * 100 for _ in range(300))
    cuts = statistics.quantiles(values, n=40, method="inclusive")  # 2.5% and 97.5% are cuts 1 and 39
    assert got["lo"] == pytest.approx(cuts[0]) and got["hi"] == pytest.approx(cuts[38])
    assert got["point"] == pytest.approx(_weighted(list(range(len(qs))), qs) * 100)
    assert got["std"] == pytest.approx(statistics.pstdev(values))
    assert not math.isclose(got["point"], statistics.mean(s.score for s in qs) * 100)  # the weights mattered


def test_the_paired_difference_pools_both_sides() -> None:
    rng = random.Random(9)
    a = [q(f"q{i}", rng.random(), rng.choice([1, 3])) for i in range(25)]
    b = [q(f"q{i}", rng.random(), rng.choice([1, 3])) for i in range(25)]
    got = paired_difference(a, b, {}, n=200, seed=3, scale=1.0, how=POOLED)
    assert got["diff"] == pytest.approx(_weighted(list(range(25)), a) - _weighted(list(range(25)), b))
    draws = random.Random(3)
    values = []
    for _ in range(200):
        d = draws.choices(range(25), k=25)
        values.append(_weighted(d, a) - _weighted(d, b))
    cuts = statistics.quantiles(sorted(values), n=40, method="inclusive")
    assert got["lo"] == pytest.approx(cuts[0]) and got["hi"] == pytest.approx(cuts[38])
