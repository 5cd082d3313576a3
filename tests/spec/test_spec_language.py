"""The spec language beyond HeartBench: the QA example end to end (CSV data, reference answer, own verdict
fields), JSON data, formulas from Python (trusted only), and one clear line at `validate` for a spec
that mixes incompatible choices."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.dataset.load import parse_rows
from rubric_engine.errors import SpecError
from rubric_engine.scoring.question import log_normalised
from rubric_engine.spec.load import load_spec

from conftest import REPO
QA = REPO / "benchmarks" / "reference_qa"
HB = REPO / "benchmarks" / "healthbench"
from conftest import EXE  # the console script of the environment under test, never another on PATH


def run_cli(args: list[str], env: dict[str, str], **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=300, **kw)


def model_args(url: str) -> list[str]:
    return ["candidate=openai_compatible", "candidate.model=openai/cand", f"candidate.api_base={url}",
            "candidate.name=cand", "candidate.api_key_env=FAKE_KEY",
            "judge=openai_compatible", "judge.model=openai/judge", f"judge.api_base={url}",
            "judge.name=judge", "judge.api_key_env=FAKE_KEY"]


# ------------------------------------------------------------------------------------------- QA example

def qa_passed(text: str, n: int) -> bool:
    return (len(text) + n) % 2 == 0


class QAScript:
    def __call__(self, body: dict[str, Any]) -> Reply:
        text = body["messages"][-1]["content"]
        if body["model"] == "judge":
            checks = re.findall(r"^(\d+)\. \((-?\d+) points\) (.*)$", text, re.M)
            return Reply(text=json.dumps({"checks": [{"n": int(i), "why": "ok", "passed": qa_passed(t, int(i))}
                                                     for i, _, t in checks]}))
        return Reply(text="My answer: " + text[:20])


def test_qa_example_end_to_end(tmp_path: Path, env: dict[str, str]) -> None:
    spec = load_spec(QA)
    questions = parse_rows(spec, spec.data_path())
    assert len(questions) == 8 and all(q.reference for q in questions)
    assert all(c.label == "" and c.ability is None for q in questions for c in q.criteria)
    with FakeServer(QAScript()) as srv:
        res = run_cli(["benchmark=reference_qa", "progress=none", f"hydra.run.dir={tmp_path / 'run'}",
                       *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        judge = [b for b in srv.requests if b["model"] == "judge"]
        assert len(judge) == 8  # all criteria in one call per question
        prompts = [b["messages"][-1]["content"] for b in judge]
        for q in questions:  # the reference answer reaches the judge, under its own heading
            assert any(f"Reference answer (correct):\n{q.reference}" in p and q.dialogue[0].content in p for p in prompts)
        fmt = judge[0]["response_format"]["json_schema"]["schema"]
        assert list(fmt["properties"]) == ["checks"]
        assert list(fmt["properties"]["checks"]["items"]["properties"]) == ["n", "why", "passed"]
    # the same arithmetic, written out: passed points / positive points, clipped per question, plain mean
    per_q = []
    for q in questions:
        raw = sum(c.weight for c in q.criteria if qa_passed(c.text, c.index))
        hi = sum(c.weight for c in q.criteria if c.weight > 0)
        per_q.append(min(1.0, max(0.0, raw / hi)))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["overall"] == pytest.approx(100 * sum(per_q) / len(per_q))
    science = [s for q, s in zip(questions, per_q) if "topic:science" in q.tags]
    assert summary["breakdowns"]["topics"]["topic:science"] == pytest.approx(100 * sum(science) / len(science))
    assert summary["abilities"] == {} and summary["dimensions"] == {}


def test_json_data_format(tmp_path: Path) -> None:
    d = tmp_path / "qa_json"
    shutil.copytree(QA, d)
    spec_text = (d / "benchmark.yaml").read_text().replace("format: csv", "format: json")
    rows = [{"id": "a", "question": "2+2?", "reference": "4", "topics": ["topic:math"],
             "checks": [{"check": "Says 4.", "points": 1}]}]
    (d / "rows.json").write_text(json.dumps(rows))
    (d / "benchmark.yaml").write_text(spec_text.replace("../../data/reference_qa.csv", "rows.json"))
    spec = load_spec(d)
    (q,) = parse_rows(spec, spec.data_path())
    assert q.id == "a" and q.dialogue[0].content == "2+2?" and q.criteria[0].weight == 1 and q.tags == ("topic:math",)


# ----------------------------------------------------------------------------------- formulas from Python

def test_formula_module_function_needs_trust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "myformulas.py").write_text("def half(raw, lo, hi, params):\n    return 0.5\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    d = tmp_path / "qa"
    shutil.copytree(QA, d)
    text = (d / "benchmark.yaml").read_text().replace("formula: met_over_positive", "formula: myformulas:half")
    (d / "benchmark.yaml").write_text(text.replace("../../data/reference_qa.csv", str(REPO / "data" / "reference_qa.csv")))
    with pytest.raises(SpecError) as err:
        load_spec(d)
    assert "scoring.formula" in str(err.value) and "trust_code=true" in str(err.value)
    spec = load_spec(d, trust_code=True)
    assert spec.formula()(1, 0, 2, {}) == 0.5


def test_log_normalised_tiny_span_does_not_divide_by_zero() -> None:
    assert log_normalised(1e-17, 0.0, 1e-17, {}) == pytest.approx(1.0)
    assert math.isfinite(log_normalised(0.0, -1e-300, 0.0, {}))


# -------------------------------------------------------------------------------- bad input at validate

def variant(tmp_path: Path, src: Path, old: str, new: str) -> Path:
    d = tmp_path / "variant"
    shutil.copytree(src, d)
    text = (d / "benchmark.yaml").read_text()
    assert old in text, old
    (d / "benchmark.yaml").write_text(text.replace(old, new, 1))
    return d


@pytest.mark.parametrize(("src", "old", "new", "expected"), [
    (HB, "granularity: per_criterion, shape: object", "granularity: per_criterion, shape: list",
     "judge.verdict.shape: per_criterion judging needs a one-object verdict (got 'list'); "
     "allowed with judge.verdict.granularity=per_criterion: object"),
    (QA, "granularity: all_criteria, shape: list, list_key: checks, id: n,", "granularity: per_criterion, shape: object,",
     "judge.template: an all-criteria template (criteria, n_criteria) with per_criterion judging"),
    (QA, "formula: met_over_positive", "formula: os:system",
     "scoring.formula: a module:function formula runs Python code and is imported only when you trust this spec"),
    (QA, "question: all_items", "question: mean_over_groups",
     "aggregation.question: mean_over_groups needs a taxonomy"),
    (QA, "prefix: \"topic:\"", "prefix: \"axis:\"",
     "report.breakdowns[0].prefix: no example tag in the data starts with this (got 'axis:'); prefixes in the data: topic:"),
    (QA, "by: example_tag", "by: ability", "report.breakdowns[0].by: an ability breakdown needs a taxonomy"),
])
def test_incompatible_choices_are_one_line_at_validate(tmp_path: Path, env: dict[str, str], src: Path, old: str,
                                                       new: str, expected: str) -> None:
    d = variant(tmp_path, src, old, new)
    args = ["validate", f"benchmark={d}"]
    if src == HB:  # no download in tests: a local sample in HealthBench's shape
        rows = [{"prompt": [{"role": "user", "content": "hi"}], "prompt_id": "a", "example_tags": ["theme:x"],
                 "rubrics": [{"criterion": "c", "points": 1, "tags": ["axis:y"]}]}]
        (tmp_path / "hb.jsonl").write_text(json.dumps(rows[0]) + "\n")
        args.append(f"data.path={tmp_path / 'hb.jsonl'}")
    else:
        args.append(f"data.path={REPO / 'data' / 'reference_qa.csv'}")
    res = run_cli(args, env)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and "debug=true" not in ln]
    assert len(lines) == 1 and expected in lines[0], res.stderr


def test_formula_from_an_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed plugin (a dist-info with an entry point of rubric_engine.formulas) needs no trust flag."""
    (tmp_path / "plugin_fx.py").write_text("def quarter(raw, lo, hi, params):\n    return 0.25\n")
    info = tmp_path / "plugin_fx-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-fx\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rubric_engine.formulas]\nquarter = plugin_fx:quarter\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    d = tmp_path / "qa"
    shutil.copytree(QA, d)
    text = (d / "benchmark.yaml").read_text().replace("formula: met_over_positive", "formula: quarter")
    (d / "benchmark.yaml").write_text(text.replace("../../data/reference_qa.csv", str(REPO / "data" / "reference_qa.csv")))
    assert load_spec(d).formula()(0, 0, 1, {}) == 0.25


def test_validate_output_follows_the_spec(env: dict[str, str]) -> None:
    res = run_cli(["validate", "benchmark=reference_qa"], env)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "8 questions, 19 scored rubric items" in out and "()" not in out.split("\n")[2]
    assert "failure-rule" not in out and "Taxonomy" not in out and "Topics (example_tag: topic:)" in out
    assert "sha256" in out and "local file" in out


def test_trusted_formula_that_does_not_import_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    d = variant(tmp_path, QA, "formula: met_over_positive", "formula: no_such_module_xyz:score")
    res = run_cli(["validate", f"benchmark={d}", f"data.path={REPO / 'data' / 'reference_qa.csv'}", "trust_code=true"],
                  env)
    assert res.returncode == 2
    assert "scoring.formula: cannot import 'no_such_module_xyz:score'" in res.stderr.splitlines()[0]
