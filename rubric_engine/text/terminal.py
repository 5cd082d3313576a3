"""What the terminal may be shown of an untrusted string (a spec, data, a reply, a server's error text).

Why: a model name ending in ESC [8m hides everything printed after it, a carriage return rewrites a line,
and `[red]` in a data label is rich markup. `shown` is the one function every print of an untrusted string
goes through: control characters (C0, DEL, C1, bidi overrides) become visible escapes such as `\\x1b`, and
rich markup is escaped where the text goes into a rich renderable. `SafeConsole` applies the control-character
half to everything a rich console writes, so a string that reached a table or a line unescaped still cannot
drive the terminal; rich's own styles are not text and are untouched.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from rich.console import Console
from rich.markup import escape
from rich.segment import Segment

__all__ = ["shown", "SafeConsole"]

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
    """A rich Console whose written text never carries a control character other than a line break."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            seg if seg.control or not _CONTROL_NOT_NEWLINE.search(seg.text)
            else Segment(_CONTROL_NOT_NEWLINE.sub(_visible, seg.text), seg.style, seg.control) for seg in buffer)
