"""The style-controlled ranking, the length-adjusted scores and the human-corrected scores as plain tables
(title, header, rows).

Why one module: leaderboard.md, the console and report.html show the same tables (results/style.py computes
them), so each renders these rows rather than building its own twin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rubric_engine.report.calibration_view import calibration_tables
from rubric_engine.results.leaderboard import fmt

if TYPE_CHECKING:
    from rubric_engine.results.leaderboard import Leaderboard

__all__ = ["control_tables"]


def control_tables(lb: Leaderboard) -> list[tuple[str, list[str], list[list[str]]]]:
    """The style-controlled ranking with its coefficients, and the length-adjusted scores (results/style.py)."""
    ci = f"{100 * (1 - lb.alpha):.0f}% CI"
    out: list[tuple[str, list[str], list[list[str]]]] = []
    if lb.style_control is not None:
        sc = lb.style_control
        out.append((f"Style-controlled Bradley-Terry ({sc['baseline']} = {sc['anchor']:g})", ["Model", "Rating", ci,
                    "Raw rating"], [[x["label"] + (" (baseline)" if x["baseline"] else ""), fmt(x["rating"], 1),
                    f"[{fmt(x['lo'], 1)}, {fmt(x['hi'], 1)}]", fmt(x["raw_rating"], 1)] for x in sc["ratings"]]))
        out.append(("Style coefficients (log-odds per SD)", ["Feature", "Coefficient", ci],
                    [[c["feature"], fmt(c["coef"], 3), f"[{fmt(c['lo'], 3)}, {fmt(c['hi'], 3)}]"]
                     for c in sc["coefficients"]]))
    if lb.length_control is not None:
        lc = lb.length_control
        out.append((f"Length-adjusted scores (at {lc['mean_length']:.0f} characters; slope "
                    f"{fmt(lc['slope'])} [{fmt(lc['slope_lo'])}, {fmt(lc['slope_hi'])}] per {lc['slope_per']} "
                    "characters)", ["Model", "Adjusted", ci, "Raw", "Mean length"],
                    [[x["label"], fmt(x["adjusted"]), f"[{fmt(x['lo'])}, {fmt(x['hi'])}]", fmt(x["raw"]),
                      f"{x['mean_length']:.0f}"] for x in lc["rows"]]))
    return out + calibration_tables(lb.rows)  # human-corrected scores where `calibrate` left them
