"""Rules no other test pinned: spec defaults that change scores, report order, the empty subset label and
which verdict ids a judge may use. Each test names the rule; each fails if the rule changes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rich.console import Console

from rubric_engine.datatypes import Criterion
from rubric_engine.judge.grading import parse_verdict
from rubric_engine.judge.verdicts import Verdict, VerdictError
from rubric_engine.report.console import print_summary
from rubric_engine.scoring.aggregate import NO_SCENARIO, ScoredQuestion, aggregate
from rubric_engine.scoring.question import score_question
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import FailureRule, Scoring

from conftest import REPO as ROOT


# -- defaults ------------------------------------------------------------------------------------------------
def test_fires_when_defaults_to_hit_and_that_zeroes_an_unweighted_or_negative_hit() -> None:
    rule = FailureRule(id="confusion", data_labels=["x"])
    assert rule.fires_when == "hit"
    crits = [Criterion(1, "warm", 3, "t", ability="warmth"), Criterion(2, "x", None, "t", rule="confusion"),
             Criterion(3, "x", -4, "t", rule="confusion")]
    for hits in ([True, True, False], [True, False, True]):
        qs = score_question(crits, hits, "log_normalised", {}, [rule])
        assert qs.catastrophic and qs.score == 0.0 and qs.failed_rules == ("confusion",)
    assert score_question(crits, [True, False, False], "log_normalised", {}, [rule]).score == 1.0


def test_scoring_defaults() -> None:
    assert Scoring() == Scoring(formula="log_normalised", params={}, scale=100.0)


def test_a_spec_that_omits_fires_when_and_scale_gets_the_defaults(tmp_path: Path) -> None:
    """Through the spec file: the shipped spec with the two keys deleted scores exactly as before."""
    mine = tmp_path / "mine"
    shutil.copytree(ROOT / "benchmarks" / "heartbench", mine)
    text = (mine / "benchmark.yaml").read_text(encoding="utf-8")
    kept = [line for line in text.splitlines() if not line.strip().startswith(("fires_when:", "scale:"))]
    assert len(kept) == len(text.splitlines()) - 2
    (mine / "benchmark.yaml").write_text("\n".join(kept) + "\n", encoding="utf-8")
    spec, shipped = load_spec(mine), load_spec(ROOT / "benchmarks" / "heartbench")
    assert [r.fires_when for r in spec.failure_rules] == ["hit"] and spec.scoring.scale == 100.0
    assert spec.failure_rules == shipped.failure_rules and spec.scoring == shipped.scoring


# -- order and labels ----------------------------------------------------------------------------------------
DIMS = {"mind": ["warmth", "curiosity"], "heart": ["coping"]}


def _q(i: int, subset: str, scenario: str, **scores: float) -> ScoredQuestion:
    return ScoredQuestion(f"q{i}", subset, scenario, scores, sum(scores.values()) / len(scores), False)


QS = [_q(1, "hard", "Work", coping=0.2), _q(2, "", "", warmth=1.0), _q(3, "normal", "Growth", curiosity=0.5),
      _q(4, "hard", "", warmth=0.0, coping=0.4)]


def test_report_order_and_the_empty_labels() -> None:
    agg = aggregate(QS, DIMS)
    assert list(agg["abilities"]) == ["warmth", "curiosity", "coping"]  # taxonomy order, not data order
    assert list(agg["dimensions"]) == ["mind", "heart"]
    assert list(agg["subsets"]) == ["hard", "normal"]  # first appearance; an empty subset is no subset
    assert agg["subsets"] == {"hard": pytest.approx(100 * (0.0 + 0.3) / 2), "normal": pytest.approx(50.0)}
    assert list(agg["scenarios"]) == ["Growth", "Work", NO_SCENARIO]  # sorted, the unlabelled ones last
    assert agg["scenarios"][NO_SCENARIO] == pytest.approx(100 * (0.5 + 0.4) / 2)  # q2 and q4
    assert agg["overall"] == pytest.approx(100 * (0.5 + 0.5 + 0.3) / 3)


def test_printed_summary_follows_the_declared_breakdowns_in_order() -> None:
    agg = aggregate(QS, DIMS)
    breakdowns = [("dimensions", "dimension"), ("abilities", "ability"), ("subsets", "subset"),
                  ("scenarios", "scenario")]
    summary = {**agg, "benchmark": "b", "benchmark_version": "1", "candidate": {"name": "c"}, "judge": {"name": "j"},
               "breakdowns": {bid: {k: v for k, v in agg[bid].items() if k not in ("decay_pct", "decay_base")}
                              for bid, _ in breakdowns},
               "counts": {"questions": 4, "scored": 4, "judge_errors": 0, "candidate_errors": 0, "catastrophic": 0},
               "tokens": {r: {"prompt": 0, "completion": 0} for r in ("candidate", "judge")},
               "cost": {"candidate": None, "judge": None}}
    spec = {"locale": "en", "taxonomy": {"dimensions": [{"id": d, "abilities": [{"id": a} for a in abilities]}
                                                        for d, abilities in DIMS.items()]},
            "report": {"breakdowns": [{"id": bid, "by": by} for bid, by in breakdowns]}}
    console = Console(record=True, width=120, color_system=None)
    print_summary(summary, spec, console)
    out = console.export_text()
    order = ["mind", "heart", "warmth", "curiosity", "coping", "hard", "normal", "Growth", "Work", NO_SCENARIO]
    positions = [out.index(f"│ {name} ") for name in order]
    assert positions == sorted(positions), out
    [overall_line] = [line for line in out.splitlines() if "Overall" in line]
    assert "43.33" in overall_line
    assert "catastrophic" not in out  # no failure rules declared: no catastrophic row


# -- verdict ids ---------------------------------------------------------------------------------------------
def test_boolean_ids_are_not_ids() -> None:
    """true == 1 in Python; a judge writing "id": true must not pass for item 1."""
    with pytest.raises(VerdictError, match=r'item #1 has no integer "id" \(got True\)'):
        parse_verdict('{"criteria": [{"id": true, "reasoning": "r", "met": true}]}', 1)


def test_numeric_string_ids_are_accepted_other_strings_are_not() -> None:
    got = parse_verdict('{"criteria": [{"id": "2", "reasoning": "b", "met": false}, '
                        '{"id": " 1 ", "reasoning": "a", "met": "1"}]}', 2)
    assert got == [Verdict(1, "a", True), Verdict(2, "b", False)]
    with pytest.raises(VerdictError, match=r'item #1 has no integer "id" \(got \'one\'\)'):
        parse_verdict('{"criteria": [{"id": "one", "reasoning": "a", "met": true}]}', 1)
    with pytest.raises(VerdictError, match=r'id 1: "met" must be true or false \(got \'yes\'\)'):
        parse_verdict('{"criteria": [{"id": 1, "reasoning": "a", "met": "yes"}]}', 1)


# -- scoring details the mutation run found unpinned ---------------------------------------------------------
def test_fractional_weights_split_into_lo_and_hi() -> None:
    """Weights below 1 (e.g. a spec with 0.5-point items) count on their own side, for every formula."""
    import math

    crits = [Criterion(1, "w", 0.5, "t", ability="a"), Criterion(2, "w", -0.25, "t", ability="a")]
    expected = {"linear": 0.25 / 0.75 * 2, "log_normalised": math.log1p(0.5) / math.log1p(0.75),
                "met_over_positive": 0.5}
    for formula, value in expected.items():
        a = score_question(crits, [True, True], formula, {}, []).abilities["a"]
        assert (a.raw, a.lo, a.hi) == (0.25, -0.25, 0.5)
        assert a.score == pytest.approx(value, abs=1e-12), formula


def test_zero_weight_rule_item_does_not_fire_under_hit_positive_weight() -> None:
    crits = [Criterion(1, "w", 2, "t", ability="a"), Criterion(2, "x", 0, "t", rule="r")]
    official = FailureRule(id="r", data_labels=["x"], fires_when="hit_positive_weight")
    assert score_question(crits, [True, True], "linear", {}, [official]).score == 1.0
    assert score_question(crits, [True, True], "linear", {}, [FailureRule(id="r", data_labels=["x"])]).score == 0.0


def test_scoring_messages() -> None:
    from types import SimpleNamespace

    crits = [Criterion(1, "w", 2, "t", ability="a"), Criterion(2, "x", None, "t", rule="r")]
    bad_effect = SimpleNamespace(id="r", effect="halve", fires_when="hit")
    with pytest.raises(ValueError, match=r"^failure rule 'r': unknown effect 'halve'; known: zero_question$"):
        score_question(crits, [True, False], "linear", {}, [bad_effect])
    bad_when = SimpleNamespace(id="r", effect="zero_question", fires_when="never")
    with pytest.raises(ValueError, match=r"^failure rule 'r': unknown fires_when 'never'; "
                                         r"known: hit, hit_positive_weight$"):
        score_question(crits, [True, False], "linear", {}, [bad_when])
    with pytest.raises(ValueError, match=r"^criterion 2: failure rule 'r' is not among the rules given \(none\)$"):
        score_question(crits, [True, False], "linear", {}, [])
    two = [SimpleNamespace(id=i, effect="zero_question", fires_when="hit") for i in ("p", "q")]
    with pytest.raises(ValueError, match=r"^criterion 2: failure rule 'r' is not among the rules given \(p, q\)$"):
        score_question(crits, [True, False], "linear", {}, two)
    with pytest.raises(ValueError, match=r"^question has no ability items; every question needs at least one "
                                         r"scored criterion$"):
        score_question(crits[1:], [False], "linear", {}, [FailureRule(id="r", data_labels=["x"])])
