"""Item statistics of `rubric-engine items` against references: scipy's point-biserial, a published KR-20
example, hand-worked Cronbach's alpha examples; the per-criterion table and the hard-set rule on small
hand-made data whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from rubric_engine.stats.hardset import compare_sets, decay, propose_hard
from rubric_engine.stats.itemstats import (alpha_interval, corrected_item_total, cronbach_alpha, kr20, pearson,
                                           point_biserial)
from rubric_engine.stats.rubricitems import CriterionInfo, QuestionStats, Reply, criterion_table, group_table

# Wuensch, "The Kuder-Richardson 20" (East Carolina University course notes, KR20.txt): ten students, ten
# items; sum of p*q = 2.18 and variance of the totals 5.84 (population), so KR-20 = 10/9 * (1 - 2.18/5.84).
WUENSCH = np.array([
    [1, 1, 1, 1, 1, 1, 0, 1, 1, 0], [1, 0, 1, 1, 0, 1, 1, 1, 0, 1], [1, 1, 1, 1, 0, 1, 1, 0, 0, 1],
    [0, 0, 1, 0, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 1, 0, 0, 1, 0], [1, 1, 1, 0, 1, 1, 1, 1, 1, 1],
    [1, 1, 0, 1, 1, 1, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 0, 1], [0, 1, 0, 1, 1, 1, 1, 1, 0, 1],
    [1, 1, 0, 1, 1, 0, 1, 1, 1, 0]])


def test_kr20_matches_the_published_example() -> None:
    m = WUENSCH
    p = m.mean(axis=0)
    assert (p * (1 - p)).sum() == pytest.approx(2.18)  # the worked values of the source
    assert m.sum(axis=1).var() == pytest.approx(5.84)
    assert kr20(m) == pytest.approx(10 / 9 * (1 - 2.18 / 5.84))
    assert kr20(m) == pytest.approx(0.6963, abs=1e-4)
    assert cronbach_alpha(m) == pytest.approx(kr20(m))  # KR-20 is alpha on 0/1 items (the source's point)


def test_cronbach_alpha_worked_examples() -> None:
    # 4 respondents x 3 items: item variances 5/3, 2.75/3, 5/3 (sum 4.25), totals 13,10,15,7 (variance 12.25):
    # alpha = 3/2 * (1 - 4.25/12.25) = 48/49
    a = np.array([[4, 5, 4], [3, 4, 3], [5, 5, 5], [2, 3, 2]])
    assert cronbach_alpha(a) == pytest.approx(48 / 49)
    # 5 respondents x 3 items: item variances .7, .8, .7 (sum 2.2), totals 10,9,13,8,12 (variance 4.3):
    # alpha = 3/2 * (1 - 2.2/4.3) = 3.15/4.3
    b = np.array([[3, 4, 3], [2, 3, 4], [4, 4, 5], [3, 2, 3], [4, 4, 4]])
    assert cronbach_alpha(b) == pytest.approx(3.15 / 4.3)


def test_alpha_and_kr20_undefined_cases_are_none() -> None:
    assert cronbach_alpha(np.ones((4, 3))) is None  # no variance in the totals
    assert cronbach_alpha(np.array([[1.0, 0.0]])) is None  # one examinee
    assert kr20(np.array([[1], [0]])) is None  # one item
    with pytest.raises(ValueError):
        kr20(np.array([[0.5, 1], [0, 1]]))


def test_point_biserial_matches_scipy() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        x = rng.integers(0, 2, 30)
        y = rng.normal(size=30) + x
        assert point_biserial(x.astype(bool).tolist(), y.tolist()) == pytest.approx(sps.pointbiserialr(x, y)[0])
    assert point_biserial([True] * 5, [1, 2, 3, 4, 5]) is None  # a constant item has no correlation
    assert pearson([1, 2], [2, 1]) is None


def test_corrected_item_total_leaves_the_item_out() -> None:
    m = WUENSCH
    got = corrected_item_total(m)
    for j in range(m.shape[1]):
        rest = m.sum(axis=1) - m[:, j]
        assert got[j] == pytest.approx(sps.pointbiserialr(m[:, j], rest)[0])
        assert got[j] < pearson(m[:, j], m.sum(axis=1))  # uncorrected r is inflated by the item itself


def test_alpha_interval_brackets_the_estimate_and_is_reproducible() -> None:
    iv = alpha_interval(WUENSCH, n_boot=300, seed=1)
    assert iv.binary and iv.rows == 10 and iv.items == 10
    assert iv.lo is not None and iv.lo < iv.alpha < iv.hi  # type: ignore[operator]
    assert alpha_interval(WUENSCH, n_boot=300, seed=1) == iv
    none = alpha_interval(np.array([[1.0, 1.0], [1.0, 1.0]]), n_boot=50)
    assert none.alpha is None and none.lo is None


def _replies(pattern: dict[str, list[list[bool]]], scores: dict[str, list[float]] | None = None) -> list[Reply]:
    """pattern: model -> one list of verdicts per reply to question q1 (criteria 1..n)."""
    out = []
    for m, reps in pattern.items():
        for k, hits in enumerate(reps):
            out.append(Reply(qid="q1", model=m, score=(scores or {}).get(m, [0.5] * len(reps))[k],
                             hits={i + 1: h for i, h in enumerate(hits)}))
    return out


def test_criterion_table_flags_and_orders() -> None:
    crits = [CriterionInfo("q1", i, f"c{i}", 2.0, "g") for i in (1, 2, 3, 4)]
    # criterion 1 always met (saturated), 2 never (dead), 3 follows the model, 4 met by half of each model's replies
    pattern = {m: [[True, False, good, k % 2 == 0] for k in range(4)] for m, good in (("strong", True), ("weak", False))}
    rows = {c.index: c for c in criterion_table(crits, _replies(pattern))}
    assert rows[1].flag == "saturated" and rows[2].flag == "dead" and rows[1].no_signal and rows[2].no_signal
    assert rows[3].spread == 1.0 and not rows[3].no_signal and rows[3].per_model == {"strong": 1.0, "weak": 0.0}
    assert rows[4].spread == 0.0 and rows[4].no_signal and not rows[4].flag  # met equally by both models
    assert rows[1].discrimination is None  # constant: undefined, never 0
    assert rows[3].review_rank > max(rows[i].review_rank for i in (1, 2, 4))


def test_flip_and_juror_rates_from_votes() -> None:
    crits = [CriterionInfo("q1", 1, "c", 1.0, "g")]
    votes = [{"j1": [True, False, True], "j2": [False, False, False]},  # j1 flips; jurors split (T vs F)
             {"j1": [True, True, True], "j2": [True, True, None]}]  # nobody flips; jurors agree
    replies = [Reply("q1", "m", 0.5, {1: True}, {1: v}) for v in votes]
    (row,) = criterion_table(crits, replies)
    assert (row.flip_rate, row.flip_units) == (pytest.approx(1 / 4), 4)
    assert (row.juror_disagreement, row.juror_units) == (pytest.approx(1 / 2), 2)
    (human,) = criterion_table(crits, replies, {("q1", 1): (1, 4)})
    assert human.human_disagreement == 0.25 and human.review_score > row.review_score


def test_group_alpha_uses_models_as_examinees() -> None:
    crits = [CriterionInfo("q1", i, f"c{i}", 1.0, "g", ("tag:a",) if i < 3 else ()) for i in (1, 2, 3)]
    pattern = {"a": [[True, True, True]], "b": [[True, True, False]], "c": [[False, True, False]],
               "d": [[False, False, False]]}
    groups = {(g.kind, g.group): g for g in group_table(crits, _replies(pattern), n_boot=50)}
    m = np.array([[1, 1, 1], [1, 1, 0], [0, 1, 0], [0, 0, 0]])
    assert groups[("ability", "g")].interval.alpha == pytest.approx(kr20(m))
    assert groups[("tag", "tag:a")].criteria == 2
    assert groups[("tag", "tag:a")].interval.alpha == pytest.approx(kr20(m[:, :2]))


def _q(qid: str, per_model: dict[str, float]) -> QuestionStats:
    vals = list(per_model.values())
    return QuestionStats(qid=qid, subset="", replies=len(vals), mean_score=float(np.mean(vals)), per_model=per_model,
                         spread=max(vals) - min(vals), discrimination=None, criteria=1, no_signal_criteria=0)


def test_hard_set_rule() -> None:
    qs = [_q("easy", {"s": 0.9, "w": 0.5}), _q("hard", {"s": 0.2, "w": 0.1}), _q("flat", {"s": 0.1, "w": 0.1}),
          _q("mid", {"s": 0.5, "w": 0.3}), _q("partial", {"s": 0.0})]
    h = propose_hard(qs, 0.5)
    assert h.strong_models == ["s"] and h.eligible == 4 and h.target == 2 and h.discriminating == 3
    assert h.ids == ["hard", "mid"]  # lowest strong score first; "flat" does not discriminate; "partial" lacks w
    assert compare_sets(h.ids, ["hard", "flat"]) == {"proposed": 2, "published": 2, "overlap": 1, "jaccard": 1 / 3}
    d = decay({"s": {"a": 0.8, "b": 0.4}}, hard={"b"}, rest={"a"})
    assert d["s"] == pytest.approx(100.0)  # (0.8 - 0.4) / 0.4
    with pytest.raises(ValueError):
        propose_hard(qs, 0)
