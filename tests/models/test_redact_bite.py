"""The redaction rules docs/trust-model.md states, one by one, in-process (so the mutation tool sees them).

"What is redacted": every key value in use (registered by the model client), `*_API_KEY` / `*_KEY` /
`*_TOKEN` variables, and `Bearer ...` / `sk-...` / `api_key=...` tokens. The console-script proof (a key
echoed in a reply and in judge reasoning never reaches a file) is
tests/hardening/test_adversarial_keys.py::test_a_key_echoed_in_replies_and_reasoning_is_redacted_in_every_file.
Registered values are made fresh per call (`_fresh`): the set of registered keys lives as long as the process,
so a value registered by an earlier run of the same test (the mutation tool forks its runs from a process that
ran every test once) must not be what makes a test pass.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from rubric_engine.models.redact import MessageRedactor, redact, register_secret


def test_nothing_to_redact_is_returned_as_is() -> None:
    assert redact(None) is None
    assert redact("") == ""
    assert redact("an ordinary reply, with no key at all") == "an ordinary reply, with no key at all"


def _fresh(n: int, first: str = "Q") -> str:
    """A value of n characters never registered before in this process."""
    return (first + uuid.uuid4().hex)[:n]


def test_a_registered_key_of_six_characters_or_more_is_redacted_shorter_ones_are_not() -> None:
    six, five = _fresh(6), _fresh(5)
    register_secret(six)               # 6 characters: the shortest value that counts as a key
    register_secret(five)              # 5: a placeholder, which would blank out ordinary words
    register_secret(None)
    register_secret("")
    assert redact(f"a {six} b") == "a *** b"
    assert redact(f"a {five} b") == f"a {five} b"
    assert redact(six + six) == "******"  # every occurrence


def test_the_longest_key_is_redacted_first() -> None:
    short = _fresh(6, "Z")
    longer = "Aa" + short + "Kd"       # holds the shorter one (and sorts before it): redacting that first would
    register_secret(short)             # leave "Aa" and "Kd" behind
    register_secret(longer)
    assert redact(f"key {longer} end") == "key *** end"
    assert redact(f"key {short} end") == "key *** end"
    longest = short + "Yx"             # sorts after the shorter one and holds it
    register_secret(longest)
    assert redact(f"key {longest} end") == "key *** end"


@pytest.mark.parametrize("name", ["GROQ_API_KEY", "MY_KEY", "HF_TOKEN", "RUBRIC_ENGINE_KEY", "MY_PASSWORD", "APP_SECRET"])
def test_key_variables_of_the_environment_are_redacted(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "Ee4Rr5")  # 6 characters
    assert redact("echo Ee4Rr5 back") == "echo *** back"


@pytest.mark.parametrize("name", ["GROQ_KEYS", "PASSWORD_HINT", "TOKEN_FILE", "PATH_SUFFIX"])
def test_other_variables_are_not_taken_for_keys(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "Yy8Uu9Ii")
    assert redact("echo Yy8Uu9Ii back") == "echo Yy8Uu9Ii back"


def test_a_short_key_variable_is_not_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHORT_API_KEY", "Hh6Jj")  # 5 characters
    assert redact("echo Hh6Jj back") == "echo Hh6Jj back"


@pytest.mark.parametrize(("text", "expected"), [
    ("Authorization header was Bearer abcd", "Authorization header was Bearer ***"),
    ("bearer abcd.ef~gh+ij/kl=mn-op_q rest", "bearer *** rest"),       # the whole token, its punctuation too
    ("BEARER abcd", "BEARER ***"),                                        # any case, the word kept as written
    ("Bearer abc", "Bearer abc"),                                         # three characters: no token
    ("sk-abcd", "sk-***"),
    ("key sk-ab_cd-ef12 end", "key sk-*** end"),
    ("sk-abc", "sk-abc"),
    ("a task-abcdef word", "a task-abcdef word"),                         # sk- inside a word is no key
    ("api_key=abcd1234 next", "api_key=*** next"),
    ("API_KEY=abcd1234 next", "API_KEY=*** next"),
    ("apikey: abcd1234", "apikey: ***"),
    ("APIKEY: abcd1234", "APIKEY: ***"),
    ('{"x-api-key": "abcd1234", "n": 1}', '{"x-api-key": "***", "n": 1}'),
    ("Api-Key = 'abcd1234'", "Api-Key = '***'"),
    ("authorization: abcd1234", "authorization: ***"),
    ("AUTHORIZATION=abcd1234,rest", "AUTHORIZATION=***,rest"),
    ("api_key=abc", "api_key=abc"),                                       # three characters: no value
])
def test_key_shaped_tokens_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_every_pattern_runs_on_the_text_the_previous_one_left() -> None:
    assert redact("Bearer abcd then API_KEY=wxyz1234 and sk-qrst") == "Bearer *** then API_KEY=*** and sk-***"
    both = redact("sk-abcd1234 and Authorization: Bearer Zz11Yy22")
    assert both.startswith("sk-*** and Authorization: ***") and "Zz11Yy22" not in both


def test_a_registered_key_inside_a_bearer_token_leaves_no_part_behind() -> None:
    key = _fresh(9)
    register_secret(key)
    header = redact(f"Authorization: Bearer {key}")
    assert header.startswith("Authorization: ***") and key[2:] not in header
    assert redact(f"got {key}.") == "got ***."


# -- outgoing messages: a conversation's texts are redacted once each, not once per request ---------------------

def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the redaction really scans (the work behind redact), in order."""
    from rubric_engine.models import redact as module

    seen: list[str] = []
    real = module._scrub
    monkeypatch.setattr(module, "_scrub", lambda text, secrets: seen.append(text) or real(text, secrets))
    return seen


def test_a_growing_conversation_scans_each_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counted(monkeypatch)
    redactor = MessageRedactor()
    convo: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for k in range(60):  # each request a new list repeating every earlier turn, as a dialogue sends them
        convo = [*convo, {"role": "user", "content": f"question {k}"}]
        assert redactor(convo) is convo  # nothing to redact: the request is sent as built
        convo = [*convo, {"role": "assistant", "content": f"answer {k}"}]
    # not the 3,600 scans of redacting every request whole; the first request (the system text and one question)
    # repeats no earlier turn, so its two texts are not remembered and are scanned again by the second
    assert len(seen) == 2 + 1 + 60 + 59 and len(set(seen)) == 1 + 60 + 59


def test_a_remembered_text_is_redacted_again_once_a_new_secret_is_known(monkeypatch: pytest.MonkeyPatch) -> None:
    key, var = _fresh(12), _fresh(10, "V")
    said = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    convo = [*said, {"role": "user", "content": f"echo {key} and {var}"}]
    redactor = MessageRedactor()
    assert redactor(convo) is convo  # neither is a secret yet (and the texts are remembered: three messages)
    register_secret(key)
    assert redactor(convo) == [*said, {"role": "user", "content": f"echo *** and {var}"}]
    monkeypatch.setenv("LATE_API_KEY", var)
    assert redactor(convo) == [*said, {"role": "user", "content": "echo *** and ***"}]
    assert convo[2]["content"] == f"echo {key} and {var}"  # the caller's messages are untouched


def test_content_parts_are_redacted_and_other_parts_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counted(monkeypatch)
    image = {"type": "image_url", "image_url": {"url": "data:,"}}
    parts = [{"type": "text", "text": "sk-abcdefgh"}, image, {"type": "text", "text": ""}]
    convo = [{"role": "user", "content": parts},
             {"role": "tool", "content": None}, {"role": "user", "content": "go on"}]
    redactor = MessageRedactor()
    for _ in range(3):
        assert redactor(convo) == [{"role": "user", "content": [{"type": "text", "text": "sk-***"}, image,
                                                                {"type": "text", "text": ""}]},
                                   {"role": "tool", "content": None}, {"role": "user", "content": "go on"}]
    assert seen == ["sk-abcdefgh", "go on"]  # an empty text is never scanned; the others once


def test_the_memory_is_bounded_by_the_characters_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counted(monkeypatch)
    redactor = MessageRedactor(max_chars=10)

    def five() -> list[dict[str, Any]]:  # new objects each time: a request repeating a remembered one object for
        # object is picked up where it ended instead (test_prefixes.py), which would hide the texts' memory
        return [{"role": "user", "content": t} for t in ("aaaaa", "bbbbb", "")]

    redactor(five())
    redactor(five())  # 10 characters fit: nothing scanned again
    assert seen == ["aaaaa", "bbbbb"]
    redactor([{"role": "user", "content": "c"}, *five()[2:] * 2])  # an 11th character: it starts again
    redactor(five())
    assert seen == ["aaaaa", "bbbbb", "c", "aaaaa", "bbbbb"]


def test_a_request_without_earlier_turns_is_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    """A single prompt (a judge's: system and user) is scanned each time and never fills the memory."""
    seen = _counted(monkeypatch)
    redactor = MessageRedactor()
    prompt = [{"role": "system", "content": "grade"}, {"role": "user", "content": "the reply"}]
    redactor(prompt)
    redactor(prompt)
    assert seen == ["grade", "the reply"] * 2
