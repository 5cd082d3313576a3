"""The human-corrected scores `calibrate` left beside the runs' summaries, as one plain table (title, header, rows).

Why: a leaderboard of judge scores should show, where people labelled replies, the score they would give
beside the judge's own, in leaderboard.md, on the console and in report.html alike (report/controls.py
hands every renderer this table). A calibration.json whose judge-only score no longer matches the run's
overall (the run was rescored or resumed since) is shown as stale, never as a current number.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.results.leaderboard import fmt
from rubric_engine.store.layout import CALIBRATION_FILE

if TYPE_CHECKING:
    from rubric_engine.results.leaderboard import Row

__all__ = ["calibration_tables", "read_calibration"]


def read_calibration(run_dir: str | Path) -> dict[str, Any] | str | None:
    """The run's calibration.json, None when it has none, or the words saying why it cannot be read."""
    path = Path(run_dir) / CALIBRATION_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["score"]["estimate"], data["score"]["interval"], data["score"]["judge_only"]  # noqa: B018 - checked
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable {CALIBRATION_FILE} ({exc.__class__.__name__}): run calibrate again"
    return data


def _row(r: Row, cal: dict[str, Any] | str) -> list[str]:
    if isinstance(cal, str):
        return [r.label, cal, "", "", "", "", ""]
    sc = cal["score"]
    if r.overall is None or abs(float(sc["judge_only"]) - r.overall) > 1e-6 * max(1.0, abs(r.overall)):
        return [r.label, f"stale: the run changed since calibrate (judge-only {fmt(sc['judge_only'])}); run it again",
                "", fmt(r.overall), "", "", ""]
    lo, hi = sc["interval"]
    halve = sc.get("labels_to_halve")
    return [r.label, fmt(sc["estimate"]), f"[{fmt(lo)}, {fmt(hi)}]", fmt(sc["judge_only"]),
            fmt(sc["human_only"]["estimate"]), f"{sc['labelled']}/{sc['labelled'] + sc['unlabelled']}",
            "-" if halve is None else str(halve)]


def calibration_tables(rows: Sequence[Row]) -> list[tuple[str, list[str], list[list[str]]]]:
    """One table when any run has a calibration.json; nothing otherwise."""
    found = [(r, c) for r in rows if (c := read_calibration(r.run_dir)) is not None]
    if not found:
        return []
    return [("Human-corrected scores (calibrate: PPI++ from replies people labelled)",
             ["Model", "Human-corrected", "95% CI", "Judge-only", "Human-only", "Labelled", "Labels to halve CI"],
             [_row(r, c) for r, c in found])]
