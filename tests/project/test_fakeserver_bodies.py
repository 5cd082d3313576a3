"""The fake server's `keep_bodies=False` (benchmarks of long conversations): each request still counted, timed and
answered from its whole body, but only its model kept."""

from __future__ import annotations

import json
import urllib.request

from fakeserver import FakeServer, Reply


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def test_without_bodies_each_request_is_answered_counted_and_kept_as_its_model() -> None:
    messages = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
                {"role": "user", "content": "three"}]
    with FakeServer(lambda body: Reply(text=f"{len(body['messages'])} messages"), keep_bodies=False) as srv:
        got = [_post(srv.url, {"model": m, "messages": messages}) for m in ("a", "b")]
        assert [g["choices"][0]["message"]["content"] for g in got] == ["3 messages"] * 2
        assert srv.requests == [{"model": "a"}, {"model": "b"}] and len(srv.request_times) == 2
    with FakeServer(keep_bodies=True) as srv:
        _post(srv.url, {"model": "a", "messages": messages})
        assert srv.requests == [{"model": "a", "messages": messages}]
