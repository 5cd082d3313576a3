"""One redaction for every server-written text the engine keeps: error texts (samples.jsonl, stderr, error.txt),
replies and judge reasoning (samples.jsonl, answers.jsonl and the reports made from them).

Why one place: a provider or a hostile server may echo the request's `Authorization` header in an error
body; whichever path that text takes out of the process, it must lose the key on the way. Redacted are
every key value the engine sends (registered by the model client), the values of `*_API_KEY`, `*_KEY`,
`*_TOKEN`, `*_SECRET` and `*_PASSWORD` variables in the environment, anything shaped like `Bearer <token>` or
`sk-<token>`, and credentials inside a URL (`user:password@host`, `?token=...`, `&key=...`).

The same redaction runs on every text sent to a model (`redact_messages`, applied by the model client to each
outgoing request): a key one server echoed never reaches another server inside a prompt.
"""

from __future__ import annotations

import os
import re
from typing import Any, overload

__all__ = ["redact", "redact_messages", "register_secret"]

_MIN_LEN = 6  # shorter values (placeholders, test stubs) would blank out ordinary words
_SECRETS: set[str] = set()
# environment variables whose values are secrets wherever they appear (AWS_SECRET_ACCESS_KEY ends in _KEY)
_SECRET_VARS = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_PASSWD", "_CREDENTIALS")
# (pattern, replacement, substrings one of which any match contains: the text, lower-cased where the
# pattern ignores case). Every judge reply passes through here, so a pattern runs only when a match is
# possible: scanning a long reply with the case-insensitive key pattern costs ~0.1 ms per kilobyte.
_PATTERNS = (
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{4,}"), r"\1 ***", ("bearer",), True),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{4,}"), "sk-***", ("sk-",), False),
    (re.compile(r"(?i)((?:api[_-]?key|x-api-key|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{4,}"), r"\1***",
     ("apikey", "api_key", "api-key", "authorization"), True),
    # a URL's user:password@ and its credential query parameters (an api_base such as http://u:p@host/v1?key=...)
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), r"\1***:***@", ("://",), True),
    (re.compile(r"(?i)([?&](?:[a-z0-9_-]*(?:token|key|secret|password|passwd|pwd|sig|signature|auth|"
                r"credential)[a-z0-9_-]*)=)[^&#\s\"']+"), r"\1***", ("=",), True),
)


def register_secret(value: str | None) -> None:
    """Remember a key value sent to a server so any text echoing it is redacted."""
    if value and len(value) >= _MIN_LEN:
        _SECRETS.add(value)


def _env_secrets() -> set[str]:
    return {v for k, v in os.environ.items()
            if (k.upper().endswith(_SECRET_VARS) or k == "RUBRIC_ENGINE_KEY") and len(v) >= _MIN_LEN}


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


def redact_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with every text redacted (a string content, and the text of content parts); the same list
    when nothing changes, so a request without a secret is sent as built."""
    out, changed = [], False
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            new: Any = redact(content)
        elif isinstance(content, list):
            new = [dict(part, text=redact(part["text"])) if isinstance(part, dict) and isinstance(part.get("text"), str)
                   else part for part in content]
        else:
            new = content
        if new != content:
            changed = True
            message = {**message, "content": new}
        out.append(message)
    return out if changed else messages
