"""A sweep's stdout holds only results: no library's log lines, and each distinct warning once per sweep.

Why through the console script: the log lines came from the end-of-sweep leaderboard, which subsets the CJK font
(fontTools logs every subsetting step at INFO) while Hydra's own logging config is still active, with a handler
that writes `[HYDRA]`-prefixed lines to stdout. A single run and `leaderboard DIR` never had that config, so only a
real sweep shows it. The mock models keep the test offline and keyless; the Chinese spec makes the page need the font.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def zh_sweep(tmp_path_factory: pytest.TempPathFactory):
    from conftest import clean_env

    root = tmp_path_factory.mktemp("zh_sweep")
    sweep = root / "sweep"
    res = run_cli(["-m", "benchmark=counselling_dynamic_zh", "candidate=mock/a,mock/b", "judge=mock", "user=mock",
                   "limit=2", "progress=none", "bootstrap.samples=50", f"hydra.sweep.dir={sweep}"],
                  clean_env(root), timeout=600)
    return res, sweep


def test_a_sweep_over_chinese_text_writes_only_results_to_stdout(zh_sweep) -> None:
    res, sweep = zh_sweep
    assert res.returncode == 0, res.stderr[-2000:]
    assert (sweep / "report.html").is_file()
    assert "rubric-engine CJK" in (sweep / "report.html").read_text(encoding="utf-8")  # the font was subset
    out = res.stdout
    assert "[HYDRA]" not in out and "fontTools" not in out, out[:2000]
    assert "glyph" not in out.lower(), out[:2000]
    # what is there: the leaderboard's table and each job's results, nothing longer than a table row
    assert "outputs:" in out
    assert max(len(line) for line in out.splitlines()) < 400, max(out.splitlines(), key=len)[:300]
    # on stderr, Hydra's own launch lines (which job runs) and nothing of fontTools' log
    hydra = [line for line in res.stderr.splitlines() if "[HYDRA]" in line]
    assert hydra and all("Launching" in line or "\t#" in line for line in hydra), hydra[:5]
    assert "glyph" not in res.stderr.lower(), res.stderr[-2000:]


def test_each_distinct_warning_once_per_sweep(zh_sweep) -> None:
    res, _ = zh_sweep
    mock = [line for line in res.stderr.splitlines() if "offline mock model" in line]
    assert len(mock) == 1, res.stderr[-3000:]


def test_font_subsetting_logs_nothing_whatever_the_logging_config() -> None:
    """The root logger at DEBUG with a handler (as Hydra's config or a caller's basicConfig leaves it): subsetting a
    page's Chinese text for the embedded font writes no record there."""
    import io
    import logging

    from rubric_engine.report import fonts

    if fonts.cjk_font() is None:
        pytest.skip("noto-cjk-sans-otc is not installed")
    sink = io.StringIO()
    handler = logging.StreamHandler(sink)
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    logging.getLogger("fontTools").propagate = True  # as a logging config that named no fontTools logger leaves it
    try:
        rule, _ = fonts.font_face_css("日志不应出现在标准输出")
    finally:
        root.removeHandler(handler)
        root.setLevel(old)
    assert "rubric-engine CJK" in rule
    assert sink.getvalue() == ""
