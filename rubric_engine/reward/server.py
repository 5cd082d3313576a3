"""An OpenRLHF-compatible remote reward server over a `Reward`: POST JSON in, rewards out, on 127.0.0.1.

Why the standard library's threading HTTP server: OpenRLHF posts one batch per request and waits for it,
so the work is the judge calls (which all run on the reward's own loop thread), not HTTP; a web framework
would add a dependency for nothing.

Every request is untrusted, and every web page the user opens can send requests to 127.0.0.1. So a POST is
judged (and paid for) only when it is `Content-Type: application/json` (a page cannot send that to another
origin without a CORS preflight, which is never answered), carries no foreign `Origin`, names this server in
`Host:` (a page that reaches 127.0.0.1 through DNS rebinding names its own host) and, when a token is set
(required on an address other than loopback), `Authorization: Bearer <token>`. A body is read only up to the
size cap, by at most `max_requests` requests at once (the others: 503 with Retry-After), each connection with a
read timeout; JSON nested deeper than any request shape needs is a 400 line, as is anything that is not the
documented shape. Nothing in a body is ever evaluated. A stop closes the connections still sending their
request, so an idle client never holds it; requests already read are answered first.
"""

from __future__ import annotations

import hmac
import json
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rubric_engine.errors import ConfigError, FatalModelError
from rubric_engine.models.redact import redact
from rubric_engine.reward.frameworks import Reward

__all__ = ["RewardServer", "ServerLimits", "check_bind", "PATHS", "LOOPBACK", "MAX_JSON_DEPTH", "DEFAULT_MAX_BODY_MB",
           "DEFAULT_MAX_REQUESTS", "DEFAULT_READ_TIMEOUT"]

DEFAULT_MAX_BODY_MB = 32  # 4,096 rollouts of 8 kB of JSON each; a batch costs a few times its body in memory
DEFAULT_MAX_REQUESTS = 4  # requests read or judged at once; all judge calls share the reward's concurrency anyway
DEFAULT_READ_TIMEOUT = 60.0  # seconds a connection may stay silent while sending its request
MAX_JSON_DEPTH = 16  # the request shape is 2 levels deep (chat messages with content parts: 6)
PATHS = ("/get_reward", "/")  # OpenRLHF's examples post to /get_reward; the bare URL works as well
LOOPBACK = ("127.0.0.1", "localhost", "::1")
RETRY_AFTER = 5  # seconds, for a request refused because `max_requests` are in progress


@dataclass(frozen=True)
class ServerLimits:
    """What one server accepts: body size, requests at once, read timeout per connection, the bearer token."""

    max_body_bytes: int = DEFAULT_MAX_BODY_MB * 2**20
    max_requests: int = DEFAULT_MAX_REQUESTS
    read_timeout: float = DEFAULT_READ_TIMEOUT
    token: str | None = None


class _Refused(Exception):
    """A request answered with an error status before its body is judged."""

    def __init__(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(text)
        self.status, self.headers = status, headers or {}


def _too_deep(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests containers deeper than `limit` (iterative: no recursion of ours)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        inner = item.values() if isinstance(item, dict) else item
        stack.extend((x, depth + 1) for x in inner if isinstance(x, (list, dict)))
    return False


def _parse(raw: bytes) -> Any:
    """The body as JSON; not JSON, or nested past MAX_JSON_DEPTH: one 400 line."""
    nested = _Refused(400, f"the body is nested deeper than {MAX_JSON_DEPTH} levels; send the documented shape "
                           '{"query": [...], "prompts": [...], "labels": [...]}')
    try:
        body = json.loads(raw.decode("utf-8"))
    except RecursionError:  # the C decoder's own depth limit: far past ours
        raise nested from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise _Refused(400, f"the body is not JSON ({exc})") from None
    if isinstance(body, (list, dict)) and _too_deep(body, MAX_JSON_DEPTH):
        raise nested
    return body


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.0"  # one request per connection: no idle keep-alive thread holds up a shutdown

    def setup(self) -> None:
        self.timeout = self.server.limits.read_timeout  # applied to the socket by StreamRequestHandler.setup
        super().setup()
        self.server.reading(self.connection, True)

    def finish(self) -> None:
        self.server.reading(self.connection, False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - one line per batch instead (stderr)
        pass

    def do_GET(self) -> None:  # a health check: which benchmark, how much was scored so far
        self.server.reading(self.connection, False)
        try:
            if self.path.split("?")[0] not in ("/health", "/"):
                raise _Refused(404, f"no such path {self.path!r}; POST to /get_reward")
            self._check_caller()
        except _Refused as refused:
            return self._answer(refused.status, {"error": str(refused)}, refused.headers)
        reward = self.server.reward
        self._answer(200, {"status": "ok", "benchmark": reward.scorer.settings.benchmark,
                           "judges": reward.scorer.judges, "totals": reward.totals.as_dict()})

    def do_POST(self) -> None:
        slots = self.server.slots
        taken = False
        try:
            if self.path.split("?")[0] not in PATHS:
                raise _Refused(404, f"no such path {self.path!r}; POST to /get_reward")
            self._check_caller()
            if self.headers.get_content_type() != "application/json":
                raise _Refused(415, "send the body as Content-Type: application/json")
            length = self._length()
            taken = slots.acquire(blocking=False)
            if not taken:
                raise _Refused(503, f"{self.server.limits.max_requests} requests are in progress (max_requests); "
                                    f"send it again in {RETRY_AFTER} s", {"Retry-After": str(RETRY_AFTER)})
            raw = self._body(length)
            self.server.reading(self.connection, False)
            body = _parse(raw)
            del raw
            self._judge(body)
        except _Refused as refused:
            self._answer(refused.status, {"error": str(refused)}, refused.headers)
            if refused.status in (411, 413, 503):
                self._discard()
        finally:
            if taken:
                slots.release()

    def _check_caller(self) -> None:
        """Host, token and Origin: who may make this server spend the judge's budget (module docstring)."""
        hosts = self.server.hosts
        if hosts is not None and self.headers.get("Host", "").lower() not in hosts:
            raise _Refused(403, "the Host header does not name this server (127.0.0.1:PORT or localhost:PORT)")
        token = self.server.limits.token
        if token is not None:
            given = self.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode("utf-8", "replace"), f"Bearer {token}".encode()):
                raise _Refused(401, "send the server's token as Authorization: Bearer <token> (token_env=)",
                               {"WWW-Authenticate": "Bearer"})
        origin = self.headers.get("Origin")
        if origin is not None and origin.lower() not in self.server.origins:
            raise _Refused(403, f"Origin {origin[:100]!r} is another site; a web page may not call this server")

    def _length(self) -> int:
        try:
            length = int(self.headers.get("Content-Length") or "-1")
        except ValueError:
            length = -1
        if length < 0:
            raise _Refused(411, "send the body with a Content-Length")
        cap = self.server.limits.max_body_bytes
        if length > cap:
            raise _Refused(413, f"body of {length} bytes is over the {cap / 2**20:g} MiB limit (max_body_mb); send "
                                "smaller batches")
        return length

    def _body(self, length: int) -> bytes:
        try:
            raw = self.rfile.read(length)
        except (TimeoutError, OSError):
            raw = b""
        if len(raw) < length:  # the client went silent past read_timeout, hung up, or the server is stopping
            raise _Refused(408, f"the body ended after {len(raw)} of {length} bytes")
        return raw

    def _judge(self, body: Any) -> None:
        try:
            answer = self.server.reward.openrlhf(body)
        except ConfigError as exc:
            return self._answer(400, {"error": str(exc)})
        except FatalModelError as exc:  # a refused key: every batch would fail the same way
            self.server.note(f"judge refused: {redact(str(exc))}")
            return self._answer(503, {"error": redact(str(exc))})
        except Exception as exc:  # noqa: BLE001 - stopped while judging, or a bug: one line, never a traceback
            text = redact(" ".join(str(exc).split())) or type(exc).__name__
            self.server.note(f"batch not scored: {text}")
            return self._answer(503, {"error": f"batch not scored: {text}"})
        self.server.batch_done(answer["counts"])
        self._answer(200, answer)

    def _discard(self, seconds: float = 2.0) -> None:
        """Read and drop what the client is still sending (briefly), so it reads the answer rather than a reset."""
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(0.2)
            end = time.monotonic() + seconds
            while time.monotonic() < end and self.connection.recv(1 << 16):
                pass
        except OSError:
            pass

    def _answer(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")  # ASCII: no text of a body can make it unencodable
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client left: nothing to answer
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() waits for the batches in progress: a stop answers what it accepted
    block_on_close = True

    def __init__(self, address: tuple[str, int], reward: Reward, note: Any, limits: ServerLimits) -> None:
        super().__init__(address, _Handler)
        self.reward, self.note, self.limits = reward, note, limits
        self.slots = threading.BoundedSemaphore(limits.max_requests)
        self.batches = 0
        self._lock = threading.Lock()
        self._reading: set[socket.socket] = set()
        self._stopping = False
        port = self.server_address[1]
        names = {address[0], *LOOPBACK} if address[0] in LOOPBACK else {address[0]}
        spelled = {f"[{n}]" if ":" in n else n for n in names}
        # a loopback server checks Host; one on another address is reached under names it cannot know (the token
        # guards it)
        self.hosts = {f"{n}:{port}" for n in spelled} if address[0] in LOOPBACK else None
        self.origins = {f"http://{n}:{port}" for n in spelled}

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer: one line, not socketserver's traceback."""
        self.note(f"connection from {client_address[0]} ended early: {sys.exc_info()[1]!r}")

    def reading(self, conn: socket.socket, yes: bool) -> None:
        """Mark a connection as still sending its request (a stop cuts it) or past that point."""
        with self._lock:
            if yes and self._stopping:
                _cut(conn)
            elif yes:
                self._reading.add(conn)
            else:
                self._reading.discard(conn)

    def cut_readers(self) -> None:
        """Stop: the connections still sending their request get end-of-file at once (answered 408 or closed)."""
        with self._lock:
            self._stopping = True
            for conn in self._reading:
                _cut(conn)
            self._reading.clear()

    def batch_done(self, counts: dict[str, Any]) -> None:
        with self._lock:
            self.batches += 1
            n = self.batches
        self.note(f"batch {n}: {counts['rollouts']} rollouts, {counts['judged']} judged, {counts['calls']} judge "
                  f"calls, {counts['cache_hits']} cache hits, {counts['failures']} failures, {counts['seconds']:.1f}s")


def _cut(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RD)
    except OSError:
        pass


def check_bind(host: str, limits: ServerLimits) -> None:
    """An address other than loopback needs a token: one line (ConfigError) otherwise."""
    if host not in LOOPBACK and not limits.token:
        raise ConfigError(f"serve-reward: host={host} lets anyone who reaches it spend your judge's budget; set "
                          "token_env=NAME (an environment variable holding a secret the clients send as "
                          "Authorization: Bearer), or keep host=127.0.0.1")


class RewardServer:
    """Serve `reward` on host:port (port 0: any free port; `url` says which) until `stop()`, within `limits`."""

    def __init__(self, reward: Reward, host: str = "127.0.0.1", port: int = 0, note: Any = None,
                 limits: ServerLimits | None = None) -> None:
        limits = limits or ServerLimits()
        check_bind(host, limits)
        self._server = _Server((host, port), reward, note or (lambda text: None), limits)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/get_reward"

    @property
    def batches(self) -> int:
        return self._server.batches

    def start(self) -> "RewardServer":
        self._thread = threading.Thread(target=self._server.serve_forever, name="reward-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting requests, cut the ones still being sent, let the ones read answer, close the socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.cut_readers()
        self._server.server_close()
