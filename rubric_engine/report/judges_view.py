"""A judge sweep's own tables: each judge's ranking side by side and the rank correlation between judges.

Why apart from report/leaderboard.py: the text tables (console, leaderboard.md) and report.html's section show the
same two tables from `Leaderboard.judges` (results/judges.py); keeping both renderings here keeps one place that
knows the section's shape. A leaderboard with one judge has no section, and these functions return nothing.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from rubric_engine.results.leaderboard import fmt

if TYPE_CHECKING:
    from rubric_engine.results.leaderboard import Leaderboard

__all__ = ["judge_tables", "judges_html"]

Table = tuple[str, list[str], list[list[str]]]


def _cell(x: dict[str, Any] | None) -> str:
    return "—" if x is None else f"{x['rank']} ({fmt(x['overall'])})"


def judge_tables(lb: "Leaderboard") -> list[Table]:
    """(title, header, rows): the judges' rankings side by side (rank and overall per judge), then one row per
    pair of judges with Kendall's tau-b and its interval."""
    sec = lb.judges
    if sec is None:
        return []
    ci = f"{100 * (1 - lb.alpha):.0f}% CI"
    side = [[t["candidate"], *[_cell(t["by_judge"].get(j)) for j in sec["judges"]]] for t in sec["table"]]
    taus = [[x["a"], x["b"], fmt(x["tau"]), f"[{fmt(x['lo'])}, {fmt(x['hi'])}]", str(x["candidates"]),
             str(x["questions"])] for x in sec["tau"]]
    return [("Judges side by side: rank (overall) under each judge", ["Model", *sec["judges"]], side),
            ("Rank correlation between judges (Kendall tau-b)", ["Judge A", "Judge B", "tau-b", ci, "Models",
                                                                  "Questions"], taus)]


def judges_html(lb: "Leaderboard") -> str:
    """report.html's section for a judge sweep ('' with one judge): the same two tables and the method."""
    if lb.judges is None:
        return ""
    out = []
    for (title, head, rows), text in zip(judge_tables(lb), (1, 2)):  # the first `text` columns are names
        def td(i: int, c: str, tag: str = "td") -> str:
            cls = ' class="t"' if i < text else ""  # noqa: B023 - used at once
            return f"<{tag}{cls}>{html.escape(c)}</{tag}>"

        cells = "".join(td(i, h, "th") for i, h in enumerate(head))
        body = "".join("<tr>" + "".join(td(i, c) for i, c in enumerate(row)) + "</tr>" for row in rows)
        out.append(f'<h3>{html.escape(title)}</h3><div class="tw"><table class="sortable"><thead><tr>{cells}'
                   f"</tr></thead><tbody>{body}</tbody></table></div>")
    return ('<section id="judges"><h2>Judges</h2><p class="note">Each judge ranks the candidates on its own; the '
            "leaderboard above ranks within each judge and compares adjacent ranks under the same judge only.</p>"
            + "".join(out) + f'<p class="note">{html.escape(lb.judges["method"])}.</p></section>')
