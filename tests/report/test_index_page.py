"""The run index page from typed rows (report/index_page.py), in process: text from run directories stays text (a
model name cannot become markup or end the data block), links are relative to the index, and an edited summary's
non-numbers never reach the page as numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rubric_engine.report.index_page import relative_link, render_index
from rubric_engine.results.runindex import RunEntry, scan_runs

HOSTILE = '</script><img src=x onerror="window.PWNED=1"><b>x</b>'


def _entry(run: Path, **kw) -> RunEntry:
    base = dict(dir=run, state="finished", reason="", benchmark="bench", candidate=HOSTILE, candidate_model="m",
                judge="j", judge_model="jm", sweep=None, started="2026-11-25T07:00:00+00:00", overall=50.0, lo=40.0,
                hi=60.0, questions=3, scored=3, wall_seconds=75.0, cost=0.25, cost_partial=True,
                report=run / "report.html", tables={"Topics": {HOSTILE: 12.5}})
    base.update(kw)
    return RunEntry(**base)


def test_hostile_text_stays_text_and_links_are_relative(tmp_path: Path) -> None:
    run = tmp_path / "outputs" / "b" / "r1"
    run.mkdir(parents=True)
    index = tmp_path / "site" / "runs.html"
    page = render_index([_entry(run)], [tmp_path / "outputs"], relative_link(index))
    assert "<img" not in page and "<b>x</b>" not in page and "onerror=\"window" not in page
    assert page.count("</script>") == 2  # the data block's and the script's own, none from the run
    data = re.search(r'<script type="application/json" id="runs-data">(.*?)</script>', page, re.S).group(1)
    assert json.loads(data)[0]["candidate"] == HOSTILE and json.loads(data)[0]["tables"]["Topics"] == {HOSTILE: 12.5}
    assert 'href="../outputs/b/r1/report.html"' in page
    assert "0.2500 + ?" in page and "1 min 15 s" in page and "[40.00, 60.00]" in page


def test_an_edited_summary_gives_no_number(tmp_path: Path) -> None:
    run = tmp_path / "r"
    run.mkdir()
    summary = {"benchmark": "b", "candidate": {"name": "c", "model": "m"}, "judge": {"name": "j", "model": "n"},
               "overall": "NaN", "interval": {"lo": None, "hi": True}, "counts": {"questions": 2, "scored": 2},
               "cost": {"candidate": None, "judge": 0.5}, "dimensions": {"d": float("nan")}}
    (run / "summary.json").write_text(json.dumps(summary))
    (e,) = scan_runs([tmp_path])
    assert e.state == "finished" and e.overall is None and e.lo is None and e.hi is None
    assert (e.cost, e.cost_partial) == (0.5, True) and e.tables == {"Dimensions": {"d": None}}
    assert "NaN" not in render_index([e], [tmp_path], relative_link(tmp_path / "i.html"))
