"""`rubric-engine calibrate` through the console script: a review sheet round trip (review export unit=reply,
labels filled as three raters would, calibrate) on runs made against the fake server; the numbers checked
against the run's own summary, the PPI++ formula restated here and hit rates counted from the sheet; bad
labels stop it with one line, exit 2 and no file written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from test_agree import export, fill, run, verdicts

pytestmark = pytest.mark.slow


@pytest.fixture
def runs(review_runs: list[Path], tmp_path: Path) -> list[Path]:
    """A private copy of the three runs (calibrate writes into run directories; the fixture is shared)."""
    out = []
    for d in review_runs:
        shutil.copytree(d, tmp_path / "runs" / d.name)
        out.append(tmp_path / "runs" / d.name)
    return out


@pytest.fixture(scope="module")
def reply_sheet(review_runs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, str]]:
    """36 whole replies, 12 per candidate (of 15 each)."""
    return export(review_runs, tmp_path_factory.mktemp("calib_sheet"), "n=36", "seed=5", "unit=reply",
                  "stratify=[candidate]")


def _majority(*xs: bool) -> bool:
    return sum(xs) * 2 > len(xs)


def raters(rows: list[dict[str, str]], judge: dict[str, bool], tmp: Path,
           wrong: Callable[[int], bool]) -> tuple[list[Path], dict[str, bool]]:
    """Three raters: ann and bob overturn the judge where `wrong(criterion index)`, cid where index % 5 == 0;
    returns their files and the majority per item key."""
    def label(r: dict[str, str], flip: bool) -> str:
        return "1" if judge[r["item_key"]] ^ flip else "0"

    def idx(r: dict[str, str]) -> int:
        return int(r["criterion_index"])

    files = [fill(rows, tmp / "ann.csv", "ann", lambda i, r: label(r, wrong(idx(r)))),
             fill(rows, tmp / "bob.csv", "bob", lambda i, r: label(r, wrong(idx(r)) or i % 11 == 0)),
             fill(rows, tmp / "cid.csv", "cid", lambda i, r: label(r, idx(r) % 5 == 0))]
    k = [r["item_key"] for r in rows]
    maj = {key: _majority(judge[key] ^ wrong(idx(r)), judge[key] ^ (wrong(idx(r)) or i % 11 == 0),
                          judge[key] ^ (idx(r) % 5 == 0)) for i, (key, r) in enumerate(zip(k, rows))}
    return files, maj


def read(run_dir: Path) -> dict:
    return json.loads((run_dir / "calibration.json").read_text(encoding="utf-8"))


def published(human: np.ndarray, judge: np.ndarray, unl_mean: float, n_unl: int, judge_var_all: float) -> float:
    """PPI++ (Angelopoulos, Duchi, Zrnic 2023): mean(Y) + lambda (mean judge unlabelled - mean judge labelled),
    lambda = clip(cov_n(Y, Yhat) / ((1 + n/N) var(all judge scores)), 0, 1)."""
    n = human.size
    cov = float(np.mean((human - human.mean()) * (judge - judge.mean())))
    lam = min(1.0, max(0.0, cov / ((1 + n / n_unl) * judge_var_all)))
    return float(human.mean() + lam * (unl_mean - judge.mean()))


def test_round_trip_from_the_review_sheet(runs: list[Path], reply_sheet: list[dict[str, str]], tmp_path: Path) -> None:
    judge = verdicts(runs)
    files, maj = raters(reply_sheet, judge, tmp_path, lambda i: i % 4 == 0)  # people overturn every 4th criterion
    res = run("calibrate", str(runs[0].parent), "labels=" + ",".join(map(str, files)))  # a directory of runs, as a sweep's
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("human-corrected") == 3
    sheet_keys = {r["item_key"] for r in reply_sheet}
    for d in runs:
        c = read(d)
        summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
        sc = c["score"]
        assert sc["judge_only"] == pytest.approx(summary["overall"])  # the judge-only score is the run's own
        assert sc["labelled"] == 12 and sc["labelled"] + sc["unlabelled"] == 15
        values = c["values"]  # every reply's contribution to the overall, the people's where labelled
        assert np.mean([v["judge"] for v in values]) == pytest.approx(summary["overall"])
        lab = [v for v in values if v["human"] is not None]
        unl = np.array([v["judge"] for v in values if v["human"] is None])
        h, j = np.array([v["human"] for v in lab]), np.array([v["judge"] for v in lab])
        assert sc["estimate"] == pytest.approx(published(h, j, float(unl.mean()), unl.size,
                                                         float(np.var([v["judge"] for v in values], ddof=1))))
        assert sc["human_only"]["estimate"] == pytest.approx(h.mean())
        ids = {v["id"] for v in lab}
        mine = [k for k in sheet_keys if k in verdicts([d])]
        assert {k.split("#")[0] for k in mine} == ids
        lo, hi = sc["interval"]
        assert lo < sc["estimate"] < hi
        # hit rates over all labelled items, counted from the sheet and the majority of the three raters
        keys = mine
        allg = c["bias"]["(all)"]
        assert allg["n"] == len(keys)
        assert allg["judge_rate"] == pytest.approx(np.mean([judge[k] for k in keys]))
        assert allg["human_rate"] == pytest.approx(np.mean([maj[k] for k in keys]))
        assert set(c["bias"]) - {"(all)"}  # one row per ability too
        assert (d / "calibration.md").read_text(encoding="utf-8").startswith("# Human-corrected score")
        page = (d / "report.html").read_text(encoding="utf-8")  # the run's own page, rebuilt
        assert "Human-corrected scores" in page and f"{sc['estimate']:.2f}" in page
    # the leaderboard shows each corrected score beside the judge's, in leaderboard.md and report.html
    res = run("leaderboard", *map(str, runs), f"out={tmp_path / 'lb'}")
    assert res.returncode == 0, res.stderr
    md = (tmp_path / "lb" / "leaderboard.md").read_text(encoding="utf-8")
    page = (tmp_path / "lb" / "report.html").read_text(encoding="utf-8")
    for d in runs:
        sc = read(d)["score"]
        row = f"| {sc['estimate']:.2f} | [{sc['interval'][0]:.2f}, {sc['interval'][1]:.2f}] | {sc['judge_only']:.2f} |"
        assert row in md, md
        assert f"{sc['estimate']:.2f}" in page and "Human-corrected scores" in page
    # a run changed after calibrate: its stale number is never shown as current
    c = read(runs[0])
    c["score"]["judge_only"] += 1.0
    (runs[0] / "calibration.json").write_text(json.dumps(c), encoding="utf-8")
    res = run("leaderboard", *map(str, runs), f"out={tmp_path / 'lb2'}")
    assert "stale: the run changed since calibrate" in (tmp_path / "lb2" / "leaderboard.md").read_text(encoding="utf-8")


def test_people_who_agree_with_the_judge_change_nothing(runs: list[Path], reply_sheet: list[dict[str, str]],
                                                        tmp_path: Path) -> None:
    judge = verdicts(runs[:1])
    files, _ = raters([r for r in reply_sheet if r["item_key"] in judge], judge, tmp_path, lambda i: False)
    res = run("calibrate", *map(str, runs[:1]), "labels=" + str(files[0]), "power=false")
    assert res.returncode == 0, res.stderr
    c = read(runs[0])["score"]
    # plain PPI: mean judge score of the unlabelled replies + mean(human - judge) over the labelled ones, here 0
    n, big_n = c["labelled"], c["unlabelled"]
    unl_mean = (c["judge_only"] * (n + big_n) - c["judge_on_labelled"] * n) / big_n
    assert c["lambda"] == 1.0 and c["estimate"] == pytest.approx(unl_mean)
    assert c["human_only"]["estimate"] == pytest.approx(c["judge_on_labelled"])
    assert read(runs[0])["bias"]["(all)"]["difference"] == 0.0


def _no_file(dirs: list[Path]) -> None:
    assert not any((d / "calibration.json").exists() or (d / "calibration.md").exists() for d in dirs)


def _one_line_exit_2(res) -> str:  # noqa: ANN001
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rubric-engine: error:"), res.stderr
    return lines[0]


def test_labels_of_other_runs(runs: list[Path], reply_sheet: list[dict[str, str]], tmp_path: Path) -> None:
    rows = [{**r, "item_key": r["item_key"][:-3] + "fff"} for r in reply_sheet]
    f = fill(rows, tmp_path / "other.csv", "ann", lambda i, r: "1")
    line = _one_line_exit_2(run("calibrate", *map(str, runs), f"labels={f}"))
    assert "is not in these runs" in line
    _no_file(runs)


def test_a_run_none_of_the_labels_match(runs: list[Path], reply_sheet: list[dict[str, str]], tmp_path: Path) -> None:
    judge = verdicts(runs[:1])
    rows = [r for r in reply_sheet if r["item_key"] in judge]  # cand_a's replies only, calibrating all three runs
    f = fill(rows, tmp_path / "a.csv", "ann", lambda i, r: "1")
    line = _one_line_exit_2(run("calibrate", *map(str, runs), f"labels={f}"))
    assert "no reply of this run is labelled whole" in line and "unit=reply" in line
    _no_file(runs)


def test_too_few_labels_for_an_interval(runs: list[Path], reply_sheet: list[dict[str, str]], tmp_path: Path) -> None:
    judge = verdicts(runs[:1])
    replies = sorted({r["item_key"].split("#")[0] for r in reply_sheet if r["item_key"] in judge})[:4]
    rows = [r for r in reply_sheet if r["item_key"] in judge and r["item_key"].split("#")[0] in replies]
    f = fill(rows, tmp_path / "few.csv", "ann", lambda i, r: "1")
    line = _one_line_exit_2(run("calibrate", str(runs[0]), f"labels={f}"))
    assert "4 labelled" in line and "at least 10" in line and "review export unit=reply" in line
    _no_file(runs)


def test_item_labels_are_not_whole_replies(runs: list[Path], tmp_path: Path) -> None:
    rows = export(runs[:1], tmp_path / "items", "n=20", "unit=item")
    f = fill(rows, tmp_path / "items.csv", "ann", lambda i, r: "1")
    line = _one_line_exit_2(run("calibrate", str(runs[0]), f"labels={f}"))
    assert "labelled whole" in line
    _no_file(runs[:1])


def test_raters_mean_is_the_mean_of_each_raters_values(runs: list[Path], reply_sheet: list[dict[str, str]],
                                                       tmp_path: Path) -> None:
    judge = verdicts(runs[:1])
    files, _ = raters([r for r in reply_sheet if r["item_key"] in judge], judge, tmp_path, lambda i: i % 3 == 0)
    each = []
    for f in files:  # one rater alone: the majority is that rater
        assert run("calibrate", str(runs[0]), f"labels={f}").returncode == 0
        each.append({v["id"]: v["human"] for v in read(runs[0])["values"] if v["human"] is not None})
    res = run("calibrate", str(runs[0]), "labels=" + ",".join(map(str, files)), "raters=mean")
    assert res.returncode == 0, res.stderr
    mean = {v["id"]: v["human"] for v in read(runs[0])["values"] if v["human"] is not None}
    assert set(mean) == set(each[0]) and len(mean) == 12
    assert all(mean[q] == pytest.approx(sum(e[q] for e in each) / 3) for q in mean)
    assert read(runs[0])["raters"] == "mean" and read(runs[0])["human_raters"] == ["ann", "bob", "cid"]


def test_bad_options(runs: list[Path], tmp_path: Path) -> None:
    f = tmp_path / "x.jsonl"
    f.write_text("", encoding="utf-8")
    assert "raters=majority or raters=mean" in _one_line_exit_2(run("calibrate", str(runs[0]), f"labels={f}",
                                                                     "raters=median"))
    assert "by=colour: no item has this field" in _one_line_exit_2(run("calibrate", str(runs[0]), f"labels={f}",
                                                                        "by=colour"))
    assert "no labels file given" in _one_line_exit_2(run("calibrate", str(runs[0])))
    _no_file(runs[:1])
