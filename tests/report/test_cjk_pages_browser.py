"""Every HTML page a person reads draws its Chinese in the embedded face, in headless Chromium: report.html (with
its drill-down opened only after the page loaded, as a reader does), the raters' review.html and `view`'s runs.html.

Chromium's own account of which font drew each text (the DevTools protocol's `CSS.getPlatformFontsForNode`, as
DevTools' "Rendered Fonts" shows it) is read for every element holding Chinese: a text drawn in a system font
is a box on a machine without CJK fonts, and a wrong font on one with them. The test does not load the font
itself (no `document.fonts.load`), so a face that loads too late is seen as the reader sees it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import MINI, clean_env, run_cli
from test_report_views import driver  # noqa: F401 - the shared headless-Chromium fixture

pytestmark = pytest.mark.slow

NAME = "候选甲"  # the candidate's display name: Chinese in runs.html too

_MARK = """
var n=0;
document.querySelectorAll('details').forEach(function(d){d.open=true;});
document.querySelectorAll('body *').forEach(function(el){
  for (var i=0;i<el.childNodes.length;i++){var c=el.childNodes[i];
    if(c.nodeType===3&&el.tagName!=="SCRIPT"&&/[\\u3000-\\u9fff\\uff00-\\uffef]/.test(c.textContent)){el.setAttribute('data-cjk',String(n++));break;}}
});
return n;
"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cjkpages")
    env = clean_env(root)
    run = root / "runs" / "run"
    res = run_cli(["benchmark=heartbench", f"data.path={MINI}", "candidate=mock", "judge=mock", "progress=none",
                   f"candidate.name='{NAME}'", "bootstrap.samples=20", f"hydra.run.dir={run}"], env, cwd=root)
    assert res.returncode == 0, res.stderr
    res = run_cli(["review", "export", str(run), "n=20", f"out={root / 'sheet'}"], env, cwd=root)
    assert res.returncode == 0, res.stderr
    res = run_cli(["view", str(root / "runs"), f"out={root / 'index' / 'runs.html'}", "open=false"], env, cwd=root)
    assert res.returncode == 0, res.stderr
    return {"report": run / "report.html", "review": root / "sheet" / "review.html",
            "runs": root / "index" / "runs.html"}


def drawn_without_the_face(drv: Any, page: Path) -> tuple[int, list[tuple[list[str], str]]]:
    """(elements holding Chinese, those Chromium drew in no embedded face: (fonts used, the element's start))."""
    drv.set_window_size(1280, 1400)
    drv.get(page.as_uri())
    n = drv.execute_script(_MARK)
    drv.execute_async_script("var done=arguments[0];setTimeout(function(){document.fonts.ready.then(done);},300);")
    root = drv.execute_cdp_cmd("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    drv.execute_cdp_cmd("CSS.enable", {})
    bad = []
    for node in drv.execute_cdp_cmd("DOM.querySelectorAll", {"nodeId": root, "selector": "[data-cjk]"})["nodeIds"]:
        fonts = drv.execute_cdp_cmd("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
        if fonts and not any(f["isCustomFont"] for f in fonts):  # no fonts: not drawn (a JSON <script>)
            html = drv.execute_cdp_cmd("DOM.getOuterHTML", {"nodeId": node})["outerHTML"]
            bad.append(([f["familyName"] for f in fonts], html[:120]))
    return n, bad


@pytest.mark.parametrize("name", ["report", "review", "runs"])
def test_every_chinese_text_is_drawn_in_the_embedded_face(pages: dict[str, Path], driver, name: str) -> None:  # noqa: F811
    """Three fresh loads of each page: with the face listed after the system fonts, about one load in seven (under
    load) drew the first Chinese text visible at load in a system font."""
    for _ in range(3):
        n, bad = drawn_without_the_face(driver, pages[name])
        assert n >= (1 if name == "runs" else 10), n  # the page does hold Chinese: the check is not vacuous
        assert bad == [], json.dumps(bad, ensure_ascii=False)
