"""Unpaired UTF-16 surrogates: text JSON can carry (`"\\ud800"`) but UTF-8 cannot.

Why a module of its own: such a string passes `json.loads`, then fails at whatever writes it next (the
call cache, the journal, a report) after the call was paid. Every place text enters the engine (a
model's reply, an error body, a data or answers row) checks it here, so the failure is named where it
comes in: a reply becomes a recorded per-question error, a data file is refused before any call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

__all__ = ["LONE_SURROGATE", "surrogate_path", "replace_surrogates"]

# json.loads joins a valid pair into one code point, so any surrogate left in a str is unpaired
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")  # how JSON text spells one: the cheap test first


def replace_surrogates(text: str) -> str:
    """`text` with each unpaired surrogate replaced by U+FFFD (for error texts, which are only read)."""
    return LONE_SURROGATE.sub("\ufffd", text) if LONE_SURROGATE.search(text) else text


def _strings(obj: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(str(k), f"{path}.{k}" if path else str(k))
            yield from _strings(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _strings(v, f"{path}[{i}]")


def surrogate_path(obj: Any, source: str | bytes | None = None) -> str | None:
    """Where (a key path such as `rubrics[2].criterion`) a parsed JSON value holds an unpaired surrogate,
    or None. `source`: the JSON text it was parsed from; without a `\\uD8..`-`\\uDF..` escape in it the
    value cannot hold one, and the walk is skipped (the common case costs one regex search)."""
    if source is not None:
        text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
        if not _ESCAPE.search(text) and not LONE_SURROGATE.search(text):
            return None
    for path, text in _strings(obj, ""):
        if LONE_SURROGATE.search(text):
            return path or "<value>"
    return None
