"""What the terminal may be shown of an untrusted string (a spec, data, a reply, a server's error text).

Why: a model name ending in ESC [8m hides everything printed after it, a carriage return rewrites a line,
and `[red]` in a data label is rich markup. `shown` is the one function every print of an untrusted string
goes through: control characters (C0, DEL, C1, bidi overrides) become visible escapes such as `\\x1b`, and
rich markup is escaped where the text goes into a rich renderable. `SafeConsole` applies the control-character
half to everything a rich console writes, so a string that reached a table or a line unescaped still cannot
drive the terminal; rich's own styles are not text and are untouched. Written to a file or a pipe it never
breaks a line (`> result.txt` keeps whole paths and table cells): only a terminal has a width to fit.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from rich.console import Console
from rich.markup import escape
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

__all__ = ["shown", "SafeConsole", "UNBOUNDED"]

UNBOUNDED = 1 << 20  # the width of a console writing to a file or a pipe: lines are as long as their text

# Cc (C0, DEL, C1) plus the bidi embedding / override / isolate controls that reorder what is shown.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_NOT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(match: re.Match[str]) -> str:
    ch = match.group()
    return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def shown(text: Any, markup: bool = True, newlines: bool = False) -> str:
    """`text` safe for the terminal: control characters as escapes, rich markup escaped when `markup`
    (the text goes into console.print or a Table). `newlines=True` keeps line breaks (a multi-line message)."""
    out = (_CONTROL_NOT_NEWLINE if newlines else _CONTROL).sub(_visible, str(text))
    return escape(out) if markup else out


class SafeConsole(Console):
    """A rich Console whose written text never carries a control character other than a line break, and whose
    lines are never broken when it writes to a file or a pipe (rich would fit them to 80 columns, or to the
    width of whichever standard stream is a terminal, or to $COLUMNS)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if kwargs.get("width") is None and not self.is_terminal:
            self.width = UNBOUNDED

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """As rich prints; to a file or a pipe a table is at least as wide as its title, which rich would
        otherwise wrap to the table's width (a long benchmark path or model name in the heading)."""
        if self._width == UNBOUNDED:
            for obj in objects:
                if isinstance(obj, Table) and isinstance(obj.title, str):
                    obj.min_width = max(obj.min_width or 0, Text.from_markup(obj.title).cell_len)
        super().print(*objects, **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            seg if seg.control or not _CONTROL_NOT_NEWLINE.search(seg.text)
            else Segment(_CONTROL_NOT_NEWLINE.sub(_visible, seg.text), seg.style, seg.control) for seg in buffer)
