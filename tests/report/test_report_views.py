"""report.html views: dialogue in the drill-down, heatmaps with counts, subset intervals, the
side-by-side view, the agreement section, hostile text kept as text, and (in headless Chromium via
Selenium) sorting, filtering, search and the two-model picker.

Synthetic runs from test_leaderboard.make_run, plus an answers.jsonl per run holding each question's
dialogue, as the runner writes it. The browser test skips with one line when chromium/chromedriver
are missing, and fails instead under CI=true.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rubric_engine.report.html_views import subset_intervals
from rubric_engine.report.leaderboard import write_leaderboard
from rubric_engine.results.leaderboard import build_leaderboard
from rubric_engine.scoring.aggregate import group_members
from rubric_engine.stats.bootstrap import bootstrap_overall
from rubric_engine.store.runs import collect_runs
from test_html_report import Page, _page
from test_leaderboard import make_run

HOSTILE_TURN = "</script><img src=x onerror=\"window.PWNED=1\"> <b>hi</b> 你好，我今天很难过"
HOSTILE_REPLY = "</pre></details><script>window.PWNED=2</script><img src=y onerror=window.PWNED=3>"


def _answers(run: Path) -> None:
    """answers.jsonl as the runner writes it: the benchmark's own row (id, dialogue) plus the reply."""
    samples = [json.loads(x) for x in (run / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    with (run / "answers.jsonl").open("w", encoding="utf-8") as fh:
        for s in samples:
            dialogue = [{"role": "user", "content": f"turn one of {s['id']}"},
                        {"role": "assistant", "content": "earlier answer"},
                        {"role": "user", "content": HOSTILE_TURN if s["id"] == "q01" else f"last turn {s['id']}"}]
            fh.write(json.dumps({"id": s["id"], "dialogue": dialogue, "response": s["response"]},
                                ensure_ascii=False) + "\n")


def _declare_breakdowns(run: Path) -> None:
    spec_path = run / "spec.resolved.json"
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    spec.setdefault("report", {})["breakdowns"] = [
        {"id": "by_ability", "by": "ability", "labels": {"en": "Ability"}},
        {"id": "by_subset", "by": "subset", "labels": {"en": "Difficulty"}}]
    spec_path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("views") / "runs"
    make_run(root / "0", "model-a", 0.85, response=HOSTILE_REPLY)
    make_run(root / "1", "model-b", 0.5, judge_errors=(4,))
    make_run(root / "2", "model-c", 0.3, catastrophic=(2,))
    for d in ("0", "1", "2"):
        _answers(root / d)
        _declare_breakdowns(root / d)
    return root


@pytest.fixture(scope="module")
def report(runs: Path) -> Path:
    lb = build_leaderboard(collect_runs([runs]), n_boot=200)
    return write_leaderboard(lb, runs.parent / "out")["html"]


def test_drilldown_shows_dialogue_and_hostile_text_stays_text(report: Path) -> None:
    page = _page(report)
    text = "".join(page.text)
    assert "turn one of q02" in text and "earlier answer" in text and "last turn q07" in text
    assert HOSTILE_TURN in text and HOSTILE_REPLY.strip() in text  # shown verbatim, as text
    imgs = [v for t, n, v in page.attrs if t == "img" and n == "src"]
    assert imgs and all(v.startswith("data:image/png;base64,") for v in imgs)  # no <img> from a reply
    assert not [1 for _, n, _v in page.attrs if n.startswith("on")]  # no event handler attribute anywhere
    fonts = "@font-face" in report.read_text(encoding="utf-8")  # with CJK text: the font's re-layout script too
    assert page.tags.count("script") == 1 + fonts  # the report's own, nothing from a reply
    assert 'font-family:"rubric-engine CJK",system-ui' in report.read_text(encoding="utf-8")
    assert '"Noto Sans CJK SC"' in report.read_text(encoding="utf-8")


def test_readable_with_scripts_off(report: Path) -> None:
    """Without the script nothing is hidden and there are no dead controls: the script makes them all."""
    page = _page(report)
    assert not {"input", "select", "button", "noscript"} & set(page.tags)
    assert not [1 for _, n, _v in page.attrs if n in ("hidden", "style") and _v == "display:none"]
    assert not [1 for _, n, _v in page.attrs if n == "hidden"]


def test_heatmap_scores_and_counts_per_cell(runs: Path, report: Path) -> None:
    lb = build_leaderboard(collect_runs([runs]), n_boot=20)
    html_text = report.read_text(encoding="utf-8")
    assert "<h2>Ability</h2>" in html_text and "<h2>Difficulty</h2>" in html_text  # the declared labels
    page = Page()
    page.feed(html_text[html_text.index("<h2>Ability</h2>"):html_text.index("<h2>Difficulty</h2>")])
    cells = "".join(page.text)
    b = lb.rows[1]  # model-b: one judge error, so its counts are one lower where q04 was
    members = group_members(b.scored, "ability", lb.taxonomy.dimensions)
    for a, ids in members.items():
        assert f"{b.abilities[a]:.1f}n={len(ids)}" in cells, a
    a_members = group_members(lb.rows[0].scored, "ability", lb.taxonomy.dimensions)
    assert sum(map(len, a_members.values())) > sum(map(len, members.values()))


def test_subset_intervals_match_bootstrap_on_the_subset(runs: Path, report: Path) -> None:
    lb = build_leaderboard(collect_runs([runs]), n_boot=200)
    ci = subset_intervals(lb)
    r = lb.rows[0]
    hard = [q for q in r.scored if q.subset == "hard"]
    _, lo, hi = bootstrap_overall(hard, lb.taxonomy.dimensions, 200, 0, 0.05, scale=100.0, how=lb.taxonomy.how)
    assert ci[r.label]["hard"] == pytest.approx((lo, hi))
    assert lo < r.subsets["hard"] < hi
    assert f"[{lo:.2f}, {hi:.2f}]" in report.read_text(encoding="utf-8")


def test_side_by_side_holds_every_model_per_question(report: Path) -> None:
    html_text = report.read_text(encoding="utf-8")
    sbs = html_text[html_text.index('<div id="sbs"'):html_text.index("Per-question drill-down")]
    one = sbs[sbs.index('data-q="q02"'):sbs.index('data-q="q03"')]
    for i, reply in enumerate(("q02", "q02", "q02")):
        assert f'data-m="{i}"' in one
    assert one.count("<pre>") == 3 + 3  # three dialogue turns, three replies


def test_agreement_section_from_agreement_json(runs: Path, tmp_path: Path) -> None:
    result = {"benchmark": "toybench", "headline": {"judge-x": "judge-x vs the human majority: raw 91.0% <x>"},
              "pairs": [{"a": "judge-x", "b": "human majority", "n": 40, "raw": 0.91, "chance_floor": 0.6,
                         "cohen_kappa": 0.71, "gwet_ac1": 0.8, "krippendorff_alpha": 0.7, "false_pass": 0.05,
                         "false_fail": 0.04, "ci": {"cohen_kappa": [0.5, 0.85]}}]}
    out = tmp_path / "lb"
    out.mkdir()
    (out / "agreement.json").write_text(json.dumps(result), encoding="utf-8")
    lb = build_leaderboard(collect_runs([runs]), n_boot=20)
    text = "".join(_page(write_leaderboard(lb, out)["html"]).text)
    assert "Judge–human agreement" in text and "raw 91.0% <x>" in text
    assert "0.71 [0.50, 0.85]" in text and "91.0%" in text and "human majority" in text
    (out / "agreement.json").write_text("[1, 2]", encoding="utf-8")
    text = "".join(_page(write_leaderboard(lb, out)["html"]).text)
    assert "agreement.json: not a JSON object" in text
    (out / "agreement.json").unlink()
    assert "Judge–human agreement" not in "".join(_page(write_leaderboard(lb, out)["html"]).text)


def test_single_run_report_from_run_report(runs: Path, tmp_path: Path) -> None:
    from rubric_engine.report.run_page import write_run_report

    run = tmp_path / "one"
    shutil.copytree(runs / "1", run)
    path = write_run_report(run, n_boot=20)
    assert path == run / "report.html"
    text = "".join(_page(path).text)
    assert "model-b" in text and "turn one of q02" in text and "Judge error" in text
    assert "Side by side" not in text  # one model: nothing to put beside it
    assert sorted(p.name for p in run.iterdir()) == ["answers.jsonl", "report.html", "samples.jsonl",
                                                     "spec.resolved.json", "summary.json"]
    (run / "samples.jsonl").unlink()
    (run / "report.html").unlink()
    assert write_run_report(run) is None and not (run / "report.html").exists()  # generate-only: no report


# ---- in a real browser ----

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]


@pytest.fixture
def driver(tmp_path: Path):
    if not (CHROMIUM and DRIVER):
        reason = "chromium and chromedriver not on PATH; install them with: apt-get install -y chromium chromium-driver"
        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    opts.add_argument("--window-size=1280,1600")
    drv = webdriver.Chrome(service=Service(executable_path=DRIVER, env={**os.environ, "HOME": str(tmp_path)}),
                           options=opts)
    try:
        yield drv
    finally:
        drv.quit()


@pytest.mark.slow
def test_sort_filter_search_and_side_by_side_in_chromium(driver, report: Path) -> None:
    from selenium.webdriver.common.by import By

    driver.get(report.as_uri())
    assert driver.execute_script("return window.PWNED === undefined")  # no reply or dialogue ran as script
    board = driver.find_elements(By.CSS_SELECTOR, "table.sortable")[0]

    def models() -> list[str]:
        return [r.find_elements(By.TAG_NAME, "td")[1].text for r in board.find_elements(By.CSS_SELECTOR, "tbody tr")
                if r.is_displayed()]

    assert models() == ["model-a", "model-b", "model-c"]
    overall = board.find_elements(By.TAG_NAME, "th")[3]
    overall.click()  # ascending
    assert models() == ["model-c", "model-b", "model-a"]
    overall.click()  # descending again
    assert models() == ["model-a", "model-b", "model-c"]
    filt = driver.find_elements(By.CSS_SELECTOR, "input.filter")[0]
    filt.send_keys("model-b")
    assert models() == ["model-b"]
    filt.clear()
    filt.send_keys(" ")  # clear() fires no input event; type and delete to refresh
    filt.send_keys("\b")
    assert models() == ["model-a", "model-b", "model-c"]

    search = driver.find_element(By.ID, "search")
    search.send_keys("last turn q07")
    shown = [d for d in driver.find_elements(By.CSS_SELECTOR, "#drill details.q") if d.is_displayed()]
    assert len(shown) == 3 and all("q07" in d.find_element(By.TAG_NAME, "summary").text for d in shown)

    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, "sbs-a")).select_by_visible_text("model-a")
    Select(driver.find_element(By.ID, "sbs-b")).select_by_visible_text("model-c")
    q = driver.find_element(By.CSS_SELECTOR, '#sbs details[data-q="q02"]')
    q.find_element(By.TAG_NAME, "summary").click()
    cols = [c for c in q.find_elements(By.CSS_SELECTOR, ".sbs-grid > div") if c.is_displayed()]
    assert [c.find_element(By.TAG_NAME, "b").text.split(" · ")[0] for c in cols] == ["model-a", "model-c"]
    assert "q02" in cols[1].find_element(By.TAG_NAME, "pre").text
    assert "window.PWNED=2" in cols[0].find_element(By.TAG_NAME, "pre").text  # the hostile reply, as text
    assert cols[0].location["y"] == cols[1].location["y"]  # side by side at desktop width


def test_leaderboard_cli_takes_an_agreement_file(runs: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    exe = str(Path(sys.executable).with_name("rubric-engine"))  # the environment under test
    agreement = tmp_path / "elsewhere" / "agreement.json"
    agreement.parent.mkdir()
    agreement.write_text(json.dumps({"headline": {"judge-x": "judge-x vs the human majority: raw 77.7%"},
                                     "pairs": []}), encoding="utf-8")
    out = tmp_path / "lb"
    res = subprocess.run([exe, "leaderboard", str(runs), f"out={out}", "bootstrap.samples=20",
                          f"agreement={agreement}"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "raw 77.7%" in "".join(_page(out / "report.html").text)
    res = subprocess.run([exe, "leaderboard", str(runs), f"out={out}", "bootstrap.samples=20",
                          f"agreement={tmp_path / 'missing.json'}"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "missing.json: no such file" in res.stderr


@pytest.mark.slow
def test_phone_width_has_no_page_wide_overflow_and_stacks_replies(driver, report: Path) -> None:
    from selenium.webdriver.common.by import By

    driver.set_window_size(390, 1200)
    driver.get(report.as_uri())
    width = driver.execute_script("return window.innerWidth")
    # wide tables scroll inside their own box; the page itself never scrolls sideways
    assert driver.execute_script("return document.documentElement.scrollWidth") <= width
    q = driver.find_element(By.CSS_SELECTOR, '#sbs details[data-q="q02"]')
    q.find_element(By.TAG_NAME, "summary").click()
    cols = [c for c in q.find_elements(By.CSS_SELECTOR, ".sbs-grid > div") if c.is_displayed()]
    assert len(cols) == 2 and cols[1].location["y"] > cols[0].location["y"]  # stacked on a phone


def _visible(driver, css: str) -> int:
    return driver.execute_script(f"return document.querySelectorAll('{css}').length")


@pytest.mark.slow
def test_questions_sort_by_difference_and_filter_errors_and_rules_in_chromium(driver, report: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver.get(report.as_uri())
    table = driver.find_element(By.ID, "qtable")
    Select(driver.find_element(By.ID, "q-a")).select_by_visible_text("model-a")
    Select(driver.find_element(By.ID, "q-b")).select_by_visible_text("model-c")
    head = table.find_element(By.CSS_SELECTOR, "th.diff")
    assert head.text.startswith("model-a − model-c")

    def rows() -> list[tuple[str, float | None, float | None, str]]:
        out = []
        for r in table.find_elements(By.CSS_SELECTOR, "tbody tr"):
            if not r.is_displayed():
                continue
            cells = r.find_elements(By.TAG_NAME, "td")
            num = [None if c.get_attribute("data-v") in (None, "") else float(c.get_attribute("data-v"))
                   for c in cells[1:4]]
            out.append((cells[0].text, num[0], num[2], cells[4].text))
        return out

    for qid, a, c, diff in rows():  # the difference of the two chosen models, from their own scores
        assert diff == ("—" if a is None or c is None else f"{a - c:.2f}"), qid
    head.click()  # ascending by A − B
    diffs = [float(d) for _, _, _, d in rows() if d != "—"]
    assert diffs == sorted(diffs) and len(diffs) == 18
    head.click()
    assert [float(d) for _, _, _, d in rows() if d != "—"] == sorted(diffs, reverse=True)

    driver.find_element(By.ID, "only-errors").click()  # model-b's judge error on q04, everywhere
    assert [q for q, *_ in rows()] == ["q04"]
    assert _visible(driver, "#sbs details.sbs:not([hidden])") == 1
    assert _visible(driver, "#drill details.q:not([hidden])") == 1
    assert driver.find_element(By.CSS_SELECTOR, "#drill details.q:not([hidden]) summary").get_attribute(
        "textContent").startswith("q04")
    driver.find_element(By.ID, "only-errors").click()
    driver.find_element(By.ID, "only-rules").click()  # model-c's failure rule on q02
    assert [q for q, *_ in rows()] == ["q02"]
    assert _visible(driver, "#drill details.q:not([hidden])") == 1
    driver.find_element(By.ID, "only-rules").click()
    assert len(rows()) == 18 and _visible(driver, "#drill details.q:not([hidden])") == 3 * 18

    # criteria side by side: the picked pair only, each criterion's verdict per model
    Select(driver.find_element(By.ID, "sbs-a")).select_by_visible_text("model-a")
    Select(driver.find_element(By.ID, "sbs-b")).select_by_visible_text("model-c")
    q = driver.find_element(By.CSS_SELECTOR, '#sbs details[data-q="q02"]')
    q.find_element(By.TAG_NAME, "summary").click()
    crit = q.find_element(By.CSS_SELECTOR, "table.crit")
    heads = [h.text for h in crit.find_elements(By.CSS_SELECTOR, "thead th") if h.is_displayed()]
    assert heads == ["#", "Criterion", "Weight", "model-a", "model-c", "Met by"]
    last = crit.find_elements(By.CSS_SELECTOR, "tbody tr")[-1]  # the rule item: model-c's fired
    shown = [c for c in last.find_elements(By.TAG_NAME, "td") if c.is_displayed()]
    assert [c.text for c in shown][3:5] == ["no", "met"]
    red, green, seen = "rgba(176, 0, 0, 1)", "rgba(10, 107, 10, 1)", set()
    for row in crit.find_elements(By.CSS_SELECTOR, "tbody tr"):  # met: red on a penalty item or a rule, else green
        cells = [c for c in row.find_elements(By.TAG_NAME, "td") if c.is_displayed()]
        bad = cells[2].text == "rule" or cells[2].text.startswith("-")
        for c in cells[3:5]:
            if c.text == "met":
                assert c.value_of_css_property("color") == (red if bad else green), (cells[1].text, c.text)
                seen.add(bad)
    assert seen == {True, False}


def test_criterion_pass_rates_match_the_records(runs: Path, report: Path) -> None:
    html_text = report.read_text(encoding="utf-8")
    section = html_text[html_text.index('<h2 id="criteria">'):html_text.index('<h2 id="side-by-side">')]
    page = Page()
    page.feed(section)
    text = "".join(page.text)
    for d, label in (("0", "model-a"), ("2", "model-c")):
        records = [json.loads(x) for x in (runs / d / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
        for ability, kind, keep in (("warmth", "reward", lambda w: w > 0), ("humor", "penalty", lambda w: w < 0)):
            verdicts = [c["hit"] for r in records for c in r["criteria"]
                        if c["ability"] == ability and keep(c["weight"]) and c["hit"] is not None]
            k, n = sum(verdicts), len(verdicts)
            assert f"{100 * k / n:.1f}% ({k}/{n})" in text, (label, ability, kind)
        fired = [c["hit"] for r in records for c in r["criteria"] if c["rule"] and c["hit"] is not None]
        assert f"{100 * sum(fired) / len(fired):.1f}% ({sum(fired)}/{len(fired)})" in text


def test_a_declared_label_heads_its_one_view(runs: Path, tmp_path: Path) -> None:
    """A breakdown by scenario labelled Topics is headed Topics, shown once (no Scenarios table beside it)."""
    for d in ("0", "1"):
        shutil.copytree(runs / d, tmp_path / "runs" / d)
        spec_path = tmp_path / "runs" / d / "spec.resolved.json"
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
        spec["report"]["breakdowns"] = [{"id": "topics", "by": "scenario", "labels": {"en": "Topics"}}]
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
    lb = build_leaderboard(collect_runs([tmp_path / "runs"]), n_boot=20)
    html_text = write_leaderboard(lb, tmp_path / "out")["html"].read_text(encoding="utf-8")
    assert "<h2>Topics</h2>" in html_text and "Scenario" not in "".join(_page_text(html_text))
    view = html_text[html_text.index("<h2>Topics</h2>"):html_text.index("<h2>Charts</h2>")]
    assert view.count("<table") == 1 and '<th class="t">Topics</th>' in view and "Growth" in view
    assert "<h2>Ability</h2>" not in html_text and "<h2>Dimensions</h2>" not in html_text  # only what is declared


def _page_text(html_text: str) -> list[str]:
    page = Page()
    page.feed(html_text)
    return page.text


def test_provenance_of_runs_made_before_it_was_recorded(report: Path) -> None:
    """Runs without summary.json provenance: what they did record, and 'not recorded' for the rest, never a guess."""
    html_text = report.read_text(encoding="utf-8")
    block = "".join(_page_text(html_text[html_text.index('<h2 id="provenance">'):html_text.index("<h2>Ability</h2>")]))
    assert "same spec hash in every run" not in block  # make_run writes no spec hash: one value, None
    assert "openai/model-a" in block and "openai/j" in block and "2026-11-22T06:00:00+00:00" in block
    assert block.count("not recorded") >= 3 * 3  # engine, command and spec hash of each of the 3 runs
    assert 'class="mock"' not in html_text


def test_pass_rates_leave_out_criteria_never_judged() -> None:
    """Scores on a scale keep the data's rubric items without verdicts: no row of dashes, no empty section."""
    from rubric_engine.report.questions_view import Cell, Crit, Grid, criteria_rates

    grid = Grid(labels=["m1", "m2"], qids=["q1"], criteria={"q1": [Crit(1, "t", 1.0, "Warmth", "reward")]},
                cells=[{"q1": Cell(0.5, None, (), False, {1: None}, None)}, {}])
    assert criteria_rates(grid) == ""
    grid.cells[1] = {"q1": Cell(0.5, None, (), False, {1: True}, None)}
    assert "<td>—</td><td>100.0% <small>(1/1)</small></td>" in criteria_rates(grid)


def test_charts_are_named_by_the_declared_labels(report: Path) -> None:
    text = "".join(_page_text(report.read_text(encoding="utf-8")))
    assert "Ability (radar)" in text and "abilities (radar)" not in text  # the spec calls its abilities "Ability"


def test_columns_of_a_judge_sweep_name_the_judge(runs: Path, tmp_path: Path) -> None:
    """One candidate graded by two judges: two columns, each naming its judge, never the same name twice."""
    for d, judge in (("0", "judge-x"), ("1", "judge-y")):
        make_run(tmp_path / "runs" / d, "model-a", 0.6 if d == "0" else 0.4, judge=judge)
    lb = build_leaderboard(collect_runs([tmp_path / "runs"]), n_boot=20)
    html_text = write_leaderboard(lb, tmp_path / "out")["html"].read_text(encoding="utf-8")
    for section in ('<table class="sortable" id="qtable"', '<h2 id="criteria">', '<div id="sbs"', "<h2>Abilities</h2>"):
        part = html_text[html_text.index(section):]
        part = part[:part.index("</thead>")]
        assert "model-a [judge judge-x]" in part and "model-a [judge judge-y]" in part, section
