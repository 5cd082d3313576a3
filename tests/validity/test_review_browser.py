"""The review page in a real headless Chromium (Selenium driving the system browser and driver):
labels are clicked, saved through the page's own download, kept across a reload, and the saved
file is fed to `rubric-engine agree`, whose numbers are checked.

Skipped with a one-line reason when chromium or chromedriver is missing, except under CI=true,
where a missing browser is a failure (.ci/run installs both).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agree_runs import EXE
from browsers import browser, wait_for as _wait_for  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow


def test_label_save_reload_and_agree(browser, review_runs: list[Path], tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    drv, downloads = browser
    sheet = tmp_path / "sheet"
    res = subprocess.run([EXE, "review", "export", str(review_runs[0]), "n=12", "seed=0", f"out={sheet}"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    sid = json.loads((sheet / "sheet.json").read_text(encoding="utf-8"))["sheet_id"]
    samples = {json.loads(x)["id"]: json.loads(x) for x in (review_runs[0] / "samples.jsonl").read_text().splitlines()}

    drv.get((sheet / "review.html").as_uri())
    assert drv.execute_script("return window.PWNED === undefined")  # no reply ran as script
    items = drv.find_elements(By.CSS_SELECTOR, "li.item")
    assert len(items) == 12
    # the reviewer disagrees with the judge on items 0 and 3, is unsure on 5, skips 11, and notes on 2
    plan: dict[int, str] = {}
    for i, li in enumerate(items):
        qid, idx = li.get_attribute("data-q"), int(li.get_attribute("data-i"))
        hit = samples[qid]["criteria"][idx - 1]["hit"]
        if i == 11:
            continue
        choice = "unsure" if i == 5 else ("met" if hit != (i in (0, 3)) else "not_met")
        li.find_element(By.CSS_SELECTOR, f'button[data-v="{choice}"]').click()
        plan[i] = choice
    items[2].find_element(By.CSS_SELECTOR, "input.note").send_keys("作者注: 不确定")
    rater = drv.find_element(By.ID, "rater")
    rater.send_keys("Dr Lee")
    assert drv.find_element(By.ID, "done").text == "11"

    def reloaded() -> bool:
        """Progress is kept in the browser. Chromium hands localStorage writes to its storage service
        asynchronously, so on a loaded machine the first reload can come before they land: reload until
        they have (a page that kept nothing never gets there)."""
        drv.refresh()
        return drv.find_element(By.ID, "done").text == "11"

    _wait_for(reloaded, "the labels kept across a reload")
    items = drv.find_elements(By.CSS_SELECTOR, "li.item")
    assert drv.find_element(By.ID, "rater").get_attribute("value") == "Dr Lee"
    assert items[2].find_element(By.CSS_SELECTOR, "input.note").get_attribute("value") == "作者注: 不确定"
    for i, choice in plan.items():
        on = items[i].find_elements(By.CSS_SELECTOR, "button.on")
        assert [b.get_attribute("data-v") for b in on] == [choice], i
    assert not items[11].find_elements(By.CSS_SELECTOR, "button.on")

    drv.find_element(By.ID, "save").click()
    saved = _wait_for(lambda: [p for p in downloads.glob("*.jsonl")], "the labels download")[0]
    assert saved.name == f"labels-{sid}-Dr_Lee.jsonl"
    lines = [json.loads(x) for x in _wait_for(lambda: saved.read_text(encoding="utf-8"), "the file's content").splitlines()]
    assert len(lines) == 11 and {x["sheet_id"] for x in lines} == {sid} and {x["rater"] for x in lines} == {"Dr Lee"}
    assert sum(x["met"] == "unsure" for x in lines) == 1 and lines[2]["note"] == "作者注: 不确定"

    res = subprocess.run([EXE, "agree", str(review_runs[0]), f"labels={saved}", f"out={tmp_path / 'agr'}", "n_boot=200"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "1 row(s) marked unsure not used" in res.stderr
    result = json.loads((tmp_path / "agr" / "agreement.json").read_text(encoding="utf-8"))
    p = next(x for x in result["pairs"] if x["b"] == "Dr Lee")
    assert p["n"] == 10 and p["raw"] == pytest.approx(8 / 10)  # 10 labelled met/not met, 2 disagreements
    assert result["sheets"] == [sid]
