"""The tolerant reading of a verdict asked in plain text: almost-right free text repaired, then parsed strictly.

Why: a judge asked without a format (its server refused structured output, or gave nothing) often writes a
verdict that is nearly JSON: fenced, with prose around it, trailing commas, bare keys, `met: yes`. Re-asking each
of those costs a call and, with small open-weight judges, often gets the same text back. So a plain reply the
strict parser (judge/verdicts.py) refuses is repaired in a few unambiguous ways and parsed again by the same
strict parser; what still does not parse is re-asked with the strict parser's words. A repair never invents a
decision: yes/no and true/false are the only words read as one, and a reply holding no decision stays unusable.
Structured replies are never read this way (judge/structured.py calls this only for plain ones).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from rubric_engine.judge.verdicts import Verdict, VerdictError, VerdictShape

__all__ = ["lenient"]

_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_WORDS = {"yes": "true", "y": "true", "true": "true", "no": "false", "n": "false", "false": "false"}


def _repaired(text: str, shape: VerdictShape) -> str:
    """Trailing commas dropped, the shape's bare keys quoted, the decision's yes/no/True/"true" as JSON booleans."""
    text = _TRAILING_COMMA.sub(r"\1", text)
    names = "|".join(re.escape(k) for k in (shape.list_key, shape.id, shape.reasoning, shape.met))
    text = re.sub(rf'([{{,]\s*)({names})\s*:', r'\1"\2":', text)
    met = re.escape(shape.met)
    return re.sub(rf'("{met}"\s*:\s*)"?(yes|no|y|n|true|false)"?(?=\s*[,}}\n])',
                  lambda m: m.group(1) + _WORDS[m.group(2).lower()], text, flags=re.I)


def _key_values(text: str, shape: VerdictShape) -> str | None:
    """A one-criterion verdict written as lines (`reasoning: ...` / `met: yes`) as its JSON object, else None."""
    met = re.search(rf"^\W*{re.escape(shape.met)}\W*\s*[:=]\s*\**\s*(yes|no|true|false)\b", text, re.I | re.M)
    if met is None:
        return None
    why = re.search(rf"^\W*{re.escape(shape.reasoning)}\W*\s*[:=]\s*(.+)$", text, re.I | re.M)
    reasoning = why.group(1).strip() if why else text[:met.start()].strip()
    return json.dumps({shape.reasoning: reasoning, shape.met: _WORDS[met.group(1).lower()] == "true"})


def lenient(shape: VerdictShape, n: int) -> Callable[[str], list[Verdict]]:
    """The parser of a plain reply for n criteria: strict first, then repaired, then (one criterion) key: value
    lines. Raises the strict parser's VerdictError when none of them reads it."""
    def parse(text: str) -> list[Verdict]:
        try:
            return shape.parse(text, n)
        except VerdictError as first:
            tries = [_repaired(text, shape)]
            if shape.shape == "object":
                tries.append(_key_values(text, shape))
            for attempt in tries:
                if attempt is not None and attempt != text:
                    try:
                        return shape.parse(attempt, n)
                    except VerdictError:
                        pass
            raise first
    return parse
