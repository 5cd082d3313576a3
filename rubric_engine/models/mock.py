"""The `mock/` models: deterministic, offline stand-ins for a candidate and a judge.

Why: a newcomer can run the whole pipeline (generate, judge, score, outputs) with no key, no server
and no network (`candidate=mock judge=mock`). Asked a question with lettered options (`A. ...` lines), the
mock picks one by a hash of the request, or now and then none, so a multiple-choice try-out shows right,
wrong and unreadable answers as a real run does; asked for ratings (`Name: <score>` lines), it fills the
requested format with numbers, and now and then leaves a name out, so a rating try-out shows unparseable ones. Nothing here imports LiteLLM. Every text a mock writes
starts with MOCK_TAG so no output can be mistaken for a real model's.

A mock answers from the request (models/request.py): its answer description says what a valid answer looks
like (a verdict JSON's fields and items, a number on a scale, a label as written, a simulated user's stop
signal and the hidden state it writes after each line), so nothing above models/ knows the mock exists, and a spec that declares other verdict fields is
answered in its own shape. A request with no description (free text) gets a labelled reply.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rubric_engine.models.request import Labels, Number, Request, UserLines, VerdictJSON

__all__ = ["MOCK_PREFIX", "MOCK_TAG", "MOCK_USER_TURNS", "is_mock", "mock_reply", "mock_verdict", "mock_tokens"]

MOCK_PREFIX = "mock/"
MOCK_TAG = "[mock]"


def is_mock(model: str) -> bool:
    """True for LiteLLM-style ids the engine answers itself (`mock/<anything>`)."""
    return model.startswith(MOCK_PREFIX)


MOCK_USER_TURNS = 3  # the mock user says its stop signal after this many lines of its own


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


def mock_verdict(shape: VerdictJSON, seed: str) -> str:
    """A valid verdict JSON for `shape`; the same `seed` (the prompt) always gives the same verdict."""
    items = [{name: _value(kind, name, i, seed) for name, kind in shape.fields.items()}
             for i in range(1, shape.items + 1)]
    if shape.list_key is None:
        return json.dumps(items[0] if items else {}, ensure_ascii=False)
    return json.dumps({shape.list_key: items}, ensure_ascii=False)


def _number(answer: Number, seed: str) -> str:
    """A number of the scale: in its JSON field, or written in the first form `answer.read` reads as that number
    (`[[7]]`, `[7]`, `Rating: 7`, `7`); a scale no form is read on gets a verdict JSON of the default fields."""
    if answer.field is not None:
        return mock_verdict(VerdictJSON(1, None, {answer.reasoning: "text", answer.field: answer.values}), seed)
    replies = []
    for v in answer.values:
        for form in (f"[[{v}]]", f"[{v}]", f"Rating: {v}", f"{v}"):
            text = f"{MOCK_TAG} deterministic placeholder, not a real judgement. {form}"
            try:
                if answer.read is not None and answer.read(text) == v:
                    replies.append(text)
                    break
            except ValueError:
                continue
    if not replies:
        return mock_verdict(VerdictJSON(1, None), seed)
    return replies[_digest(seed, "reply") % len(replies)]


def mock_reply(model: str, request: Request) -> str:
    """The mock's answer to `request`: what its answer description asks for, else a short labelled reply."""
    messages, answer = request.messages, request.answer
    seed = json.dumps([model, [m.get("content") for m in messages]], ensure_ascii=False, sort_keys=True, default=str)
    if isinstance(answer, Labels):
        label = answer.written[_digest(seed) % len(answer.written)]
        return f"{MOCK_TAG} deterministic placeholder, not a real comparison. My final verdict: {label}"
    if isinstance(answer, UserLines):
        spoken = sum(1 for m in messages if m.get("role") == "assistant")
        if spoken >= MOCK_USER_TURNS:
            return f"{MOCK_TAG} Thank you, that is all for today.{_state(answer, messages, spoken)} {answer.stop}"
        line = f"{MOCK_TAG} Simulated user, turn {spoken + 1} (offline; #{_digest(seed) % 10000:04d})."
        return line + _state(answer, messages, spoken)
    if isinstance(answer, VerdictJSON):
        return mock_verdict(answer, seed)
    if isinstance(answer, Number):
        return _number(answer, seed)
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


def _state(answer: UserLines, messages: Sequence[Mapping[str, Any]], spoken: int) -> str:
    """A valid hidden state after the line ("" when none is declared): a bounded number moves from its midpoint by
    a step per turn whose size and sign a hash of the persona (the first message) fixes, clamped to its bounds,
    so some sessions reach a bound (a stop rule) and some do not; an unbounded number is the first bounded one's
    change this turn; a text says it is a placeholder."""
    if not answer.state:
        return ""
    persona = str(messages[0].get("content") or "") if messages else ""
    step = (-25, -15, 15, 25)[_digest(persona, "state") % 4]

    def level(low: float | None, high: float | None, k: int) -> float:
        lo, hi = (0.0 if low is None else low), (100.0 if high is None else high)
        return min(hi, max(lo, (lo + hi) / 2 + step * k))

    bounded = next(((lo, hi) for _, kind, lo, hi in answer.state
                    if kind == "number" and (lo is not None or hi is not None)), (None, None))
    state: dict[str, Any] = {}
    for name, kind, low, high in answer.state:
        if kind == "text":
            state[name] = f"{MOCK_TAG} offline placeholder state"
        elif low is None and high is None:
            state[name] = level(*bounded, spoken + 1) - level(*bounded, spoken)
        else:
            state[name] = level(low, high, spoken + 1)
    return "\n" + json.dumps(state, ensure_ascii=False)


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
