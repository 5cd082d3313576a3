"""The batch journal: `batches.jsonl` in the run directory, one fsync'd line per step of every provider batch,
and `batches/<seq>.jsonl`, each finished batch's output and error lines as the provider sent them.

Why: a provider batch is billed once created, whether or not the process that created it lives to read it.
Each step is durable before the next one starts, so a run killed at any moment knows, for every request id
(the request's cache key), whether it may have been submitted and where its answer is:

    {"event": "submit", "seq": S, "ids": [...]}      before the file is uploaded (nothing billed yet)
    {"event": "file", "seq": S, "file_id": F}        the file is uploaded; a batch may follow at any moment
    {"event": "batch", "seq": S, "batch_id": B}      the batch exists: poll it, never create another
    {"event": "end", "seq": S, "status": ...}        its output and error lines are in batches/S.jsonl

A seq with only `submit` never reached the provider's batch endpoint (its ids are sent again); one with `file`
and no `batch` is looked up by its file id before anything is created. A crash can cut only the last line:
reading drops it (as the run journal does).

A provider's output is read as untrusted replies are: a request answered by more than one line, or named by a line
that does not parse (nested past the parser's depth, cut, not JSON), gets an error line of its own
(`duplicate_custom_id`, `unreadable_line`), recorded against its question like any failed request, never the last
line silently winning and never an exception that would stop the run and every resume of it.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rubric_engine.errors import ConfigError, DataError

__all__ = ["BATCH_JOURNAL", "BATCH_DIR", "Seq", "BatchJournal", "check_no_batches_in_flight"]

BATCH_JOURNAL = "batches.jsonl"
BATCH_DIR = "batches"
_CUSTOM_ID = re.compile(rb'"custom_id"\s*:\s*"([^"\\]{1,200})"')  # where a line that does not parse names its id
_FIELDS = {"file": "file_id", "batch": "batch_id", "end": "status"}  # the field each step after `submit` records


@dataclass
class Seq:
    """One batch as the journal knows it."""

    seq: str
    ids: list[str]
    file_id: str | None = None
    batch_id: str | None = None
    status: str | None = None  # set by `end`
    lines: dict[str, dict[str, Any]] = field(default_factory=dict)  # custom_id -> output / error line (ended)

    @property
    def submitted(self) -> bool:
        """Its file reached the provider: a batch may exist, so its ids are never put in another batch blindly."""
        return self.file_id is not None


class BatchJournal:
    """Reads what earlier invocations left (`seqs`, in order) and appends each step durably."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / BATCH_JOURNAL
        self.dir = Path(run_dir) / BATCH_DIR
        self.seqs: dict[str, Seq] = {}
        self._read()
        self._fh: IO[bytes] | None = None

    def _read(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        keep = len(data) - len(lines[-1])  # a last line without its newline was cut by a crash: dropped
        for number, raw in enumerate(lines[:-1], 1):
            try:  # every field a step needs is read here: a damaged line is one line of error, never a traceback
                rec = json.loads(raw)
                seq, event = str(rec["seq"]), rec["event"]
                ids = [str(i) for i in rec.get("ids", [])] if event == "submit" else []
                value = str(rec[_FIELDS[event]]) if event in _FIELDS else None
            except (ValueError, KeyError, TypeError) as exc:
                raise DataError(str(self.path), f"unreadable line ({str(exc)[:60]})", line=number,
                                fix="the batch journal is damaged; move the run directory away to start afresh "
                                    "(batches it names may still be running at the provider)") from None
            if event == "submit":
                self.seqs[seq] = Seq(seq, ids)
            elif seq in self.seqs and value is not None:
                setattr(self.seqs[seq], _FIELDS[event], value)
                if event == "end":
                    self.seqs[seq].lines = self.read_lines(seq)
        if keep < len(data):
            with self.path.open("r+b") as fh:
                fh.truncate(keep)
                os.fsync(fh.fileno())

    def read_lines(self, seq: str) -> dict[str, dict[str, Any]]:
        """custom_id -> its output or error line, from the saved file of an ended seq (see the module docstring
        for duplicate and unreadable lines)."""
        out: dict[str, dict[str, Any]] = {}
        path = self.dir / f"{seq}.jsonl"
        if not path.exists():
            return out
        answers: Counter[str] = Counter()
        unreadable: dict[str, str] = {}
        for raw in path.read_bytes().splitlines():
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except (ValueError, RecursionError) as exc:
                found = _CUSTOM_ID.search(raw[:4096])
                if found:
                    unreadable[found.group(1).decode("utf-8", "replace")] = type(exc).__name__
                continue
            if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                cid = line["custom_id"]
                answers[cid] += _ok(line)
                if cid not in out or _ok(line):  # an answer wins over an error line for the same id
                    out[cid] = line
        for cid, n in answers.items():
            if n > 1:
                out[cid] = _error_line(cid, "duplicate_custom_id", f"the batch output holds {n} lines answering this "
                                       "request; none is used")
        for cid, why in unreadable.items():
            out[cid] = _error_line(cid, "unreadable_line", f"the batch output line for this request is unreadable "
                                   f"({why}); it is not used")
        return out

    def append(self, event: str, seq: str, **fields: Any) -> None:
        """Write one step and fsync it before returning: the next step starts only after this one is durable."""
        if self._fh is None:
            fresh = not self.path.exists()
            self._fh = self.path.open("ab")
            if fresh:
                _sync_dir(self.path.parent)
        self._fh.write((json.dumps({"event": event, "seq": seq, **fields}, separators=(",", ":")) + "\n")
                       .encode("utf-8"))
        self._fh.flush()
        os.fsync(self._fh.fileno())
        if event == "submit":
            self.seqs[seq] = Seq(seq, list(fields.get("ids", [])))
        else:
            s = self.seqs[seq]
            s.file_id = fields.get("file_id", s.file_id)
            s.batch_id = fields.get("batch_id", s.batch_id)
            s.status = fields.get("status", s.status)

    def save_lines(self, seq: str, data: bytes) -> None:
        """The provider's output and error lines of one batch, durable before its `end` line is written."""
        self.dir.mkdir(exist_ok=True)
        path = self.dir / f"{seq}.jsonl"
        tmp = path.with_suffix(".part")
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _sync_dir(self.dir)
        self.seqs[seq].lines = self.read_lines(seq)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def check_no_batches_in_flight(run_dir: Path) -> None:
    """A run without batch=true into a directory whose batches may still be running: one line (ConfigError),
    since sending their requests again synchronously would pay for them twice."""
    if not (Path(run_dir) / BATCH_JOURNAL).exists():
        return
    journal = BatchJournal(run_dir)
    live = [s.batch_id or s.file_id for s in journal.seqs.values() if s.submitted and s.status is None]
    if live:
        raise ConfigError(f"{run_dir} has {len(live)} provider batch(es) in flight from a batch=true run "
                          f"({', '.join(str(x) for x in live[:3])}); resume it with batch=true, or move "
                          f"{BATCH_JOURNAL} away to send those requests again (the batches are still billed)")


def _error_line(cid: str, code: str, message: str) -> dict[str, Any]:
    return {"custom_id": cid, "error": {"code": code, "message": message}}


def _ok(line: dict[str, Any]) -> bool:
    response = line.get("response") or {}
    return isinstance(response, dict) and response.get("status_code") == 200 and not line.get("error")


def _sync_dir(path: Path) -> None:
    """A new file's directory entry is durable too (a crash after fsync of the file alone may lose its name)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
