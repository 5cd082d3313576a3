"""`rubric-engine rescore` and the length analysis, on real run directories made by the console script.

Two candidates x two judges on heartbench_en: `jb` (verdicts independent of length, failure-rule items
fire sometimes) and `jlen` (passes an item with probability proportional to the reply's length).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scipy import stats

import gridruns as g

CANDS = {"c_oa1": "openai", "c_an": "anthropic"}
JUDGES = {"jb": "anthropic", g.LENGTH_JUDGE: "qwen"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return g.build_grid(tmp_path_factory.mktemp("rescore"), CANDS, JUDGES, progress="plain")


def _samples(d: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (d / "samples.jsonl").read_text(encoding="utf-8").splitlines()]


def test_rescore_with_the_run_formula_reproduces_the_summary_exactly(runs: dict[str, Any]) -> None:
    for d in runs["dirs"].values():
        res = g.run_cli(["rescore", str(d)], runs["env"])
        assert res.returncode == 0, res.stderr
        out = d / "rescore-log_normalised"
        new = json.loads((out / "summary.json").read_text())
        info = new.pop("rescore")
        assert info["formula"] == "log_normalised" and info["failure_rules"] is True
        assert new == json.loads((d / "summary.json").read_text())  # every number, bit for bit
        assert _samples(out) == _samples(d)
        assert (out / "compare.md").is_file() and (out / "spec.resolved.json").is_file()


def test_linear_without_failure_rules_against_a_hand_computation(runs: dict[str, Any], tmp_path: Path) -> None:
    d = runs["dirs"][("c_oa1", "jb")]
    old = _samples(d)
    assert sum(s["catastrophic"] for s in old) > 0  # so switching the rule off must change something
    res = g.run_cli(["rescore", str(d), "scoring.formula=linear", "failure_rules=off", f"out={tmp_path}"], runs["env"])
    assert res.returncode == 0, res.stderr
    new = {s["id"]: s for s in _samples(tmp_path)}
    per_ability: dict[str, list[float]] = {}
    for s in old:
        groups: dict[str, list[tuple[float, bool]]] = {}
        for c in s["criteria"]:
            if c["ability"]:
                groups.setdefault(c["ability"], []).append((c["weight"], c["hit"]))
        for ab, items in groups.items():
            raw = sum(w for w, h in items if h)
            lo, hi = sum(w for w, _ in items if w < 0), sum(w for w, _ in items if w > 0)
            want = (raw - lo) / (hi - lo) if hi - lo > 0 else 0.0
            assert new[s["id"]]["abilities"][ab]["score"] == pytest.approx(want, abs=1e-12)
            per_ability.setdefault(ab, []).append(want)
        assert new[s["id"]]["catastrophic"] is False and new[s["id"]]["failed_rules"] == []
    summary = json.loads((tmp_path / "summary.json").read_text())
    means = [sum(v) / len(v) for v in per_ability.values()]
    assert summary["overall"] == pytest.approx(100 * sum(means) / len(means), abs=1e-9)
    assert summary["counts"]["catastrophic"] == 0 and summary["rescore"]["formula"] == "linear"
    cmp = json.loads((tmp_path / "compare.json").read_text())["runs"][0]
    assert cmp["overall_before"] == json.loads((d / "summary.json").read_text())["overall"]
    assert cmp["overall_after"] == summary["overall"]
    for row in cmp["rows"]:
        assert row["moved"] == (row["rank_before"] != row["rank_after"])
    assert "failure rules off" in " ".join(res.stdout.split())


def test_rescore_makes_no_call_and_never_imports_litellm(runs: dict[str, Any], tmp_path: Path) -> None:
    d = runs["dirs"][("c_an", g.LENGTH_JUDGE)]
    code = (
        "import sys\n"
        "from rubric_engine.cli.main import main\n"
        "try:\n"
        f"    main(['rescore', {str(d)!r}, 'scoring.formula=met_over_positive', 'out={tmp_path}'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "print('litellm imported' if any(m.split('.')[0] == 'litellm' for m in sys.modules) else 'clean')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], env=runs["env"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "clean"
    assert json.loads((tmp_path / "summary.json").read_text())["rescore"]["formula"] == "met_over_positive"


def test_rescore_a_sweep_side_by_side_without_polluting_it(runs: dict[str, Any]) -> None:
    sweep = runs["sweep"]
    res = g.run_cli(["rescore", str(sweep), "scoring.formula=linear"], runs["env"])
    assert res.returncode == 0, res.stderr
    cmp = json.loads((sweep / "rescore-linear-compare.json").read_text())
    assert len(cmp["runs"]) == 4
    after = {r["run"]: r["overall_after"] for r in cmp["runs"]}
    ranks = {r["run"]: r["rank_after"] for r in cmp["runs"]}
    assert sorted(after, key=lambda k: -after[k]) == sorted(ranks, key=lambda k: ranks[k])
    for d in runs["dirs"].values():
        assert (d / "rescore-linear" / "summary.json").is_file()
    lb = g.run_cli(["leaderboard", str(sweep), f"out={sweep / 'lb2'}", "bootstrap.samples=20"], runs["env"])
    assert lb.returncode == 0, lb.stderr
    assert len(json.loads((sweep / "lb2" / "leaderboard.json").read_text())["rows"]) == 4  # re-scores not ranked


@pytest.mark.parametrize("args, needle", [(["scoring.formula=cubic"], "unknown scoring.formula 'cubic'"),
                                          (["failure_rules=maybe"], "failure_rules must be on or off"),
                                          ([], "no run directory given")])
def test_rescore_bad_input_is_one_line(runs: dict[str, Any], args: list[str], needle: str) -> None:
    target = [str(runs["sweep"])] if args else []
    res = g.run_cli(["rescore", *target, *args], runs["env"])
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("rubric-engine: error: rescore:") and needle in res.stderr.splitlines()[0]
    help_ = g.run_cli(["rescore", "--help"], runs["env"])
    assert help_.returncode == 0 and "usage: rubric-engine rescore" in help_.stdout


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")  # undefined rho: we give None
def test_length_analysis_in_summary_matches_scipy(runs: dict[str, Any]) -> None:
    for (cand, judge), d in runs["dirs"].items():
        length = json.loads((d / "summary.json").read_text())["length"]
        scored = [s for s in _samples(d) if s["score"] is not None]
        chars = [len(s["response"]) for s in scored]
        toks = [s["tokens"]["candidate"]["completion"] for s in scored]
        scores = [s["score"] for s in scored]
        assert length["questions"] == len(scored) == 15
        assert length["overall"]["chars"]["rho"] == pytest.approx(stats.spearmanr(chars, scores).statistic, abs=1e-12)
        assert length["overall"]["tokens"]["rho"] == pytest.approx(stats.spearmanr(toks, scores).statistic, abs=1e-12)
        assert length["token_measure"].startswith("candidate completion tokens")
        for ab, r in length["abilities"].items():
            pick = [s for s in scored if ab in s["abilities"]]
            ref = stats.spearmanr([len(s["response"]) for s in pick], [s["abilities"][ab]["score"] for s in pick])
            if r["chars"] is None:
                assert len(pick) < 3 or math.isnan(ref.statistic)
            else:
                assert r["chars"]["rho"] == pytest.approx(ref.statistic, abs=1e-12)
                assert r["chars"]["lo"] <= r["chars"]["rho"] <= r["chars"]["hi"]
    assert "Reply length vs score" in runs["output"]


def test_leaderboard_notes_a_strong_length_correlation(runs: dict[str, Any]) -> None:
    strong = {k: json.loads((d / "summary.json").read_text())["length"]["strong"] for k, d in runs["dirs"].items()}
    assert all(strong[(c, g.LENGTH_JUDGE)] for c in CANDS)  # the length-loving judge is caught
    lb = json.loads((runs["sweep"] / "leaderboard.json").read_text())
    assert len(lb["length_notes"]) == sum(bool(v) for v in strong.values())
    assert all("longer replies gain" in n for n in lb["length_notes"])
    assert "correlate strongly" in (runs["sweep"] / "leaderboard.md").read_text(encoding="utf-8")
    assert (runs["sweep"] / "length.png").is_file() and (runs["sweep"] / "length.svg").is_file()
    assert "Reply length vs question score" in (runs["sweep"] / "report.html").read_text(encoding="utf-8")
