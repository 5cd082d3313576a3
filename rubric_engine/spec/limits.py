"""The size bounds a question is held to, in one place for every layer that checks them.

Why here: the data loader (dataset/), the prompt renderer (judge/) and the run (run/) each refuse something too
big, and they must agree on the numbers: a row whose own texts cannot fit in a judge prompt is refused when the
data is read (`validate`, and a run before any call) instead of after its candidate calls were paid; a reply
that could never fit in one is refused when it arrives, as that question's error. docs/trust-model.md (bounds).
"""

from __future__ import annotations

from rubric_engine.datatypes import Question
from rubric_engine.errors import DataError

__all__ = ["MAX_PROMPT_CHARS", "MAX_REPLY_CHARS", "MAX_TURNS", "RENDER_SECONDS", "question_chars", "check_fits"]

MAX_PROMPT_CHARS = 2_000_000  # a rendered prompt longer than this is a runaway template or an oversized row
# a candidate's or simulated user's reply longer than this could never fit in a judge prompt: that question's
# error (below it, RUBRIC_ENGINE_MAX_REPLY_MB, the cap on a reply body as it arrives, is the one the user sets)
MAX_REPLY_CHARS = MAX_PROMPT_CHARS
MAX_TURNS = 10_000  # scripted user turns per row (data.fields.turns)
RENDER_SECONDS = 5.0  # CPU time one template rendering may take (a loop that never ends is a spec error)


def question_chars(q: Question) -> int:
    """Characters of a question's own texts that its prompts quote: a row past MAX_PROMPT_CHARS can never be
    judged, so the data loader refuses it before any call is paid."""
    return (sum(len(t.content) for t in q.dialogue) + sum(map(len, q.turns)) + len(q.reference)
            + sum(map(len, q.references)) + sum(len(c.text) for c in q.criteria) + sum(map(len, q.choices)))


def check_fits(q: Question, file: str, line: int) -> Question:
    """The question as it is, or a DataError naming it when its texts alone are past MAX_PROMPT_CHARS."""
    size = question_chars(q)
    if size > MAX_PROMPT_CHARS:
        raise DataError(file, f"question {q.id}: its texts (dialogue, turns, reference, rubric) come to {size} "
                        f"characters, over the limit of {MAX_PROMPT_CHARS} a prompt may have, so no judge prompt "
                        "could hold them", line=line, fix="shorten the row, or leave it out of the data")
    return q
