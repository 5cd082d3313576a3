"""A scriptable OpenAI-compatible chat server on 127.0.0.1 for tests and benchmarks.

Why: tests must exercise the real path (LiteLLM -> OpenAI SDK -> httpx -> HTTP) without any network
call outside this machine, and must be able to script the failures real providers produce
(429 + Retry-After, 5xx, hangs, dropped connections, malformed bodies, schema rejection).

    with FakeServer() as srv:
        srv.queue(Reply(status=429, headers={"Retry-After": "1"}), Reply(text="hi"))
        srv.handler = lambda body: Reply(text="default")   # after the queue is empty
        ... srv.url, srv.requests, srv.headers, srv.max_in_flight, srv.request_times ...

Reply selection per request: (0) `dialect` (tests/fakedialects.py: a server family refusing the others' structured
fields in its own error shape), (1) `reject_json_schema` check, (2) the next queued reply,
(3) `srv.handler(body)` (which may return a Reply or a plain str), default: echo of the last message.
`POST /v1/messages` answers in Anthropic's shape (for `anthropic/` models pointed here); `Reply.cached` reports
prompt-cache reads in either shape. `srv.auth_headers` records each request's Authorization header; the text `{authorization}` in a reply's
`error` or `text` is replaced by it (a server that echoes the key back, for leak tests).
`FakeServer(track_senders=True)` also records, parallel to requests, whether each came from the test's own process
(`srv.from_here`: False for a request a worker process sent), read from /proc while its connection is open.
`FakeServer(keep_bodies=False)` records each request's model alone (`{"model": ...}` in `srv.requests`), for
benchmarks whose bodies would fill the server's memory (3,000 turns of one conversation: 9 million messages).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
import zlib
from collections import deque
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

from fakedialects import refusal  # tests/ is on sys.path wherever the fake server runs

__all__ = ["Reply", "FakeServer", "echo_handler"]


@dataclass
class Reply:
    """One scripted answer. `raw` is sent verbatim (status as given); `drop` closes the socket
    without answering; `delay` longer than the client timeout is a hang; `error` is the message
    of a non-2xx answer (a default per status is used when None)."""

    text: str = "ok"
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    raw: str | None = None
    usage: tuple[int, int] = (10, 5)
    cached: int = 0  # prompt tokens reported as served from a prompt cache (usage.prompt_tokens_details.cached_tokens)
    drop: bool = False
    error: str | None = None
    finish_reason: str = "stop"
    trickle: float = 0.0  # > 0: the body is sent one byte per `trickle` seconds (each read is quick, the whole slow)
    flood_mb: float = 0.0  # > 0: a valid completion whose reply is this many MiB, written in 64 KiB pieces
    flood_length: bool = True  # the flood declares its Content-Length (False: none, the body ends at close)
    flood_gzip: bool = False  # the flood gzip-compressed as it is written (a "zip bomb"; no Content-Length)
    # token log-probabilities: (token, logprob, [(alternative, logprob), ...]) per token, as choices[0].logprobs
    logprobs: list[tuple[str, float, list[tuple[str, float]]]] | None = None


HandlerResult = Union[Reply, str]
Handler = Callable[[dict[str, Any]], HandlerResult]

_DEFAULT_ERRORS = {
    400: ("invalid_request_error", "Bad request"),
    401: ("invalid_request_error", "Incorrect API key provided: sk-t***"),
    403: ("permission_denied", "You do not have access to this model"),
    404: ("invalid_request_error", "The model `fake-model` does not exist or you do not have access to it."),
    422: ("invalid_request_error", "Unprocessable entity"),
    429: ("rate_limit_exceeded", "Rate limit reached, please try again later"),
    500: ("server_error", "The server had an error while processing your request"),
    502: ("server_error", "Bad gateway"),
    503: ("server_error", "The engine is currently overloaded, please try again later"),
}


def echo_handler(body: dict[str, Any]) -> Reply:
    """Default reply: 'echo: ' + the text of the last message (string or content parts)."""
    messages = body.get("messages") or [{}]
    content = messages[-1].get("content", "")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return Reply(text=f"echo: {content}")


def _completion_json(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    prompt, completion = reply.usage
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model", "fake-model")),
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text},
                "logprobs": None if reply.logprobs is None else {"content": [
                    {"token": t, "logprob": lp, "bytes": None,
                     "top_logprobs": [{"token": a, "logprob": alp, "bytes": None} for a, alp in top]}
                    for t, lp, top in reply.logprobs]},
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                  **({"prompt_tokens_details": {"cached_tokens": reply.cached}} if reply.cached else {})},
    }


def _anthropic_json(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """The same reply in Anthropic's Messages API shape (POST /v1/messages), cache reads as Anthropic counts them."""
    prompt, completion = reply.usage
    return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
            "model": str(body.get("model", "fake-model")), "content": [{"type": "text", "text": reply.text}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": prompt - reply.cached, "output_tokens": completion,
                      "cache_read_input_tokens": reply.cached, "cache_creation_input_tokens": 0}}


def _error_json(status: int, message: str | None, param: str | None = None) -> dict[str, Any]:
    etype, default = _DEFAULT_ERRORS.get(status, ("server_error" if status >= 500 else "invalid_request_error",
                                                  f"HTTP {status}"))
    return {"error": {"message": message or default, "type": etype, "param": param, "code": None}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real providers; every answer has Content-Length
    disable_nagle_algorithm = True  # TCP_NODELAY: no 40 ms Nagle/delayed-ACK stalls on keep-alive
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence access logs
        return

    def do_GET(self) -> None:  # /v1/models: handy for health checks
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}))
        else:
            self._send(404, json.dumps(_error_json(404, f"no route {self.path}")))

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length) if length else b""
        route = self.path.split("?")[0].rstrip("/")
        anthropic = route in ("/v1/messages", "/messages")  # Anthropic's API, for LiteLLM's anthropic/ provider
        if route not in ("/v1/chat/completions", "/chat/completions") and not anthropic:
            self._send(404, json.dumps(_error_json(404, f"no route {self.path}")))
            return
        try:
            body = json.loads(raw_body or b"{}")
        except ValueError:
            self._send(400, json.dumps(_error_json(400, "request body is not JSON")))
            return
        fake._enter(body, {k.lower(): v for k, v in self.headers.items()},
                    _sent_from_here(self.client_address[1], fake.port) if fake.track_senders else None)
        auth = str(self.headers.get("Authorization") or "")
        with fake._lock:
            fake.auth_headers.append(auth)
        try:
            reply = fake._choose(body)
            if "{authorization}" in (reply.error or "") + reply.text:
                reply = replace(reply, error=(reply.error or "").replace("{authorization}", auth) or None,
                                text=reply.text.replace("{authorization}", auth))
            if reply.delay > 0 and fake._stopping.wait(reply.delay):
                reply = Reply(drop=True)  # server shutting down: don't keep a client hanging
            if reply.drop:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if reply.flood_mb > 0:
                self._flood(body, reply)
            elif reply.trickle > 0:
                self._send(reply.status, reply.raw if reply.raw is not None else
                           json.dumps(_completion_json(body, reply), ensure_ascii=False), reply.headers,
                           trickle=reply.trickle)
            elif reply.raw is not None:
                self._send(reply.status, reply.raw, reply.headers)
            elif reply.status >= 300:
                self._send(reply.status, json.dumps(_error_json(reply.status, reply.error)), reply.headers)
            else:
                shape = _anthropic_json if anthropic else _completion_json
                self._send(reply.status, json.dumps(shape(body, reply), ensure_ascii=False), reply.headers)
        finally:
            fake._leave()

    def _flood(self, body: dict[str, Any], reply: Reply) -> None:
        """A completion of `reply.flood_mb` MiB generated as it is written: the server never holds it."""
        head, tail = json.dumps(_completion_json(body, replace(reply, text="\x00"))).encode().split(b"\\u0000")
        piece, size = b"a" * 65536, int(reply.flood_mb * 2**20)
        squeeze = zlib.compressobj(9, zlib.DEFLATED, 31) if reply.flood_gzip else None
        write = (lambda data: self.wfile.write(squeeze.compress(data))) if squeeze else self.wfile.write
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if squeeze:
                self.send_header("Content-Encoding", "gzip")
            if reply.flood_length and not squeeze:
                self.send_header("Content-Length", str(len(head) + size + len(tail)))
            else:
                self.send_header("Connection", "close")
            self.end_headers()
            write(head)
            for start in range(0, size, len(piece)):
                if self.server.fake._stopping.is_set():
                    break
                write(piece[: min(len(piece), size - start)])
            write(tail)
            if squeeze:
                self.wfile.write(squeeze.flush())
            self.wfile.flush()
        except OSError:  # the client stopped reading (its cap) and closed
            pass
        self.close_connection = True

    def _send(self, status: int, text: str, headers: dict[str, str] | None = None, trickle: float = 0.0) -> None:
        data = text.encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, str(value))
            self.end_headers()
            if trickle > 0:
                for i in range(len(data)):
                    if self.server.fake._stopping.wait(trickle):
                        break
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
            else:
                self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client gave up (timeout) and closed: nothing to answer
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # hung handlers and idle keep-alive connections never block exit
    request_queue_size = 1024  # latency benchmarks open 32-256 connections at once
    allow_reuse_address = True
    fake: "FakeServer"

    def handle_error(self, request: Any, client_address: Any) -> None:  # broken pipes are expected here
        return


def _sent_from_here(peer_port: int, server_port: int) -> bool | None:
    """Whether the client end of the connection 127.0.0.1:peer_port -> server_port is a socket of this process
    (Linux: its inode from /proc/net/tcp, looked for among /proc/self/fd); None where /proc cannot say."""
    try:
        lines = open("/proc/net/tcp", encoding="ascii").read().splitlines()[1:]
    except OSError:
        return None
    inodes = {f[9] for f in (line.split() for line in lines)
              if int(f[1].rsplit(":", 1)[1], 16) == peer_port and int(f[2].rsplit(":", 1)[1], 16) == server_port}
    if not inodes:
        return None
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            mine.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return any(f"socket:[{inode}]" in mine for inode in inodes)


class FakeServer:
    """The server object tests use; see module docstring. Thread-safe bookkeeping."""

    def __init__(self, handler: Handler | None = None, *, reject_json_schema: bool = False,
                 latency: float = 0.0, track_senders: bool = False, dialect: str | None = None,
                 keep_bodies: bool = True) -> None:
        self.handler: Handler = handler or echo_handler
        self.keep_bodies = keep_bodies
        self.track_senders = track_senders
        self.from_here: list[bool | None] = []  # track_senders: each request sent by this process (parallel to requests)
        self.reject_json_schema = reject_json_schema
        self.dialect = dialect  # a server family (tests/fakedialects.py): refuses the others' structured fields
        self.latency = latency  # added to every reply that has no explicit delay
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str] = []
        self.headers: list[dict[str, str]] = []  # request headers (lower-case names), parallel to requests
        self.request_times: list[float] = []  # time.monotonic() at arrival of each request
        self.in_flight = 0
        self.max_in_flight = 0
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "FakeServer":
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"fakeserver-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> "FakeServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "FakeServer not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting ---------------------------------------------------------------------------
    def queue(self, *replies: Reply) -> None:
        """Append replies consumed one per request, in order, before the handler is used."""
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        """Forget recorded requests and queued replies (keeps handler and options)."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.auth_headers.clear()
            self.headers.clear()
            self.from_here.clear()
            self.request_times.clear()
            self.max_in_flight = self.in_flight

    @property
    def pending(self) -> int:
        """Queued replies not consumed yet."""
        with self._lock:
            return len(self._queue)

    # -- internals used by the request handler -----------------------------------------------
    def _enter(self, body: dict[str, Any], headers: dict[str, str] | None = None,
               here: bool | None = None) -> None:
        with self._lock:
            self.requests.append(body if self.keep_bodies else {"model": body.get("model")})
            self.from_here.append(here)
            self.headers.append(headers or {})
            self.request_times.append(time.monotonic())
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _choose(self, body: dict[str, Any]) -> Reply:
        refused = refusal(self.dialect, body) if self.dialect else None
        if refused is not None:
            return Reply(status=refused[0], raw=refused[1])
        fmt = body.get("response_format")
        if self.reject_json_schema and isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            # llama-cpp-python's server accepts only 'text' and 'json_object'
            return Reply(status=400, error="response_format: Input should be 'text' or 'json_object' "
                                           "(type 'json_schema' is not supported)")
        with self._lock:
            queued = self._queue.popleft() if self._queue else None
        if queued is not None:
            reply = queued
        else:
            result = self.handler(body)
            reply = Reply(text=result) if isinstance(result, str) else result
        if reply.delay == 0 and self.latency > 0:
            reply = replace(reply, delay=self.latency)
        return reply
