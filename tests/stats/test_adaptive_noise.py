"""stats/adaptive.py: the estimated flip of a majority verdict, against scipy's binomial and hand values."""

from __future__ import annotations

import pytest
from scipy.stats import binom

from rubric_engine.stats.adaptive import majority_flip


@pytest.mark.parametrize("n,minority", [(1, 0), (2, 0), (2, 1), (3, 1), (4, 1), (4, 2), (5, 1), (5, 2), (10, 3)])
def test_majority_flip_is_the_binomial_tail(n: int, minority: int) -> None:
    p = minority / n
    tail = binom.sf(n // 2, n, p) + (0.5 * binom.pmf(n // 2, n, p) if n % 2 == 0 else 0.0)
    assert majority_flip(n, minority) == pytest.approx(tail)


def test_hand_values() -> None:
    assert majority_flip(1, 0) == 0.0 and majority_flip(3, 0) == 0.0
    assert majority_flip(2, 1) == pytest.approx(0.25 + 0.5 * 0.5)  # both flip, or an even split counted half
    assert majority_flip(5, 1) == pytest.approx(10 * 0.2 ** 3 * 0.8 ** 2 + 5 * 0.2 ** 4 * 0.8 + 0.2 ** 5)


def _rec(qid: str, votes: list[list[bool]], **more: object) -> dict[str, object]:
    return {"id": qid, "criteria": [{"index": i, "hit": v[0], "votes": {"j": v}} for i, v in enumerate(votes, 1)],
            **more}


def test_fold_counts_calls_per_request_and_flips_by_hand() -> None:
    from rubric_engine.stats.adaptive import AdaptiveFold

    records = [_rec("a", [[True], [True, True], [False, True, True, False, False]]),
               _rec("b", [[False, False]]),
               _rec("c", [[True, False]], judge_error="judge j grading 2: boom"),  # left out: a judge error
               {"id": "d", "criteria": [{"index": 1, "hit": True, "check": "x"}]}]  # a checked item: no call
    per = AdaptiveFold("j", 5, True, ["h1"])
    whole = AdaptiveFold("j", 5, False, [])
    for r in records:
        per.add(r, {1: "A", 2: None, 3: "B"})
        whole.add(r, {1: "A", 2: None, 3: "B"})
    p, w = per.section(), whole.section()
    assert p["repeats"] == "auto" and p["adaptive"]["prior"] == ["h1"] and p["adaptive"]["repeats_max"] == 5
    assert (p["adaptive"]["calls"], p["adaptive"]["single_pass_calls"], p["adaptive"]["fixed_calls"]) == (10, 4, 20)
    assert (p["adaptive"]["saved_calls"], p["adaptive"]["graded_again"], p["adaptive"]["graded_to_cap"]) == (10, 3, 1)
    assert p["adaptive"]["calls_per_single_pass"] == pytest.approx(10 / 4)
    # the whole rubric per request: question a is 5 calls (its most-graded criterion), b 2
    assert (w["adaptive"]["calls"], w["adaptive"]["single_pass_calls"], w["adaptive"]["graded_to_cap"]) == (7, 2, 1)
    flips = p["groups"]["overall"]["flip_rate"]
    assert flips["units"] == 3 and flips["rate"] == pytest.approx(1 / 3)  # criteria graded twice or more
    assert p["groups"]["B"]["flip_rate"]["rate"] == 1.0 and p["groups"]["A"]["flip_rate"]["units"] == 1  # b1, not a1
    final = [0.0, 0.0, majority_flip(5, 2), 0.0]  # a1, a2, a3, b1
    assert p["adaptive"]["final_flip_rate"] == pytest.approx(sum(final) / 4)
    assert AdaptiveFold("j", 5, True, []).section()["adaptive"]["calls_per_single_pass"] is None
