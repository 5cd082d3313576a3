"""Item diagnostics (stats/itemstats.py, stats/rubricitems.py) on small cases computed by hand, scipy-free so the
mutation tool's environment runs them (tests/stats/test_itemstats.py restates them with scipy and a published KR-20).

Each number a user reads in items.md / items.csv (docs/authoring.md, "Make your rubric better"): a criterion's
pass rate and its flags (saturated at >= 95%, dead at <= 5%), the per-model rates and their spread, the
corrected item-total r (criterion oriented to favour the reply; undefined below 5 fully judged replies), "no
signal", the flip and juror-disagreement rates and their units, the review-first score and order; a question's
difficulty, spread and discrimination; a group's alpha over models, criteria some model lacks left out.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rubric_engine.stats.itemstats import (alpha_interval, corrected_item_total, cronbach_alpha, is_binary, kr20,
                                           pearson, point_biserial)
from rubric_engine.stats.rubricitems import (DEAD, FLAT_R, FLAT_SPREAD, MIN_R_REPLIES, SATURATED, CriterionInfo, Reply,
                                             criterion_table, group_table, model_means, question_table)


def _r(x: list[float], y: list[float]) -> float:
    """Pearson's r written out."""
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    return sxy / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))


def _alpha(m: list[list[float]]) -> float:
    """Cronbach's alpha written out, sample variances (ddof 1) for items and totals."""
    def var(v: list[float]) -> float:
        mean = sum(v) / len(v)
        return sum((a - mean) ** 2 for a in v) / (len(v) - 1)
    k = len(m[0])
    return k / (k - 1) * (1 - sum(var([row[j] for row in m]) for j in range(k)) / var([sum(row) for row in m]))


# -- itemstats ------------------------------------------------------------------------------------------

def test_pearson_by_hand_and_where_it_is_undefined() -> None:
    # x = 1, 2, 3; y = 1, 2, 4: sxy = 3, sxx = 2, syy = 14/3 -> r = 3 / sqrt(28/3) = 0.98198
    assert pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(3 / math.sqrt(28 / 3))
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert pearson([1, 2, 3], [2, 4, 6]) <= 1.0
    assert pearson([1, 2], [1, 2]) is None                    # fewer than 3 pairs
    assert pearson([1, 2, 3], [1, 2, 3, 4]) is None           # not paired
    assert pearson([1, 1, 1], [1, 2, 3]) is None and pearson([1, 2, 3], [5, 5, 5]) is None
    assert point_biserial([True, False, True, False], [4, 1, 3, 2]) == pytest.approx(_r([1, 0, 1, 0], [4, 1, 3, 2]))


def test_corrected_item_total_by_hand() -> None:
    m = np.array([[1, 1, 0], [1, 0, 0], [0, 1, 1], [1, 1, 1], [0, 0, 0]])
    got = corrected_item_total(m)
    for j in range(3):
        rest = [float(sum(row) - row[j]) for row in m.tolist()]
        assert got[j] == pytest.approx(_r([float(v) for v in m[:, j]], rest))
    assert corrected_item_total(np.array([[1], [0], [1]])) == [None]  # one item: no "other items"
    assert corrected_item_total(np.array([1, 0, 1])) == []


def test_cronbach_alpha_and_kr20_by_hand() -> None:
    # items [1,2,3] (var 1) and [2,3,3] (var 1/3); totals [3,5,6] (var 7/3): alpha = 2 x (1 - (4/3)/(7/3)) = 6/7
    assert cronbach_alpha(np.array([[1, 2], [2, 3], [3, 3]])) == pytest.approx(6 / 7)
    m = [[1, 1, 0], [1, 0, 0], [0, 1, 1], [1, 1, 1], [0, 0, 0], [1, 1, 0]]
    assert cronbach_alpha(np.array(m)) == pytest.approx(_alpha(m))
    # KR-20 on the same 0/1 data: p = 4/6, 4/6, 2/6, sum pq = 3 x 2/9 = 2/3; totals 2,1,2,3,0,2 (mean 5/3):
    # population variance (1 + 4 + 1 + 16 + 25 + 1) / 9 / 6 = 8/9; KR-20 = 3/2 x (1 - (2/3) / (8/9)) = 3/8
    assert kr20(np.array(m)) == pytest.approx(3 / 8)
    assert kr20(np.array(m)) == pytest.approx(cronbach_alpha(np.array(m)))  # the same on 0/1 data
    for undefined in ([[1, 0]], [[1], [0]], [[1, 1], [1, 1]], [[0, 1], [1, 0]]):  # one row, one item, constant totals
        assert cronbach_alpha(np.array(undefined)) is None and kr20(np.array(undefined)) is None
    assert cronbach_alpha(np.array([[1, np.nan], [0, 1], [1, 1]])) is None
    assert cronbach_alpha(np.array([1, 2, 3])) is None and kr20(np.array([1, 0, 1])) is None
    with pytest.raises(ValueError, match="KR-20 needs 0/1 items; use cronbach_alpha"):
        kr20(np.array([[1, 0.5], [0, 1]]))


def test_is_binary() -> None:
    assert is_binary(np.array([[0, 1], [1, 1]])) and not is_binary(np.array([[0, 2]]))
    assert not is_binary(np.zeros((0, 0)))


def test_alpha_interval_restated_from_the_same_resamples() -> None:
    m = np.array([[1, 1, 0], [1, 0, 0], [0, 1, 1], [1, 1, 1], [0, 0, 0], [1, 1, 0], [0, 1, 0], [1, 1, 1]], float)
    iv = alpha_interval(m, n_boot=200, seed=4)
    rng = np.random.default_rng(4)
    values = []
    for _ in range(200):
        rows = m[rng.integers(0, 8, 8)].tolist()
        totals = [sum(r) for r in rows]
        if len(set(totals)) > 1:
            values.append(_alpha(rows))
    assert iv.resamples == len(values) and iv.alpha == pytest.approx(_alpha(m.tolist()))
    assert (iv.lo, iv.hi) == pytest.approx(tuple(np.quantile(values, [0.025, 0.975])))
    assert (iv.rows, iv.items, iv.binary) == (8, 3, True)
    narrower = alpha_interval(m, n_boot=200, seed=4, level=0.5)
    assert (narrower.lo, narrower.hi) == pytest.approx(tuple(np.quantile(values, [0.25, 0.75])))


def test_alpha_interval_needs_half_the_resamples_defined() -> None:
    # two distinct rows out of 3: a resample of one row repeated (3 x (1/3)^3 x ... ) has no alpha
    m = np.array([[1, 1], [0, 0], [0, 0]], float)
    iv = alpha_interval(m, n_boot=400, seed=0)
    assert iv.alpha == pytest.approx(1.0)
    assert iv.resamples < 400 and (iv.lo is not None) == (iv.resamples >= 200)
    none = alpha_interval(np.array([[1, 0], [1, 0]], float), n_boot=10)
    assert (none.alpha, none.lo, none.hi, none.resamples, none.rows, none.items) == (None, None, None, 0, 2, 2)
    assert alpha_interval(m, n_boot=0).lo is None and alpha_interval(m, n_boot=0).resamples == 0
    assert alpha_interval(np.array([1.0, 0.0]), n_boot=5).rows == 0


# -- rubricitems: criteria ------------------------------------------------------------------------------

def _crit(*indexes: int, weight: float | None = 1.0, qid: str = "q1") -> list[CriterionInfo]:
    return [CriterionInfo(qid, i, f"c{i}", weight, "g") for i in indexes]


def test_the_documented_thresholds() -> None:
    assert (SATURATED, DEAD, FLAT_SPREAD, FLAT_R, MIN_R_REPLIES) == (0.95, 0.05, 0.10, 0.10, 5)


@pytest.mark.parametrize(("met", "flag"), [(19, "saturated"), (20, "saturated"), (18, ""), (1, "dead"),
                                           (0, "dead"), (2, "")])
def test_pass_rate_flags_at_their_bounds(met: int, flag: str) -> None:
    replies = [Reply("q1", f"m{k % 2}", 0.5, {1: k < met}) for k in range(20)]
    (row,) = criterion_table(_crit(1), replies)
    assert row.pass_rate == pytest.approx(met / 20) and row.replies == 20 and row.flag == flag
    assert row.no_signal or not flag  # a flag always means no signal


def test_unjudged_replies_are_not_counted_and_per_model_rates_and_spread_are_by_hand() -> None:
    replies = [Reply("q1", "a", 1.0, {1: True}), Reply("q1", "a", 0.0, {1: False}), Reply("q1", "a", 0.0, {1: True}),
               Reply("q1", "b", 0.0, {1: False}), Reply("q1", "b", None, {1: None}), Reply("q1", "c", 0.0, {})]
    (row,) = criterion_table(_crit(1), replies)
    assert row.replies == 4 and row.pass_rate == pytest.approx(2 / 4)
    assert row.per_model == {"a": pytest.approx(2 / 3), "b": 0.0} and list(row.per_model) == ["a", "b"]
    assert row.spread == pytest.approx(2 / 3) and not row.no_signal
    (one,) = criterion_table(_crit(1), replies[:3])
    assert one.spread is None  # one model: no spread, so not "flat"
    (none,) = criterion_table(_crit(1), [])
    assert (none.replies, none.pass_rate, none.flag, none.no_signal) == (0, None, "", False)


def _pattern(rows: list[tuple[str, list[bool]]]) -> list[Reply]:
    return [Reply("q1", m, 0.5, {i + 1: h for i, h in enumerate(hits)}) for m, hits in rows]


def test_discrimination_is_the_corrected_item_total_r_oriented_to_favour_the_reply() -> None:
    rows = [("a", [True, True, False]), ("a", [True, False, False]), ("b", [False, True, True]),
            ("b", [True, True, True]), ("a", [False, False, False])]
    table = {r.index: r for r in criterion_table(_crit(1, 2) + _crit(3, weight=-1.0), _pattern(rows))}
    fav = [[1, 1, 1], [1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]]  # criterion 3 is a penalty: unmet favours
    for j in range(3):
        rest = [float(sum(r) - r[j]) for r in fav]
        assert table[j + 1].discrimination == pytest.approx(_r([float(r[j]) for r in fav], rest))
    # four fully judged replies: no r (three or four points correlate by chance)
    assert all(r.discrimination is None for r in criterion_table(_crit(1, 2), _pattern(rows[:4])))
    # a reply with a criterion unjudged is left out of r, but counted in that criterion's pass rate
    partial = _pattern(rows) + [Reply("q1", "b", 0.5, {1: True, 2: None})]
    t2 = {r.index: r for r in criterion_table(_crit(1, 2), partial)}
    assert t2[1].replies == 6 and t2[2].replies == 5
    assert t2[1].discrimination == pytest.approx(_r([1, 1, 0, 1, 0], [1, 0, 1, 1, 0]))
    failure_rule = {r.index: r for r in criterion_table(_crit(1) + _crit(2, weight=None), _pattern(rows))}
    assert failure_rule[2].discrimination == pytest.approx(_r([0, 1, 0, 0, 1], [1, 1, 0, 1, 0]))


def test_one_criterion_has_no_item_total_r() -> None:
    rows = [("a", [True]), ("a", [False]), ("b", [True]), ("b", [False]), ("a", [True]), ("b", [True])]
    (row,) = criterion_table(_crit(1), _pattern(rows))
    assert row.discrimination is None


@pytest.mark.parametrize(("a_met", "flat"), [(10, True), (11, True), (13, False), (7, False)])
def test_flat_means_a_spread_below_a_tenth_when_r_is_undefined(a_met: int, flat: bool) -> None:
    """Model b meets the criterion in 10 of 20 replies, model a in `a_met` of 20; one criterion: r undefined."""
    replies = ([Reply("q1", "a", 0.5, {1: k < a_met}) for k in range(20)]
               + [Reply("q1", "b", 0.5, {1: k < 10}) for k in range(20)])
    (row,) = criterion_table(_crit(1), replies)
    assert row.spread == pytest.approx(abs(a_met - 10) / 20) and row.flag == "" and row.discrimination is None
    assert row.no_signal == flat


def test_flat_needs_r_below_a_tenth_too() -> None:
    # two models meeting each criterion equally often (spread 0), but criterion 1 goes with the others
    rows = [("a", [True, True]), ("a", [False, False]), ("b", [True, True]), ("b", [False, False]),
            ("a", [True, False]), ("b", [True, False])]
    t = {r.index: r for r in criterion_table(_crit(1, 2), _pattern(rows))}
    assert t[1].spread == 0.0 and t[1].discrimination == pytest.approx(_r([1, 0, 1, 0, 1, 1], [1, 0, 1, 0, 0, 0]))
    assert t[1].discrimination >= FLAT_R and not t[1].no_signal


def test_flip_and_juror_units_by_hand() -> None:
    # flips: a unit is one juror's two or more verdicts on a reply; jurors: a reply two or more jurors graded,
    # split when their own majorities differ (a tie is "not met", as scoring/votes.py combines it)
    votes = [{"j1": [True, None, False], "j2": [True]},        # j1 flips (2 verdicts), j2 one verdict: 1 flip unit;
                                                              # j1's tie is not met, j2 met: split
             {"j1": [None, None], "j2": [True, True]},        # j1 nothing; j2 steady: 1 flip unit, one juror
             {"j1": [True, True, False], "j2": [False, False, True]}]  # majorities T and F: split; 2 flip units
    replies = [Reply("q1", "m", 0.5, {1: True}, {1: v}) for v in votes] + [Reply("q1", "m", 0.5, {1: True})]
    (row,) = criterion_table(_crit(1), replies)
    assert (row.flip_units, row.flip_rate) == (4, pytest.approx(3 / 4))
    assert (row.juror_units, row.juror_disagreement) == (2, 1.0)
    agree = [Reply("q1", "m", 0.5, {1: True}, {1: {"j1": [True, True, False], "j2": [True]}}),
             Reply("q1", "m", 0.5, {1: True}, {1: {"j1": [False], "j2": [False, None]}})]
    (both,) = criterion_table(_crit(1), agree + replies[2:3])
    assert (both.juror_units, both.juror_disagreement) == (3, pytest.approx(1 / 3))
    assert (row.human_units, row.human_disagreement) == (0, None)
    (quiet,) = criterion_table(_crit(1), [Reply("q1", "m", 0.5, {1: True})])
    assert (quiet.flip_units, quiet.flip_rate, quiet.juror_units, quiet.juror_disagreement) == (0, None, 0, None)


def test_review_score_and_order() -> None:
    crits = _crit(1, 2, 3, 4) + _crit(1, qid="q2")
    rows = [("a", [True, True, False, True]), ("a", [True, False, False, True]), ("b", [False, True, True, True]),
            ("b", [False, False, True, True]), ("a", [True, True, False, True]), ("b", [False, True, True, False])]
    replies = _pattern(rows) + [Reply("q2", "a", 0.5, {1: k % 2 == 0}) for k in range(4)]
    human = {("q1", 2): (1, 4)}
    table = criterion_table(crits, replies, human)
    for s in table:
        expected = (float(s.no_signal) + float(s.discrimination is not None and s.discrimination < 0)
                    + (s.flip_rate or 0) + (s.juror_disagreement or 0) + (s.human_disagreement or 0))
        assert s.review_score == pytest.approx(expected)
    by = {(s.qid, s.index): s for s in table}
    assert by[("q1", 2)].human_disagreement == 0.25 and by[("q1", 2)].human_units == 4
    assert [s.review_rank for s in table] == list(range(1, len(table) + 1))
    keys = [(-s.review_score, -s.replies, s.qid, s.index) for s in table]
    assert keys == sorted(keys)
    # criterion 3 of q1 is met by b only: r of a criterion against the others, spread 1.0, signal
    assert by[("q1", 3)].spread == 1.0 and not by[("q1", 3)].no_signal


# -- rubricitems: questions and groups ------------------------------------------------------------------

def test_model_means_and_question_table_by_hand() -> None:
    replies = [Reply("q1", "a", 0.8, {}), Reply("q1", "a", 0.6, {}), Reply("q1", "b", 0.2, {}),
               Reply("q2", "a", 0.5, {}), Reply("q2", "b", 0.1, {}), Reply("q2", "b", None, {}),
               Reply("q3", "a", 1.0, {}), Reply("q3", "b", 0.3, {}), Reply("q3", "c", 0.4, {})]
    assert model_means(replies) == {"a": {"q1": pytest.approx(0.7), "q2": 0.5, "q3": 1.0},
                                    "b": {"q1": 0.2, "q2": 0.1, "q3": 0.3}, "c": {"q3": 0.4}}
    table = question_table(replies, {"q1": "s1", "q2": "s2", "q3": "s1", "q4": "s2"})
    assert [q.qid for q in table] == ["q1", "q2", "q3", "q4"]
    q1, q2, q3, q4 = table
    assert (q1.subset, q1.replies) == ("s1", 3) and q2.replies == 2  # an unscored reply is not counted
    assert q1.mean_score == pytest.approx((0.7 + 0.2) / 2) and q1.spread == pytest.approx(0.5)
    assert q1.per_model == {"a": pytest.approx(0.7), "b": 0.2}
    # q3: each reply's score against its model's mean on the other questions; c has no other question
    # (a: 1.0 vs 0.6, b: 0.3 vs 0.15): two pairs, so no r
    assert q3.discrimination is None and q3.spread == pytest.approx(0.7) and q3.mean_score == pytest.approx(1.7 / 3)
    # q1: replies 0.8, 0.6 (a: mean elsewhere 0.75), 0.2 (b: 0.2)
    assert q1.discrimination == pytest.approx(_r([0.8, 0.6, 0.2], [0.75, 0.75, 0.2]))
    assert q1.criteria == 0 and q4.replies == 0 and q4.mean_score is None and q4.spread is None
    assert q4.discrimination is None and q4.per_model == {}


def test_question_table_counts_each_question_s_criteria_and_no_signal_ones() -> None:
    replies = [Reply("q1", m, 0.5, {1: True, 2: k % 2 == 0}) for m in ("a", "b") for k in range(4)]
    crits = criterion_table(_crit(1, 2), replies)
    (q1,) = question_table(replies, {"q1": ""}, crits)
    assert (q1.criteria, q1.no_signal_criteria) == (2, sum(c.no_signal for c in crits)) and q1.no_signal_criteria == 2


def test_group_alpha_over_models_leaves_out_criteria_a_model_lacks() -> None:
    crits = [CriterionInfo("q1", i, f"c{i}", 1.0 if i != 3 else -1.0, "g", ("t",) if i < 3 else ()) for i in (1, 2, 3, 4)]
    replies = []
    # cells: the model's favourable-verdict rate; criterion 3 is a penalty (met is unfavourable)
    for model, hits in (("a", [(True, True, False, True), (True, False, False, True)]),
                        ("b", [(True, False, True, None), (False, False, True, None)]),
                        ("c", [(False, False, True, True), (False, True, False, True)])):
        for h in hits:
            replies.append(Reply("q1", model, 0.5, {i + 1: v for i, v in enumerate(h)}))
    groups = {(g.kind, g.group): g for g in group_table(crits, replies, n_boot=20, seed=1)}
    g = groups[("ability", "g")]
    assert (g.criteria, g.models) == (3, 3)  # criterion 4: model b has no verdict
    m = [[1.0, 0.5, 1.0], [0.5, 0.0, 0.0], [0.0, 0.5, 0.5]]  # rows a, b, c; columns criteria 1, 2, 3
    assert g.interval.alpha == pytest.approx(_alpha(m)) and not g.interval.binary
    t = groups[("tag", "t")]
    assert t.criteria == 2 and t.interval.alpha == pytest.approx(_alpha([r[:2] for r in m]))
    assert list(groups) == [("ability", "g"), ("tag", "t")]


def test_pearson_is_clipped_to_plus_minus_one_where_rounding_leaves_it() -> None:
    x = [0.5112747213686085, 0.4049341374504143, 0.7837985890347726]
    up = [3.0331272607892745 * v + 1.3 for v in x]
    x2 = [0.9130110532378982, 0.9666063677707588, 0.47700977655271704]
    down = [-8.6530992777164 * v + 1.3 for v in x2]
    assert pearson(x, up) == 1.0 and pearson(x2, down) == -1.0  # written out, both land just past 1


def test_two_items_and_two_rows_are_enough() -> None:
    m = [[1, 0], [0, 1], [1, 1], [0, 0], [1, 1]]
    assert corrected_item_total(np.array(m)) == pytest.approx([_r([1, 0, 1, 0, 1], [0, 1, 1, 0, 1]),
                                                               _r([0, 1, 1, 0, 1], [1, 0, 1, 0, 1])])
    # two rows: items [1, 2] and [2, 4] (variances 0.5, 2), totals [3, 6] (4.5): alpha = 2 x (1 - 2.5/4.5) = 8/9
    assert cronbach_alpha(np.array([[1, 2], [2, 4]])) == pytest.approx(8 / 9)
    assert kr20(np.array([[1, 1], [0, 0]])) == pytest.approx(1.0)  # pq = 1/4 + 1/4, totals 2, 0: var 1


def test_kr20_refusal_word_for_word() -> None:
    with pytest.raises(ValueError) as e:
        kr20(np.array([[1, 2], [0, 1]]))
    assert str(e.value) == "KR-20 needs 0/1 items; use cronbach_alpha"


def _defined(m: np.ndarray, n_boot: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    rows = len(m)
    return sum(len({sum(r) for r in m[rng.integers(0, rows, rows)].tolist()}) > 1 for _ in range(n_boot))


@pytest.mark.parametrize("defined", [2, 3])
def test_an_interval_needs_at_least_half_of_the_resamples_defined(defined: int) -> None:
    m = np.array([[1, 1], [0, 0], [0, 0]], float)
    seed = next(s for s in range(500) if _defined(m, 6, s) == defined)
    iv = alpha_interval(m, n_boot=6, seed=seed)
    assert iv.resamples == defined and (iv.lo is not None) == (defined >= 3)


def test_one_resample_is_a_bootstrap_too_and_an_undefined_alpha_draws_none() -> None:
    m = np.array([[1, 1], [0, 0], [1, 0], [0, 1]], float)
    seed = next(s for s in range(100) if _defined(m, 1, s) == 1)
    iv = alpha_interval(m, n_boot=1, seed=seed)
    assert iv.resamples == 1 and iv.lo == iv.hi is not None
    nan = alpha_interval(np.array([[1, 1], [0, 0], [1, 0], [np.nan, 1]]), n_boot=50)
    assert nan.alpha is None and nan.resamples == 0 and nan.lo is None  # resamples without the NaN row are not drawn
    flat = alpha_interval(np.array([1.0, 0.0]), n_boot=5)
    assert (flat.rows, flat.items, flat.alpha) == (0, 0, None)


def test_a_criterion_row_carries_its_criterion_s_fields() -> None:
    crit = CriterionInfo("q1", 3, "Names the risk.", -2.0, "safety", ("axis:care", "x"))
    (row,) = criterion_table([crit], [Reply("q1", "m", 0.5, {3: False})])
    assert (row.qid, row.index, row.text, row.weight, row.group, row.tags) == (
        "q1", 3, "Names the risk.", -2.0, "safety", ("axis:care", "x"))


def test_a_spread_of_exactly_a_tenth_is_not_flat() -> None:
    replies = ([Reply("q1", "a", 0.5, {1: k < 4}) for k in range(20)]      # 0.2
               + [Reply("q1", "b", 0.5, {1: k < 2}) for k in range(20)])   # 0.1
    (row,) = criterion_table(_crit(1), replies)
    assert row.spread == 0.1 and not row.no_signal and row.flag == ""


def test_review_score_counts_every_disagreement_and_ties_go_to_more_replies() -> None:
    # criterion 1 against criterion 2 over six replies: r exactly 0 (not negative); criterion 3 goes with 2 (r > 0)
    rows = [("a", [True, True, True]), ("a", [False, True, True]), ("b", [True, False, False]),
            ("b", [False, False, False]), ("a", [True, True, True]), ("b", [False, True, False])]
    votes = {1: {"j1": [True, False, True], "j2": [False]}, 2: {"j1": [True, True], "j2": [True, False]}}
    replies = [Reply("q1", m, 0.5, {i + 1: h for i, h in enumerate(hits)}, votes if k == 0 else {})
               for k, (m, hits) in enumerate(rows)]
    table = {s.index: s for s in criterion_table(_crit(1, 2, 3), replies)}
    for s in table.values():
        expected = (float(s.no_signal) + float(s.discrimination is not None and s.discrimination < 0)
                    + (s.flip_rate or 0) + (s.juror_disagreement or 0) + (s.human_disagreement or 0))
        assert s.review_score == pytest.approx(expected)
    assert table[1].flip_rate == 1.0 and table[1].juror_disagreement == 1.0
    assert table[2].flip_rate == 0.5 and table[2].juror_disagreement == 1.0
    assert 0 < table[3].discrimination < 1 and table[3].review_score == 0.0
    tie = criterion_table(_crit(1, qid="q0") + _crit(1), [
        Reply("q1", "a", 0.5, {1: True}), Reply("q1", "b", 0.5, {1: False}),
        Reply("q0", "a", 0.5, {1: True}), Reply("q0", "b", 0.5, {1: False}), Reply("q0", "a", 0.5, {1: False})])
    assert [(s.qid, s.replies, s.review_score) for s in tie] == [("q0", 3, 0.0), ("q1", 2, 0.0)]  # more replies first


def test_an_item_total_r_of_exactly_zero_does_not_count_as_against_the_rubric() -> None:
    rows = [("a", [True, True]), ("a", [False, True]), ("b", [True, False]), ("b", [False, False]),
            ("a", [True, True]), ("b", [False, True])]
    table = {s.index: s for s in criterion_table(_crit(1, 2), _pattern(rows))}
    assert table[1].discrimination == 0.0 and table[1].review_score == float(table[1].no_signal)


def test_question_discrimination_uses_each_model_s_mean_on_the_other_questions() -> None:
    replies = [Reply("q1", "a", 0.8, {}), Reply("q1", "b", 0.2, {}), Reply("q1", "c", 0.5, {}),
               Reply("q2", "a", 0.5, {}), Reply("q2", "b", 0.1, {}), Reply("q3", "a", 1.0, {}),
               Reply("q3", "b", 0.9, {}), Reply("q3", "c", 0.4, {})]
    (q1, _, _) = question_table(replies, {"q1": "", "q2": "", "q3": ""})
    assert q1.discrimination == pytest.approx(_r([0.8, 0.2, 0.5], [0.75, 0.5, 0.4]))


def test_question_rows_count_their_criteria_apart_from_the_no_signal_ones() -> None:
    replies = [Reply("q1", "a", 0.5, {1: True, 2: True}), Reply("q1", "b", 0.5, {1: True, 2: False})]
    crits = criterion_table(_crit(1, 2), replies)
    (q1,) = question_table(replies, {"q1": ""}, crits)
    assert (q1.criteria, q1.no_signal_criteria) == (2, 1)  # criterion 1 is saturated, 2 separates a from b


def test_group_cells_are_each_model_s_rate_over_its_own_replies() -> None:
    crits = _crit(1, 2, 3)
    replies = [Reply("q1", "a", 0.5, {1: True, 2: True, 3: False}), Reply("q1", "a", 0.5, {1: True, 2: False, 3: False}),
               Reply("q1", "b", 0.5, {1: False, 2: False, 3: True}),
               Reply("q1", "c", 0.5, {1: True, 2: True, 3: True}), Reply("q1", "c", 0.5, {1: False, 2: True, 3: True}),
               Reply("q1", "c", 0.5, {1: True, 2: True, 3: False})]
    (g,) = group_table(crits, replies, n_boot=30, seed=2)
    m = [[1.0, 0.5, 0.0], [0.0, 0.0, 1.0], [2 / 3, 1.0, 2 / 3]]
    assert g.interval.alpha == pytest.approx(_alpha(m)) and not g.interval.binary
    assert g.interval == alpha_interval(np.array(m), n_boot=30, seed=2)
    one = [Reply("q1", "a", 0.5, {1: True, 2: True}), Reply("q1", "b", 0.5, {1: False, 2: True}),
           Reply("q1", "c", 0.5, {1: False, 2: False})]
    (b,) = group_table(_crit(1, 2), one, n_boot=10)
    assert b.interval.binary and b.interval.alpha == pytest.approx(_alpha([[1, 1], [0, 1], [0, 0]]))


def test_a_group_with_no_criterion_every_model_was_judged_on_has_none() -> None:
    replies = [Reply("q1", "a", 0.5, {1: True, 2: None}), Reply("q1", "b", 0.5, {2: False})]
    (g,) = group_table(_crit(1, 2), replies, n_boot=10)
    assert (g.criteria, g.models, g.interval.rows, g.interval.items, g.interval.alpha) == (0, 2, 2, 0, None)
