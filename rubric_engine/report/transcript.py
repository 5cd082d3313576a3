"""A conversation the run generated (scripted or simulated), as HTML for the report's per-question view.

Why its own module: the report's pages show a single reply; a conversation adds the turns in order, how the
session ended and the simulated user's error, and only for records that carry a `transcript`.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

__all__ = ["transcript_html"]

_WHO = {"user": "user", "assistant": "candidate"}
_ENDED = {"stop": "the simulated user ended it", "max_turns": "cut at max_turns"}


def transcript_html(sample: Mapping[str, Any]) -> str:
    """The record's transcript, one block per turn ('' for a single-reply record)."""
    turns = sample.get("transcript")
    if not isinstance(turns, list):
        return ""
    body = "".join(f'<div class="turn"><b>{html.escape(_WHO.get(str(t.get("role")), str(t.get("role"))))}</b>'
                   f'<pre>{html.escape(str(t.get("content", "")))}</pre></div>' for t in turns if isinstance(t, Mapping))
    how = _ENDED.get(str(sample.get("ended")), "")
    note = f"Conversation ({len(turns)} turns{'; ' + how if how else ''}):"
    err = sample.get("user_error")
    return (f'<p class="note">{html.escape(note)}</p><div class="dialogue">{body}</div>'
            + (f'<p class="err">Simulated user error: {html.escape(str(err))}</p>' if err else ""))
