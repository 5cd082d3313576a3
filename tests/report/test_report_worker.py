"""The report worker (report/worker.py): a real helper process builds report.html for the run that asks,
serves several runs, and never costs a run its report: a dead worker means the page is built in the
run's process, a page the worker cannot build is the same one warning line as without a worker, and
the worker ends with its input (Ctrl-C at the terminal is for the run, not for it), and a hung one is
given up.

The console-script tests of runs (test_cli.py, test_run_journal.py, ...) go through the worker too:
the command line starts one for every run that writes a report.
"""

from __future__ import annotations

import io
import os
import signal
from pathlib import Path

import pytest
from rich.console import Console

from rubric_engine.report import worker as report_worker
from rubric_engine.report.run_page import write_run_report
from test_leaderboard import make_run


@pytest.fixture
def worker():
    assert report_worker.start()
    yield report_worker._WORKER  # noqa: SLF001 - the test needs the process itself
    report_worker.stop()


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=400), buf


def test_the_worker_builds_the_page_and_serves_the_next_run(tmp_path: Path, worker, monkeypatch) -> None:
    def not_here(*a, **k):  # the run's process must not build it: the worker does
        raise AssertionError("built in the run's process")

    monkeypatch.setattr(report_worker, "build_report", not_here)
    for name, model in (("a", "model-a"), ("b", "model-b")):
        run = make_run(tmp_path / name, model, 0.7)
        console, buf = _console()
        assert write_run_report(run, console, n_boot=20) == run / "report.html"
        text = (run / "report.html").read_text(encoding="utf-8")
        assert model in text and "data:image/png;base64," in text
        assert buf.getvalue() == ""
    assert report_worker.active()


def test_a_dead_worker_means_the_page_is_built_here(tmp_path: Path, worker) -> None:
    worker.proc.kill()
    worker.proc.wait()
    run = make_run(tmp_path / "run", "model-a", 0.7)
    console, buf = _console()
    assert write_run_report(run, console, n_boot=20) == run / "report.html"
    assert "model-a" in (run / "report.html").read_text(encoding="utf-8") and buf.getvalue() == ""
    assert not report_worker.active()


def test_a_page_the_worker_cannot_build_is_the_same_one_warning(tmp_path: Path, worker) -> None:
    run = make_run(tmp_path / "run", "model-a", 0.7)
    (run / "summary.json").write_text("{not json", encoding="utf-8")
    console, buf = _console()
    assert write_run_report(run, console, n_boot=20) is None
    with_worker = buf.getvalue()
    report_worker.stop()
    console, buf = _console()
    assert write_run_report(run, console, n_boot=20) is None
    assert with_worker == buf.getvalue()  # word for word what the run's own process says
    assert with_worker.startswith("warning: report.html not written (") and with_worker.count("\n") == 1
    assert f"build it with: rubric-engine leaderboard {run}" in with_worker
    assert not (run / "report.html").exists()


def test_ctrl_c_at_the_terminal_is_not_for_the_worker_which_ends_with_its_input(worker) -> None:
    # the terminal sends SIGINT to its foreground process group: the run's, not the worker's
    assert os.getpgid(worker.proc.pid) != os.getpgid(0)
    report_worker.stop()
    assert worker.proc.poll() is not None and not report_worker.active()


def test_a_hung_worker_is_given_up_and_the_page_built_here(tmp_path: Path, worker, monkeypatch) -> None:
    monkeypatch.setattr(report_worker, "ANSWER_TIMEOUT", 1.0)
    os.kill(worker.proc.pid, signal.SIGSTOP)  # alive but never answering
    run = make_run(tmp_path / "run", "model-a", 0.7)
    console, buf = _console()
    assert write_run_report(run, console, n_boot=20) == run / "report.html"
    assert "model-a" in (run / "report.html").read_text(encoding="utf-8") and buf.getvalue() == ""
    assert not report_worker.active() and worker.proc.poll() is not None  # ended, not left stopped
