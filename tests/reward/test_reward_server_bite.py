"""The remote reward server (reward/server.py; docs/rewards.md, "OpenRLHF"), in-process over real HTTP on
127.0.0.1: the server runs on a thread of this test, the reward's judge is the fake server scripted by the
reply (tests/rewardjudge.py), and every request is sent byte for byte with http.client or a raw socket.

Pinned: the answer of a batch and its one line, the health check, and every refusal word for word with its
status: path, Host, Origin, token, content type, length, size cap, requests at once (503 + Retry-After), a body
that ends early, JSON that is not JSON or nested too deep, a body of the wrong shape, a refused key, a batch
that cannot be scored; the bind check; a stop that does not wait for a client still sending.
tests/reward/test_reward.py checks `serve-reward` through the console script.
"""

from __future__ import annotations

import http.client
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer
from rewardjudge import judge_reply, reward_settings
from rubric_engine.errors import ConfigError
from rubric_engine.reward.frameworks import Reward
from rubric_engine.reward.server import (DEFAULT_MAX_BODY_MB, DEFAULT_MAX_REQUESTS, DEFAULT_READ_TIMEOUT, LOOPBACK,
                                         MAX_JSON_DEPTH, PATHS, RewardServer, ServerLimits, check_bind)

Q = "mq01aa"
JSON = {"Content-Type": "application/json"}
WAIT = 10.0  # seconds a client here waits for an answer: a broken server fails a test quickly, never hangs it


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeServer]:
    """The judge; LiteLLM imported once here (a first judgment), so no request below waits for that import."""
    with FakeServer() as server:
        server.handler = judge_reply
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("FAKE_KEY", "sk-test")
            with Reward(reward_settings(server.url, tmp_path_factory.mktemp("warm"))) as warm:
                warm.score([Q], ["MET=1"])
        yield server


@pytest.fixture()
def reward(srv: FakeServer, tmp_path: Path, fake_key: str) -> Iterator[Reward]:
    with Reward(reward_settings(srv.url, tmp_path)) as r:
        yield r


class Served:
    """A RewardServer on a free port, started on a thread; `lines` are the notes it printed."""

    def __init__(self, reward: Reward, host: str = "127.0.0.1", **limits: Any) -> None:
        self.lines: list[str] = []
        limits.setdefault("read_timeout", 20.0)  # a handler a broken server leaves reading never holds a stop long
        self.server = RewardServer(reward, host=host, note=self.lines.append, limits=ServerLimits(**limits)).start()
        self.host = host
        self.port = int(self.server.url.rsplit(":", 1)[1].split("/")[0])

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                length: bool = True) -> tuple[int, dict[str, Any], dict[str, str]]:
        """One request with exactly these headers (Host added unless given); (status, JSON answer, headers)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=WAIT)
        try:
            headers = dict(headers or {})
            conn.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
            if "Host" not in headers:
                conn.putheader("Host", f"{self.host}:{self.port}")
            if body is not None and length and "Content-Length" not in headers:
                conn.putheader("Content-Length", str(len(body)))
            for k, v in headers.items():
                conn.putheader(k, v)
            conn.endheaders(body)
            res = conn.getresponse()
            data = res.read()
            assert res.version == 10  # HTTP/1.0: one request per connection
            assert res.getheader("Content-Type") == "application/json"
            assert res.getheader("Content-Length") == str(len(data))
            return res.status, json.loads(data), {k.lower(): v for k, v in res.getheaders()}
        finally:
            conn.close()

    def post(self, body: Any, headers: dict[str, str] | None = None,
             path: str = "/get_reward") -> tuple[int, dict[str, Any], dict[str, str]]:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.request("POST", path, raw, {**JSON, **(headers or {})})

    def idle(self, sent: bytes = b'{"query": [', length: int = 1000) -> socket.socket:
        """A client that sends its headers and part of its body, then nothing."""
        conn = socket.create_connection((self.host, self.port), timeout=WAIT)
        conn.sendall(f"POST /get_reward HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {length}\r\n\r\n".encode() + sent)
        return conn

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture()
def served(reward: Reward) -> Iterator[Served]:
    s = Served(reward)
    yield s
    s.stop()


def body(*rollouts: tuple[str, str]) -> dict[str, Any]:
    return {"query": [t for _, t in rollouts], "prompts": [""] * len(rollouts), "labels": [q for q, _ in rollouts]}


def test_defaults() -> None:
    assert ServerLimits() == ServerLimits(max_body_bytes=32 * 2**20, max_requests=4, read_timeout=60.0, token=None)
    assert (DEFAULT_MAX_BODY_MB, DEFAULT_MAX_REQUESTS, DEFAULT_READ_TIMEOUT, MAX_JSON_DEPTH) == (32, 4, 60.0, 16)
    assert PATHS == ("/get_reward", "/") and LOOPBACK == ("127.0.0.1", "localhost", "::1")


# -- a batch -------------------------------------------------------------------------------------------------

def test_a_batch_is_the_rewards_answer_and_one_line(served: Served, reward: Reward) -> None:
    assert served.server.url == f"http://127.0.0.1:{served.port}/get_reward"
    status, got, _ = served.post(body((Q, "MET=1,2"), (Q, "MET=1,2"), (Q, "FAIL-ME")))
    assert status == 200
    assert got["rewards"] == [pytest.approx(0.6), pytest.approx(0.6), 0.0]
    assert got["extra_logs"]["judge_failed"] == [0.0, 0.0, 1.0] and got["extra_logs"]["duplicate"] == [0.0, 1.0, 0.0]
    assert served.server.batches == 1 and len(served.lines) == 1
    line = served.lines[0]
    assert line.startswith("batch 1: 3 rollouts, 2 judged, 2 judge calls, 0 cache hits, 1 failures, ")
    assert line.endswith("s") and line.rsplit(", ", 1)[1][:-1].count(".") == 1
    assert float(line.rsplit(", ", 1)[1][:-1]) == pytest.approx(got["counts"]["seconds"], abs=0.051)
    status, got, _ = served.post(body((Q, "MET=3")), path="/")  # the bare URL works as well
    assert status == 200 and got["rewards"] == [pytest.approx(0.4)]
    status, got, _ = served.post(body((Q, "MET=4")), path="/get_reward?x=1")
    assert status == 200 and served.server.batches == 3 and served.lines[2].startswith("batch 3: 1 rollouts")


def test_the_health_check(served: Served, reward: Reward) -> None:
    served.post(body((Q, "MET=1")))
    for path in ("/health", "/", "/health?verbose=1"):
        status, got, _ = served.request("GET", path)
        assert status == 200
        assert got == {"status": "ok", "benchmark": "heartbench", "judges": ["judge"],
                       "totals": reward.totals.as_dict()}
        assert got["totals"]["rollouts"] == 1
    status, got, _ = served.request("GET", "/get_reward")
    assert (status, got) == (404, {"error": "no such path '/get_reward'; POST to /get_reward"})
    status, got, _ = served.request("GET", "/health", headers={"Host": "evil.example"})
    assert status == 403 and got["error"].startswith("the Host header")


def test_an_unknown_path(reward: Reward) -> None:
    s = Served(reward)
    status, got, _ = s.post(body((Q, "MET=1")), path="/reward")
    assert (status, got) == (404, {"error": "no such path '/reward'; POST to /get_reward"})
    assert s.post(b"x", {"Content-Type": "text/plain"})[0] == 415
    s.stop()  # waits for the handlers: a refusal before any slot was taken leaves no line (nothing released twice)
    assert s.lines == []


def test_no_access_log_on_stderr(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    served.post(body((Q, "MET=1")))
    served.request("GET", "/health")
    assert capsys.readouterr().err == ""


# -- who may call --------------------------------------------------------------------------------------------

def test_the_host_header_must_name_this_server(served: Served, srv: FakeServer) -> None:
    before = len(srv.requests)
    for host in ("evil.example", f"evil.example:{served.port}", "127.0.0.1", f"127.0.0.1:{served.port + 1}", ""):
        status, got, _ = served.post(body((Q, "MET=1")), {"Host": host})
        assert (status, got) == (403, {"error": "the Host header does not name this server (127.0.0.1:PORT or "
                                                "localhost:PORT)"})
    assert len(srv.requests) == before
    for host in (f"127.0.0.1:{served.port}", f"localhost:{served.port}", f"LOCALHOST:{served.port}",
                 f"[::1]:{served.port}"):
        assert served.post(body((Q, "MET=1")), {"Host": host})[0] == 200


def test_a_foreign_origin_is_refused(served: Served, srv: FakeServer) -> None:
    before = len(srv.requests)
    status, got, _ = served.post(body((Q, "MET=1")), {"Origin": "https://evil.example"})
    assert (status, got) == (403, {"error": "Origin 'https://evil.example' is another site; a web page may not call "
                                            "this server"})
    long = "https://" + "a" * 200 + ".example"
    status, got, _ = served.post(body((Q, "MET=1")), {"Origin": long})
    assert status == 403 and got["error"] == f"Origin {long[:100]!r} is another site; a web page may not call this server"
    status, _, _ = served.post(body((Q, "MET=1")), {"Origin": f"http://127.0.0.1:{served.port + 1}"})
    assert status == 403 and len(srv.requests) == before
    for own in (f"http://127.0.0.1:{served.port}", f"http://LOCALHOST:{served.port}", f"http://[::1]:{served.port}"):
        assert served.post(body((Q, "MET=1")), {"Origin": own})[0] == 200


def test_the_bearer_token(reward: Reward, srv: FakeServer) -> None:
    s = Served(reward, token="t0ken-for-tests")
    try:
        before = len(srv.requests)
        for auth in (None, "Bearer wrong", "t0ken-for-tests", "Bearer t0ken-for-tests ", "bearer t0ken-for-tests"):
            status, got, headers = s.post(body((Q, "MET=1")), {"Authorization": auth} if auth else {})
            assert (status, got) == (401, {"error": "send the server's token as Authorization: Bearer <token> "
                                                    "(token_env=)"})
            assert headers["www-authenticate"] == "Bearer"
        status, got, headers = s.request("GET", "/health")
        assert status == 401 and headers["www-authenticate"] == "Bearer"
        assert len(srv.requests) == before
        assert s.post(body((Q, "MET=1")), {"Authorization": "Bearer t0ken-for-tests"})[0] == 200
        assert s.request("GET", "/health", headers={"Authorization": "Bearer t0ken-for-tests"})[0] == 200
    finally:
        s.stop()


def test_another_address_needs_a_token_and_then_any_host_name(reward: Reward) -> None:
    with pytest.raises(ConfigError) as e:
        RewardServer(reward, host="127.0.0.2")
    assert str(e.value) == ("serve-reward: host=127.0.0.2 lets anyone who reaches it spend your judge's budget; set "
                            "token_env=NAME (an environment variable holding a secret the clients send as "
                            "Authorization: Bearer), or keep host=127.0.0.1")
    with pytest.raises(ConfigError):
        check_bind("0.0.0.0", ServerLimits(token=""))
    for host in LOOPBACK:
        check_bind(host, ServerLimits())
    check_bind("0.0.0.0", ServerLimits(token="x"))
    s = Served(reward, host="127.0.0.2", token="tok")
    try:
        auth = {"Authorization": "Bearer tok"}
        assert s.server.url == f"http://127.0.0.2:{s.port}/get_reward"
        assert s.post(body((Q, "MET=1")), {**auth, "Host": "reward.internal:5000"})[0] == 200  # names it cannot know
        assert s.post(body((Q, "MET=1")), {**auth, "Origin": f"http://127.0.0.2:{s.port}"})[0] == 200
        status, _, _ = s.post(body((Q, "MET=1")), {**auth, "Origin": f"http://localhost:{s.port}"})
        assert status == 403  # not a loopback server: localhost is another site
    finally:
        s.stop()


# -- what a request must be ----------------------------------------------------------------------------------

def test_the_content_type_must_be_json(served: Served, srv: FakeServer) -> None:
    before = len(srv.requests)
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        status, got, _ = served.post(body((Q, "MET=1")), {"Content-Type": kind})
        assert (status, got) == (415, {"error": "send the body as Content-Type: application/json"})
    assert len(srv.requests) == before
    assert served.post(body((Q, "MET=1")), {"Content-Type": "application/json; charset=utf-8"})[0] == 200


@pytest.mark.parametrize("length", [None, "abc", "-1", ""])
def test_a_body_without_a_length(served: Served, length: str | None) -> None:
    headers = {**JSON, **({"Content-Length": length} if length is not None else {})}
    status, got, _ = served.request("POST", "/get_reward", b"", headers, length=False)
    assert (status, got) == (411, {"error": "send the body with a Content-Length"})


def test_the_size_cap(reward: Reward) -> None:
    raw = json.dumps(body((Q, "MET=1,2"))).encode()
    s = Served(reward, max_body_bytes=len(raw))
    try:
        assert s.post(raw)[0] == 200  # at the cap
        status, got, _ = s.post(raw + b" ")
        assert (status, got) == (413, {"error": f"body of {len(raw) + 1} bytes is over the {len(raw) / 2**20:g} MiB "
                                                "limit (max_body_mb); send smaller batches"})
        big = b" " * (2 * 2**20)  # the client sends all of it: it still reads the answer, not a reset
        status, got, _ = s.post(big)
        assert status == 413 and got["error"].startswith(f"body of {2 * 2**20} bytes is over the ")
    finally:
        s.stop()
    s = Served(reward, max_body_bytes=2**20)
    try:
        status, got, _ = s.post(b" " * (2**20 + 1))
        assert got["error"] == "body of 1048577 bytes is over the 1 MiB limit (max_body_mb); send smaller batches"
    finally:
        s.stop()


def _until_busy(s: Served, idle: list[socket.socket]) -> tuple[int, dict[str, Any], dict[str, str]]:
    """POST a body that is not JSON until the server is busy (503): the idle clients' slots are taken by then.
    Deadlines, not a count of tries. An idle client whose slot is still free after 10 s (seen twice in CI under
    load, not reproduced alone) is replaced by a new one, so the cap itself is what the test checks."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        stall = time.monotonic() + 10
        while time.monotonic() < min(stall, deadline):
            got = s.post(b"x")
            if got[0] != 400:
                return got
            time.sleep(0.01)
        for i, conn in enumerate(idle):
            conn.close()
            idle[i] = s.idle()
    raise AssertionError("the idle client never took its slot")


def test_requests_at_once_are_capped(reward: Reward) -> None:
    s = Served(reward, max_requests=2, read_timeout=30)
    idle = [s.idle(), s.idle()]
    try:
        status, got, headers = _until_busy(s, idle)
        assert (status, got) == (503, {"error": "2 requests are in progress (max_requests); send it again in 5 s"})
        assert headers["retry-after"] == "5"
        idle.pop().close()  # one hangs up: its slot is free again
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status, got, _ = s.post(body((Q, "MET=1")))
            if status == 200:
                break
            time.sleep(0.01)
        assert status == 200 and got["rewards"] == [pytest.approx(0.4)]
    finally:
        for conn in idle:
            conn.close()
        s.stop()


def _read_all(conn: socket.socket) -> bytes:
    """Everything the server sends on a raw connection until it closes it (then closed here too)."""
    conn.settimeout(WAIT)
    answer = b""
    while chunk := conn.recv(65536):
        answer += chunk
    conn.close()
    return answer


def test_a_body_that_ends_early(reward: Reward) -> None:
    s = Served(reward, read_timeout=0.3)
    try:
        conn = s.idle(b'{"query": [', 1000)  # silent past read_timeout
        head, _, data = _read_all(conn).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 408 ")
        # the read that timed out keeps none of what it had read: the line says 0 bytes
        assert json.loads(data) == {"error": "the body ended after 0 of 1000 bytes"}
        conn = s.idle(b'{"query"', 100)
        conn.shutdown(socket.SHUT_WR)  # hangs up mid-body
        head, _, data = _read_all(conn).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 408 ")
        assert json.loads(data) == {"error": "the body ended after 8 of 100 bytes"}
    finally:
        s.stop()


@pytest.mark.parametrize(("raw", "error"), [
    (b"not json", "the body is not JSON (Expecting value: line 1 column 1 (char 0))"),
    (b"\xff\xfe", "the body is not JSON ('utf-8' codec can't decode byte 0xff in position 0: invalid start byte)"),
])
def test_a_body_that_is_not_json(served: Served, raw: bytes, error: str) -> None:
    assert served.post(raw)[:2] == (400, {"error": error})


NESTED = ('the body is nested deeper than 16 levels; send the documented shape {"query": [...], "prompts": [...], '
          '"labels": [...]}')
QUERY = "'query' must be a list of strings (prompt + response of each rollout)"
SHAPE = 'the request body is a JSON object {"query": [...], "prompts": [...], "labels": [...]}'


@pytest.mark.parametrize(("raw", "error"), [
    (b"[" * 16 + b"]" * 16, SHAPE),  # 16 levels: read, then refused for its shape
    (b"[" * 17 + b"]" * 17, NESTED),
    (b"[" * 200_000 + b"]" * 200_000, NESTED),  # past the decoder's own limit
    (b'{"a": ' * 16 + b"1" + b"}" * 16, QUERY),
    (b'{"a": ' * 17 + b"1" + b"}" * 17, NESTED),
    (b'{"query": [1, [[' + b"[" * 13 + b"]" * 13 + b']]], "x": 2}', NESTED),  # deep in a later element
    (b'[1, 2, {"a": [' + b"[" * 13 + b"]" * 13 + b"]}]", SHAPE),  # 16 levels
    (b'[1, 2, {"a": [' + b"[" * 14 + b"]" * 14 + b"]}]", NESTED),
    (b'"text"', SHAPE),
    (b"5", SHAPE),
])
def test_nesting_and_shape_are_one_400_line(served: Served, raw: bytes, error: str) -> None:
    assert served.post(raw)[:2] == (400, {"error": error})


def test_an_unknown_question_is_a_400(served: Served) -> None:
    status, got, _ = served.post(body(("nope", "MET=1")))
    assert status == 400 and got["error"].startswith("question id 'nope' is not in the benchmark's data")
    assert served.server.batches == 0 and served.lines == []


def test_a_refused_key_is_a_503_and_a_line(served: Served) -> None:
    status, got, _ = served.post(body((Q, "DENY-ME")))
    assert status == 503 and "401" in got["error"] and "sk-test" not in got["error"]
    assert served.lines == [f"judge refused: {got['error']}"] and served.server.batches == 0


def test_a_batch_that_cannot_be_scored_is_a_503_and_a_line(reward: Reward) -> None:
    s = Served(reward)
    try:
        reward.close()
        status, got, _ = s.post(body((Q, "MET=1")))
        assert (status, got) == (503, {"error": "batch not scored: this reward was closed; build a new one"})
        assert s.lines == ["batch not scored: this reward was closed; build a new one"]
    finally:
        s.stop()


# -- stopping ------------------------------------------------------------------------------------------------

def test_a_stop_does_not_wait_for_a_client_still_sending(reward: Reward) -> None:
    s = Served(reward, max_requests=1, read_timeout=30)
    idle = [s.idle()]
    try:
        assert _until_busy(s, idle)[0] == 503  # the idle client is being read
        stopper = threading.Thread(target=s.stop)
        stopper.start()
        stopper.join(15)  # read_timeout=30: a stop that waited for the client would still be here
        assert not stopper.is_alive()
        answer = _read_all(idle[0])
        assert answer == b"" or answer.startswith(b"HTTP/1.0 408 ")
    finally:
        idle[0].close()
    s.stop()  # again: nothing to do


def test_a_server_stopped_before_it_started(reward: Reward) -> None:
    server = RewardServer(reward)  # port 0 by default: a free port the system picks
    try:
        assert server.url.startswith("http://127.0.0.1:") and int(server.url.split(":")[2].split("/")[0]) >= 1024
    finally:
        server.stop()
    assert server.batches == 0


def test_an_empty_body_with_its_length_is_read(served: Served) -> None:
    status, got, _ = served.request("POST", "/get_reward", b"", JSON)
    assert (status, got) == (400, {"error": "the body is not JSON (Expecting value: line 1 column 1 (char 0))"})


def test_refused_before_reading_a_big_body_the_client_still_reads_the_answer(reward: Reward) -> None:
    """411 and 503 come before the body is read: what the client still sends is read and dropped, so it gets the
    answer rather than a reset."""
    big = b" " * (4 * 2**20)
    s = Served(reward, max_requests=1)
    idle = [s.idle()]
    try:
        assert _until_busy(s, idle)[0] == 503
        status, got, headers = s.post(big)
        assert status == 503 and headers["retry-after"] == "5"
    finally:
        idle[0].close()
        s.stop()
    s = Served(reward)
    try:
        status, got, _ = s.request("POST", "/get_reward", big, {**JSON, "Transfer-Encoding": "chunked"},
                                   length=False)
        assert (status, got) == (411, {"error": "send the body with a Content-Length"})
    finally:
        s.stop()


class _Failing:
    """A reward whose every batch raises `exc` (the server's collaborator, given at construction)."""

    def __init__(self, reward: Reward, exc: BaseException) -> None:
        self.scorer, self.totals, self.exc = reward.scorer, reward.totals, exc

    def openrlhf(self, body: Any) -> dict[str, Any]:
        raise self.exc


@pytest.mark.parametrize(("exc", "status", "error", "line"), [
    (ValueError("first line\n  second\tline  "), 503, "batch not scored: first line second line",
     "batch not scored: first line second line"),
    (KeyError(), 503, "batch not scored: KeyError", "batch not scored: KeyError"),
    (RuntimeError("server said sk-test"), 503, "batch not scored: server said ***", "batch not scored: server said ***"),
])
def test_a_batch_that_raises_is_one_line(reward: Reward, exc: BaseException, status: int, error: str,
                                         line: str) -> None:
    s = Served(_Failing(reward, exc))  # type: ignore[arg-type]
    try:
        assert s.post(body((Q, "MET=1")))[:2] == (status, {"error": error})
        assert s.lines == [line] and s.server.batches == 0
    finally:
        s.stop()


def test_a_refused_key_from_the_judge_is_redacted(reward: Reward) -> None:
    from rubric_engine.errors import FatalModelError

    s = Served(_Failing(reward, FatalModelError("openai/judge", "key sk-test refused", status=401)))  # type: ignore
    try:
        status, got, _ = s.post(body((Q, "MET=1")))
        assert status == 503 and "sk-test" not in got["error"] and "key *** refused" in got["error"]
        assert s.lines == [f"judge refused: {got['error']}"]
    finally:
        s.stop()


def test_a_client_that_resets_mid_request_is_one_line(served: Served) -> None:
    conn = socket.create_connection((served.host, served.port), timeout=WAIT)
    conn.sendall(b"POST /get_rew")
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends a reset
    conn.close()
    for _ in range(500):
        if served.lines:
            break
        time.sleep(0.01)
    assert len(served.lines) == 1
    assert served.lines[0].startswith("connection from 127.0.0.1 ended early: ConnectionResetError(")


def test_the_server_thread(served: Served) -> None:
    threads = [t for t in threading.enumerate() if t.name == "reward-server"]
    assert threads and all(t.daemon for t in threads)


def test_a_request_without_a_host_header_is_refused(served: Served) -> None:
    """HTTP/1.0 lets a client leave Host out: no name is no name of this server."""
    raw = json.dumps(body((Q, "MET=1"))).encode()
    for head in (f"POST /get_reward HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {len(raw)}\r\n\r\n",
                 "GET /health HTTP/1.0\r\n\r\n"):
        conn = socket.create_connection((served.host, served.port), timeout=WAIT)
        conn.sendall(head.encode() + (raw if head.startswith("POST") else b""))
        status, _, data = _read_all(conn).partition(b"\r\n\r\n")
        assert status.startswith(b"HTTP/1.0 403 ")
        assert json.loads(data) == {"error": "the Host header does not name this server (127.0.0.1:PORT or "
                                             "localhost:PORT)"}
