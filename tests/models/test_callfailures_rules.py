"""callfailures: which failures are retried, which stop, what kind they are, how long Retry-After asks for,
and the one cleaned line a user reads. Pure functions of an exception, so tested with exceptions shaped
like LiteLLM's (recognised by class name; the HTTP path is in test_models_faults.py and test_cli_faults.py).
Written against survivors of `python bench/mutation.py callfailures`."""

from __future__ import annotations

import email.utils
import time

import pytest

from rubric_engine.models.failures import STOPS_RUN_KINDS, Failure, Malformed, classify, clean, refused, retry_after


def named(name: str, status: int | None = None, headers: dict[str, str] | None = None,
          base: type[Exception] = Exception) -> type[Exception]:
    def init(self: Exception, msg: str = "") -> None:
        base.__init__(self, msg)
        if status is not None:
            self.status_code = status  # type: ignore[attr-defined]
        if headers is not None:
            self.litellm_response_headers = headers  # type: ignore[attr-defined]
    return type(name, (base,), {"__init__": init})


@pytest.mark.parametrize("status, fatal, kind", [
    (400, True, "bad_request"), (401, True, "auth"), (403, True, "forbidden"), (404, True, "not_found"),
    (422, True, "bad_request"), (499, True, "bad_request"),
    (408, False, "transient"), (409, False, "transient"), (425, False, "transient"), (429, False, "transient"),
    (500, False, "transient"), (503, False, "transient"), (599, False, "transient"),
])
def test_status_decides_retry_and_kind(status: int, fatal: bool, kind: str) -> None:
    f = classify(named("APIError", status)("boom"), None)
    assert (f.fatal, f.status, f.kind) == (fatal, status, kind)


def test_transient_status_carries_retry_after_fatal_does_not() -> None:
    assert classify(named("RateLimitError", 429, {"Retry-After": "3"})("slow down"), None).retry_after == 3.0
    assert classify(named("APIError", 400, {"Retry-After": "3"})("bad"), None).retry_after is None
    assert classify(named("Weird", None, {"retry-after": "2"})("odd"), None) == Failure(False, None, 2.0, "odd",
                                                                                       "transient")


def test_missing_credentials_is_an_auth_stop_even_as_http_500() -> None:
    f = classify(named("InternalServerError", 500)("OpenAIException - Missing credentials. Please pass an api_key"),
                 None)
    assert f == Failure(True, None, None, "OpenAIException - Missing credentials. Please pass an api_key", "auth")
    assert "auth" in STOPS_RUN_KINDS and "bad_request" not in STOPS_RUN_KINDS


def test_sdk_refusing_to_start_without_a_key() -> None:
    f = classify(named("OpenAIError")("The api_key client option must be set"), None)
    assert (f.fatal, f.kind) == (True, "auth")
    assert classify(named("OpenAIError")("something else"), None).fatal is False


def test_context_window_is_fatal_with_400() -> None:
    f = classify(named("ContextWindowExceededError")("too long"), None)
    assert (f.fatal, f.status, f.kind) == (True, 400, "context")
    assert classify(named("ContextWindowExceededError", 413)("too long"), None).status == 413


@pytest.mark.parametrize("name", ["AuthenticationError", "PermissionDeniedError", "NotFoundError", "BadRequestError",
                                  "UnprocessableEntityError", "UnsupportedParamsError",
                                  "ContentPolicyViolationError"])
def test_fatal_class_names_without_status(name: str) -> None:
    f = classify(named(name)("no"), None)
    assert (f.fatal, f.kind, f.status) == (True, "bad_request", None)


@pytest.mark.parametrize("exc", [Malformed("no choices"), TimeoutError("t"), named("Timeout")("t"),
                                 named("APITimeoutError")("t"), named("APIConnectionError")("reset by peer")])
def test_timeouts_and_malformed_replies_are_transient(exc: Exception) -> None:
    f = classify(exc, None)
    assert (f.fatal, f.kind, f.retry_after) == (False, "transient", None)


def test_refused_connection_is_its_own_kind() -> None:
    assert classify(named("APIConnectionError", 500)("Connection error."), None).kind == "connection"
    cause = ConnectionRefusedError("[Errno 111] Connection refused")
    outer = named("APIConnectionError")("wrapped")
    outer.__cause__ = cause
    assert refused(outer) and classify(outer, None) == Failure(False, None, None, "wrapped", "connection")
    ctx = named("APIConnectionError")("wrapped")
    ctx.__context__ = named("ConnectError")("x")
    assert refused(ctx)
    timed = named("APIConnectionError")("Connection error.")
    timed.__cause__ = named("TimeoutException")("read timed out")
    assert not refused(timed)  # a timeout inside is not a refusal, whatever the outer text says
    loop = named("APIConnectionError")("a")
    loop.__context__ = loop
    assert not refused(loop)


def test_detail_is_the_class_name_when_the_message_is_empty() -> None:
    assert classify(named("APIError", 500)(""), None).detail == "APIError:"


def test_clean_is_one_short_line_without_the_secret() -> None:
    assert clean("litellm.RateLimitError: litellm.APIError:   too\n\n many  calls ", None) == "too many calls"
    assert clean("key sk-abcd1234 refused", "sk-abcd1234") == "key *** refused"
    assert clean("key abc refused", "abc") == "key abc refused"  # a secret under 4 characters is not masked
    assert clean("x" * 300, None) == "x" * 300
    assert clean("y" * 301, None) == "y" * 300 + "..."
    assert classify(named("APIError", 500)("token sk-abcd1234 bad"), "sk-abcd1234").detail == "token *** bad"


def test_retry_after_header_forms() -> None:
    class Response:
        headers = {"Retry-After": "4"}

    exc = named("RateLimitError")("x")
    exc.response = Response()  # type: ignore[attr-defined]
    assert retry_after(exc) == 4.0  # from the HTTP response when LiteLLM did not copy the headers
    assert retry_after(named("E", None, {"Retry-After-Ms": "1500", "Retry-After": "9"})("x")) == 1.5  # ms wins
    assert retry_after(named("E", None, {"retry-after-ms": "-5"})("x")) == 0.0
    assert retry_after(named("E", None, {"retry-after": "-5"})("x")) == 0.0
    soon = email.utils.formatdate(time.time() + 3600, usegmt=True)
    assert 3500 < (retry_after(named("E", None, {"Retry-After": soon})("x")) or 0) <= 3600
    assert retry_after(named("E", None, {"Retry-After-Ms": "soon"})("x")) is None  # unreadable: no hint


@pytest.mark.parametrize("exc", [named("Timeout")("Connection refused"), named("APITimeoutError")("Connection refused"),
                                 named("TimeoutException")("Connection refused"), TimeoutError("Connection refused")])
def test_a_timeout_is_never_a_refusal_whatever_its_text(exc: Exception) -> None:
    assert not refused(exc)
    assert classify(exc, None).kind == "transient"


@pytest.mark.parametrize("exc", [ConnectionRefusedError("errno 111"), named("ConnectError")("x"),
                                 named("APIError")("upstream: Connection refused by host")])
def test_a_refusal_is_known_by_class_or_by_the_words(exc: Exception) -> None:
    assert refused(exc)
    assert not refused(named("APIError")("upstream: connection refused by host"))  # the words as LiteLLM spells them


@pytest.mark.parametrize("name", ["Timeout", "APITimeoutError", "APIConnectionError"])
def test_timeout_and_connection_classes_are_transient_whatever_their_status(name: str) -> None:
    f = classify(named(name, 400)("reset by peer"), None)
    assert (f.fatal, f.kind, f.status, f.detail) == (False, "transient", 400, "reset by peer")


def test_status_and_detail_are_carried_on_every_kind() -> None:
    ctx = classify(named("ContextWindowExceededError")("too long"), None)
    assert ctx.detail == "too long"
    conn = classify(named("APIConnectionError", 502)("Connection error."), None)
    assert (conn.kind, conn.status) == ("connection", 502)
    assert classify(named("APITimeoutError", 504)("t"), None).status == 504


@pytest.mark.parametrize("bogus", [True, "500", 500.0])
def test_a_status_that_is_not_an_integer_is_ignored(bogus: object) -> None:
    f = classify(named("APIError", bogus)("odd"), None)  # type: ignore[arg-type]
    assert (f.status, f.kind, f.fatal) == (None, "transient", False)


def test_a_four_character_secret_is_masked() -> None:
    assert clean("key abcd refused", "abcd") == "key *** refused"


def raised_from(outer: Exception, inner: Exception) -> Exception:
    outer.__cause__ = inner
    return outer


def test_the_status_recorded_is_the_one_the_server_sent() -> None:
    """LiteLLM 1.110 re-raises a 413 'Request too large' as a 429 RateLimitError; the SDK error it was
    raised from still says 413: that is recorded, and a 413 is never retried."""
    exc = raised_from(named("RateLimitError", 429)("Request too large"), named("OpenAIError", 413)("Request too large"))
    f = classify(exc, None)
    assert (f.fatal, f.status, f.kind) == (True, 413, "too_large")
    real = raised_from(named("RateLimitError", 429)("slow down"), named("OpenAIError", 429)("slow down"))
    assert classify(real, None) == Failure(False, 429, None, "slow down", "transient")


def with_body(exc: Exception, body: object) -> Exception:
    exc.body = body  # type: ignore[attr-defined]
    return exc


@pytest.mark.parametrize("body", [{"code": "context_length_exceeded", "type": "invalid_request_error"},
                                  {"error": {"code": "context_length_exceeded"}}])
def test_the_providers_code_marks_a_context_overflow(body: object) -> None:
    f = classify(with_body(named("BadRequestError", 400)("Please reduce the length"), body), None)
    assert (f.fatal, f.status, f.kind) == (True, 400, "context")


def test_a_429_for_a_spent_quota_is_not_retried_and_stops_the_run() -> None:
    f = classify(with_body(named("RateLimitError", 429)("You exceeded your current quota"),
                           {"code": "insufficient_quota", "type": "insufficient_quota"}), None)
    assert (f.fatal, f.status, f.kind) == (True, 429, "quota") and "quota" in STOPS_RUN_KINDS
    other = with_body(named("RateLimitError", 429)("slow"), {"code": None, "type": "rate_limit_exceeded"})
    assert classify(other, None).fatal is False
