"""report.html of a run whose numbers are not fractions of points, in headless Chromium: an MT-Bench-shaped run
(a judge's 1-10 rating per turn) and a pairwise run (a win rate per category) through the console script and the
fake OpenAI-compatible server.

What a reader sees is what is checked: the scale the page states, the colour of each category cell (a low score
is not coloured like a high one), the reply-length chart (its points are drawn, so they lie inside its axes:
counted from the embedded image's pixels and from the SVG `leaderboard` writes) and the title the pairwise spec
gives its categories, on the page and in the leaderboard tables. Skipped with one line when chromium or
chromedriver is missing, except under CI=true (the `driver` fixture of test_report_views.py).
"""

from __future__ import annotations

import colorsys
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, clean_env, model_args
from fakeserver import FakeServer, Reply
from test_report_views import driver  # noqa: F401 - the shared headless-Chromium fixture

from conftest import DATA
MT_MINI = DATA / "mt_bench_mini.jsonl"
# each question's rating (both turns): the categories get 3, 7 and 10, far apart on the 1-10 scale
RATING = {"901": 3, "902": 7, "903": 10, "904": 3, "905": 7, "906": 10}
CATEGORY = {"901": "Writing", "902": "Math", "903": "Coding", "904": "Roleplay", "905": "Reasoning", "906": "STEM"}
ANSWER = re.compile(r"ANSWER (\d+) ")
LABELS = ["A>>B", "A>B", "A=B", "B>A", "B>>A", "A>B", "B>A"]


def _mt_server(rows: list[dict[str, Any]]) -> Any:
    """Candidate: `ANSWER <id> ` and a reply whose length grows with the question; judge: that question's rating."""
    def handle(body: dict[str, Any]) -> Reply:
        msgs = body["messages"]
        if body["model"] != "judge":
            users = [m["content"] for m in msgs if m["role"] == "user"]
            qid = next(str(r["question_id"]) for r in rows if users[-1] in r["turns"])
            return Reply(text=f"ANSWER {qid} " + "word " * (20 * (int(qid) - 900) + 5 * len(users)))
        prompt = "\n".join(m["content"] for m in msgs)
        return Reply(text=f"The reply is judged. Rating: [[{RATING[ANSWER.findall(prompt)[-1]]}]]")
    return handle


def _pairwise_server() -> Any:
    labels = iter(LABELS * 10)

    def handle(body: dict[str, Any]) -> Reply:
        if body["model"] != "judge":
            return Reply(text="candidate reply " * 5)
        return Reply(text=f"My final verdict: [[{next(labels)}]]")
    return handle


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An MT-Bench-shaped run (shipped mt_bench spec, its mini sample) and a pairwise run (the arena_hard spec on
    its mini sample), each with the report.html the run writes."""
    root = tmp_path_factory.mktemp("scaleruns")
    env = clean_env(root)
    rows = [json.loads(x) for x in MT_MINI.read_text().splitlines()]
    out = {"mt": root / "mt", "pw": root / "pw"}
    for name, handler, spec, data in (("mt", _mt_server(rows), "mt_bench", MT_MINI),
                                      ("pw", _pairwise_server(), str(DATA / "pairwise_mini_spec"),
                                       DATA / "pairwise_mini.jsonl")):
        with FakeServer(handler) as srv:
            proc = subprocess.run([EXE, f"benchmark={spec}", f"data.path={data}", *model_args(srv.url),
                                   f"hydra.run.dir={out[name]}", "progress=none"], env=env, capture_output=True,
                                  text=True, timeout=600, cwd=root)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert (out[name] / "report.html").is_file(), proc.stderr[-2000:]
    return out


def _hue(css: str) -> float:
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", css)[:3])
    return 360 * colorsys.rgb_to_hls(r, g, b)[0]


# Counts the strongly coloured pixels of an embedded chart (a scatter point; the axes, ticks and text are grey or
# black), the image drawn onto a canvas as the browser decoded it.
_COLOURED = """
var img=arguments[0],c=document.createElement('canvas');c.width=img.naturalWidth;c.height=img.naturalHeight;
var x=c.getContext('2d');x.drawImage(img,0,0);var d=x.getImageData(0,0,c.width,c.height).data,n=0;
for(var i=0;i<d.length;i+=4){var mx=Math.max(d[i],d[i+1],d[i+2]),mn=Math.min(d[i],d[i+1],d[i+2]);if(mx-mn>60)n++;}
return n;"""


@pytest.mark.slow
def test_mt_bench_page_draws_its_1_to_10_scale(driver, runs: dict[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    summary = json.loads((runs["mt"] / "summary.json").read_text())
    assert summary["scale"]["min"] == 1 and summary["scale"]["max"] == 10
    driver.get((runs["mt"] / "report.html").as_uri())
    text = driver.find_element(By.TAG_NAME, "body").text
    assert "scores 1–10" in text and "scores 0–1." not in text
    heat = driver.find_element(By.CSS_SELECTOR, "table.heat")
    hues = {}
    for row in heat.find_elements(By.CSS_SELECTOR, "tbody tr"):
        label, cell = row.find_elements(By.TAG_NAME, "td")[:2]
        hues[label.text] = _hue(driver.execute_script("return getComputedStyle(arguments[0]).backgroundColor", cell))
    low, mid, high = (hues[CATEGORY[q]] for q in ("901", "902", "903"))
    assert low < mid < high, hues  # red towards green along 1-10
    assert hues["Roleplay"] == low and hues["STEM"] == high
    assert high == pytest.approx(120, abs=2) and low < 60  # a 3 of 10 is not full green
    if "red (1)" not in text:
        pytest.fail(f"the heatmap's note names the bottom of the scale: {text[text.find('Each cell'):][:200]}")
    chart = next(i for i in driver.find_elements(By.CSS_SELECTOR, "figure img")
                 if "length" in (i.get_attribute("alt") or "").lower())
    assert driver.execute_script(_COLOURED, chart) > 30  # the points are drawn, inside the axes


def _axes_and_points(svg: Path) -> tuple[tuple[float, float, float, float], list[tuple[float, float]]]:
    """The axes' rectangle (x0, y0, x1, y1) and the scatter points' centres of a one-panel matplotlib SVG."""
    ns = {"s": "http://www.w3.org/2000/svg", "x": "http://www.w3.org/1999/xlink"}
    root = ET.parse(svg).getroot()
    rect = next(r for r in root.iterfind(".//s:clipPath/s:rect", ns))
    x0, y0 = float(rect.get("x")), float(rect.get("y"))
    box = (x0, y0, x0 + float(rect.get("width")), y0 + float(rect.get("height")))
    points = [(float(u.get("x")), float(u.get("y"))) for g in root.iterfind(".//s:g", ns)
              if (g.get("id") or "").startswith("PathCollection") for u in g.iterfind(".//s:use", ns)]
    return box, points


def test_length_chart_points_lie_inside_its_axes(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "lb"
    res = subprocess.run([EXE, "leaderboard", str(runs["mt"]), f"out={out}"], env=clean_env(tmp_path),
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    (x0, y0, x1, y1), points = _axes_and_points(out / "length.svg")
    assert len(points) == len(RATING)
    assert all(x0 <= x <= x1 and y0 <= y <= y1 for x, y in points), ((x0, y0, x1, y1), points)
    ys = sorted({round(y, 3) for _, y in points})
    assert len(ys) == 3  # 3, 7 and 10 at three heights, 10 highest (smallest SVG y)


@pytest.mark.slow
def test_pairwise_page_titles_its_categories_as_the_spec_does(driver, runs: dict[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    driver.get((runs["pw"] / "report.html").as_uri())
    heads = [h.text for h in driver.find_elements(By.TAG_NAME, "h2")]
    captions = [c.text for c in driver.find_elements(By.TAG_NAME, "figcaption")]
    assert "Win rate by category" in heads, heads
    assert any(c.startswith("Win rate by category") for c in captions), captions
    assert "Subsets" not in captions and "Subsets" not in heads
    assert "scores 0–100" in driver.find_element(By.TAG_NAME, "body").text


def test_pairwise_leaderboard_tables_title_the_categories_as_the_spec_does(runs: dict[str, Path],
                                                                          tmp_path: Path) -> None:
    out = tmp_path / "lb"
    res = subprocess.run([EXE, "leaderboard", str(runs["pw"]), f"out={out}"], env=clean_env(tmp_path),
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    md = (out / "leaderboard.md").read_text()
    for text in (res.stdout, md):
        assert "Subsets" not in text and "Win rate by category, cost" in text, text


@pytest.mark.slow
def test_run_index_compares_the_pairwise_categories_under_the_spec_title_once(
        driver, runs: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    index = tmp_path / "index" / "runs.html"
    res = subprocess.run([EXE, "view", str(runs["pw"].parent), f"out={index}", "open=false"], env=clean_env(tmp_path),
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    driver.get(index.as_uri())
    data = json.loads(driver.find_element(By.ID, "runs-data").get_attribute("textContent"))
    tables = {Path(r["dir"]).name: r["tables"] for r in data}
    assert list(tables["pw"]) == ["Win rate by category"], tables["pw"]  # not again as "Subsets"
    assert list(tables["mt"]) == ["Categories"], tables["mt"]  # as the mt_bench spec names its breakdown
