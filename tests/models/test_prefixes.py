"""Work remembered per request prefix (models/prefixes.py): what it finds and keeps, and that a client's cache keys and
redacted requests built through it equal those computed whole, turn after turn, whatever the conversations do
(interleave, branch, repeat, change model or format). The memory trusts that a message sent is never changed in
place: the last test holds LiteLLM to that, through the real path to the fake server."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import uuid
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.models.client import ModelClient
from rubric_engine.models.entries import MessageTexts, ModelSpec, cache_key
from rubric_engine.models.prefixes import PrefixMemory
from rubric_engine.models.redact import MessageRedactor, redact, register_secret


def _msgs(*texts: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]


def test_the_longest_remembered_prefix_of_the_same_objects_is_found() -> None:
    memory: PrefixMemory[str] = PrefixMemory()
    a = _msgs("s", "u1", "a1", "u2", "a2", "u3")
    memory.remember(a[:2], "two")
    memory.remember(a[:4], "four")
    assert memory.longest(a) == (4, "four")
    assert memory.longest(a[:3]) == (2, "two")
    assert memory.longest(a[:4]) == (4, "four")  # the whole request, remembered: a repeat
    assert memory.longest(a[:1]) == (0, None)
    assert memory.longest(copy.deepcopy(a)) == (0, None)  # equal messages, other objects: not the same request
    assert memory.longest([a[0], {"role": "assistant", "content": "u1"}, *a[2:]]) == (0, None)


def test_a_prefix_ending_further_back_than_the_window_is_not_looked_for() -> None:
    memory: PrefixMemory[str] = PrefixMemory(window=3)
    a = _msgs(*"abcdefgh")
    memory.remember(a[:4], "four")
    assert memory.longest(a[:7]) == (4, "four")  # ends 3 before the end: looked at
    assert memory.longest(a[:8]) == (0, None)


def test_the_caller_changing_its_list_afterwards_changes_nothing_remembered() -> None:
    memory: PrefixMemory[str] = PrefixMemory()
    a = _msgs("x", "y", "z")
    sent = list(a)
    memory.remember(sent, "v")
    sent.append({"role": "user", "content": "later"})
    sent[1] = {"role": "user", "content": "other"}
    assert memory.longest([*a, {"role": "assistant", "content": "w"}]) == (3, "v")
    assert memory.longest(sent) == (0, None)


def test_the_oldest_entry_goes_first_by_count_and_by_references_held() -> None:
    memory: PrefixMemory[int] = PrefixMemory(entries=2, max_refs=5)
    a, b, c = _msgs("a", "a"), _msgs("b", "b"), _msgs("c", "c")
    memory.remember(a, 1)
    memory.remember(b, 2)
    assert memory.longest(a) == (2, 1)  # a used last: b is now the oldest
    memory.remember(c, 3)
    assert (memory.longest(a), memory.longest(b), memory.longest(c), len(memory)) == ((2, 1), (0, None), (2, 3), 2)
    memory.remember(_msgs("d", "d", "d", "d"), 4)  # 2 + 4 references > 5: the oldest two go
    assert (memory.longest(a), memory.longest(c), len(memory)) == ((0, None), (0, None), 1)
    memory.remember(_msgs(*"abcdef"), 5)  # longer than everything it may hold: not kept
    assert len(memory) == 1
    memory.remember(a, 1)  # 4 + 2 references > 5: the four go
    assert (memory.longest(a), len(memory)) == ((2, 1), 1)
    memory.remember(a, 6)  # the same list again: replaced, its references counted once
    memory.remember(b, 2)
    assert (memory.longest(a), memory.longest(b), len(memory)) == ((2, 6), (2, 2), 2)


def _pinned(spec: ModelSpec, messages: list, fmt: dict | None = None, repeat: int = 0) -> str:
    """The recipe serialised whole (as test_modelspec_rules.py states it)."""
    payload = {**spec._key_part, "messages": messages, "response_format": fmt}
    if repeat:
        payload["repeat"] = repeat
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def test_keys_continued_from_an_earlier_turn_equal_keys_hashed_whole() -> None:
    """Two conversations interleaved on one client, each turn's request a new list of the same objects; a branch
    (two re-asks of one request), the same request again, another format, repeat or model: every key is the
    recipe's, character for character."""
    texts = MessageTexts()
    specs = (ModelSpec("n", "openai/x"), ModelSpec("m", "openai/y", api_base="http://h/v1", params={"seed": 1}))
    convos: list[list[dict[str, Any]]] = [[{"role": "system", "content": "be brief"}], []]
    for k in range(12):
        for c, convo in enumerate(convos):
            convo.append({"role": "user", "content": f"q{k} of {c} \" \\ 😀"})
            sent = list(convo)
            for spec in specs:
                for fmt, repeat in ((None, 0), ({"type": "json_object"}, 2)):
                    assert cache_key(spec, sent, fmt, repeat, texts) == _pinned(spec, sent, fmt, repeat)
            for fix in ("fix it", "again"):  # a branch: the same request, then each its own reply and re-ask
                branch = [*sent, {"role": "assistant", "content": "bad"}, {"role": "user", "content": fix}]
                assert cache_key(specs[0], branch, None, 0, texts) == _pinned(specs[0], branch)
            convo.append({"role": "assistant", "content": f"a{k} of {c}"})
    odd = [*convos[0], {"role": "user", "content": [{"type": "text", "text": "parts"}]}]  # not plain: whole
    assert cache_key(specs[0], odd, None, 0, texts) == _pinned(specs[0], odd)


def test_redaction_continued_from_an_earlier_turn_equals_redaction_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret in an early turn stays redacted in every later request; one learnt mid-way reaches the turns
    before it; the caller's messages are never changed."""
    early, late = f"Q{uuid.uuid4().hex[:12]}", f"Z{uuid.uuid4().hex[:12]}"
    register_secret(early)
    redactor = MessageRedactor()
    convo: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for k in range(10):
        convo.append({"role": "user", "content": f"turn {k}: {early if k == 2 else ''} {late if k == 4 else ''}"})
        if k == 7:
            monkeypatch.setenv("LATE_SECRET", late)
        sent, before = list(convo), copy.deepcopy(convo)
        got = redactor(sent)
        assert got == [{**m, "content": redact(m["content"])} for m in convo]
        assert (got is sent) == (k < 2)  # sent as built until a text needs redacting
        assert convo == before
        if k >= 7:
            assert late not in json.dumps(got)
        convo.append({"role": "assistant", "content": f"reply {k}"})
    assert early not in json.dumps(got)


def test_litellm_leaves_the_messages_it_is_given_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory finds earlier requests by their message objects, so a message changed in place after it was
    sent would give a later request a stale key: a conversation through LiteLLM to the fake server, every
    message compared with its copy after each call."""
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    with FakeServer() as srv:
        srv.queue(*(Reply(text=f"reply {k}") for k in range(4)))
        client = ModelClient(ModelSpec("fake", "openai/fake-model", api_base=srv.url, api_key_env="FAKE_KEY"),
                             cache=None, max_retries=0)
        convo: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]

        async def talk() -> None:
            try:
                for k in range(4):
                    convo.append({"role": "user", "content": f"question {k}"})
                    before = copy.deepcopy(convo)
                    result = await client.complete(messages=list(convo))
                    assert convo == before and all(type(m) is dict and len(m) == 2 for m in convo)
                    convo.append({"role": "assistant", "content": result.text})
            finally:
                await client.aclose()
        asyncio.run(talk())
        assert [len(r["messages"]) for r in srv.requests] == [2, 4, 6, 8]
        assert srv.requests[-1]["messages"][-2:] == [{"role": "assistant", "content": "reply 2"},
                                                     {"role": "user", "content": "question 3"}]


def test_a_growing_conversation_visits_only_the_messages_each_turn_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each turn's key and redaction pick up the previous turn's request where it ended: 2 messages a turn after
    the first request that carries earlier turns, not the whole history (2,500 visits for 50 turns)."""
    keyed: list[int] = []
    redacted: list[int] = []
    real_text, real_redacted = MessageTexts._text, MessageRedactor._redacted
    monkeypatch.setattr(MessageTexts, "_text", lambda self, m: keyed.append(1) or real_text(self, m))
    monkeypatch.setattr(MessageRedactor, "_redacted",
                        lambda self, ms, keep: redacted.append(len(ms)) or real_redacted(self, ms, keep))
    spec, texts, redactor = ModelSpec("n", "openai/x"), MessageTexts(), MessageRedactor()
    convo: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for k in range(50):
        convo = [*convo, {"role": "user", "content": f"q{k}"}]
        assert cache_key(spec, convo, None, 0, texts) == _pinned(spec, convo)
        assert redactor(convo) is convo
        convo = [*convo, {"role": "assistant", "content": f"a{k}"}]
    # the first request (2 messages) carries no earlier turn: keyed whole, never remembered; the second (4) is
    # the first remembered; every later one adds 2
    assert len(keyed) == 4 + 2 * 48
    assert redacted == [2, 4] + [2] * 48
