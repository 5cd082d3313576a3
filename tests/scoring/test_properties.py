"""Property tests (hypothesis) for the scoring core, the statistics and the judge's verdict format.

Why properties: the example tests pin HeartBench's numbers; these pin what must hold for *any* spec a
user writes: scores stay in [0, 1] for any finite weights, grow with positive hits and shrink with
negative ones, do not depend on criterion order; the percentile is numpy's linear rule; a verdict
survives serialise -> parse; `extends` merges with null meaning "remove". Example counts are modest
so the suite stays fast on two cores.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rubric_engine.datatypes import Criterion
from rubric_engine.judge.grading import parse_verdict
from rubric_engine.judge.verdicts import Verdict
from rubric_engine.scoring.aggregate import ScoredQuestion, aggregate, overall
from rubric_engine.scoring.question import FORMULAS, log_normalised, score_question
from rubric_engine.spec.files import deep_merge
from rubric_engine.spec.load import load_spec
from rubric_engine.stats.bootstrap import percentile

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
from conftest import REPO as ROOT


@dataclass(frozen=True)
class Rule:
    id: str
    effect: str = "zero_question"
    fires_when: str = "hit"


finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
moderate = st.one_of(st.integers(-10, 10).map(float), st.floats(min_value=-1e6, max_value=1e6, allow_nan=False))


@st.composite
def rubric(draw: st.DrawFn, weights: st.SearchStrategy[float] = finite, rules: bool = False
           ) -> tuple[list[Criterion], list[bool]]:
    """1-12 ability items over up to 3 abilities (each with a weight), optionally some failure-rule items."""
    n = draw(st.integers(1, 12))
    crits = [Criterion(index=i + 1, label="x", weight=draw(weights), text="t", ability=draw(st.sampled_from("abc")))
             for i in range(n)]
    if rules:
        for _ in range(draw(st.integers(0, 2))):
            crits.append(Criterion(index=len(crits) + 1, label="r", weight=draw(st.one_of(st.none(), moderate)),
                                   text="t", rule="r"))
    hits = draw(st.lists(st.booleans(), min_size=len(crits), max_size=len(crits)))
    return crits, hits


@FAST
@given(rubric(rules=True), st.sampled_from(sorted(FORMULAS)), st.sampled_from(["hit", "hit_positive_weight"]))
def test_scores_are_in_unit_interval_for_any_finite_weights(case, formula, fires_when) -> None:
    crits, hits = case
    qs = score_question(crits, hits, formula, {}, [Rule("r", fires_when=fires_when)])
    assert 0.0 <= qs.score <= 1.0
    assert all(0.0 <= a.score <= 1.0 and not math.isnan(a.score) for a in qs.abilities.values())
    if qs.catastrophic:
        assert qs.score == 0.0 and all(a.score == 0.0 for a in qs.abilities.values())


@FAST
@given(rubric(weights=moderate), st.sampled_from(sorted(FORMULAS)), st.data())
def test_score_is_monotone_in_hits(case, formula, data) -> None:
    """Hitting one more positive item never lowers its ability; one more negative item never raises it."""
    crits, hits = case
    misses = [i for i, h in enumerate(hits) if not h]
    assume(misses)
    i = data.draw(st.sampled_from(misses))
    more = list(hits)
    more[i] = True
    before = score_question(crits, hits, formula, {}, []).abilities[crits[i].ability]
    after = score_question(crits, more, formula, {}, []).abilities[crits[i].ability]
    w = crits[i].weight
    if w > 0:
        assert after.score >= before.score - 1e-12
    elif w < 0:
        assert after.score <= before.score + 1e-12
    else:
        assert after.score == pytest.approx(before.score, abs=1e-12)


@FAST
@given(rubric(weights=moderate, rules=True), st.sampled_from(sorted(FORMULAS)), st.randoms(use_true_random=False))
def test_score_does_not_depend_on_criterion_order(case, formula, rnd) -> None:
    crits, hits = case
    order = list(range(len(crits)))
    rnd.shuffle(order)
    a = score_question(crits, hits, formula, {}, [Rule("r")])
    b = score_question([crits[i] for i in order], [hits[i] for i in order], formula, {}, [Rule("r")])
    assert b.score == pytest.approx(a.score, abs=1e-9)
    assert {k: v.score for k, v in b.abilities.items()} == pytest.approx({k: v.score for k, v in a.abilities.items()},
                                                                         abs=1e-9)
    assert b.catastrophic == a.catastrophic


@FAST
@given(st.floats(min_value=1e-300, max_value=1e-12), st.floats(min_value=0.0, max_value=1.0))
def test_log_normalised_survives_a_tiny_weight_span(span, frac) -> None:
    """A span below ~1e-16 made ln(span + 1) exactly 0 (ZeroDivisionError); log1p keeps it exact."""
    lo = -span / 3
    value = log_normalised(lo + frac * span, lo, lo + span, {})
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(frac, abs=1e-6)  # for a tiny span the log is linear


def test_log_normalised_textbook_values() -> None:
    assert log_normalised(3.0, -1.0, 7.0, {}) == pytest.approx(math.log(5) / math.log(9))
    assert log_normalised(-1.0, -1.0, 7.0, {}) == 0.0 and log_normalised(7.0, -1.0, 7.0, {}) == 1.0
    assert log_normalised(1e-17, 0.0, 1e-17, {}) == 1.0  # span below float epsilon, all points hit


# -- statistics ----------------------------------------------------------------------------------------------
@FAST
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=2, max_size=60),
       st.sampled_from([0.025, 0.05, 0.25, 0.5, 0.75, 0.95, 0.975]))
def test_percentile_is_the_linear_interpolation_quantile(values, q) -> None:
    """Checked against the standard library's 'inclusive' method (numpy's default 'linear')."""
    ordered = sorted(values)
    cuts = statistics.quantiles(ordered, n=1000, method="inclusive")
    assert percentile(ordered, q) == pytest.approx(cuts[round(q * 1000) - 1], rel=1e-9, abs=1e-6)


ability_scores = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.floats(0.0, 1.0), min_size=1)


@FAST
@given(st.lists(ability_scores, min_size=1, max_size=30))
def test_overall_is_the_mean_of_ability_means(rows) -> None:
    qs = [ScoredQuestion(f"q{i}", "normal", "", s, 0.0, False) for i, s in enumerate(rows)]
    dims = {"d0": ["a", "b"], "d1": ["c", "d"]}
    means = [statistics.fmean([r[a] for r in rows if a in r]) for a in "abcd" if any(a in r for r in rows)]
    assert overall(qs, dims) == pytest.approx(statistics.fmean(means), abs=1e-12)
    assert 0.0 <= aggregate(qs, dims)["overall"] <= 100.0


# -- verdicts ------------------------------------------------------------------------------------------------
@FAST
@given(st.lists(st.tuples(st.text(max_size=40), st.booleans()), min_size=1, max_size=25), st.randoms(),
       st.sampled_from(["plain", "fenced", "prose"]))
def test_verdict_serialise_parse_round_trip(items, rnd, wrapping) -> None:
    verdicts = [Verdict(index=i + 1, reasoning=r, hit=h) for i, (r, h) in enumerate(items)]
    shuffled = list(verdicts)
    rnd.shuffle(shuffled)  # ids, not positions, say which criterion an item is about
    body = json.dumps({"criteria": [{"id": v.index, "reasoning": v.reasoning, "met": v.hit} for v in shuffled]},
                      ensure_ascii=rnd.random() < 0.5)
    text = {"plain": body, "fenced": f"```json\n{body}\n```", "prose": f"Here it is:\n{body}\nDone."}[wrapping]
    assert parse_verdict(text, len(verdicts)) == verdicts


# -- extends -------------------------------------------------------------------------------------------------
leaf = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=3))
tree = st.recursive(leaf, lambda kids: st.dictionaries(st.sampled_from("abcd"), kids, max_size=3), max_leaves=12)
mapping = st.dictionaries(st.sampled_from("abcd"), tree, max_size=4)


def _reference_merge(base, over):
    """Written independently: walk `over`; a mapping onto a mapping recurses, anything else (null too) wins."""
    result = {k: v for k, v in base.items()}
    for key in over:
        mine, theirs = result.get(key), over[key]
        both = isinstance(mine, dict) and isinstance(theirs, dict)
        result[key] = _reference_merge(mine, theirs) if both else theirs
    return result


@FAST
@given(mapping, mapping)
def test_extends_merge(a, b) -> None:
    """(Not associative: a null then a mapping differs from the mapping merged onto the grandparent, so a
    chain is merged from the root down, as specfile does.)"""
    assert deep_merge(a, b) == _reference_merge(a, b)
    assert deep_merge(a, {}) == a and deep_merge({}, a) == a
    for key, value in b.items():
        if not isinstance(value, dict):
            assert deep_merge(a, b)[key] == value  # null included: the child removes the parent's value


def test_extends_chain_with_null_overrides(tmp_path: Path) -> None:
    """grandparent (the shipped spec) -> parent sets values -> child sets some of them back to null."""
    parent = tmp_path / "parent"
    child = tmp_path / "child"
    parent.mkdir()
    child.mkdir()
    base = (ROOT / "benchmarks" / "heartbench").resolve()
    (parent / "benchmark.yaml").write_text(
        f"extends: {base}\nname: parent\njudge:\n  model:\n    api_base: http://127.0.0.1:9/v1\n"
        "    api_key_env: PARENT_KEY\n  max_reasks: 5\n", encoding="utf-8")
    (child / "benchmark.yaml").write_text(
        "extends: ../parent\nname: child\njudge:\n  model:\n    api_base: null\nreport:\n  decay: null\n",
        encoding="utf-8")
    shipped, spec = load_spec(base), load_spec(child)
    assert spec.name == "child"
    assert spec.judge.model.api_base is None  # removed by the child
    assert spec.judge.model.api_key_env == "PARENT_KEY" and spec.judge.max_reasks == 5  # kept from the parent
    assert spec.judge.model.model == shipped.judge.model.model  # kept from the grandparent
    assert spec.report.decay is None and shipped.report.decay is not None
    assert spec.taxonomy == shipped.taxonomy and spec.scoring == shipped.scoring
    assert [p.parent.name for p in spec.files] == ["heartbench", "parent", "child"]
