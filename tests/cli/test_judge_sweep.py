"""A candidate x judge sweep through the console script (mock models, keyless): the leaderboard ranks the
candidates per judge, breakdown tables carry a judge column, paired differences stay inside one judge and never
pair a model with itself, the judges' rankings sit side by side with Kendall's tau-b (checked against scipy), and
every leaderboard warning goes to stderr, the results alone to stdout."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from scipy.stats import kendalltau

from conftest import EXE
from view_runs import CANDIDATES, JUDGES, judge_sweep

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    from conftest import clean_env

    root = tmp_path_factory.mktemp("judges")
    return judge_sweep(root, clean_env(root))


def test_ranked_per_judge_and_pairs_stay_inside_a_judge(sweep) -> None:
    out, _ = sweep
    lb = json.loads((out / "leaderboard.json").read_text())
    rows = lb["rows"]
    assert len(rows) == 9 and len({r["label"] for r in rows}) == 9  # every label names one row
    for judge in JUDGES:
        mine = [r for r in rows if r["judge"] == judge]
        assert sorted(r["candidate"] for r in mine) == sorted(f"{c}" for c in CANDIDATES)
        by_score = sorted(mine, key=lambda r: -r["overall"])
        assert [r["rank"] for r in by_score] == [1, 2, 3] or len({r["overall"] for r in mine}) < 3
    judge_of = {r["label"]: r["judge"] for r in rows}
    cand_of = {r["label"]: r["candidate"] for r in rows}
    assert len(lb["pairs"]) == 6  # adjacent ranks: two per judge
    for p in lb["pairs"]:
        assert judge_of[p["a"]] == judge_of[p["b"]] and cand_of[p["a"]] != cand_of[p["b"]]


def test_judges_side_by_side_with_kendall_tau_b(sweep) -> None:
    out, _ = sweep
    lb = json.loads((out / "leaderboard.json").read_text())
    sec = lb["judges"]
    assert sec["judges"] == list(JUDGES) and sorted(sec["candidates"]) == sorted(CANDIDATES)
    overall = {(r["candidate"], r["judge"]): r["overall"] for r in lb["rows"]}
    rank = {(r["candidate"], r["judge"]): r["rank"] for r in lb["rows"]}
    for t in sec["table"]:
        assert t["by_judge"] == {j: {"label": f"{t['candidate']} [judge {j}]", "rank": rank[(t["candidate"], j)],
                                     "overall": overall[(t["candidate"], j)]} for j in JUDGES}
    assert [(x["a"], x["b"]) for x in sec["tau"]] == [(JUDGES[0], JUDGES[1]), (JUDGES[0], JUDGES[2]),
                                                     (JUDGES[1], JUDGES[2])]
    for x in sec["tau"]:  # every run scored every question: the point is tau-b of the leaderboard's overalls
        ref = kendalltau([overall[(c, x["a"])] for c in CANDIDATES], [overall[(c, x["b"])] for c in CANDIDATES]).statistic
        assert x["tau"] == pytest.approx(ref) and x["candidates"] == 3 and x["questions"] == 15
        assert x["lo"] <= x["tau"] <= x["hi"] and x["error"] is None


def test_tables_have_a_ranking_per_judge_and_a_judge_column(sweep) -> None:
    out, res = sweep
    md = (out / "leaderboard.md").read_text()
    for judge in JUDGES:
        assert f"## heartbench_en 1.0, judge {judge}" in md
    assert "## Judges side by side" in md and "## Rank correlation between judges (Kendall tau-b)" in md
    assert "| Model | Judge | " in md.split("## Dimensions", 1)[1]  # breakdowns: one row per (model, judge)
    assert "mock-a - mock-a" not in md and "mock-b - mock-b" not in md
    text = " ".join(res.stdout.split())
    assert "judge mock-j2: mock-" in text and "Rank correlation between judges" in text
    page = (out / "report.html").read_text()
    assert '<section id="judges">' in page and "Kendall tau-b" in page


def test_leaderboard_warnings_go_to_stderr_results_to_stdout(sweep, tmp_path: Path) -> None:
    out, res = sweep
    assert "warning:" not in res.stdout  # the sweep's own leaderboard
    copy = tmp_path / "sweep"
    shutil.copytree(out, copy)
    failed = copy / "9_candidate=broken"  # a failed job: the leaderboard warns that it is not ranked
    (failed / ".hydra").mkdir(parents=True)
    (failed / "error.txt").write_text("the candidate's server answered 500 every time\n")
    lb = subprocess.run([EXE, "leaderboard", str(copy)], capture_output=True, text=True, timeout=300)
    assert lb.returncode == 0, lb.stderr
    assert "run failed, not ranked" in lb.stderr and "warning:" in lb.stderr
    assert "warning:" not in lb.stdout and "not ranked" not in lb.stdout
    assert "Rank correlation between judges" in lb.stdout and "leaderboard written to" in lb.stdout
    assert "run failed, not ranked" in (copy / "leaderboard.md").read_text()  # the file keeps its warnings
