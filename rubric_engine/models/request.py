"""One request to a model, typed: the messages sent, the role that sends them, the response_format if any,
`prompts`' words for it, how many calls it stands for, what the run's transcripts name it by, and what a valid
answer looks like.

Why a type, and why here: the plan of calls (shapes/plan.py) and the run obtain every request from the same
strategy methods (shapes/), so what the dry run prices, `prompts` prints, the preflight renders and the run
sends is one object. The client sends it as it is (ModelClient.send), and the offline mock (models/mock.py)
answers from its answer description: what a valid answer looks like is a fact of the request, derived once from
the spec by whoever plans it (judge/verdicts.py, judge/scores.py, judge/pairwise.py, shapes/simulated.py), not
a hint threaded through the judge's code. Real models never read the description; the caller still validates
every reply it gets (judge/structured.py).

The answer descriptions:
  FreeText     any non-empty text (a candidate's or a baseline's reply)
  VerdictJSON  a verdict JSON: `{list_key: [{field: kind, ...} x items]}`, or one object when `list_key` is None;
               a field's kind is "id" (1..items), "text", "bool", "number" or a tuple of allowed values
  Number       one number on a scale, from `values`: in the JSON field `field` (beside `reasoning`), or written
               in free text (`field` None) where `read` finds it
  Labels       one of these labels, as the judge must write them (`[[A>B]]`)
  UserLines    a simulated user's line; `stop` ends the session, which the run cuts after `max_turns` turns;
               with `state` fields, the line is followed by a JSON state of those fields (spec/userstate.py)
This module imports nothing of the engine's: every layer above may build a request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
import dataclasses
from dataclasses import dataclass
from typing import Any, Union

__all__ = ["Request", "Answer", "FreeText", "VerdictJSON", "Number", "Labels", "UserLines", "FREE_TEXT", "Message"]

Message = dict[str, Any]


@dataclass(frozen=True)
class FreeText:
    """Any non-empty text."""


@dataclass(frozen=True)
class VerdictJSON:
    """A verdict JSON with `items` entries (ids 1..items), each with `fields` (name -> kind)."""
    items: int
    list_key: str | None = "criteria"  # None: one item, answered as a single object
    fields: Mapping[str, Any] = dataclasses.field(
        default_factory=lambda: {"id": "id", "reasoning": "text", "met": "bool"})


@dataclass(frozen=True)
class Number:
    """One number from `values` (the whole numbers of the scale, its low end when it holds none)."""
    values: tuple[float, ...]
    field: str | None  # the JSON field holding it (None: written in free text)
    reasoning: str = "reasoning"
    # a free-text reply's number (ValueError when it gives none); not part of the request's equality
    read: Callable[[str], float] | None = dataclasses.field(default=None, compare=False)


@dataclass(frozen=True)
class Labels:
    """One of `written`, each label as the judge must write it."""
    written: tuple[str, ...]


@dataclass(frozen=True)
class UserLines:
    """A simulated user's line: `stop` ends the session; the run asks at most `max_turns` times. `state`: the
    hidden state's fields, (name, "number" | "text", min, max) each, written as a JSON object after the line."""
    stop: str
    max_turns: int
    state: tuple[tuple[str, str, float | None, float | None], ...] = ()


Answer = Union[FreeText, VerdictJSON, Number, Labels, UserLines]
FREE_TEXT = FreeText()


@dataclass(frozen=True)
class Request:
    """One request as it is sent. `calls`: how many calls it stands for in the plan (a conversation's first
    request, once per turn); `context`: what the run's transcripts name the call by (criterion, turn, order)."""
    messages: list[Message]
    role: str = "candidate"
    answer: Answer = FREE_TEXT
    response_format: dict[str, Any] | None = None
    title: str = ""
    calls: int = 1
    context: Mapping[str, Any] = dataclasses.field(default_factory=dict)
