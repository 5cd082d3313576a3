"""An OpenAI-compatible files + batches server on 127.0.0.1, for batch mode's tests (the chat route too).

Why: batch mode must be tested on the real path (the console script, LiteLLM's files and batches functions,
the OpenAI SDK, HTTP) and killed between every step. The server answers each batch line with the same script
as a synchronous call (`FakeServer.handler`, `Reply`), so a batched run's outputs can be compared with a
synchronous run's on the same server.

    with FakeBatchServer(Script(), polls_to_finish=2) as srv:
        srv.hold("create")          # the next POST /v1/batches is carried out, then its answer held
        ... srv.held.wait(); kill the client; srv.release() ...
        srv.submitted               # Counter: custom_id -> batches created holding it (what is billed)

`hold("create:before")` / `hold("upload:before")` hold the request before it is carried out.

Routes: POST /v1/files (multipart upload), GET /v1/files/{id}/content, POST /v1/batches, GET /v1/batches/{id}
(status validating -> in_progress -> completed (or expired) over `polls_to_finish` polls), GET /v1/batches
(list, newest first, `after` / `limit`). `expire=(n, ...)`: the next batches expire with only n lines answered.
`failing[step] = n`: the next n requests of a step are carried out, then answered with a 500.
`tamper = f`: the next batch's output lines (dicts) become the lines `f` returns (str, written as given): a
hostile or broken provider (duplicate ids, absurd usage, a line nested past any parser's depth).
A scripted Reply with status >= 300 becomes an error-file line with that status.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections import Counter
from typing import Any

from fakeserver import FakeServer, _completion_json, _error_json, _Handler, _Server

__all__ = ["FakeBatchServer"]


class _BatchHandler(_Handler):
    def do_GET(self) -> None:
        fake: FakeBatchServer = self.server.fake  # type: ignore[assignment]
        url = urllib.parse.urlparse(self.path)
        parts = url.path.strip("/").split("/")
        if parts[:2] == ["v1", "batches"] and len(parts) == 3:
            self._answer(*fake._poll(parts[2]), step="poll")
        elif parts[:2] == ["v1", "batches"] and len(parts) == 2:
            query = urllib.parse.parse_qs(url.query)
            self._answer(*fake._list(query.get("after", [None])[0], int(query.get("limit", ["20"])[0])), step="list")
        elif parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content":
            status, data = fake._content(parts[2])
            self._answer(status, data, step="content", raw=True)
        else:
            super().do_GET()

    def do_POST(self) -> None:
        fake: FakeBatchServer = self.server.fake  # type: ignore[assignment]
        path = self.path.split("?")[0].rstrip("/")
        if path not in ("/v1/files", "/v1/batches"):
            super().do_POST()
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        fake._step("upload:before" if path == "/v1/files" else "create:before")  # `hold` before carrying it out
        if path == "/v1/files":
            self._answer(*fake._upload(raw, self.headers.get("Content-Type", "")), step="upload")
        else:
            self._answer(*fake._create(json.loads(raw or b"{}")), step="create")

    def _answer(self, status: int, payload: Any, *, step: str, raw: bool = False) -> None:
        fake: FakeBatchServer = self.server.fake  # type: ignore[assignment]
        fake._step(step)
        with fake._lock:
            failing = fake.failing[step] > 0
            fake.failing[step] -= failing
        if failing:  # carried out, then answered with a 500 (as a provider may, after a timeout inside)
            self._send(500, json.dumps(_error_json(500, None)))
            return
        data = payload if raw else json.dumps(payload)
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        self._send(status, data)


class FakeBatchServer(FakeServer):
    """FakeServer plus files and batches; see the module docstring."""

    def __init__(self, handler: Any = None, *, polls_to_finish: int = 2, expire: tuple[int, ...] = (),
                 **kw: Any) -> None:
        super().__init__(handler, **kw)
        self.polls_to_finish = polls_to_finish
        self.expire = list(expire)  # batches created next expire with only this many lines answered, in order
        self.cut_status = "expired"  # what such a batch ends as ("cancelled": someone cancelled it; "failed")
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.submitted: Counter[str] = Counter()  # custom_id -> batches created holding it
        self.steps: Counter[str] = Counter()  # upload, create, poll, list, content: requests answered (or held)
        self.held = threading.Event()  # set when a held step was reached
        self.failing: Counter[str] = Counter()  # step -> how many more of its requests are answered with a 500
        self.tamper: Any = None  # rewrites the next finished batch's output lines (see the module docstring)
        self._hold: str | None = None
        self._skip = 0
        self._release = threading.Event()
        self._n = 0

    def start(self) -> "FakeBatchServer":
        self._httpd = _Server(("127.0.0.1", 0), _BatchHandler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        super().stop()

    # -- scripting -------------------------------------------------------------------------------
    def hold(self, step: str | None, skip: int = 0) -> None:
        """The next `step` request after `skip` more of them is carried out, then its answer is held until
        `release()` (or stop)."""
        with self._lock:
            self._hold, self._skip = step, skip
            self.held.clear()
            self._release.clear()

    def release(self) -> None:
        self.hold(None)
        self._release.set()

    # -- internals -------------------------------------------------------------------------------
    def _step(self, step: str) -> None:
        with self._lock:
            self.steps[step] += 1
            hold = self._hold == step and self._skip == 0
            if self._hold == step and not hold:
                self._skip -= 1
            if hold:
                self._hold = None
        if hold:
            self.held.set()
            self._release.wait(60)

    def _id(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f"{prefix}-{self._n:04d}"

    def _upload(self, raw: bytes, ctype: str) -> tuple[int, Any]:
        boundary = ctype.split("boundary=", 1)[-1].strip('"').encode()
        data = b""
        for part in raw.split(b"--" + boundary):
            head, _, body = part.partition(b"\r\n\r\n")
            if b'name="file"' in head:
                data = body[:-2] if body.endswith(b"\r\n") else body
        file_id = self._id("file")
        self.files[file_id] = data
        return 200, {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                     "filename": "batch.jsonl", "purpose": "batch", "status": "processed"}

    def _create(self, body: dict[str, Any]) -> tuple[int, Any]:
        file_id = body.get("input_file_id")
        if file_id not in self.files:
            return 404, _error_json(404, f"no file {file_id}")
        lines = [json.loads(x) for x in self.files[file_id].splitlines() if x.strip()]
        batch_id = self._id("batch")
        batch = {"id": batch_id, "object": "batch", "endpoint": body.get("endpoint"), "errors": None,
                 "input_file_id": file_id, "completion_window": "24h", "status": "validating",
                 "output_file_id": None, "error_file_id": None, "created_at": int(time.time()),
                 "metadata": body.get("metadata"), "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                 "_lines": lines, "_polls": 0, "_expire": self.expire.pop(0) if self.expire else None}
        with self._lock:
            self.batches[batch_id] = batch
            self.submitted.update(line["custom_id"] for line in lines)
        return 200, self._public(batch)

    def _poll(self, batch_id: str) -> tuple[int, Any]:
        batch = self.batches.get(batch_id)
        if batch is None:
            return 404, _error_json(404, f"no batch {batch_id}")
        with self._lock:
            batch["_polls"] += 1
            polls = batch["_polls"]
        if batch["status"] in ("validating", "in_progress"):
            if polls >= self.polls_to_finish:
                self._finish(batch)
            else:
                batch["status"] = "in_progress"
        return 200, self._public(batch)

    def _finish(self, batch: dict[str, Any]) -> None:
        out, err = [], []
        lines = batch["_lines"]
        done = lines if batch["_expire"] is None else lines[: batch["_expire"]]
        for line in done:
            reply = self._choose(line["body"])
            rid = self._id("req")
            if reply.status >= 300:
                err.append({"id": rid, "custom_id": line["custom_id"], "error": None,
                            "response": {"status_code": reply.status, "request_id": rid,
                                         "body": _error_json(reply.status, reply.error)}})
            else:
                out.append({"id": rid, "custom_id": line["custom_id"], "error": None,
                            "response": {"status_code": 200, "request_id": rid,
                                         "body": _completion_json(line["body"], reply)}})
        tamper, self.tamper = self.tamper, None
        texts = tamper(out) if tamper is not None else [json.dumps(r, ensure_ascii=False) for r in out]
        for name, rows in (("output_file_id", texts), ("error_file_id", [json.dumps(r) for r in err])):
            if rows:
                file_id = self._id("file")
                self.files[file_id] = "".join(r + "\n" for r in rows).encode()
                batch[name] = file_id
        batch["status"] = "completed" if batch["_expire"] is None else self.cut_status
        if batch["status"] == "failed":  # refused as a whole, as when its file does not validate
            batch["errors"] = {"object": "list", "data": [{"code": "invalid_json", "line": 1,
                                                           "message": "scripted: the file did not validate"}]}
        batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}

    def _list(self, after: str | None, limit: int) -> tuple[int, Any]:
        items = sorted(self.batches.values(), key=lambda b: b["id"], reverse=True)
        if after:
            items = [b for b in items if b["id"] < after]
        page = items[:limit]
        return 200, {"object": "list", "data": [self._public(b) for b in page],
                     "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None,
                     "has_more": len(items) > limit}

    def _content(self, file_id: str) -> tuple[int, Any]:
        if file_id not in self.files:
            return 404, json.dumps(_error_json(404, f"no file {file_id}")).encode()
        return 200, self.files[file_id]

    @staticmethod
    def _public(batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in batch.items() if not k.startswith("_")}
