"""An OpenRLHF-compatible remote reward server over a `Reward`: POST JSON in, rewards out, on 127.0.0.1.

Why the standard library's threading HTTP server: OpenRLHF posts one batch per request and waits for it,
so the work is the judge calls (which all run on the reward's own loop thread), not HTTP; a web framework
would add a dependency for nothing. Request bodies are untrusted data: their size is capped, a body that is
not the documented shape is a 400 with one line, and nothing in it is ever evaluated.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rubric_engine.errors import ConfigError, FatalModelError
from rubric_engine.models.redact import redact
from rubric_engine.reward.frameworks import Reward

__all__ = ["RewardServer", "MAX_BODY_BYTES", "PATHS"]

MAX_BODY_BYTES = 256 * 1024 * 1024  # a batch of 8,192 rollouts of 8 kB each is 64 MiB of JSON
PATHS = ("/get_reward", "/")  # OpenRLHF's examples post to /get_reward; the bare URL works as well


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.0"  # one request per connection: no idle keep-alive thread holds up a shutdown

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - one line per batch instead (stderr)
        pass

    def do_GET(self) -> None:  # a health check: which benchmark, how much was scored so far
        if self.path.split("?")[0] not in ("/health", "/"):
            return self._answer(404, {"error": f"no such path {self.path!r}; POST to /get_reward"})
        reward = self.server.reward
        self._answer(200, {"status": "ok", "benchmark": reward.scorer.settings.benchmark,
                           "judges": reward.scorer.judges, "totals": reward.totals.as_dict()})

    def do_POST(self) -> None:
        if self.path.split("?")[0] not in PATHS:
            return self._answer(404, {"error": f"no such path {self.path!r}; POST to /get_reward"})
        try:
            length = int(self.headers.get("Content-Length") or "-1")
        except ValueError:
            length = -1
        if length < 0:
            return self._answer(411, {"error": "send the body with a Content-Length"})
        if length > MAX_BODY_BYTES:
            return self._answer(413, {"error": f"body of {length} bytes is over {MAX_BODY_BYTES}; send smaller batches"})
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            return self._answer(400, {"error": f"the body is not JSON ({exc})"})
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

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() waits for the batches in progress: a stop answers what it accepted
    block_on_close = True

    def __init__(self, address: tuple[str, int], reward: Reward, note: Any) -> None:
        super().__init__(address, _Handler)
        self.reward, self.note = reward, note
        self.batches = 0
        self._lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer: one line, not socketserver's traceback."""
        self.note(f"connection from {client_address[0]} ended early: {sys.exc_info()[1]!r}")

    def batch_done(self, counts: dict[str, Any]) -> None:
        with self._lock:
            self.batches += 1
            n = self.batches
        self.note(f"batch {n}: {counts['rollouts']} rollouts, {counts['judged']} judged, {counts['calls']} judge "
                  f"calls, {counts['cache_hits']} cache hits, {counts['failures']} failures, {counts['seconds']:.1f}s")


class RewardServer:
    """Serve `reward` on host:port (port 0: any free port; `url` says which) until `stop()`."""

    def __init__(self, reward: Reward, host: str = "127.0.0.1", port: int = 0, note: Any = None) -> None:
        self._server = _Server((host, port), reward, note or (lambda text: None))
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
        """Stop accepting requests, let the ones in progress answer, close the socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()
