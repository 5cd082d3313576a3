"""Spec-language defaults and validation rules users rely on, pinned by behaviour: each test fails if the
rule changes (a default moves, a check goes, a refusal becomes an acceptance). Written against mutants
that survived the earlier tests: the scale and fires_when defaults, negative max_reasks, malformed
sha256, non-finite scale, deep_merge mutating its base, duplicate ids in a paired comparison, and a
zero-weight failure item under hit_positive_weight."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

from rubric_engine.datatypes import Criterion
from rubric_engine.errors import SpecError
from rubric_engine.scoring.aggregate import ScoredQuestion
from rubric_engine.scoring.question import score_question
from rubric_engine.spec.files import deep_merge
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import FailureRule
from rubric_engine.stats.bootstrap import paired_difference
from rubric_engine.store.runs import RunTaxonomy
from test_spec_rules import BASE, TAXONOMY, write_spec


def spec_with(tmp_path: Path, old: str, new: str) -> Path:
    text = BASE + TAXONOMY
    assert old in text
    return write_spec(tmp_path, text.replace(old, new, 1))


def refusal(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    msg = str(info.value)
    assert "\n" not in msg.strip(), msg  # one line
    return msg


# -- defaults ------------------------------------------------------------------------------------------------
def test_scale_and_fires_when_defaults_reach_the_spec_and_every_reader_of_a_stored_spec(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path))  # the spec names neither scoring.scale nor fires_when
    assert spec.scoring.scale == 100.0 and [r.fires_when for r in spec.failure_rules] == ["hit"]
    stored = spec.model_dump(by_alias=True)
    stored.pop("scoring")  # a stored spec written without the key (an older run, a hand-made file)
    assert RunTaxonomy.from_spec(stored, "spec.json").scale == 100.0
    assert RunTaxonomy.from_spec({**stored, "scoring": {"scale": 10}}, "spec.json").scale == 10.0


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "0", "-100"])
def test_scale_must_be_a_finite_positive_number(tmp_path: Path, value: str) -> None:
    msg = refusal(spec_with(tmp_path, "aggregation:", f"scoring: {{scale: {value}}}\naggregation:"))
    assert "scoring.scale" in msg


def test_a_finite_positive_scale_is_kept(tmp_path: Path) -> None:
    assert load_spec(spec_with(tmp_path, "aggregation:", "scoring: {scale: 10}\naggregation:")).scoring.scale == 10.0


# -- validation ----------------------------------------------------------------------------------------------
def test_a_negative_max_reasks_is_refused_naming_the_key(tmp_path: Path) -> None:
    msg = refusal(spec_with(tmp_path, "  template: judge.j2\n", "  template: judge.j2\n  max_reasks: -1\n"))
    assert "judge.max_reasks" in msg and "-1" in msg


def test_max_reasks_zero_means_no_reask_and_is_accepted(tmp_path: Path) -> None:
    spec = load_spec(spec_with(tmp_path, "  template: judge.j2\n", "  template: judge.j2\n  max_reasks: 0\n"))
    assert spec.judge.max_reasks == 0
    assert load_spec(write_spec(tmp_path / "d")).judge.max_reasks == 2  # the default


@pytest.mark.parametrize("digest", ["abc", "0" * 63, "0" * 65, "g" * 64, "A" * 64, " " + "0" * 63])
def test_a_malformed_sha256_is_refused_naming_the_key(tmp_path: Path, digest: str) -> None:
    msg = refusal(spec_with(tmp_path, "  path: rows.jsonl\n", f"  path: rows.jsonl\n  sha256: '{digest}'\n"))
    assert "data.sha256" in msg


def test_a_well_formed_sha256_is_kept(tmp_path: Path) -> None:
    digest = "0123456789abcdef" * 4
    spec = load_spec(spec_with(tmp_path, "  path: rows.jsonl\n", f"  path: rows.jsonl\n  sha256: '{digest}'\n"))
    assert spec.data.sha256 == digest


def test_deep_merge_leaves_both_inputs_untouched() -> None:
    base = {"judge": {"model": {"name": "a", "params": {"t": 0}}, "repeats": 1}, "tags": ["x"]}
    over = {"judge": {"model": {"params": {"t": 1}}}, "tags": ["y"]}
    base_before, over_before = copy.deepcopy(base), copy.deepcopy(over)
    merged = deep_merge(base, over)
    assert merged == {"judge": {"model": {"name": "a", "params": {"t": 1}}, "repeats": 1}, "tags": ["y"]}
    assert base == base_before and over == over_before
    merged["judge"]["model"]["name"] = "changed"  # the result shares no merged mapping with the base
    assert base == base_before


# -- paired comparisons --------------------------------------------------------------------------------------
DIMS = {"d": ["a"]}


def _q(qid: str, score: float) -> ScoredQuestion:
    return ScoredQuestion(qid, "", "", {"a": score}, score, False)


@pytest.mark.parametrize("which, a, b", [
    ("first", [_q("q1", 0.5), _q("q1", 0.6)], [_q("q1", 0.4)]),
    ("second", [_q("q1", 0.5), _q("q2", 0.6)], [_q("q1", 0.4), _q("q1", 0.9)]),
])
def test_a_duplicate_id_in_either_model_of_a_paired_comparison_is_refused(which: str, a: list, b: list) -> None:
    with pytest.raises(ValueError, match=rf"^question id 'q1' appears twice in the {which} model's scores$"):
        paired_difference(a, b, DIMS, n=50)


def test_a_paired_comparison_without_duplicates_runs() -> None:
    d = paired_difference([_q("q1", 0.5), _q("q2", 0.7)], [_q("q1", 0.4), _q("q2", 0.7)], DIMS, n=50)
    assert d["questions"] == 2 and d["diff"] == pytest.approx(5.0)


# -- failure rules -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("weight", [0, 0.0, -0.0, -2, None])
def test_a_failure_item_without_positive_weight_never_fires_under_hit_positive_weight(weight: float | None) -> None:
    rule = FailureRule(id="r", data_labels=["x"], fires_when="hit_positive_weight")
    crits = [Criterion(1, "w", 2, "t", ability="a"), Criterion(2, "x", weight, "t", rule="r")]
    qs = score_question(crits, [True, True], "linear", {}, [rule])
    assert (qs.score, qs.catastrophic, qs.failed_rules) == (1.0, False, ())


def test_the_smallest_positive_weight_fires_under_hit_positive_weight() -> None:
    rule = FailureRule(id="r", data_labels=["x"], fires_when="hit_positive_weight")
    crits = [Criterion(1, "w", 2, "t", ability="a"), Criterion(2, "x", math.ulp(0.0), "t", rule="r")]
    qs = score_question(crits, [True, True], "linear", {}, [rule])
    assert (qs.score, qs.catastrophic, qs.failed_rules) == (0.0, True, ("r",))


# -- table order: abilities as declared, the unlabelled scenario last ----------------------------------------
def test_heatmaps_show_abilities_in_declaration_order_and_the_unlabelled_scenario_last() -> None:
    from types import SimpleNamespace

    from rubric_engine.report.html_views import heatmap

    spec = {"taxonomy": {"dimensions": [{"id": "d", "abilities": [{"id": "zeta"}, {"id": "alpha"}]}]},
            "report": {"breakdowns": [{"id": "abilities", "by": "ability"}, {"id": "scenarios", "by": "scenario"}]}}
    tax = RunTaxonomy.from_spec(spec, "spec.json")
    qs = [ScoredQuestion("q1", "", "", {"alpha": 0.5, "zeta": 0.5}, 0.5, False),
          ScoredQuestion("q2", "", "Work", {"alpha": 1.0}, 1.0, False)]
    rows = [SimpleNamespace(label="m1", scored=qs, breakdowns={"abilities": {"alpha": 75.0, "zeta": 50.0},
                                                                "scenarios": {"(none)": 50.0, "Work": 100.0}}),
            SimpleNamespace(label="m2", scored=qs, breakdowns={"abilities": {"alpha": 75.0},
                                                                "scenarios": {"Work": 100.0, "Growth": 1.0}})]
    lb = SimpleNamespace(taxonomy=tax, rows=rows)
    html = "".join(heatmap(lb, title, by, bid) for bid, title, by in tax.breakdowns)  # one per declared breakdown
    cells = [html.index(f'<td class="t">{name}</td>') for name in ("zeta", "alpha", "Growth", "Work", "(none)")]
    assert cells == sorted(cells), html
