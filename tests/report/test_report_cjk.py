"""report.html of a Chinese-language run: provenance, the mock banner, and Chinese that renders on a machine
without CJK fonts, in the page (an embedded font subset, checked in headless Chromium at desktop and phone
width) and in the charts (matplotlib finds every glyph).

The run is made by the console script on the project's HeartBench-shaped sample (tests/data) against the fake
OpenAI-compatible server; the candidate has a Chinese name, so the charts carry Chinese too.
"""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from conftest import MINI, QuestionScript, clean_env, read_rows, run_cli
from fakeserver import FakeServer, Reply
from test_html_report import _page
from test_report_views import driver  # noqa: F401 - the headless Chromium fixture

ROWS, BY_ID = read_rows(MINI)
CAND = "候选甲"  # the candidate's display name: Chinese in every chart's legend or axis
TAG = re.compile(r"\[(mq\w+)\]")


class Script(QuestionScript):
    """The candidate answers in Chinese, tagged with the question; the judge meets every other item."""

    def __init__(self) -> None:
        super().__init__(ROWS)

    def candidate(self, model: str, qid: str) -> Reply:
        return Reply(text=f"[{qid}] 我听见了你的心慌，先深呼吸一下。<script>window.PWNED=1</script>", usage=(30, 20))

    def judge(self, model: str, text: str) -> Reply:
        qid = TAG.search(text).group(1)  # type: ignore[union-attr]
        return self.verdict(len(BY_ID[qid]["rubric"]), lambda i: i % 2 == 1, lambda i: f"第{i}条：符合")


def _args(url: str) -> list[str]:
    return ["benchmark=heartbench", f"data.path={MINI}", "progress=plain", "bootstrap.samples=50",
            "candidate=openai_compatible", "candidate.model=openai/cand", f"candidate.api_base={url}",
            f"candidate.name='{CAND}'", "candidate.api_key_env=FAKE_KEY", "candidate.params.temperature=0.3",
            "judge=openai_compatible", "judge.model=openai/judge", f"judge.api_base={url}", "judge.name=judge",
            "judge.api_key_env=FAKE_KEY"]


@pytest.fixture(scope="module")
def cjk_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("cjk")
    env = clean_env(root)
    run_dir = root / "run"
    with FakeServer(Script()) as srv:
        res = run_cli([*_args(srv.url), f"hydra.run.dir={run_dir}"], env)
    assert res.returncode == 0, res.stderr
    return {"dir": run_dir, "env": env, "stderr": res.stderr, "root": root}


def test_run_records_provenance(cjk_run: dict[str, Any]) -> None:
    summary = json.loads((cjk_run["dir"] / "summary.json").read_text(encoding="utf-8"))
    prov = summary["provenance"]
    assert prov["engine_version"] == version("rubric-engine") and prov["litellm"] == version("litellm")
    assert prov["command"].startswith("rubric-engine ") and "benchmark=heartbench" in prov["command"]
    assert CAND in prov["command"]  # shell-quoted as typed
    assert f"hydra.run.dir={cjk_run['dir']}" in prov["command"] and "hydra.mode" not in prov["command"]
    models = {m["role"]: m for m in prov["models"]}
    assert models["candidate"]["model"] == "openai/cand" and models["candidate"]["params"] == {"temperature": 0.3}
    assert models["judge"]["name"] == "judge" and not any(m["mock"] for m in prov["models"])
    for name in ("summary.json", "report.html", "manifest.json"):  # the key's value is nowhere
        assert "sk-test" not in (cjk_run["dir"] / name).read_text(encoding="utf-8")


def test_report_shows_provenance_and_no_mock_banner(cjk_run: dict[str, Any]) -> None:
    summary = json.loads((cjk_run["dir"] / "summary.json").read_text(encoding="utf-8"))
    html_text = (cjk_run["dir"] / "report.html").read_text(encoding="utf-8")
    block = html_text[html_text.index('<h2 id="provenance">'):]
    block = "".join(_page_text(block[:block.index("<h2>", 10)]))
    for value in (summary["created"], summary["spec_hash"], summary["data_sha256"], summary["run_id"],
                  f"rubric-engine {version('rubric-engine')}", "openai/cand", '{"temperature": 0.3}', "temperature",
                  summary["provenance"]["command"]):
        assert value in block, value
    assert 'class="mock"' not in html_text


def _page_text(fragment: str) -> list[str]:
    from test_html_report import Page

    page = Page()
    page.feed(fragment)
    return page.text


def test_mock_run_has_a_banner(tmp_path: Path) -> None:
    res = run_cli(["benchmark=heartbench", f"data.path={MINI}", "candidate=mock", "judge=mock", "limit=2",
                   "progress=plain", "bootstrap.samples=20", f"hydra.run.dir={tmp_path / 'run'}"], clean_env(tmp_path))
    assert res.returncode == 0, res.stderr
    text = "".join(_page(tmp_path / "run" / "report.html").text)
    assert "Mock models: mock-candidate (candidate, mock-candidate), mock-judge (judge, mock-candidate)" in text
    assert "measure nothing" in text


def _embedded_font(html_text: str) -> Any:
    from fontTools.ttLib import TTFont

    m = re.search(r'@font-face\{font-family:"rubric-engine CJK";[^}]*src:url\(data:font/(\w+);base64,([A-Za-z0-9+/=]+)\)',
                  html_text)
    assert m, "no embedded CJK font"
    return TTFont(io.BytesIO(base64.b64decode(m.group(2))))


def test_page_embeds_a_font_covering_its_chinese(cjk_run: dict[str, Any]) -> None:
    html_text = (cjk_run["dir"] / "report.html").read_text(encoding="utf-8")
    assert "font-src data:" in html_text  # the page's CSP lets the embedded font load, and nothing else
    font = _embedded_font(html_text)
    cmap = font.getBestCmap()
    used = {ord(c) for c in html_text if ord(c) >= 0x2E80}
    assert {ord(c) for c in "我听见心慌候选甲温暖"} <= used
    assert used <= set(cmap), sorted(chr(c) for c in used - set(cmap))[:10]
    assert len(cmap) < len(used) + 400  # a subset of the page's characters, not the whole 65k-glyph face
    assert "SIL Open Font License" in " ".join(str(r) for r in font["name"].names)  # the licence travels
    assert "url(" not in html_text.replace("url(data:font/", "")  # the font is the only url(), and it is data


def test_the_face_covers_exactly_the_pages_cjk_characters(cjk_run: dict[str, Any]) -> None:
    """The face's unicode-range is the page's CJK characters, no more: with the face first in the font list, every
    other character goes straight past it to the system fonts."""
    html_text = (cjk_run["dir"] / "report.html").read_text(encoding="utf-8")
    m = re.search(r'@font-face\{font-family:"rubric-engine CJK";[^}]*unicode-range:([^;]+);', html_text)
    assert m, "the face declares no unicode-range"
    declared: set[int] = set()
    for span in m.group(1).split(","):
        lo, _, hi = span.removeprefix("U+").partition("-")
        declared |= set(range(int(lo, 16), int(hi or lo, 16) + 1))
    assert declared == {ord(c) for c in html_text if ord(c) >= 0x2E80}


def test_unicode_range_joins_consecutive_code_points() -> None:
    from rubric_engine.report.fonts import unicode_range

    assert unicode_range([0x4E00, 0x4E01, 0x4E02, 0x6C34]) == "U+4E00-4E02,U+6C34"
    assert unicode_range([0x6C34]) == "U+6C34"
    assert unicode_range([0x3000, 0x3002, 0x3003, 0x20000]) == "U+3000,U+3002-3003,U+20000"


def test_every_page_a_person_reads_leads_with_the_face() -> None:
    """report.html, runs.html, the raters' review.html and the criteria page: the embedded face is the first family
    of the body's font list (text/pagefonts.py says why a face listed after the system fonts drew boxes)."""
    from rubric_engine.authoring import criteria_page
    from rubric_engine.report import html_page, index_page
    from rubric_engine.validity import review_page

    for css in (html_page._CSS, index_page._CSS, review_page.CSS, criteria_page.CSS):  # noqa: SLF001
        body = re.search(r"body\{font-family:([^;]+);", css)
        assert body and body.group(1).startswith('"rubric-engine CJK",system-ui,'), css[:120]


def test_charts_of_the_run_draw_chinese_without_missing_glyphs(cjk_run: dict[str, Any], tmp_path: Path) -> None:
    """The leaderboard rebuilt by the console script: charts with the Chinese candidate name, and matplotlib
    (which warns 'Glyph ... missing from font(s)') found every glyph."""
    res = run_cli(["leaderboard", str(cjk_run["dir"]), f"out={tmp_path}", "bootstrap.samples=20"], cjk_run["env"])
    assert res.returncode == 0, res.stderr
    assert "missing from font" not in res.stderr and "Glyph" not in res.stderr
    assert (tmp_path / "subsets.png").is_file() and (tmp_path / "length.png").is_file()  # both name the candidate


def test_chart_font_is_the_cjk_face_and_the_check_catches_boxes(tmp_path: Path) -> None:
    import matplotlib
    from matplotlib import font_manager

    from rubric_engine.report import charts
    from rubric_engine.report.fonts import CJK_FAMILY, chart_fonts, cjk_font

    found = cjk_font()
    assert found is not None, "the CJK font package is a dependency"
    labels = ["温暖", "好奇心", "情绪应对"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        charts.radar_chart(labels, {CAND: [50.0, 60.0, 70.0]}, tmp_path / "radar", title="能力", formats=("png",))
    assert not [w for w in caught if "missing from font" in str(w.message)]
    with matplotlib.rc_context(chart_fonts()):
        path = font_manager.findfont(font_manager.FontProperties(family=CJK_FAMILY), fallback_to_default=False)
    assert Path(path) == found[0]
    # the same chart without the fallback: DejaVu Sans alone misses every glyph (so the check above can fail)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}):
            fig, ax = charts._figure(2, 2)  # noqa: SLF001
            ax.set_title("温暖")
            fig.savefig(io.BytesIO(), format="png")
    assert [w for w in caught if "missing from font" in str(w.message)]


# ---- in a real browser: screenshots at desktop and phone width, and no glyph drawn as a box ----

_GLYPHS = """
var done=arguments[arguments.length-1];
document.fonts.load('16px "rubric-engine CJK"','温暖').then(function(faces){
  function draw(text,family){var c=document.createElement('canvas');c.width=120;c.height=60;
    var x=c.getContext('2d');x.fillStyle='#fff';x.fillRect(0,0,120,60);x.fillStyle='#000';
    x.font='40px '+family;x.fillText(text,5,45);return c.toDataURL();}
  var page=getComputedStyle(document.body).fontFamily;
  var face=null;document.fonts.forEach(function(f){if(f.family.replace(/"/g,'')==='rubric-engine CJK')face=f;});
  done({loaded:faces.length,status:face?face.status:null,family:page,
        a:draw('温',page),b:draw('暖',page),box:draw('\\uffff',page),
        bareA:draw('温','"DejaVu Sans"'),bareB:draw('暖','"DejaVu Sans"')});
});
"""


def _system_has_cjk_font() -> bool:
    try:
        out = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return True  # unknown: do not claim the machine draws boxes
    return bool(out.strip())


@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 390])
def test_chinese_renders_in_chromium(cjk_run: dict[str, Any], driver, width: int, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    report = cjk_run["dir"] / "report.html"
    driver.set_window_size(width, 1400)
    driver.get(report.as_uri())
    assert driver.execute_script("return window.PWNED === undefined")  # the reply's script stayed text
    got = driver.execute_async_script(_GLYPHS)
    assert got["loaded"] >= 1 and got["status"] == "loaded", got  # the embedded face is the one in use
    assert got["family"].startswith('"rubric-engine CJK", system-ui'), got["family"]  # the face leads the list
    # two different characters drawn in the page's font differ, and neither is the missing-glyph box
    assert got["a"] != got["b"] and got["box"] not in (got["a"], got["b"])
    if not _system_has_cjk_font():  # here the check is not vacuous: without the embedded font, boxes
        assert got["bareA"] == got["bareB"]
    assert driver.execute_script("return document.documentElement.scrollWidth") <= width
    driver.find_element(By.CSS_SELECTOR, "#drill details.model summary").click()
    question = driver.find_element(By.CSS_SELECTOR, "#drill details.q summary")
    question.click()  # the first question open: its Chinese dialogue and reply on screen
    driver.execute_script("arguments[0].scrollIntoView()", question)
    shot = tmp_path / f"report-{width}.png"
    driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 20_000


def test_without_the_font_package_the_page_says_so(cjk_run: dict[str, Any], tmp_path: Path) -> None:
    """An install without noto-cjk-sans-otc: no embedded font, and one line at the top of the page saying why
    its Chinese may show as boxes and what to install (never a silent fallback)."""
    import sys

    shim = tmp_path / "shim" / "noto_cjk_sans_otc"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('not installed')\n", encoding="utf-8")
    code = ("import sys; from pathlib import Path; from rubric_engine.report.leaderboard import write_leaderboard; "
            "from rubric_engine.results.leaderboard import build_leaderboard; from rubric_engine.store.runs import "
            f"collect_runs; write_leaderboard(build_leaderboard(collect_runs([Path(sys.argv[1])]), n_boot=20), "
            "Path(sys.argv[2]))")
    env = {**cjk_run["env"], "PYTHONPATH": str(tmp_path / "shim")}
    res = subprocess.run([sys.executable, "-c", code, str(cjk_run["dir"]), str(tmp_path / "out")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    html_text = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "@font-face" not in html_text and "pip install noto-cjk-sans-otc" in html_text
    assert "我听见了你的心慌" in html_text  # the text itself is all there
