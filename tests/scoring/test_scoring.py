"""Hand-computed checks of rubric_engine.scoring.question (the arithmetic is written out next to each case)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from rubric_engine.dataset.load import Criterion
from rubric_engine.scoring.question import FORMULAS, AbilityScore, score_question


@dataclass(frozen=True)
class Rule:
    id: str = "role_confusion"
    effect: str = "zero_question"
    fires_when: str = "hit"


PAPER = (Rule(),)
OFFICIAL = (Rule(fires_when="hit_positive_weight"),)


def item(i: int, weight: float | None, ability: str | None = "a", rule: str | None = None) -> Criterion:
    return Criterion(index=i, label=ability or rule or "", weight=weight, text=f"item {i}", ability=ability, rule=rule)


def crit(*weights: float, ability: str = "a", start: int = 1) -> list[Criterion]:
    return [item(start + k, w, ability) for k, w in enumerate(weights)]


def score(criteria, hits, formula="log_normalised", rules=PAPER):
    return score_question(criteria, hits, formula, {}, rules)


# --- log_normalised (eq. 1) -------------------------------------------------------------------


def test_mixed_ability_all_none_some_hit():
    c = crit(3, 2, -4)  # lo = -4, hi = 3 + 2 = 5, span 9 -> denominator ln(10)
    # all hit: raw = 3 + 2 - 4 = 1 -> ln(1 + 4 + 1) / ln(10) = ln 6 / ln 10
    q = score(c, [True, True, True])
    assert q.abilities["a"] == AbilityScore(raw=1.0, lo=-4.0, hi=5.0, score=pytest.approx(math.log(6) / math.log(10)))
    # none hit: raw = 0 -> ln(0 + 4 + 1) / ln 10 = ln 5 / ln 10 = log10(5)
    assert score(c, [False] * 3).score == pytest.approx(math.log10(5))
    # best case, positives hit and the negative missed: raw = 5 -> ln 10 / ln 10 = 1
    assert score(c, [True, True, False]).score == 1.0
    # worst case, only the negative hit: raw = -4 -> ln 1 / ln 10 = 0
    assert score(c, [False, False, True]).score == 0.0


def test_negative_only_ability_is_defined():
    c = crit(-3, -2)  # hi = 0, lo = -5: span 5 > 0, so eq. 1 is defined; denominator ln 6
    assert score(c, [False, False]).score == 1.0  # raw 0: ln(0 + 5 + 1) / ln 6 = 1
    assert score(c, [True, False]).score == pytest.approx(math.log(3) / math.log(6))  # raw -3: ln 3 / ln 6 ~ 0.613
    assert score(c, [True, True]).score == 0.0  # raw -5: ln 1 / ln 6 = 0
    a = score(c, [True, False]).abilities["a"]
    assert (a.raw, a.lo, a.hi) == (-3.0, -5.0, 0.0)


def test_zero_span_scores_zero():
    c = crit(0, 0)  # lo = hi = 0: hi - lo == 0 -> 0 by definition (all three formulas)
    for formula in FORMULAS:
        assert score(c, [True, True], formula).score == 0.0
    assert score([item(1, 0, "a"), item(2, 2, "b")], [True, True]).score == 0.5  # mean(0, ln3/ln3 = 1)


def test_question_score_is_mean_over_abilities_present():
    c = crit(2, ability="a") + crit(-1, ability="b", start=2) + crit(1, 1, ability="c", start=3)
    # a: raw 2, lo 0, hi 2 -> ln 3 / ln 3 = 1
    # b: raw -1, lo -1, hi 0 -> ln 1 / ln 2 = 0
    # c: raw 1, lo 0, hi 2 -> ln 2 / ln 3
    q = score(c, [True, True, True, False])
    assert list(q.abilities) == ["a", "b", "c"]
    assert q.score == pytest.approx((1 + 0 + math.log(2) / math.log(3)) / 3)
    assert q.failed_rules == () and q.catastrophic is False


# --- linear and met_over_positive -----------------------------------------------------------


def test_linear_formula():
    c = crit(3, 2, -4)  # lo -4, hi 5, span 9
    assert score(c, [True, False, True], "linear").score == pytest.approx(1 / 3)  # raw -1: (-1 + 4) / 9
    assert score(c, [False] * 3, "linear").score == pytest.approx(4 / 9)  # raw 0: 4 / 9
    assert score(c, [True, True, False], "linear").score == 1.0  # raw 5: 9 / 9


def test_met_over_positive_formula():
    c = crit(3, 2, -4)  # hi = 5
    assert score(c, [True, False, False], "met_over_positive").score == pytest.approx(0.6)  # 3 / 5
    assert score(c, [True, False, True], "met_over_positive").score == 0.0  # -1 / 5 clipped to 0
    assert score(c, [True, True, False], "met_over_positive").score == 1.0  # 5 / 5
    assert score(crit(-3), [False], "met_over_positive").score == 0.0  # hi = 0 -> 0 (undefined ratio)


def test_formula_functions_direct():
    assert FORMULAS["log_normalised"](1, -4, 5, {}) == pytest.approx(math.log(6) / math.log(10))
    assert FORMULAS["linear"](0, -1, 1, {}) == 0.5
    assert FORMULAS["met_over_positive"](4, 0, 2, {}) == 1.0  # 4 / 2 = 2, clipped to 1


# --- failure rules --------------------------------------------------------------------------


def with_rule(weight: float | None) -> list[Criterion]:
    return crit(3, -2) + [item(3, weight, ability=None, rule="role_confusion")]


def test_catastrophic_null_weight_fires_under_hit():
    q = score(with_rule(None), [True, False, True])
    assert q.catastrophic is True and q.failed_rules == ("role_confusion",)
    assert q.score == 0.0
    # raw/lo/hi still reported (raw 3, lo -2, hi 3); the score that would be 1 is zeroed
    assert q.abilities["a"] == AbilityScore(raw=3.0, lo=-2.0, hi=3.0, score=0.0)


def test_catastrophic_null_weight_does_not_fire_under_official_rule():
    # the official code needs weight > 0; the data gives None, so the rule never fires (defect 1)
    q = score(with_rule(None), [True, False, True], rules=OFFICIAL)
    assert q.catastrophic is False and q.failed_rules == ()
    assert q.score == 1.0  # raw 3: ln(3 + 2 + 1) / ln(3 + 2 + 1) = 1


def test_official_rule_negative_and_positive_weights():
    assert score(with_rule(-4), [False, False, True], rules=OFFICIAL).catastrophic is False  # -4 is not > 0
    assert score(with_rule(-4), [False, False, True]).catastrophic is True  # paper: any hit fires
    assert score(with_rule(1), [False, False, True], rules=OFFICIAL).catastrophic is True  # 1 > 0 fires


def test_rule_item_not_hit_and_never_an_ability():
    q = score(with_rule(None), [True, False, False])
    assert q.catastrophic is False and q.failed_rules == ()
    assert set(q.abilities) == {"a"}  # the rule item is no ability and adds to no raw/lo/hi
    assert (q.abilities["a"].lo, q.abilities["a"].hi) == (-2.0, 3.0)


def test_question_without_rule_item():
    q = score(crit(3, -2), [True, False])  # rules declared, but this question has no rule item
    assert q.catastrophic is False and q.score == 1.0


# --- errors: never pad, never cut, never guess --------------------------------------------


def test_length_mismatch_raises():
    with pytest.raises(ValueError, match="2 hits for 3 criteria"):
        score(crit(1, 2, 3), [True, True])
    with pytest.raises(ValueError, match="4 hits for 3 criteria"):
        score(crit(1, 2, 3), [True] * 4)


def test_unknown_formula_lists_known():
    with pytest.raises(ValueError, match="linear, log_normalised, met_over_positive"):
        score(crit(1), [True], "sqrt")


def test_other_invalid_inputs_raise():
    with pytest.raises(ValueError, match="no ability items"):
        score([item(1, None, ability=None, rule="role_confusion")], [False])
    with pytest.raises(ValueError, match="needs a weight"):
        score([item(1, None, "a")], [True])
    with pytest.raises(ValueError, match="not among the rules"):
        score(with_rule(None), [True, True, True], rules=())
    with pytest.raises(ValueError, match="exactly one of ability / rule"):
        score([item(1, 2, "a", rule="role_confusion")], [True])
    with pytest.raises(ValueError, match="boolean"):
        score(crit(1), ["yes"])
    with pytest.raises(ValueError, match="unknown effect"):
        score(crit(1), [True], rules=(Rule(effect="halve"),))
    with pytest.raises(ValueError, match="unknown fires_when"):
        score(crit(1), [True], rules=(Rule(fires_when="always"),))


# --- expected points (judge.verdict.use: probability) -----------------------------------------------------------


def test_credits_count_their_share_of_each_items_points():
    c = crit(3, -2, ability="a") + crit(4, ability="b", start=3) + [item(4, None, ability=None, rule="role_confusion")]
    hits = [True, False, True, False]
    q = score_question(c, hits, "log_normalised", {}, PAPER, credits=[0.8, 0.25, 0.6, None])
    # a: raw = 3 x .8 - 2 x .25 = 1.9, lo -2, hi 3 -> ln(1.9 + 2 + 1) / ln 6; b: raw 2.4 -> ln 3.4 / ln 5
    assert q.abilities["a"] == AbilityScore(raw=pytest.approx(1.9), lo=-2.0, hi=3.0,
                                            score=pytest.approx(math.log(4.9) / math.log(6)))
    assert q.score == pytest.approx((math.log(4.9) / math.log(6) + math.log(3.4) / math.log(5)) / 2)
    # Jensen's gap: the formula of the expected points is above the expected formula (ln is concave); for b alone,
    # ln(2.4 + 1)/ln 5 = 0.760 > E[S] = .6 x ln 5/ln 5 + .4 x 0 = 0.6
    assert math.log(3.4) / math.log(5) > 0.6 + 0.15
    # None: the verdict counts (a check, a reply without log-probabilities); the rule item fires on its verdict
    assert score_question(c, hits, "log_normalised", {}, PAPER, credits=[None] * 4) == score(c, hits)
    fired = score_question(c, [True, False, True, True], "log_normalised", {}, PAPER, credits=[0.8, 0.25, 0.6, 0.3])
    assert fired.catastrophic and fired.score == 0.0
    kept = score_question(c, hits, "log_normalised", {}, PAPER, credits=[0.8, 0.25, 0.6, 0.9])
    assert not kept.catastrophic  # P(confusion) .9 but the verdict is `not met`: the rule does not fire


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan"), True, "0.5"])
def test_a_credit_that_is_no_probability_is_refused(bad):
    with pytest.raises(ValueError, match="credit"):
        score_question(crit(3, 2), [True, False], "linear", {}, PAPER, credits=[bad, None])
    with pytest.raises(ValueError, match="credits"):
        score_question(crit(3, 2), [True, False], "linear", {}, PAPER, credits=[0.5])


def test_a_stored_runs_scorer_counts_p_met_only_under_use_probability():
    """validity/replyscore.ReplyScorer (calibrate's judge-side reply scores) reads the resolved spec: P(met) counts
    under a criteria verdict's use: probability only, and never for people's labels (p_met None)."""
    from rubric_engine.validity.replyscore import ReplyScorer

    c, hits, p_met = crit(4), [True], [0.6]
    resolved = {"scoring": {"formula": "log_normalised"}, "judge": {"verdict": {"use": "probability"}}}
    assert ReplyScorer.from_spec(resolved).score(c, hits, p_met).score == pytest.approx(math.log(3.4) / math.log(5))
    assert ReplyScorer.from_spec(resolved).score(c, hits).score == 1.0  # people's labels: their verdicts
    for other in ({"use": "verdict"}, {"use": "probability", "kind": "score"}):
        spec = {**resolved, "judge": {"verdict": other}}
        assert ReplyScorer.from_spec(spec).score(c, hits, p_met).score == 1.0
