"""criteria.html in a real headless Chromium: an expert decides and edits in the page, saves, and the saved sheet
merges with two CSV sheets by the declared rule; a hostile drafted text stays text."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from browsers import browser, wait_for  # noqa: F401 - the fixture
from conftest import MINI, REPO, run_cli
from fakeserver import FakeServer, Reply

pytestmark = pytest.mark.slow

HOSTILE = '</textarea><img src=x onerror="window.PWNED=1">'
CRITERIA = [{"text": t, "weight": 3, "group": "情绪感知", "polarity": "positive", "reason": "heard"}
            for t in ("Names the worry", "Asks one open question", HOSTILE)]


def handler(body: dict[str, Any]) -> Reply:
    return Reply(text=json.dumps({"criteria": CRITERIA}, ensure_ascii=False))


def test_expert_page_saves_a_sheet_merge_reads(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    drv, downloads = browser
    env = {**os.environ, "FAKE_KEY": "sk-test"}
    with FakeServer(handler) as srv:
        res = run_cli(["draft", "benchmark=heartbench", f"data.path={MINI}", "ids=mq01aa", "n=3",
                       "drafter=openai/fake-model", f"api_base={srv.url}", "api_key_env=FAKE_KEY",
                       f"out={tmp_path / 'drafts.jsonl'}", f"cache.dir={tmp_path / 'cache'}",
                       f"benchmark_dirs={REPO / 'benchmarks'}"], env)
    assert res.returncode == 0, res.stderr
    out = tmp_path / "sheets"
    assert run_cli(["review", "criteria", str(tmp_path / "drafts.jsonl"), "experts=b,c", f"out={out}"], env).returncode == 0
    sid = json.loads((out / "sheet.json").read_text(encoding="utf-8"))["sheet_id"]

    drv.get((out / "criteria.html").as_uri())
    assert drv.execute_script("return window.PWNED === undefined")  # the drafted text did not run
    items = drv.find_elements(By.CSS_SELECTOR, "li.c")
    assert len(items) == 3 and items[2].find_element(By.NAME, "text").get_attribute("value") == HOSTILE
    items[0].find_element(By.CSS_SELECTOR, 'button[data-v="accept"]').click()
    area = items[1].find_element(By.NAME, "text")
    area.clear()
    area.send_keys("Asks one open question about the exam")  # typing marks it edit
    items[2].find_element(By.CSS_SELECTOR, 'button[data-v="reject"]').click()
    drv.find_element(By.ID, "expert").send_keys("Dr Lee")
    assert drv.find_element(By.ID, "done").text == "3"
    drv.find_element(By.ID, "save").click()
    saved = wait_for(lambda: [p for p in downloads.glob("*.csv")], "the sheet download")[0]
    assert saved.name == f"criteria-{sid}-Dr_Lee.csv"
    wait_for(lambda: saved.read_text(encoding="utf-8-sig").count("\n") == 4, "the file's content")

    def fill(name: str, decisions: list[str]) -> Path:
        path = out / f"criteria-{name}.csv"
        lines = path.read_text(encoding="utf-8-sig").splitlines()
        body = [line.replace(f",,{name},", f",{d},{name},") for line, d in zip(lines[1:], decisions, strict=True)]
        path.write_text("\ufeff" + "\n".join([lines[0], *body]) + "\n", encoding="utf-8")
        return path

    sheets = [saved, fill("b", ["accept", "accept", "reject"]), fill("c", ["reject", "accept", "accept"])]
    into = tmp_path / "new.jsonl"
    res = run_cli(["review", "merge", *map(str, sheets), "rule=majority", f"into={into}", f"sheet={out}"], env)
    assert res.returncode == 0, res.stderr
    report = json.loads(into.with_suffix(".merge.json").read_text(encoding="utf-8"))
    assert report["kept_keys"] == ["mq01aa#1", "mq01aa#2"] and report["experts"] == ["Dr Lee", "b", "c"]
    row = json.loads(into.read_text(encoding="utf-8").splitlines()[0])
    # mq01aa#2: Dr Lee's edit against b's and c's original text: two to one, the original stays
    assert [i["content"] for i in row["rubric"][-2:]] == ["Names the worry", "Asks one open question"]
