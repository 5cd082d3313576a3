"""report.html for a single run, written into the run directory when the run ends.

Why its own entry: a user who runs one model wants the same page a sweep gets (dialogue, reply,
verdicts, heatmaps) without calling `leaderboard`. It reads back only what the run wrote, like the
leaderboard does, and embeds its charts from a temporary directory so the run directory gains one
file, report.html. A report that cannot be built never costs the run: the reason is one warning line.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from rubric_engine.rundir import SAMPLES_FILE

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["write_run_report", "REPORT_FILE"]

REPORT_FILE = "report.html"


def write_run_report(run_dir: Path, console: "Console | None" = None, *, n_boot: int = 1000) -> Path | None:
    """Build report.html in run_dir from its samples.jsonl; None (with a warning) when it cannot be built,
    e.g. a generate-only run with nothing scored yet (no samples.jsonl: silently no report)."""
    run_dir = Path(run_dir)
    if not (run_dir / SAMPLES_FILE).is_file():
        return None
    try:
        from rubric_engine import html_views
        from rubric_engine.leaderboard import build_leaderboard
        from rubric_engine.runs import load_run
        from rubric_engine.leaderboard_output import write_leaderboard

        lb = build_leaderboard([load_run(run_dir)], n_boot=n_boot)
        with tempfile.TemporaryDirectory(prefix="rubric-engine-report-") as tmp:
            built = write_leaderboard(lb, Path(tmp), agreement=html_views.find_agreement([run_dir]),
                                     chart_formats=("png",))["html"]  # only the embedded PNGs
            target = run_dir / REPORT_FILE
            target.write_bytes(built.read_bytes())
        return target
    except Exception as exc:  # noqa: BLE001 - the scores are written; a report failure must not hide them
        if console is not None:
            console.print(f"warning: report.html not written ({type(exc).__name__}: {exc}); "
                          f"build it with: rubric-engine leaderboard {run_dir}", highlight=False, markup=False,
                          soft_wrap=True)
        return None
