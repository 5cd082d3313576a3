"""What a failed model call means: retry it or not, how long the provider asks us to wait, and the
one line a user reads about it.

Why apart from the client: the rules are pure functions of an exception (its class names, status,
headers, text) and are tested as such; the client only acts on the `Failure` they return. LiteLLM's
exception classes are recognised by name, so this module never imports LiteLLM.
"""

from __future__ import annotations

import email.utils
import re
import time
from dataclasses import dataclass
from typing import Any

from rubric_engine.models.redact import redact
from rubric_engine.text.surrogates import replace_surrogates

__all__ = ["Failure", "Malformed", "classify", "clean", "retry_after", "STOPS_RUN_KINDS", "error_bodies"]

_RETRY_STATUS = frozenset({408, 409, 425, 429})
_FATAL_NAMES = frozenset({"AuthenticationError", "PermissionDeniedError", "NotFoundError", "BadRequestError",
                          "UnprocessableEntityError", "UnsupportedParamsError", "ContentPolicyViolationError"})
# provider error codes (OpenAI-style `error.code` / `error.type`) that no retry can fix
_CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_QUOTA_CODES = frozenset({"insufficient_quota"})
_MISSING_KEY = "Missing credentials"  # LiteLLM/OpenAI SDK wording when no key was found at all
STOPS_RUN_KINDS = frozenset({"auth", "forbidden", "not_found", "connection", "quota"})  # same failure for every question


class Malformed(Exception):
    """A 200 answer without usable choices: retryable like a 5xx."""


@dataclass
class Failure:
    fatal: bool
    status: int | None
    retry_after: float | None
    detail: str
    kind: str  # "context", "auth", ... chooses the advice in the message


def retry_after(exc: BaseException) -> float | None:
    """Seconds from Retry-After-Ms / Retry-After (seconds or HTTP date) on the error's response."""
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    try:
        lower = {str(k).lower(): str(v) for k, v in dict(headers or {}).items()}
        if "retry-after-ms" in lower:
            return max(0.0, float(lower["retry-after-ms"]) / 1000.0)
        value = lower.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except Exception:  # noqa: BLE001 - an unreadable header means "no hint", not a crash
        return None


def clean(text: str, secret: str | None) -> str:
    """One line, no LiteLLM class-name prefixes, no secret, at most 300 chars."""
    text = replace_surrogates(re.sub(r"\s+", " ", text).strip())  # an error body's "\\ud800" is text to show
    text = re.sub(r"^(litellm\.\w+:\s*)+", "", text)
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    text = redact(text)
    return text[:300] + ("..." if len(text) > 300 else "")


def refused(exc: BaseException) -> bool:
    """A connection that could not be opened (LiteLLM reports it as a 500 'Connection error')."""
    socket_refused = _socket_refused(exc)
    return socket_refused if socket_refused is not None else "Connection error" in str(exc)


def _socket_refused(exc: BaseException) -> bool | None:
    """True: the chain shows the socket itself refused (no server answered, whatever status LiteLLM puts on it);
    False: it shows a timeout; None: it shows neither."""
    for node in _chain(exc):
        names = {cls.__name__ for cls in type(node).__mro__}
        if names & {"Timeout", "APITimeoutError", "TimeoutException", "TimeoutError"}:
            return False
        if names & {"ConnectError", "ConnectionRefusedError"} or "Connection refused" in str(node):
            return True
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and what it was raised from, outermost first (cycles cut)."""
    seen: set[int] = set()
    nodes: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        nodes.append(node)
        node = node.__cause__ or node.__context__
    return nodes


def _status_of(node: BaseException) -> int | None:
    status = getattr(node, "status_code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def server_status(exc: BaseException) -> int | None:
    """The HTTP status the server sent: the innermost one in the chain.

    LiteLLM re-raises the SDK's error as its own class and may change the status on the way (1.110
    turns a 413 'Request too large' into a 429 RateLimitError); the exception it was raised from still
    carries what the server said."""
    statuses = [s for s in map(_status_of, _chain(exc)) if s is not None]
    return statuses[-1] if statuses else None


def provider_codes(exc: BaseException) -> set[str]:
    """The provider's own error `code` and `type` (OpenAI-style error body) anywhere in the chain."""
    codes: set[str] = set()
    for node in _chain(exc):
        body = getattr(node, "body", None)
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            body = body["error"]
        for field in ("code", "type"):
            value = body.get(field) if isinstance(body, dict) else getattr(node, field, None)
            if isinstance(value, str) and value:
                codes.add(value)
    return codes


def error_bodies(exc: BaseException) -> list[Any]:
    """Every error body the server sent, as the SDK decoded it, anywhere in the chain (a FastAPI 422's `detail`
    list too, which the SDK's message leaves out)."""
    return [b for b in (getattr(node, "body", None) for node in _chain(exc)) if b]


def too_large_reply(exc: BaseException) -> BaseException | None:
    """The bodycap.ReplyTooLarge behind `exc` (LiteLLM and the OpenAI SDK wrap it), or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if type(current).__name__ == "ReplyTooLarge":
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def classify(exc: BaseException, secret: str | None) -> Failure:
    """Retry or not, from the status the server sent and the provider's error code; LiteLLM's class
    names only where neither says (no status, e.g. a timeout or a refused connection)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    status = server_status(exc)
    codes = provider_codes(exc)
    detail = clean(f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc), secret)
    if too_large_reply(exc):  # the same request would get the same flood: never retried
        return Failure(True, None, None, clean(str(too_large_reply(exc)), secret), "reply_too_large")
    if _MISSING_KEY in str(exc):  # LiteLLM reports a key it could not find as HTTP 500: retrying cannot help
        return Failure(True, None, None, detail, "auth")
    if "ContextWindowExceededError" in names or codes & _CONTEXT_CODES:
        return Failure(True, status or 400, None, detail, "context")
    if status == 413:  # the request itself is too large: the same request can never pass
        return Failure(True, status, None, detail, "too_large")
    if codes & _QUOTA_CODES:  # a 429 that waiting cannot fix: the account has no credit left
        return Failure(True, status, None, detail, "quota")
    if refused(exc):  # a refused socket got no answer, so no HTTP status (LiteLLM's 500 is its label, not a server's)
        return Failure(False, None if _socket_refused(exc) else status, None, detail, "connection")
    if isinstance(exc, (Malformed, TimeoutError)) or names & {"Timeout", "APITimeoutError", "APIConnectionError"}:
        return Failure(False, status, None, detail, "transient")
    if status is not None:
        if status in _RETRY_STATUS or status >= 500:
            return Failure(False, status, retry_after(exc), detail, "transient")
        if 400 <= status < 500:
            return Failure(True, status, None, detail, {401: "auth", 403: "forbidden", 404: "not_found"}.get(status, "bad_request"))
    if names & _FATAL_NAMES:
        return Failure(True, status, None, detail, "bad_request")
    if type(exc).__name__ == "OpenAIError" and "api_key" in str(exc):  # SDK refused to start without a key
        return Failure(True, None, None, detail, "auth")
    return Failure(False, status, retry_after(exc), detail, "transient")
