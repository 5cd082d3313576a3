"""Batch mode (`batch=true`): a client's calls collected into provider batches, each request's id its cache key.

Why: a provider's batch API costs about half, and a run's calls come in waves (every question's generation at
once, then every judge call from those replies, then the re-asks), so a wave is one batch. A ModelClient built
with the run's BatchRun (`batches=`, models/compose.py) makes its own `Batcher`, which receives every call
`_call` would send; it keeps requests until none arrived for a short quiet time (or the size cap is hit), then
submits them as one batch. One `BatchRun` per run holds
the batch journal (models/batchjournal.py): every step is durable before the next, so the same command after
kill -9 re-attaches to the batches in flight and never submits a request twice. An id already answered in an
earlier invocation is read back from the run directory; identical requests share one line of a batch.

A request's error line is retried in a later batch when retrying could fix it (429, 5xx, an expired batch that
never ran it), up to `max_retries`; otherwise it is raised like a synchronous call's error, never padded. An
answer's usage is checked before it is counted: token counts that are negative, not whole or past any model's
context (MAX_USAGE_TOKENS) are recorded as unknown (no tokens, unknown cost) with a warning, never summed. A batch
still running after `max_wait` seconds of polling stops the run with one line (FatalModelError); the batch keeps
running at the provider and the same command re-attaches to it.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any, Callable

from rubric_engine.errors import FatalModelError, ModelCallError
from rubric_engine.models.batchapi import ENDPOINT, BatchAPI, batch_cost
from rubric_engine.models.batchjournal import BatchJournal, Seq
from rubric_engine.models.litellm_runtime import finish_reason, parse_reply

__all__ = ["BatchRun", "Batcher", "MAX_LINES", "MAX_BYTES", "MAX_USAGE_TOKENS", "DEFAULT_MAX_WAIT"]

MAX_LINES = 50_000  # OpenAI's cap on requests per batch
MAX_BYTES = 150 * 2**20  # under OpenAI's 200 MB input file cap
MAX_USAGE_TOKENS = 100_000_000  # tokens one request may report: far past any model's context and output
DEFAULT_MAX_WAIT = 90_000.0  # seconds: the providers' 24 h completion window, plus an hour
_FINAL = frozenset({"completed", "failed", "expired", "cancelled"})
_NOT_BODY = frozenset({"model", "api_base", "api_key", "api_version", "timeout", "num_retries", "max_retries",
                       "client"})


class BatchRun:
    """The run's batches: the journal, the tasks driving each batch, and one Batcher per client."""

    def __init__(self, run_dir: Any, *, poll: float, max_retries: int,
                 notify: Callable[[str], None] | None = None, max_wait: float = DEFAULT_MAX_WAIT) -> None:
        self.journal = BatchJournal(run_dir)
        self.poll, self.max_retries, self.notify, self.max_wait = poll, max_retries, notify, max_wait
        self.quiet = min(1.0, poll)  # a wave has ended when no request came for this long
        self._owner: dict[str, str] = {}  # custom_id -> the latest seq holding it (journal order)
        self._tries: dict[str, int] = {}  # custom_id -> seqs that reached the provider with it
        for seq in self.journal.seqs.values():
            for cid in seq.ids:
                self._owner[cid] = seq.seq
                self._tries[cid] = self._tries.get(cid, 0) + int(seq.submitted)
        self._tasks: dict[str, asyncio.Task[dict[str, dict[str, Any]]]] = {}
        self._batchers: list[Batcher] = []
        self.closed = False

    def batcher(self, client: Any) -> "Batcher":
        self._batchers.append(Batcher(self, client))
        return self._batchers[-1]

    def say(self, text: str) -> None:
        if self.notify is not None:
            self.notify(text)

    async def aclose(self) -> None:
        """Stop polling (the batches keep running at the provider; the same command re-attaches).

        `closed` is what stops a batch's task, the cancel only interrupts its wait: Python 3.11's
        `asyncio.wait_for` drops a cancel that lands after the awaited call finished, and a task that missed it
        would poll for ever. Cancelled or failed, a task's end is not this method's error (the journal says where
        it stood); a cancel of the closer itself still propagates."""
        self.closed = True
        for b in self._batchers:
            b.aclose()
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self.journal.close()

    def live(self) -> None:
        """Raises CancelledError once the run's batches are closed: nothing more is sent, polled or fetched."""
        if self.closed:
            raise asyncio.CancelledError

    def seq_task(self, seq: Seq, api: BatchAPI, lines: bytes | None) -> "asyncio.Task[dict[str, dict[str, Any]]]":
        """The one task driving `seq` to its end (started once, shared by every call waiting on it)."""
        if seq.seq not in self._tasks:
            self._tasks[seq.seq] = asyncio.ensure_future(self._drive(seq, api, lines))
        return self._tasks[seq.seq]

    async def _drive(self, seq: Seq, api: BatchAPI, lines: bytes | None) -> dict[str, dict[str, Any]]:
        j = self.journal
        if seq.file_id is None:  # a new batch: its ids are in the journal before the file leaves
            assert lines is not None
            seq.file_id = await api.upload(f"rubric-engine-{seq.seq}.jsonl", lines)
            j.append("file", seq.seq, file_id=seq.file_id)
            for cid in seq.ids:
                self._tries[cid] = self._tries.get(cid, 0) + 1
        if seq.batch_id is None:  # created, and the crash came before its line? then the provider has it
            found = None if lines is not None else await api.find(seq.file_id)
            batch = found if found is not None else await api.create(seq.file_id, seq.seq)
            j.append("batch", seq.seq, batch_id=str(_get(batch, "id")))
            self.say(f"{api.role} batch {_get(batch, 'id')}: {'found again' if found else 'submitted'}, "
                     f"{len(seq.ids)} requests")
        assert seq.batch_id is not None
        shown = None
        since = time.monotonic()
        while True:
            self.live()
            batch = await api.retrieve(seq.batch_id)
            self.live()
            status = str(_get(batch, "status"))
            counts = _get(batch, "request_counts")
            state = (f"{api.role} batch {seq.batch_id}: {status}, {_get(counts, 'completed') or 0} of "
                     f"{_get(counts, 'total') or len(seq.ids)} done, {_get(counts, 'failed') or 0} failed")
            if state != shown:
                self.say(state)
                shown = state
            if status in _FINAL:
                break
            waited = time.monotonic() - since
            if waited >= self.max_wait:
                raise FatalModelError(api.spec.model, f"{state} after batch_max_wait={self.max_wait:g} s of polling; "
                                      "the run stopped here with its finished questions journaled, and the batch "
                                      "keeps running at the provider (billed): run the same command to re-attach "
                                      "and wait again (raise batch_max_wait= to wait longer)", stops_run=True)
            await asyncio.sleep(min(self.poll, self.max_wait - waited))
        data = b""
        for name in ("output_file_id", "error_file_id"):
            file_id = _get(batch, name)
            if file_id:
                part = await api.content(str(file_id))
                data += part if part.endswith(b"\n") or not part else part + b"\n"
        if status == "failed" and not data:  # the batch was refused as a whole (e.g. its file did not validate)
            why = "; ".join(str(_get(e, "message")) for e in (_get(_get(batch, "errors"), "data") or [])) or status
            data = b"".join(json.dumps({"custom_id": cid, "error": {"code": "batch_failed", "message": why[:300]}})
                            .encode() + b"\n" for cid in seq.ids)
        j.save_lines(seq.seq, data)
        j.append("end", seq.seq, status=status)
        return seq.lines


class Batcher:
    """One client's side of batch mode: `call` answers one request from a batch (see module docstring)."""

    def __init__(self, run: BatchRun, client: Any) -> None:
        self.run, self.client = run, client
        self._api: BatchAPI | None = None
        self._pending: dict[str, tuple[bytes, asyncio.Future[dict[str, Any]]]] = {}
        self._size = 0
        self._arrived = 0
        self._timer: asyncio.Task[None] | None = None
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}  # id -> its line, for ids sent this time

    def api(self) -> BatchAPI:
        if self._api is None:
            c = self.client
            self._api = BatchAPI(c.spec, c._runtime.module(), c._base_request(), max_retries=c.max_retries,
                                 role=c.role)
        return self._api

    async def call(self, kwargs: dict[str, Any], key: str) -> Any:
        """The CallResult of this request, from the batch that answers it (sent now, or found in the journal)."""
        run, api = self.run, self.api()
        while True:
            line = await self._line(key, kwargs, api)
            error = _error(line)
            if error is None:
                try:
                    return self._result(line, api, key)
                except Exception as exc:  # noqa: BLE001 - an answer LiteLLM cannot read: retried like a malformed reply
                    error = (200, f"malformed batch answer ({str(exc)[:200]})", True)
            status, message, retry = error
            tries = run._tries.get(key, 0)
            if retry and tries <= run.max_retries:
                run._owner.pop(key, None)  # answered with an error: the next round sends it again
                self.client.stats.retries += 1
                continue
            self.client.stats.errors += 1
            who = f"{self.client.role} model '{self.client.spec.name}': batch request failed: {message}"
            # as a synchronous call's: one retrying cannot fix is fatal for its question only (a 400 naming
            # response_format then makes judge/structured.py ask again without it)
            err = ModelCallError(self.client.spec.model, f"{who} (sent in {tries} batches; raise max_retries to "
                                 "send it again)", status=status, attempts=tries) if retry else \
                FatalModelError(self.client.spec.model, who, status=status, attempts=tries,
                                stops_run=status in FatalModelError.STOPS_RUN_STATUSES)
            err.detail = message  # type: ignore[attr-defined]  # the provider's own words, for callers
            raise err

    async def _line(self, key: str, kwargs: dict[str, Any], api: BatchAPI) -> dict[str, Any]:
        run = self.run
        run.live()  # a call after close (or sent again after its batch was cancelled by the close) is not sent
        fut = self._waiting.get(key)
        if fut is not None and not fut.done():  # the same request is already on its way (collected or in a batch)
            return await asyncio.shield(fut)
        owner = run._owner.get(key)
        if owner is not None:  # an earlier invocation (or this one) already holds it in a batch
            seq = run.journal.seqs[owner]
            if seq.status is None and seq.submitted:
                await run.seq_task(seq, api, None)
            if seq.status is not None:
                return _line_of(seq, key)
            run._owner.pop(key, None)  # its file never reached the provider: send it now
        fut = asyncio.get_running_loop().create_future()
        self._waiting[key] = fut
        body = {k: v for k, v in kwargs.items() if k not in _NOT_BODY}
        data = json.dumps({"custom_id": key, "method": "POST", "url": ENDPOINT,
                           "body": {"model": api.body_model(), **body}}, ensure_ascii=False,
                          separators=(",", ":")).encode("utf-8") + b"\n"
        self._pending[key] = (data, fut)
        self._size += len(data)
        self._arrived += 1
        if len(self._pending) >= MAX_LINES or self._size >= MAX_BYTES:
            self._flush()
        elif self._timer is None or self._timer.done():
            self._timer = asyncio.ensure_future(self._quiet())
        return await asyncio.shield(fut)

    async def _quiet(self) -> None:
        """Submit once no request arrived for `quiet` seconds."""
        seen = -1
        while self._pending and seen != self._arrived:
            seen = self._arrived
            await asyncio.sleep(self.run.quiet)
        if self._pending:
            self._flush()

    def _flush(self) -> None:
        pending, self._pending, self._size = self._pending, {}, 0
        ids = list(pending)
        seq = uuid.uuid4().hex[:16]
        try:
            self.run.journal.append("submit", seq, ids=ids)  # durable before anything leaves
        except Exception as exc:  # noqa: BLE001 - the journal cannot be written: nothing is sent, and the calls
            for _, fut in pending.values():  # of this wave get the error (run from the quiet timer's task, it
                if not fut.done():  # would otherwise reach no one and leave them waiting for ever)
                    fut.set_exception(exc)
            return
        for cid in ids:
            self.run._owner[cid] = seq
        task = self.run.seq_task(self.run.journal.seqs[seq], self.api(), b"".join(d for d, _ in pending.values()))

        def settle(t: "asyncio.Task[dict[str, dict[str, Any]]]") -> None:
            for cid, (_, fut) in pending.items():
                if fut.done():
                    continue
                if t.cancelled():
                    fut.cancel()
                elif t.exception() is not None:
                    fut.set_exception(t.exception())  # type: ignore[arg-type]
                else:
                    fut.set_result(_line_of(self.run.journal.seqs[seq], cid))

        task.add_done_callback(settle)

    def _result(self, line: dict[str, Any], api: BatchAPI, key: str) -> Any:
        from rubric_engine.models.client import CallResult  # the client imports this module's users, not it

        litellm = api._litellm
        body = line["response"]["body"]
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        said = {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens") if usage.get(k) is not None}
        absurd = {k: v for k, v in said.items() if not _plausible_tokens(v)}
        if absurd:  # read as unknown: the answer is kept, the numbers are not (never summed, never priced)
            body = {**body, "usage": None}
        response = litellm.ModelResponse(**body)
        text, prompt, completion = parse_reply(response)
        cost = batch_cost(litellm, self.client.spec.model, prompt, completion)
        if absurd:
            prompt = completion = 0
            cost = None
            self.run.say(f"warning: {api.role} model '{self.client.spec.name}': a batch answer reported usage "
                         f"{', '.join(f'{k}={v!r}' for k, v in absurd.items())} (request {key[:12]}); recorded as "
                         "unknown: its tokens are left out of the totals and its cost is unknown")
        stats = self.client.stats
        stats.requests += 1
        stats.batched += 1
        stats.prompt_tokens += prompt
        stats.completion_tokens += completion
        stats.cost += cost or 0.0
        stats.cost_unknown_calls += cost is None
        return CallResult(text, prompt, completion, cost, False, 1, finish_reason(response), batched=True)

    def aclose(self) -> None:
        """The wave still gathering is never sent: its calls end as cancelled (the same command sends them)."""
        if self._timer is not None:
            self._timer.cancel()
        pending, self._pending, self._size = self._pending, {}, 0
        for _, fut in pending.values():
            fut.cancel()


def _plausible_tokens(value: Any) -> bool:
    """A token count one request can report: a whole number in [0, MAX_USAGE_TOKENS]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return value == value and 0 <= value <= MAX_USAGE_TOKENS and float(value).is_integer()


def _line_of(seq: Seq, cid: str) -> dict[str, Any]:
    """An ended batch's line for `cid`; when it has none, an error line: sent again unless the batch was cancelled
    (by someone at the provider: its requests are not sent again behind their back)."""
    if cid in seq.lines:
        return seq.lines[cid]
    code = "batch_cancelled" if seq.status == "cancelled" else "missing"
    return {"custom_id": cid, "error": {"code": code, "message": f"batch {seq.batch_id} ended '{seq.status}' "
                                                                "without answering this request"}}


def _error(line: dict[str, Any]) -> tuple[int | None, str, bool] | None:
    """None for an answer; else (HTTP status, message, whether another batch could fix it)."""
    response: dict[str, Any] = line["response"] if isinstance(line.get("response"), dict) else {}
    status = response.get("status_code") if response else None
    error = line.get("error")
    if status == 200 and not error:
        body = response.get("body")
        return None if isinstance(body, dict) and body.get("choices") else (200, "malformed batch answer", True)
    if not error and isinstance(response.get("body"), dict):
        error = response["body"].get("error")
    code = str(_get(error, "code") or "") if error else ""
    message = str(_get(error, "message") or code or f"HTTP {status}")
    retry = code in ("missing", "batch_expired", "server_error", "rate_limit_exceeded") or \
        (isinstance(status, int) and (status >= 500 or status in (408, 429)))
    return (status if isinstance(status, int) else None, (f"HTTP {status}: " if status else "") + message[:300], retry)


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
