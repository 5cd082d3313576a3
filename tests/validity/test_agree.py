"""`rubric-engine agree` through the console script: numbers checked against independent
computations (scikit-learn, counts by hand), bad labels files rejected with file and row."""

from __future__ import annotations

import csv
import hashlib
import html
import json
import re
import subprocess
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from agree_runs import EXE
from test_review import read_sheet

pytestmark = pytest.mark.slow


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120)


def verdicts(run_dirs: list[Path]) -> dict[str, bool]:
    """item key -> the judge's hit, read straight from samples.jsonl."""
    out = {}
    for d in run_dirs:
        for line in (d / "samples.jsonl").read_text(encoding="utf-8").splitlines():
            s = json.loads(line)
            rid = hashlib.sha256(s["response"].encode("utf-8")).hexdigest()[:10]
            for c in s["criteria"]:
                out[f"{s['id']}#{c['index']}@{rid}"] = c["hit"]
    return out


def export(run_dirs: list[Path], out: Path, *opts: str) -> list[dict[str, str]]:
    res = run("review", "export", *map(str, run_dirs), f"out={out}", *opts)
    assert res.returncode == 0, res.stderr
    return read_sheet(out / "review.csv")


def fill(rows: list[dict[str, str]], path: Path, rater: str, met: Callable[[int, dict[str, str]], Any]) -> Path:
    """A filled-in copy of review.csv, as a spreadsheet user would save it."""
    with path.open("w", encoding="utf-8-sig", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for i, r in enumerate(rows):
            w.writerow({**r, "rater": rater, "met": met(i, r)})
    return path


def b(x: bool) -> str:
    return "1" if x else "0"


@pytest.fixture(scope="module")
def sheet(review_runs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, str]]]:
    out = tmp_path_factory.mktemp("agree_sheet")
    return out, export(review_runs, out, "n=60", "seed=3")


def test_numbers_match_independent_computation(review_runs: list[Path], sheet: tuple, tmp_path: Path) -> None:
    out, rows = sheet
    judge = verdicts(review_runs)
    keys = [r["item_key"] for r in rows]
    ann = [judge[k] ^ (i % 5 == 0) for i, k in enumerate(keys)]
    bob = [judge[k] ^ (i % 7 == 0) for i, k in enumerate(keys)]
    fa = fill(rows, tmp_path / "ann.csv", "ann", lambda i, r: b(ann[i]))
    fb = fill(rows, tmp_path / "bob.csv", "bob", lambda i, r: ["no", "yes"][bob[i]])
    res = run("agree", *map(str, review_runs), f"labels={fa},{fb}", f"out={tmp_path / 'agr'}", "n_boot=300")
    assert res.returncode == 0, res.stderr
    result = json.loads((tmp_path / "agr" / "agreement.json").read_text(encoding="utf-8"))
    pairs = {(p["a"], p["b"]): p for p in result["pairs"]}
    j = [judge[k] for k in keys]

    vs_ann = pairs[("judge:judge", "ann")]
    assert vs_ann["n"] == 60 and vs_ann["raw"] == pytest.approx(np.mean(np.array(j) == np.array(ann)))
    assert vs_ann["cohen_kappa"] == pytest.approx(cohen_kappa_score(j, ann))
    not_met = [i for i in range(60) if not ann[i]]
    assert vs_ann["false_pass"] == pytest.approx(sum(j[i] for i in not_met) / len(not_met))
    assert vs_ann["chance_floor"] == pytest.approx(max(np.mean(ann), 1 - np.mean(ann)))

    agree_idx = [i for i in range(60) if ann[i] == bob[i]]  # ties (ann != bob) have no majority
    maj = pairs[("judge:judge", "human majority")]
    assert maj["n"] == len(agree_idx) < 60
    assert maj["cohen_kappa"] == pytest.approx(cohen_kappa_score([j[i] for i in agree_idx], [ann[i] for i in agree_idx]))
    assert maj["ceiling"]["raw"] == pytest.approx(len(agree_idx) / 60)
    assert pairs[("ann", "bob")]["raw"] == pytest.approx(len(agree_idx) / 60)
    for key in ("cohen_kappa", "gwet_ac1", "krippendorff_alpha", "false_pass", "false_fail"):
        lo, hi = maj["ci"][key]
        assert lo <= maj[key] <= hi
    assert any(f"{60 - len(agree_idx)} item(s) with a tie" in w for w in result["warnings"])
    assert set(result["by"]["judge:judge"]) >= {"ability", "dimension", "subset", "candidate", "weight_sign", "reply_length"}
    assert sum(g["n"] for g in result["by"]["judge:judge"]["subset"].values()) == maj["n"]
    assert sum(g["n"] for g in result["by"]["judge:judge"]["reply_length"].values()) == maj["n"]
    assert set(result["by"]["judge:judge"]["candidate"]) <= {"cand_a", "cand_b", "cand_c"}
    assert result["humans"]["raters"] == ["ann", "bob"] and result["humans"]["krippendorff_alpha"] is not None
    md = (tmp_path / "agr" / "agreement.md").read_text(encoding="utf-8")
    head = md.splitlines()[2]
    assert head.startswith("judge:judge vs the human majority") and f"raw agreement {100 * maj['raw']:.1f}%" in head
    assert f"(a constant rater would get {100 * maj['chance_floor']:.1f}%)" in head and "concentrated in" in head
    assert head in res.stdout
    page = (tmp_path / "agr" / "agreement.html").read_text(encoding="utf-8")
    assert "<script" not in page and not re.search(r"https?:|url\(", page)
    assert html.escape(head) in page and page.count("<table>") == (
        2 + len(result["by"]["judge:judge"]) + bool(result["score_level"]["judge:judge"]["candidates"]))
    n_dis = sum(d["disagreements"] for d in result["disputed"]["judge:judge"])
    assert 0 < n_dis <= sum(maj["disagreements"].values())


def test_score_level_and_rankings(review_runs: list[Path], tmp_path: Path) -> None:
    rows = export(review_runs, tmp_path / "s", "n=45", "unit=reply", "stratify=subset")
    judge = verdicts(review_runs)
    f = fill(rows, tmp_path / "h.csv", "h", lambda i, r: b(judge[r["item_key"]]))
    res = run("agree", *map(str, review_runs), f"labels={f}", f"out={tmp_path / 'agr'}", "n_boot=200")
    assert res.returncode == 0, res.stderr
    result = json.loads((tmp_path / "agr" / "agreement.json").read_text(encoding="utf-8"))
    sl = result["score_level"]["judge:judge"]
    assert sl["replies"] == 45 and sl["mean_difference"]["mean"] == pytest.approx(0.0)
    assert sl["spearman"] == pytest.approx(1.0) and sl["kendall_tau"] == pytest.approx(1.0)
    for d in review_runs:  # the judge's side equals what the run itself scored
        scores = [json.loads(x)["score"] for x in (d / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
        assert sl["candidates"][d.name]["judge"] == pytest.approx(100 * np.mean(scores))
    assert "one rater" in result["humans"]["note"]
    assert result["pairs"][0]["ceiling"] is None


def test_degenerate_one_class_is_stated(review_runs: list[Path], sheet: tuple, tmp_path: Path) -> None:
    out, rows = sheet
    judge = verdicts(review_runs)
    keep = [r for r in rows if not judge[r["item_key"]]]
    f = fill(keep, tmp_path / "no.csv", "solo", lambda i, r: "false")
    res = run("agree", *map(str, review_runs), f"labels={f}", f"out={tmp_path / 'agr'}", "n_boot=100")
    assert res.returncode == 0, res.stderr
    p = json.loads((tmp_path / "agr" / "agreement.json").read_text(encoding="utf-8"))["pairs"][0]
    assert p["cohen_kappa"] is None and p["gwet_ac1"] == pytest.approx(1.0)
    assert any("kappa undefined" in n for n in p["notes"])
    assert "read AC1" in res.stdout


def test_no_comparable_item_is_one_line(review_runs: list[Path], sheet: tuple, tmp_path: Path) -> None:
    out, rows = sheet
    fa = fill(rows, tmp_path / "a.csv", "a", lambda i, r: "1")
    fb = fill(rows, tmp_path / "b.csv", "b", lambda i, r: "0")  # every item a tie: no majority anywhere
    res = run("agree", *map(str, review_runs), f"labels={fa},{fb}", f"out={tmp_path / 'agr'}")
    assert res.returncode == 2 and "no item is both labelled by the humans and judged" in res.stderr
    assert len(res.stderr.splitlines()) == 1 and "Traceback" not in res.stderr


def test_blank_and_unsure_are_counted(review_runs: list[Path], sheet: tuple, tmp_path: Path) -> None:
    out, rows = sheet
    f = fill(rows, tmp_path / "part.csv", "p", lambda i, r: ["1", "", "unsure", "0"][i % 4])
    res = run("agree", *map(str, review_runs), f"labels={f}", f"out={tmp_path / 'agr'}", "n_boot=50")
    assert res.returncode == 0, res.stderr
    assert "15 row(s) with no label (blank) not used" in res.stderr
    assert "15 row(s) marked unsure not used" in res.stderr
    result = json.loads((tmp_path / "agr" / "agreement.json").read_text(encoding="utf-8"))
    assert result["pairs"][0]["n"] == 30 and len(result["warnings"]) == 2


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_bad_labels_files_one_line_with_file_and_row(review_runs: list[Path], sheet: tuple, tmp_path: Path) -> None:
    out, rows = sheet
    good = {"question_id": rows[0]["question_id"], "criterion_index": int(rows[0]["criterion_index"]), "rater": "x", "met": 1}
    other_sheet = dict(good, item_key=rows[0]["item_key"].split("@")[0] + "@0000000000", sheet_id="Sdeadbeef")
    cases = [
        ([good, dict(good, item_key=rows[1]["item_key"]), other_sheet], review_runs, 3, "is not in these runs"),
        ([dict(good, met="maybe")], review_runs[:1], 1, "is not one of 1/0/true/false/yes/no"),
        ([dict(good, criterion_index=99)], review_runs[:1], 1, "criterion_index 99 out of range"),
        ([good, dict(good, met=0)], review_runs[:1], 2, "labelled item"),
        ([dict(good, benchmark="heartbench")], review_runs[:1], 1, "labels for benchmark 'heartbench'"),
        ([dict(good, question_id="nope")], review_runs[:1], 1, "question_id 'nope' is not in these runs"),
        ([good], review_runs, 1, "is ambiguous"),
        ([dict(good, rater="")], review_runs[:1], 1, "no rater"),
    ]
    for i, (labels, dirs, row, needle) in enumerate(cases):
        if i == 0:
            labels = [dict(lab, item_key=lab.get("item_key", rows[0]["item_key"])) for lab in labels]
            labels[1] = dict(labels[1], question_id=rows[1]["question_id"], criterion_index=int(rows[1]["criterion_index"]))
        f = _jsonl(tmp_path / f"case{i}.jsonl", labels)
        res = run("agree", *map(str, dirs), f"labels={f}", f"out={tmp_path / 'agr'}")
        assert res.returncode == 2, (needle, res.stdout, res.stderr)
        first = res.stderr.splitlines()[0]
        assert f"{f}:{row}:" in first and needle in first, (needle, first)
        assert len(res.stderr.splitlines()) == 1
    bad_csv = tmp_path / "cols.csv"
    bad_csv.write_text("question_id,met\nenq001,1\n", encoding="utf-8")
    res = run("agree", str(review_runs[0]), f"labels={bad_csv}")
    assert res.returncode == 2 and f"{bad_csv}:1: missing column(s) criterion_index, rater" in res.stderr
    res = run("agree", str(review_runs[0]))
    assert res.returncode == 2 and "no labels file given" in res.stderr
    res = run("agree", "--help")
    assert res.returncode == 0 and "usage: rubric-engine agree" in res.stdout


def test_external_labels_without_item_key(review_runs: list[Path], tmp_path: Path) -> None:
    """Labels from another tool: question_id, criterion_index, rater, met only, on a single-candidate run."""
    judge = verdicts(review_runs[:1])
    labels = [{"question_id": k.split("#")[0], "criterion_index": int(k.split("#")[1].split("@")[0]),
               "rater": "ext", "met": ["no", "yes"][v]} for k, v in judge.items()]
    f = _jsonl(tmp_path / "ext.jsonl", labels)
    res = run("agree", str(review_runs[0]), f"labels={f}", "n_boot=100")
    assert res.returncode == 0, res.stderr
    result = json.loads((review_runs[0] / "agreement" / "agreement.json").read_text(encoding="utf-8"))
    p = result["pairs"][0]
    assert p["n"] == len(judge) and p["raw"] == 1.0 and p["cohen_kappa"] == pytest.approx(1.0)
    assert result["score_level"]["judge:judge"]["replies"] == 15


def test_extra_item_fields_are_tolerated_and_grouped(review_runs: list[Path], tmp_path: Path) -> None:
    """Fields another spec adds (e.g. criterion tags, a list) pass through to breakdowns and strata."""
    import shutil

    run_dir = tmp_path / "tagged"
    shutil.copytree(review_runs[0], run_dir, ignore=shutil.ignore_patterns("agreement"))
    samples = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    for s in samples:
        s["site"] = "north" if s["id"] < "enq008" else "south"
        for c in s["criteria"]:
            c["tags"] = ["even"] if c["index"] % 2 == 0 else ["odd", "any"]
    (run_dir / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")
    judge = verdicts([run_dir])
    labels = [{"question_id": k.split("#")[0], "criterion_index": int(k.split("#")[1].split("@")[0]),
               "rater": "ext", "met": int(v)} for k, v in judge.items()]
    f = _jsonl(tmp_path / "ext.jsonl", labels)
    res = run("agree", str(run_dir), f"labels={f}", "by=[tags,site]", f"out={tmp_path / 'agr'}", "n_boot=50")
    assert res.returncode == 0, res.stderr
    by = json.loads((tmp_path / "agr" / "agreement.json").read_text(encoding="utf-8"))["by"]["judge:judge"]
    n_even = sum(1 for k in judge if int(k.split("#")[1].split("@")[0]) % 2 == 0)
    assert by["tags"]["even"]["n"] == n_even and by["tags"]["odd"]["n"] == by["tags"]["any"]["n"] == len(judge) - n_even
    assert set(by["site"]) == {"north", "south"}
    res = run("agree", str(run_dir), f"labels={f}", "by=colour")
    assert res.returncode == 2 and "by=colour: no item has this field" in res.stderr
    res = run("review", "export", str(run_dir), "n=10", "stratify=[site]", f"out={tmp_path / 'sheet'}")
    assert res.returncode == 0, res.stderr
