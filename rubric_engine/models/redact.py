"""One redaction for every server-written text the engine keeps: error texts (samples.jsonl, stderr, error.txt),
replies and judge reasoning (samples.jsonl, answers.jsonl and the reports made from them).

Why one place: a provider or a hostile server may echo the request's `Authorization` header in an error
body; whichever path that text takes out of the process, it must lose the key on the way. Redacted are
every key value the engine sends (registered by the model client), the values of `*_API_KEY` variables in
the environment, and anything shaped like `Bearer <token>` or `sk-<token>`.
"""

from __future__ import annotations

import os
import re
from typing import overload

__all__ = ["redact", "register_secret"]

_MIN_LEN = 6  # shorter values (placeholders, test stubs) would blank out ordinary words
_SECRETS: set[str] = set()
# (pattern, replacement, substrings one of which any match contains: the text, lower-cased where the
# pattern ignores case). Every judge reply passes through here, so a pattern runs only when a match is
# possible: scanning a long reply with the case-insensitive key pattern costs ~0.1 ms per kilobyte.
_PATTERNS = (
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{4,}"), r"\1 ***", ("bearer",), True),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{4,}"), "sk-***", ("sk-",), False),
    (re.compile(r"(?i)((?:api[_-]?key|x-api-key|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{4,}"), r"\1***",
     ("apikey", "api_key", "api-key", "authorization"), True),
)


def register_secret(value: str | None) -> None:
    """Remember a key value sent to a server so any text echoing it is redacted."""
    if value and len(value) >= _MIN_LEN:
        _SECRETS.add(value)


def _env_secrets() -> set[str]:
    return {v for k, v in os.environ.items()
            if (k.endswith(("_API_KEY", "_KEY", "_TOKEN")) or k == "RUBRIC_ENGINE_KEY") and len(v) >= _MIN_LEN}


@overload
def redact(text: str) -> str: ...
@overload
def redact(text: None) -> None: ...
def redact(text: str | None) -> str | None:
    """`text` with every known key value and key-shaped token replaced by ***."""
    if not text:
        return text
    for secret in sorted(_SECRETS | _env_secrets(), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    lower = text.lower()
    for pattern, repl, needles, folded in _PATTERNS:
        if any(n in (lower if folded else text) for n in needles):
            text = pattern.sub(repl, text)
            lower = text.lower()
    return text
