"""Kendall's tau-b between judges' rankings (stats/rankcorr.py), checked against scipy.stats.kendalltau and a
textbook value; its bootstrap interval against an independent resampling written out here (the macro average
over abilities recomputed from the raw question scores, percentiles with statistics.quantiles)."""

from __future__ import annotations

import random
import statistics

import pytest
from scipy.stats import kendalltau

from rubric_engine.scoring.aggregate import ScoredQuestion
from rubric_engine.stats.rankcorr import kendall_tau_b, tau_interval

DIMS = {"d1": ["a1", "a2"], "d2": ["a3"]}


def test_textbook_value_with_ties() -> None:
    # x = (1, 2, 2, 3), y = (1, 3, 2, 2): 6 pairs; concordant (1,2) (1,3) (1,4); discordant (2,4);
    # tied in x: (2,3); tied in y: (3,4) -> (3 - 1) / sqrt((6 - 1)(6 - 1)) = 2 / 5
    assert kendall_tau_b([1, 2, 2, 3], [1, 3, 2, 2]) == pytest.approx(0.4)
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


@pytest.mark.parametrize("seed", range(40))
def test_matches_scipy_tau_b(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 9)
    x = [float(rng.randint(0, 4)) for _ in range(n)]  # small ranges: many ties
    y = [float(rng.randint(0, 4)) for _ in range(n)]
    ref = kendalltau(x, y, variant="b").statistic
    ours = kendall_tau_b(x, y)
    if ref != ref:  # scipy's NaN: every value of one side tied
        assert ours is None
    else:
        assert ours == pytest.approx(ref, abs=1e-12)


def test_undefined_is_none_never_zero() -> None:
    assert kendall_tau_b([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None
    assert kendall_tau_b([1.0], [2.0]) is None
    with pytest.raises(ValueError, match="paired"):
        kendall_tau_b([1.0, 2.0], [1.0])


def _runs(seed: int, candidates: int, questions: int) -> list[list[ScoredQuestion]]:
    rng = random.Random(seed)
    out = []
    for c in range(candidates):
        skill = rng.random() * 0.4
        qs = []
        for q in range(questions):
            abilities = {a: min(1.0, rng.random() * 0.6 + skill) for a in rng.sample(["a1", "a2", "a3"], rng.randint(1, 3))}
            qs.append(ScoredQuestion(id=f"q{q}", subset="normal", scenario="", abilities=abilities,
                                     score=sum(abilities.values()) / len(abilities), catastrophic=False))
        out.append(qs)
    return out


def _macro(qs: list[ScoredQuestion]) -> float:
    """The overall as methodology.md defines it: each ability's mean over the questions that have it, then the
    mean over the abilities present."""
    per: dict[str, list[float]] = {}
    for q in qs:
        for a, s in q.abilities.items():
            per.setdefault(a, []).append(s)
    return 100 * statistics.fmean(statistics.fmean(v) for v in per.values())


def test_interval_is_the_independent_resampling() -> None:
    a = _runs(1, 4, 25)
    b = _runs(2, 4, 25)
    # question q24 left out of one run: the statistic is over the questions every run scored
    b[2] = [q for q in b[2] if q.id != "q24"]
    n, seed = 300, 7
    got = tau_interval(a, b, DIMS, n=n, seed=seed)
    common = [f"q{i}" for i in range(24)]

    def pick(qs: list[ScoredQuestion], ids: list[str]) -> list[ScoredQuestion]:
        by = {q.id: q for q in qs}
        return [by[i] for i in ids]

    point = kendalltau([_macro(pick(x, common)) for x in a], [_macro(pick(x, common)) for x in b]).statistic
    rng = random.Random(seed)  # the engine's draws: random.Random(seed).choices over the common questions
    taus = []
    for _ in range(n):
        draw = [common[i] for i in rng.choices(range(len(common)), k=len(common))]
        t = kendalltau([_macro(pick(x, draw)) for x in a], [_macro(pick(x, draw)) for x in b]).statistic
        taus.append(t)
    defined = [t for t in taus if t == t]
    cuts = statistics.quantiles(defined, n=40, method="inclusive")
    assert got["questions"] == 24 and got["candidates"] == 4
    assert got["tau"] == pytest.approx(point)
    assert got["undefined"] == n - len(defined)
    assert got["lo"] == pytest.approx(cuts[0]) and got["hi"] == pytest.approx(cuts[-1])


def test_needs_two_candidates_and_common_questions() -> None:
    a, b = _runs(1, 2, 5), _runs(2, 2, 5)
    with pytest.raises(ValueError, match="at least 2 candidates"):
        tau_interval(a[:1], b[:1], DIMS)
    b[1] = [ScoredQuestion(id="other", subset="normal", scenario="", abilities={"a1": 0.5}, score=0.5,
                           catastrophic=False)]
    with pytest.raises(ValueError, match="no scored question in common"):
        tau_interval(a, b, DIMS)
