"""The "Rubric items" section of report.html, from the items.json that `rubric-engine items` wrote.

Why a module of its own: the leaderboard page shows the rubric diagnostics beside the scores, the way it shows
judge-human agreement, without recomputing anything: it reads the stored items.json (found in the report's
directory or its items/ folder) and escapes every text in it; a file it cannot read is one warning line.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rubric_engine.report.html_views import load_json_section

__all__ = ["ITEMS_JSON", "find_items", "items_section", "load_items_section"]

ITEMS_JSON = "items.json"
TOP = 10
_TITLE = "<h2>Rubric items</h2>"


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * float(x):.0f}%"


def find_items(paths: Iterable[Path]) -> Path | None:
    """The first items.json in the given directories or their items/ folder (the command's default out=)."""
    for p in map(Path, paths):
        for cand in (p / ITEMS_JSON, p / "items" / ITEMS_JSON):
            if cand.is_file():
                return cand
    return None


def items_section(result: Mapping[str, Any], source: str = ITEMS_JSON) -> str:
    """The summary paragraph and the first criteria of the review-first order."""
    try:
        rows = []
        for c in list(result["criteria"])[:TOP]:
            r = c.get("discrimination")
            flag = c.get("flag") or ("no separation" if c.get("no_signal") else "")
            rows.append("<tr>" + "".join(f'<td class="t">{_e(x)}</td>' for x in (c["qid"], c["index"], c["text"]))
                        + "".join(f"<td>{_e(x)}</td>" for x in (
                            c["replies"], _pct(c.get("pass_rate")), "—" if r is None else f"{float(r):+.2f}",
                            _pct(c.get("spread")), flag, f"{float(c.get('review_score', 0)):.2f}")) + "</tr>")
        summary = str(result["summary"])
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        return (f'{_TITLE}<p class="warn">{_e(source)}: not an items.json written by `rubric-engine items` '
                f"({_e(type(exc).__name__)}: {_e(exc)}); re-run items to rebuild it.</p>")
    head = ("<tr><th class=\"t\">Question</th><th class=\"t\">#</th><th class=\"t\">Criterion</th><th>Replies</th>"
            "<th>Pass</th><th>r</th><th>Spread</th><th>Flag</th><th>Review score</th></tr>")
    return (f"{_TITLE}<p>{_e(summary)}</p>"
            f'<div class="tw"><table class="sortable"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>'
            f'<p class="note">Review first: the top {TOP} criteria. From {_e(source)} (written by '
            "<code>rubric-engine items</code>; items.md and items.csv there have every criterion, the questions, "
            "the groups' alpha and any proposed hard set).</p>")


def load_items_section(path: Path) -> str:
    """items_section() of a file; unreadable JSON becomes a one-line warning in the page."""
    return load_json_section(path, "Rubric items", items_section)
