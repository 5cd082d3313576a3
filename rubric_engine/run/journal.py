"""The run journal: one JSON line per completed question, appended as it completes, fsync'd in batches.

Why: a run must not hold every outcome until the end (memory grows with the benchmark), and a run
killed with kill -9 must resume without re-paying finished questions even when the call cache is
gone or on another machine. The runner writes and resumes every run through it (docs/scaling.md).

Layout: line 1 is a header `{"journal": 1, "run": <fingerprint>, ...}`; every later line is one
question's record with an `id`. A crash can leave only the last line incomplete: reading repairs
that (the line is cut off, its question runs again). Anything else malformed is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.records import SampleRecord
from rubric_engine.store.layout import close_naming_full_disk, naming_full_disk, open_nofollow

__all__ = ["JOURNAL_VERSION", "run_fingerprint", "JournalWriter", "JournalState", "read_journal"]

JOURNAL_VERSION = 1


def run_fingerprint(parts: Mapping[str, Any]) -> str:
    """sha256 over what decides a run's answers (spec, data hash, models, stage, selection): two runs
    with the same fingerprint may share a journal. Callers leave out keys, timeouts and concurrency."""
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class JournalState:
    """What a journal on disk already holds."""

    done: set[str] = field(default_factory=set)
    repaired: str | None = None  # the one line to print when an incomplete last record was dropped


def _records(fh: IO[bytes]) -> Iterator[tuple[int, int, bytes]]:
    """(1-based line number, byte offset of the line, raw line) for every line."""
    offset = 0
    for number, raw in enumerate(fh, 1):
        yield number, offset, raw
        offset += len(raw)


def read_journal(path: Path, fingerprint: str, on_record: Callable[[SampleRecord], None] | None = None) -> JournalState:
    """Stream an existing journal: check it belongs to this run, hand each record to `on_record`, and
    cut off an incomplete last line (a crash mid-write). A missing file is an empty journal."""
    path = Path(path)
    state = JournalState()
    if not path.exists():
        return state
    cut: tuple[int, int, str] | None = None  # (line, offset, why) of a bad line; fatal unless it is the last
    with path.open("rb") as fh:
        for number, offset, raw in _records(fh):
            if cut is not None:
                raise DataError(str(path), f"unreadable record ({cut[2]})", line=cut[0],
                                fix="the journal is damaged before its end; move it away to start this run afresh")
            try:
                if not raw.endswith(b"\n"):
                    raise ValueError("no line end")
                rec = json.loads(raw)
                if not isinstance(rec, dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:
                cut = (number, offset, str(exc)[:80])
                continue
            if number == 1:
                _check_header(path, rec, fingerprint)
                continue
            qid = rec.get("id")
            if not isinstance(qid, str):
                raise DataError(str(path), "record without a string 'id'", line=number,
                                fix="the journal is damaged; move it away to start this run afresh")
            state.done.add(qid)
            if on_record is not None:
                _hand(on_record, cast(SampleRecord, rec), path, number)  # a line this run wrote: a SampleRecord
    if cut is not None:
        if cut[0] == 1:
            raise DataError(str(path), f"unreadable header ({cut[2]})", line=1,
                            fix="move the file away to start this run afresh")
        with path.open("r+b") as fh:
            fh.truncate(cut[1])
            fh.flush()
            os.fsync(fh.fileno())
        state.repaired = (f"{path.name}: dropped an incomplete record at line {cut[0]} (left by an interrupted run); "
                          "its question runs again")
    return state


def _hand(on_record: Callable[[SampleRecord], None], rec: SampleRecord, path: Path, number: int) -> None:
    """`on_record(rec)`; a record it cannot read (DataError naming this file, no line) is refused at its line."""
    try:
        on_record(rec)
    except DataError as exc:
        if exc.line is not None or exc.file != str(path):
            raise
        raise DataError(exc.file, exc.message, line=number, fix=exc.fix) from None


def _check_header(path: Path, header: dict[str, Any], fingerprint: str) -> None:
    if header.get("journal") != JOURNAL_VERSION:
        raise DataError(str(path), f"not a version-{JOURNAL_VERSION} journal (header {str(header)[:80]})", line=1,
                        fix="use a new run directory (hydra.run.dir=...)")
    if header.get("run") != fingerprint:
        raise ConfigError(f"{path} belongs to another run (spec, data, models, stage or selection differ); "
                          "use a new run directory (hydra.run.dir=...) or move the file away")


class JournalWriter:
    """Appends records to a journal; fsyncs every `batch` records or `interval` seconds, and on close.

    One writer per journal (the runner funnels records through one task); a record is durable once a
    sync has passed it, so a crash loses at most the last batch (whose calls the cache still holds)."""

    def __init__(self, path: Path, fingerprint: str, *, header: Mapping[str, Any] | None = None,
                 batch: int = 64, interval: float = 2.0) -> None:
        self.path, self.batch, self.interval = Path(path), batch, interval
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        self._fh: IO[bytes] = os.fdopen(open_nofollow(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "ab")
        self._pending = 0
        self._last_sync = time.monotonic()
        if fresh:
            head = {"journal": JOURNAL_VERSION, "run": fingerprint, **dict(header or {})}
            self._write(head)
            self.sync()

    def _write(self, rec: Mapping[str, Any]) -> None:
        with naming_full_disk(self.path):
            self._fh.write((json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"))

    def append(self, record: SampleRecord) -> None:
        """Write one question's record (it must carry its `id`)."""
        if not isinstance(record.get("id"), str):
            raise ValueError("a journal record needs a string 'id'")
        self._write(record)
        self._pending += 1
        if self._pending >= self.batch or time.monotonic() - self._last_sync >= self.interval:
            self.sync()

    def sync(self) -> None:
        """Make everything written so far durable (a full disk: DiskFull naming the journal)."""
        with naming_full_disk(self.path):
            self._fh.flush()
            os.fsync(self._fh.fileno())
        self._pending, self._last_sync = 0, time.monotonic()

    def close(self) -> None:
        close_naming_full_disk(self._fh, self.path, self.sync)

    def __enter__(self) -> "JournalWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
