"""A run scored by a formula that is not built in (a plugin's entry point, or a trusted module:function) is
read back like a run: `rescore` resolves the formula through the same registry and the same trust rule, and
the hierarchical interval of a sampled run (its report.html, the leaderboard) is rebuilt with it.

Before: the stored spec was rebuilt without the formula check, so scoring met the formula's name where a
function was expected and `rescore` ended in a traceback; the run's own report.html was not written.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import REPO, run_cli

QA = REPO / "benchmarks" / "reference_qa"
DATA = REPO / "data" / "reference_qa.csv"


def _variant(tmp_path: Path, formula: str) -> Path:
    d = tmp_path / "qa"
    shutil.copytree(QA, d)
    text = (d / "benchmark.yaml").read_text(encoding="utf-8")
    assert "formula: met_over_positive" in text
    (d / "benchmark.yaml").write_text(text.replace("formula: met_over_positive", f"formula: {formula}"), encoding="utf-8")
    return d


def _with_path(env: dict[str, str], path: Path) -> dict[str, str]:
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(path), env.get("PYTHONPATH", "")) if p)}


def _run(tmp_path: Path, env: dict[str, str], bench: Path, *extra: str) -> Path:
    out = tmp_path / "run"
    res = run_cli([f"benchmark={bench}", f"data.path={DATA}", "candidate=mock", "judge=mock", "candidate.samples=2",
                   "progress=none", f"hydra.run.dir={out}", *extra], env)
    assert res.returncode == 0, res.stderr
    assert "report.html not written" not in res.stderr, res.stderr  # the sampled run's interval was rebuilt
    assert (out / "report.html").is_file()
    return out


def _summary(path: Path) -> dict:
    return json.loads((path / "summary.json").read_text(encoding="utf-8"))


def test_a_trusted_formula_run_rescores_only_when_trusted_again(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "fx_mod.py").write_text("def third(raw, lo, hi, params):\n    return 1 / 3\n")
    env = _with_path(env, tmp_path)
    run = _run(tmp_path, env, _variant(tmp_path, "fx_mod:third"), "trust_code=true")
    assert _summary(run)["overall"] == pytest.approx(100 / 3)  # every question scores the formula's constant
    refused = run_cli(["rescore", str(run)], env)
    assert refused.returncode == 2, refused.stderr
    lines = [ln for ln in refused.stderr.splitlines() if ln.strip() and "debug=true" not in ln]
    assert len(lines) == 1 and "scoring.formula" in lines[0] and "trust_code=true" in lines[0], refused.stderr
    res = run_cli(["rescore", str(run), "trust_code=true"], env)
    assert res.returncode == 0, res.stderr
    new = _summary(run / "rescore-fx_mod:third")
    assert new.pop("rescore")["formula"] == "fx_mod:third"
    assert new == _summary(run)  # every number, bit for bit


def test_a_plugin_formula_run_rescores_and_ranks(tmp_path: Path, env: dict[str, str]) -> None:
    """An installed entry point of rubric_engine.formulas needs no trust flag, at run, rescore or leaderboard."""
    (tmp_path / "plugin_fx.py").write_text("def quarter(raw, lo, hi, params):\n    return 0.25\n")
    info = tmp_path / "plugin_fx-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-fx\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rubric_engine.formulas]\nquarter = plugin_fx:quarter\n")
    env = _with_path(env, tmp_path)
    run = _run(tmp_path, env, _variant(tmp_path, "quarter"))
    assert _summary(run)["overall"] == 25.0
    res = run_cli(["rescore", str(run)], env)
    assert res.returncode == 0, res.stderr
    new = _summary(run / "rescore-quarter")
    new.pop("rescore")
    assert new == _summary(run)
    board = run_cli(["leaderboard", str(run), f"out={tmp_path / 'board'}", "bootstrap.samples=20"], env)
    assert board.returncode == 0, board.stderr
    rows = json.loads((tmp_path / "board" / "leaderboard.json").read_text(encoding="utf-8"))["rows"]
    assert [r["overall"] for r in rows] == [25.0]
