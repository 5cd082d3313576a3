"""The run's transcripts writer: every model call's event (models/events.py), appended to transcripts/calls.jsonl.

Why texts are stored once: per-criterion judging sends one conversation and reply again for every criterion, so
writing each prompt whole would make the transcripts many times larger than samples.jsonl. A text already
written is referred to by its hash; a prompt that differs from the last one of its kind for the same question
only in the middle (another criterion) is written as that prompt's head and tail plus the new middle; a new
prompt refers to the question's earlier texts it contains (its turns, the candidate's reply). The format and
the reader are store/transcripts.py.

Durability follows the journal's: writes are buffered, handed to the OS whenever a question is finished
(before its journal record, so a question in the journal has its calls on disk) and fsync'd at most every
`interval` seconds and on close. A kill -9 loses at most the calls of unfinished questions, which a resumed run
makes again (from the cache) and records; the incomplete last line it may leave is cut off on reopening.
Every text goes through the one redaction (models/redact.py) before it is written.
"""

from __future__ import annotations

import json
import operator
import os
import time
from collections import OrderedDict
from pathlib import Path
from typing import IO, Any

from rubric_engine.models.events import CallEvent
from rubric_engine.models.redact import redact
from rubric_engine.store.layout import close_naming_full_disk, naming_full_disk, open_nofollow
from rubric_engine.store.transcripts import SHORT_TEXT, WHERE, calls_path, digest, text_hash, whole_lines

__all__ = ["TranscriptWriter"]

_KNOWN_MIN = 128  # a question's text at least this long is looked for inside its later prompts
_KNOWN_MAX = 32  # texts remembered per question for that search
_MIN_SAVED = 128  # a head + tail shorter than this is not worth a reference
_BUFFER = 1 << 20
_JOIN = "\n\x00\u241e\x00\n"  # between an event's texts redacted in one pass: no key or redaction pattern spans it


def _redacted(texts: list[str]) -> list[str]:
    """Every text of one event through the one redaction, in one pass (its cost is mostly per call, not per byte)."""
    joined = redact(_JOIN.join(texts)) or ""
    out = joined.split(_JOIN)
    return out if len(out) == len(texts) else [redact(t) or "" for t in texts]


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by bisection over slice comparisons (C speed, no per-character loop)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    lo, hi = 0, min(len(a), len(b), limit)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid:len(a) - lo] == b[len(b) - mid:len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _plain(content: Any) -> str:
    """A message's content as text: a string as it is, content parts (a list) as their JSON."""
    if isinstance(content, str):
        return content
    return "" if content is None else json.dumps(content, ensure_ascii=False)


class _Question:
    """What one question's calls wrote so far: the last text of each kind (a base for the next), its long
    texts (looked for in its later prompts), and each (role, model)'s last message list with its call number (a
    conversation's next request repeats it and adds turns: written as `after` that call, its new messages only)."""

    __slots__ = ("bases", "known", "lists")

    def __init__(self) -> None:
        self.bases: dict[tuple[Any, ...], tuple[str, str]] = {}
        self.known: list[tuple[str, str]] = []
        self.lists: dict[tuple[str, str], tuple[int, list[Any]]] = {}


def _same(m: Any, n: Any) -> bool:
    """Two messages alike (the same objects, as a conversation's next request reuses them, or equal)."""
    return m is n or (m.get("role") == n.get("role") and m.get("content") == n.get("content"))


def _extends(earlier: list[Any], messages: list[Any]) -> bool:
    """`messages` starts with every message of `earlier` (a conversation's next turn, a re-ask)."""
    return 0 < len(earlier) <= len(messages) and (all(map(operator.is_, earlier, messages))  # (in C: the usual case)
                                                  or all(_same(a, b) for a, b in zip(earlier, messages)))


class TranscriptWriter:
    """One writer per file; `observe` is the clients' observer (ModelClient.observer). The file is the run
    directory's transcripts/calls.jsonl, or `path` (a shard's segment, merged by the head: run/shards.py)."""

    def __init__(self, run_dir: Path, *, path: Path | None = None, interval: float = 2.0, keep: int = 4096) -> None:
        self.path = path if path is not None else calls_path(run_dir)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.interval, self.keep = interval, keep
        self._seen: set[str] = set()
        self._next = 1
        self._resume()
        self._fh: IO[bytes] = os.fdopen(open_nofollow(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab",
                                        buffering=_BUFFER)
        self._last_sync = time.monotonic()
        self._questions: OrderedDict[str, _Question] = OrderedDict()
        self._numbers: dict[int, int] = {}  # a client's call id -> its number here (while its retries come)
        self._chains: dict[int, int] = {}  # a request re-asked -> the number of its first call

    def _resume(self) -> None:
        """Learn what an earlier run of this directory wrote (texts, call numbers); cut an incomplete last line."""
        if not self.path.is_file():
            return
        good = 0
        for offset, raw in whole_lines(self.path):
            good = offset + len(raw)
            if (h := text_hash(raw)) is not None:
                self._seen.add(h)
            elif raw.startswith(b'{"call":'):
                number = raw[8:raw.index(b",")]
                self._next = max(self._next, int(number) + 1)
        if good != self.path.stat().st_size:
            with self.path.open("r+b") as fh:
                fh.truncate(good)

    # -- the observer ------------------------------------------------------------------------------------
    def observe(self, e: CallEvent) -> None:
        """Write one event (called on the event loop, by every client of the run)."""
        number = self._numbers.get(e.call)
        if number is None:
            number, self._next = self._next, self._next + 1
        qid = e.context.get("question")
        head: dict[str, Any] = {"call": number, "kind": e.kind, "q": qid}
        head.update((k, e.context[k]) for k in WHERE if e.context.get(k) is not None)
        head.update(role=e.role, model=e.model, model_id=e.model_id)
        if e.kind == "retry":
            self._numbers[e.call] = number
            head.update(attempt=e.attempts, status=e.status, error=redact(e.error), wait=e.wait, t=round(e.time, 3))
            self._write(head)
            return
        self._numbers.pop(e.call, None)
        if e.repeat:
            head["repeat"] = e.repeat
        if e.reask:
            head["reask"] = e.reask
            head["reask_of"] = self._chains.get(e.chain)
        if e.kind == "rejected":
            self._chains.setdefault(e.chain, number)
        else:
            self._chains.pop(e.chain, None)
        q = self._question(qid)
        messages = list(e.messages or ())
        skip = self._after(head, q, (e.role, e.model), number, messages)  # a conversation: its new turns only
        texts = _redacted([_plain(m.get("content")) for m in messages[skip:]] + [e.text or "", e.parse_error or "",
                                                                                    e.error or ""])
        head["messages"] = [{"role": m.get("role"), **self._content(texts[i], q, (e.role, e.model, "m", skip + i))}
                            for i, m in enumerate(messages[skip:])]
        if e.text is not None:
            head["reply"] = self._content(texts[-3], q, (e.role, e.model, "r"))
        if e.parse_error is not None:
            head["parse_error"] = texts[-2]
        if e.error is not None:
            head.update(error=texts[-1], status=e.status)
        head.update(attempts=e.attempts, tokens=[e.prompt_tokens, e.completion_tokens], cost=e.cost,
                    latency=e.latency, cached=e.cached, t=round(e.time, 3))
        self._write(head)

    @staticmethod
    def _after(head: dict[str, Any], q: _Question | None, who: tuple[str, str], number: int,
               messages: list[Any]) -> int:
        """How many leading messages are those of this question's last call by the same role and model (then
        `after` names that call): each turn of a conversation is written once, never copied into every later
        call, so transcripts grow linearly with the turns."""
        if q is None:
            return 0
        earlier = q.lists.get(who)
        q.lists[who] = (number, messages)
        if earlier is None or not _extends(earlier[1], messages):
            return 0
        head["after"] = earlier[0]
        return len(earlier[1])

    def _question(self, qid: Any) -> _Question | None:
        if not isinstance(qid, str):
            return None
        q = self._questions.get(qid)
        if q is None:
            q = self._questions[qid] = _Question()
            if len(self._questions) > self.keep:
                self._questions.popitem(last=False)
        return q

    def _content(self, text: str, q: _Question | None, kind: tuple[Any, ...]) -> dict[str, Any]:
        """One redacted text as a CONTENT (store/transcripts.py): inline, a reference, or a base's head and tail
        plus a middle."""
        if len(text) < SHORT_TEXT:
            return {"text": text}
        h = digest(text)
        if h in self._seen:
            return {"ref": h}
        base = q.bases.get(kind) if q is not None else None
        if base is not None:
            old, bh = base
            head = _common_prefix(old, text)
            tail = _common_suffix(old, text, min(len(old), len(text)) - head)
            if head + tail >= _MIN_SAVED and len(text) - head - tail <= len(text) // 2:
                parts: list[Any] = [{"ref": bh, "at": [0, head]}] if head else []
                if len(text) - head - tail:
                    parts.append(text[head:len(text) - tail])
                if tail:
                    parts.append({"ref": bh, "at": [len(old) - tail, len(old)]})
                return {"parts": parts}
        self._store(text, h, q)
        if q is not None:
            q.bases[kind] = (text, h)
            if len(text) >= _KNOWN_MIN and len(q.known) < _KNOWN_MAX:
                q.known.append((text, h))
        return {"ref": h}

    def _store(self, text: str, h: str, q: _Question | None) -> None:
        """Write a text line: whole, or as pieces naming the question's earlier texts it contains."""
        pieces: list[Any] = [text]
        for known, kh in sorted(q.known, key=lambda k: -len(k[0])) if q is not None else ():
            if len(known) >= len(text):
                continue
            split: list[Any] = []
            for piece in pieces:
                if isinstance(piece, str) and known in piece:
                    for i, part in enumerate(piece.split(known)):
                        if i:
                            split.append({"ref": kh})
                        if part:
                            split.append(part)
                else:
                    split.append(piece)
            pieces = split
        self._seen.add(h)
        self._write({"h": h, "t": text} if len(pieces) == 1 and isinstance(pieces[0], str) else {"h": h, "p": pieces})

    def _write(self, rec: dict[str, Any]) -> None:
        with naming_full_disk(self.path):
            self._fh.write((json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode(
                "utf-8", "surrogatepass"))

    # -- durability ----------------------------------------------------------------------------------------
    def finished(self, qid: str) -> None:
        """A question is final: its calls go to the OS now (before its journal record), fsync'd by interval."""
        self._questions.pop(qid, None)
        with naming_full_disk(self.path):
            self._fh.flush()
        if time.monotonic() - self._last_sync >= self.interval:
            self.sync()

    def sync(self) -> None:
        with naming_full_disk(self.path):
            self._fh.flush()
            os.fsync(self._fh.fileno())
        self._last_sync = time.monotonic()

    def close(self) -> None:
        close_naming_full_disk(self._fh, self.path, self.sync)
