"""A conversation the run generated (scripted or simulated), as HTML for the report's per-question view.

Why its own module: the report's pages show a single reply; a conversation adds the turns in order, how the
session ended and the simulated user's error, and only for records that hold a session (the conversation's
strategy finds it: shapes/scripted.Session.stored_transcript).
"""

from __future__ import annotations

import html
import json

from rubric_engine.record.types import Transcript
from rubric_engine.report.calls_view import QUESTION_CHARS, clipped

__all__ = ["transcript_html"]

_WHO = {"user": "user", "assistant": "candidate"}
_ENDED = {"stop": "the simulated user ended it", "max_turns": "cut at max_turns",
          "state": "a stop rule on the simulated user's state ended it"}


def transcript_html(session: Transcript | None, max_chars: int = QUESTION_CHARS) -> str:
    """A record's session, one block per turn ('' for a single reply: None); past `max_chars` characters of
    turns the rest is a note pointing to the full text (samples.jsonl, `rubric-engine show`), so a conversation of
    thousands of turns keeps the page small."""
    if session is None:
        return ""
    turns = session.turns
    budget, blocks = max_chars, []
    for k, t in enumerate(turns):
        text = str(t.content if t.content is not None else "")
        if budget <= 0:
            blocks.append(f'<p class="note">{len(turns) - k} more turn(s) not embedded (over {max_chars} characters):'
                          " the whole conversation is in samples.jsonl and rubric-engine show</p>")
            break
        shown = clipped(text, budget)
        budget -= len(text)
        state = t.state  # a simulated user's hidden state (spec/userstate.py), unseen by the candidate
        hidden = (f'<p class="note">hidden state: {html.escape(json.dumps(state, ensure_ascii=False))}</p>'
                  if state is not None else "")
        blocks.append(f'<div class="turn"><b>{html.escape(_WHO.get(str(t.role), str(t.role)))}</b>'
                      f'<pre>{html.escape(shown)}</pre>{hidden}</div>')
    body = "".join(blocks)
    how = _ENDED.get(str(session.ended), "")
    note = f"Conversation ({len(turns)} turns{'; ' + how if how else ''}):"
    err = session.user_error
    return (f'<p class="note">{html.escape(note)}</p><div class="dialogue">{body}</div>'
            + (f'<p class="err">Simulated user error: {html.escape(str(err))}</p>' if err else ""))
