"""The `mock/` models: deterministic, offline stand-ins for a candidate and a judge.

Why: a newcomer can run the whole pipeline (generate, judge, score, outputs) with no key, no server
and no network (`candidate=mock judge=mock`). Asked a question with lettered options (`A. ...` lines), the
mock picks one by a hash of the request, or now and then none, so a multiple-choice try-out shows right,
wrong and unreadable answers as a real run does; asked for ratings (`Name: <score>` lines), it fills the
requested format with numbers, and now and then leaves a name out, so a rating try-out shows unparseable ones. Nothing here imports LiteLLM. Every text a mock writes
starts with MOCK_TAG so no output can be mistaken for a real model's.

The judge layer tells the mock what shape of verdict it expects (`MockShape`); `mock_verdict` is the
one function that builds a verdict from it, so a spec that declares other verdict fields only has to
describe them in the shape.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MOCK_PREFIX", "MOCK_TAG", "MockShape", "MockLabels", "MockUser", "is_mock", "mock_reply", "mock_verdict"]

MOCK_PREFIX = "mock/"
MOCK_TAG = "[mock]"


def is_mock(model: str) -> bool:
    """True for LiteLLM-style ids the engine answers itself (`mock/<anything>`)."""
    return model.startswith(MOCK_PREFIX)


@dataclass(frozen=True)
class MockShape:
    """What a valid verdict looks like: `{list_key: [{field: value, ...} x items]}`.

    `fields` maps each field name to its kind: "id" (1..items), "text", "bool", "number", or a list of
    allowed values (the mock picks one deterministically).
    """

    items: int
    list_key: str | None = "criteria"  # None: one criterion per call, answered as a single object
    fields: Mapping[str, Any] = field(default_factory=lambda: {"id": "id", "reasoning": "text", "met": "bool"})
    replies: tuple[str, ...] = ()  # when set, the verdict is one of these texts (a judge without structured output)


@dataclass(frozen=True)
class MockUser:
    """What a simulated user must do: speak as the user, and say `stop` once it has spoken `turns` times
    (its own earlier lines are the `assistant` messages of its view), so a mock session ends by itself."""

    stop: str
    turns: int = 3


def _digest(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()[:8], "big")


def _value(kind: Any, name: str, index: int, seed: str) -> Any:
    if kind == "id":
        return index
    if kind == "text":
        return f"{MOCK_TAG} deterministic placeholder, not a real judgement (item {index})"
    if kind == "bool":
        return _digest(seed, name, str(index)) % 2 == 0
    if kind == "number":
        return _digest(seed, name, str(index)) % 11 / 10.0
    if isinstance(kind, Sequence) and not isinstance(kind, str) and kind:
        return list(kind)[_digest(seed, name, str(index)) % len(kind)]
    raise ValueError(f"mock judge: unknown verdict field kind {kind!r} for {name!r}")


def mock_verdict(shape: MockShape, seed: str) -> str:
    """A valid verdict JSON for `shape`; the same `seed` (the prompt) always gives the same verdict."""
    if shape.replies:
        return shape.replies[_digest(seed, "reply") % len(shape.replies)]
    items = [{name: _value(kind, name, i, seed) for name, kind in shape.fields.items()}
             for i in range(1, shape.items + 1)]
    if shape.list_key is None:
        return json.dumps(items[0] if items else {}, ensure_ascii=False)
    return json.dumps({shape.list_key: items}, ensure_ascii=False)


@dataclass(frozen=True)
class MockLabels:
    """A pairwise verdict: one of `written` (each label as the judge must write it, e.g. `[[A>B]]`)."""

    written: tuple[str, ...]


def mock_reply(model: str, messages: Sequence[Mapping[str, Any]], expect: MockShape | MockLabels | None) -> str:
    """The mock's answer: a verdict when the caller expects one, else a short labelled reply."""
    seed = json.dumps([model, [m.get("content") for m in messages]], ensure_ascii=False, sort_keys=True, default=str)
    if isinstance(expect, MockLabels):
        label = expect.written[_digest(seed) % len(expect.written)]
        return f"{MOCK_TAG} deterministic placeholder, not a real comparison. My final verdict: {label}"
    if isinstance(expect, MockUser):
        spoken = sum(1 for m in messages if m.get("role") == "assistant")
        if spoken >= expect.turns:
            return f"{MOCK_TAG} Thank you, that is all for today. {expect.stop}"
        return f"{MOCK_TAG} Simulated user, turn {spoken + 1} (offline; #{_digest(seed) % 10000:04d})."
    if expect is not None:
        return mock_verdict(expect, seed)
    number = f"#{_digest(seed) % 10000:04d}"
    rated = _ratings(messages, seed)
    if rated is not None:
        return rated
    letters = _option_letters(messages)
    if letters:  # lettered options in the prompt: a mix of answers, and now and then none, as a real model gives
        pick = _digest(seed, "option") % (len(letters) + 1)
        if pick == len(letters):
            return f"{MOCK_TAG} (the offline mock names no option this time, so this reply is unreadable; {number})"
        return f"{MOCK_TAG} Answer: {letters[pick]} (a deterministic pick by the offline mock, not a real answer; {number})"
    return f"{MOCK_TAG} Deterministic reply from {model} (offline, no model was called; {number})."


_OPTION = re.compile(r"^[ \t]*\(?([A-Z])[.)][ \t]+\S", re.M)


def _option_letters(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The option letters A, B, C, ... listed one per line (`A. text`, `(B) text`) in the last message, or []."""
    text = str(messages[-1].get("content") or "") if messages else ""
    found = [m.group(1) for m in _OPTION.finditer(text)]
    letters: list[str] = []
    for letter in found:  # the run that starts at A and goes on in order
        if letter == chr(ord("A") + len(letters)):
            letters.append(letter)
    return letters if len(letters) >= 2 else []


_RATING_LINE = re.compile(r"^[ \t]*(\w+):[ \t]*<[^<>\n]*score[^<>\n]*>[ \t]*$", re.I)
_PLACEHOLDER = re.compile(r"<[^<>\n]*>")


def _ratings(messages: Sequence[Mapping[str, Any]], seed: str) -> str | None:
    """A reply in the rating format the last message asks for (`Name: <score>` lines, the heading above the
    first and anything between them kept, other placeholders filled with words), numbers 0-10 by a hash; one
    request in four leaves its last name out (unparseable). None: the message asks for no ratings."""
    lines = (str(messages[-1].get("content") or "") if messages else "").splitlines()
    at = [i for i, line in enumerate(lines) if _RATING_LINE.match(line)]
    if len(at) < 2:
        return None
    out = []
    for i in range(max(0, at[0] - 1), at[-1] + 1):
        m = _RATING_LINE.match(lines[i])
        out.append(f"{m.group(1)}: {_digest(seed, str(i)) % 11}" if m else _PLACEHOLDER.sub("offline mock", lines[i]))
    if _digest(seed, "rating") % 4 == 0:
        out.pop()
    return "\n".join([MOCK_TAG, *out])


def mock_tokens(text: str) -> int:
    """A rough size for the mock's usage numbers (it has no tokenizer); about 4 characters a token."""
    return max(1, (len(text) + 3) // 4)
