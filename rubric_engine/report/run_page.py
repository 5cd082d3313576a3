"""report.html for a single run, written into the run directory when the run ends.

Why its own entry: a user who runs one model wants the same page a sweep gets (dialogue, reply,
verdicts, heatmaps) without calling `leaderboard`. It reads back only what the run wrote, like the
leaderboard does, and embeds its charts from a temporary directory so the run directory gains one
file, report.html. A report that cannot be built never costs the run: the reason is one warning line.
The command line has it built by a helper process that loaded its libraries during the run
(report/worker.py); without one (Python callers, or a worker that failed) it is built here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rubric_engine.report import worker as report_worker
from rubric_engine.store.layout import SAMPLES_FILE

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["write_run_report", "REPORT_MAX_QUESTIONS"]

# The page embeds every question (dialogue, reply, verdicts): about 6 KB of HTML and tens of KB of
# memory per question while it is built. Past this many questions the run skips it (one line), so a
# run's memory stays flat in the number of questions (docs/scaling.md); `leaderboard` builds it on request.
REPORT_MAX_QUESTIONS = 5000


def write_run_report(run_dir: Path, console: "Console | None" = None, *, n_boot: int = 1000,
                     questions: int | None = None, trust_code: bool = False) -> Path | None:
    """Build report.html in run_dir from its samples.jsonl; None (with a warning) when it cannot be built,
    e.g. a generate-only run with nothing scored yet (no samples.jsonl: silently no report), or when the
    run's `questions` exceed REPORT_MAX_QUESTIONS."""
    run_dir = Path(run_dir)
    if not (run_dir / SAMPLES_FILE).is_file():
        return None
    if questions is not None and questions > REPORT_MAX_QUESTIONS:
        if console is not None:
            console.print(f"report.html not written: {questions} questions is more than the {REPORT_MAX_QUESTIONS} "
                          f"one page holds in bounded memory; build it anyway with: rubric-engine leaderboard {run_dir}",
                          highlight=False, markup=False, soft_wrap=True)
        return None
    try:
        if report_worker.active():
            try:
                answer = report_worker.build(run_dir, n_boot, trust_code)
            except report_worker.WorkerFailed:  # built here instead; a failure is the warning below
                return report_worker.build_report(run_dir, n_boot=n_boot, trust_code=trust_code)
            if "error" in answer:
                raise _Failed(str(answer["error"]))  # already "Type: message", as the worker saw it
            return Path(answer["ok"])
        return report_worker.build_report(run_dir, n_boot=n_boot, trust_code=trust_code)
    except Exception as exc:  # noqa: BLE001 - the scores are written; a report failure must not hide them
        if console is not None:
            why = str(exc) if isinstance(exc, _Failed) else f"{type(exc).__name__}: {exc}"
            console.print(f"warning: report.html not written ({why}); build it with: rubric-engine leaderboard "
                          f"{run_dir}", highlight=False, markup=False, soft_wrap=True)
        return None


class _Failed(Exception):
    """The worker's reason a report could not be built."""
