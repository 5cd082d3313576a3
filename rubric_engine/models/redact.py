"""One redaction for every server-written text the engine keeps: error texts (samples.jsonl, stderr, error.txt),
replies and judge reasoning (samples.jsonl, answers.jsonl and the reports made from them).

Why one place: a provider or a hostile server may echo the request's `Authorization` header in an error
body; whichever path that text takes out of the process, it must lose the key on the way. Redacted are
every key value the engine sends (registered by the model client), the values of `*_API_KEY`, `*_KEY`,
`*_TOKEN`, `*_SECRET` and `*_PASSWORD` variables in the environment, anything shaped like `Bearer <token>` or
`sk-<token>`, and credentials inside a URL (`user:password@host`, `?token=...`, `&key=...`).

The same redaction runs on every text sent to a model (`MessageRedactor`, one per model client, applied to each
outgoing request): a key one server echoed never reaches another server inside a prompt. A conversation's
request at turn k repeats the k - 1 turns before it, so the client's redactor remembers what each text of such
a request redacted to (for as long as the set of secrets is the one it was redacted with): a T-turn
conversation's texts are scanned about 2T times in all, not T^2 times (3,000 turns: 9 million scans before,
each re-reading the environment, minutes of CPU).
"""

from __future__ import annotations

import os
import re
from typing import Any, overload

from rubric_engine.models.prefixes import PrefixMemory

__all__ = ["HISTORY", "MessageRedactor", "redact", "register_secret"]

# A request of at least this many messages repeats an earlier turn (user, assistant, user): only the texts of
# such requests are remembered, so single prompts (a judge's, one per call) never fill the memory.
HISTORY = 3
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
    return _scrub(text, _secrets())


def _secrets() -> tuple[str, ...]:
    """Every secret value known now, longest first (a key holding a shorter one is replaced whole)."""
    return tuple(sorted(_SECRETS | _env_secrets(), key=lambda s: (-len(s), s)))


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    """`text` without `secrets` and key-shaped tokens (the work behind `redact`)."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "***")
    lower = text.lower()
    for pattern, repl, needles, folded in _PATTERNS:
        if any(n in (lower if folded else text) for n in needles):
            text = pattern.sub(repl, text)
            lower = text.lower()
    return text


class MessageRedactor:
    """Every text of a request's messages redacted (a string content, and the text of content parts); the same
    list when nothing changes, so a request without a secret is sent as built. One per model client, remembering
    what each text redacted to and, for a request that repeats an earlier one and adds turns, where that request
    ended (models/prefixes.py): only the new messages are visited.

    Valid while the secrets are the ones it was computed with: a key registered or a variable set since
    then clears it. Only requests that carry earlier turns (`HISTORY` messages or more) are remembered, bounded
    by the characters held (`max_chars`); when full it starts again."""

    def __init__(self, max_chars: int = 4_000_000) -> None:
        self.max_chars = max_chars
        self._done: dict[str, str] = {}
        self._chars = 0
        self._secrets: tuple[str, ...] = ()
        # each remembered request -> its messages redacted (None: none changed, the request is sent as built)
        self._prefixes: PrefixMemory[list[dict[str, Any]] | None] = PrefixMemory()

    def __call__(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        secrets = _secrets()  # once per request: a changed set of secrets voids what was remembered
        if secrets != self._secrets:
            self._done, self._chars, self._secrets = {}, 0, secrets
            self._prefixes.clear()
        keep = len(messages) >= HISTORY
        n, earlier = self._prefixes.longest(messages) if keep else (0, None)
        tail, changed = self._redacted(messages[n:], keep)
        if earlier is None and not changed:
            out = messages
        else:  # the earlier request's redacted messages (or its own, unchanged), then the new ones
            out = [*(earlier if earlier is not None else messages[:n]), *tail]
        if keep:
            self._prefixes.remember(messages, None if out is messages else list(out))
        return out

    def _redacted(self, messages: list[dict[str, Any]], keep: bool) -> tuple[list[dict[str, Any]], bool]:
        out, changed = [], False
        for message in messages:
            content = message.get("content")
            if isinstance(content, str):
                new: Any = self._one(content, keep)
            elif isinstance(content, list):
                new = [dict(part, text=self._one(part["text"], keep))
                       if isinstance(part, dict) and isinstance(part.get("text"), str) else part for part in content]
            else:
                new = content
            if new != content:
                changed = True
                message = {**message, "content": new}
            out.append(message)
        return out, changed

    def _one(self, text: str, keep: bool) -> str:
        done = self._done.get(text)
        if done is None:
            done = _scrub(text, self._secrets) if text else text
            if not keep:
                return done
            if self._chars + len(text) > self.max_chars:
                self._done, self._chars = {}, 0
            self._done[text] = done
            self._chars += len(text)
        return done

