"""The run index (`rubric-engine view`) and a judge sweep's leaderboard page in headless Chromium, at desktop (1280)
and phone (390) width: screenshots, no page-wide horizontal overflow on a phone, picking two runs shows both in the
comparison, the filter narrows the rows, and the judges' section is there. Skipped with one line when chromium or
chromedriver is missing, except under CI=true (the `driver` fixture of test_report_views.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import EXE, clean_env
from test_report_views import driver  # noqa: F401 - the shared headless-Chromium fixture
from view_runs import JUDGES, judge_sweep

pytestmark = pytest.mark.slow

WIDTHS = {"desktop": 1280, "phone": 390}


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("viewpages")
    env = clean_env(root)
    sweep, _ = judge_sweep(root, env)
    res = subprocess.run([EXE, "view", "sweep", "out=index/runs.html", "open=false"], cwd=root, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return root / "index" / "runs.html", sweep / "report.html"


def _no_page_overflow(drv) -> None:
    width = drv.execute_script("return window.innerWidth")
    assert drv.execute_script("return document.documentElement.scrollWidth") <= width  # tables scroll in their box


def _shot(drv, path: Path) -> None:
    drv.save_screenshot(str(path))
    assert path.stat().st_size > 5000


@pytest.mark.parametrize("size", WIDTHS)
def test_index_compare_and_filter(driver, pages, size: str, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    index, _ = pages
    driver.set_window_size(WIDTHS[size], 1000)
    driver.get(index.as_uri())
    _shot(driver, tmp_path / f"index-{size}.png")
    if size == "phone":
        _no_page_overflow(driver)
    data = json.loads(driver.find_element(By.ID, "runs-data").get_attribute("textContent"))
    rows = driver.find_elements(By.CSS_SELECTOR, "tr[data-text]")
    assert len(rows) == 9
    boxes = driver.find_elements(By.CSS_SELECTOR, "input.pick")
    picked = [boxes[1], boxes[4]]
    for box in picked:
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
        box.click()
    assert driver.find_element(By.ID, "picked").text == "2 selected"
    driver.find_element(By.ID, "compare-btn").click()
    table = driver.find_element(By.ID, "compare-table")
    assert table.is_displayed()
    heads = table.find_elements(By.CSS_SELECTOR, "tr:first-child th")
    runs = [next(d for d in data if d["id"] == b.get_attribute("value")) for b in picked]
    assert len(heads) == 3
    for head, run in zip(heads[1:], runs):  # each picked run has its column: its names and its numbers
        assert run["candidate"] in head.text and run["judge"] in head.text
    overall = [r for r in table.find_elements(By.TAG_NAME, "tr") if r.find_element(By.TAG_NAME, "th").text == "Overall"]
    assert [c.text for c in overall[0].find_elements(By.TAG_NAME, "td")] == [f"{r['overall']:.2f}" for r in runs]
    assert "Dimensions" not in table.text or table.find_elements(By.CSS_SELECTOR, "th.group")
    _shot(driver, tmp_path / f"compare-{size}.png")
    if size == "phone":
        _no_page_overflow(driver)
    box = driver.find_element(By.ID, "filter")
    box.send_keys("mock-j2")
    shown = [r for r in driver.find_elements(By.CSS_SELECTOR, "tr[data-text]") if r.is_displayed()]
    assert len(shown) == 3 and all("mock-j2" in r.text for r in shown)


@pytest.mark.parametrize("size", WIDTHS)
def test_judge_sweep_leaderboard_page(driver, pages, size: str, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    _, report = pages
    driver.set_window_size(WIDTHS[size], 1000)
    driver.get(report.as_uri())
    section = driver.find_element(By.ID, "judges")
    driver.execute_script("arguments[0].scrollIntoView()", section)
    _shot(driver, tmp_path / f"judges-{size}.png")
    if size == "phone":
        _no_page_overflow(driver)
    tables = section.find_elements(By.TAG_NAME, "table")
    assert len(tables) == 2
    side, tau = tables
    assert [h.text for h in side.find_elements(By.TAG_NAME, "th")] == ["Model", *JUDGES]
    assert len(tau.find_elements(By.CSS_SELECTOR, "tbody tr")) == 3
