"""A run's transcripts (`transcripts/calls.jsonl`): the format, and the one reader of it.

Why a format of its own and not one line per call with its prompt: per-criterion judging sends the same
conversation and reply once per criterion, so texts are stored once, content-addressed, and calls refer to them
(docs/outputs.md, "transcripts/"). The file holds two kinds of line, written in order, so a reference always
points to a line before it:
  text  {"h": HASH, "t": TEXT} or {"h": HASH, "p": PIECES}   HASH = blake2b-64 (hex) of the text
  call  {"call": N, "kind": ..., "q": ID, "role": ..., "messages": [...], "reply": CONTENT, ...}
        with "after": M, the call's messages are call M's (same question, written before) followed by "messages":
        a conversation's request at turn k repeats the turns before it, and writing them again at every turn would
        make the file quadratic in the number of turns.
A CONTENT is {"text": TEXT} (short, inline), {"ref": HASH} or {"parts": PIECES}; PIECES is a list of literal
strings and {"ref": HASH} or {"ref": HASH, "at": [START, END]} (a slice of that text). A run killed mid-write
leaves at most its last line incomplete: the reader skips it and a resumed run cuts it off before appending.
The writer is run/transcripts.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_engine.errors import DataError

__all__ = ["TRANSCRIPTS_DIR", "CALLS_FILE", "Call", "Retry", "Transcripts", "calls_path", "digest", "read_calls",
           "whole_lines", "text_hash",
           "content_text", "SHORT_TEXT", "WHERE"]

TRANSCRIPTS_DIR = "transcripts"
CALLS_FILE = "calls.jsonl"
WHERE = ("sample", "turn", "criterion", "order")  # where in its question a call belongs, when known
SHORT_TEXT = 64  # a text shorter than this is written inline: a reference would not be shorter
_MAX_DEPTH = 4  # PIECES may refer to texts whose own PIECES refer to others; never deeper than this


def calls_path(run_dir: Path) -> Path:
    return Path(run_dir) / TRANSCRIPTS_DIR / CALLS_FILE


def digest(text: str) -> str:
    """The content address of a (redacted) text: 64 bits of blake2b, as hex."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


@dataclass
class Retry:
    """One failed attempt that was retried."""

    attempt: int
    status: int | None
    error: str
    wait: float | None


@dataclass
class Call:
    """One recorded call, its texts resolved."""

    number: int
    kind: str  # reply, cache_hit, rejected (accept() refused the reply), error
    role: str
    model: str
    model_id: str
    question: str | None
    own: list[tuple[str, str]]  # (role, content): the messages after those of `earlier` (all of them without one)
    reply: str | None
    parse_error: str | None = None
    error: str | None = None
    status: int | None = None
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    latency: float | None = None
    cached: bool = False
    repeat: int = 0
    reask: int = 0
    reask_of: int | None = None
    context: dict[str, Any] = field(default_factory=dict)  # sample, turn, criterion where known
    retries: list[Retry] = field(default_factory=list)
    time: float | None = None
    earlier: "Call | None" = None  # the call whose messages come first (a conversation's previous turn)

    @property
    def messages(self) -> list[tuple[str, str]]:
        """Every message as sent, (role, content): built when asked (a conversation's calls share their turns,
        so holding each call's whole list would take memory quadratic in the turns)."""
        chain: list[list[tuple[str, str]]] = []
        c: Call | None = self
        while c is not None:
            chain.append(c.own)
            c = c.earlier
        return [m for own in reversed(chain) for m in own]


def whole_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(byte offset, raw line) of every complete line (an incomplete last line, left by a killed run, is skipped)."""
    offset = 0
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                return  # the last line, cut off mid-write
            yield offset, raw
            offset += len(raw)


def text_hash(raw: bytes) -> str | None:
    """A text line's HASH, read without parsing the line; None for a call line."""
    return raw[6:22].decode("ascii", "replace") if raw.startswith(b'{"h":"') else None


def _load(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        rec = json.loads(raw)
    except ValueError as exc:
        raise DataError(str(path), f"unreadable line ({str(exc)[:80]})",
                        fix="the transcripts file is damaged; move it away") from None
    if not isinstance(rec, dict):
        raise DataError(str(path), "a line that is not a JSON object",
                        fix="the transcripts file is damaged; move it away")
    return rec


def _refs(content: Any) -> Iterator[str]:
    """The hashes a CONTENT (or a text line's PIECES) refers to."""
    if isinstance(content, Mapping):
        if isinstance(content.get("ref"), str):
            yield content["ref"]
        content = content.get("parts") or content.get("p") or []
    if isinstance(content, list):
        for piece in content:
            if isinstance(piece, Mapping) and isinstance(piece.get("ref"), str):
                yield piece["ref"]


def content_text(content: Any, texts: Mapping[str, Any], depth: int = 0) -> str:
    """The text a CONTENT (or a text line) stands for."""
    if not isinstance(content, Mapping) or depth > _MAX_DEPTH:
        return "" if content is None else str(content)
    if "t" in content:
        return str(content["t"])
    if "text" in content:
        return str(content["text"])
    if isinstance(content.get("ref"), str) and "at" not in content:
        return content_text(texts.get(content["ref"]), texts, depth + 1)
    pieces = content.get("parts") if "parts" in content else content.get("p")
    out = []
    for piece in pieces or []:
        if isinstance(piece, str):
            out.append(piece)
        elif isinstance(piece, Mapping):
            whole = content_text(texts.get(str(piece.get("ref"))), texts, depth + 1)
            at = piece.get("at")
            out.append(whole[at[0]:at[1]] if isinstance(at, list) and len(at) == 2 else whole)
    return "".join(out)


def _call(rec: Mapping[str, Any], texts: Mapping[str, Any], earlier: Mapping[int, Call]) -> Call:
    ctx = {k: rec[k] for k in WHERE if rec.get(k) is not None}
    tokens = rec.get("tokens") or [0, 0]
    return Call(number=int(rec["call"]), kind=str(rec.get("kind")), role=str(rec.get("role")),
                model=str(rec.get("model")), model_id=str(rec.get("model_id")), question=rec.get("q"),
                own=[(str(m.get("role")), content_text(m, texts)) for m in rec.get("messages") or []],
                earlier=earlier.get(rec["after"]) if isinstance(rec.get("after"), int) else None,
                reply=content_text(rec["reply"], texts) if rec.get("reply") is not None else None,
                parse_error=rec.get("parse_error"), error=rec.get("error"), status=rec.get("status"),
                attempts=int(rec.get("attempts") or 0), prompt_tokens=int(tokens[0]), completion_tokens=int(tokens[1]),
                cost=rec.get("cost"), latency=rec.get("latency"), cached=bool(rec.get("cached")),
                repeat=int(rec.get("repeat") or 0), reask=int(rec.get("reask") or 0), reask_of=rec.get("reask_of"),
                context=ctx, time=rec.get("t"))


class Transcripts:
    """Random access to one run's transcripts: one pass indexes where each question's calls and each text are, then
    `calls(question)` reads only those lines, so a report over thousands of questions holds one question at a time."""

    def __init__(self, run_dir: Path) -> None:
        self.path = calls_path(run_dir)
        self._calls: dict[str | None, list[int]] = {}
        self._texts: dict[str, int] = {}
        if not self.path.is_file():
            return
        for offset, raw in whole_lines(self.path):
            if (h := text_hash(raw)) is not None:
                self._texts[h] = offset
            else:
                rec = _load(self.path, raw)
                if "call" in rec:
                    self._calls.setdefault(rec.get("q"), []).append(offset)

    def questions(self) -> list[str | None]:
        return list(self._calls)

    def calls(self, question: str | None) -> list[Call]:
        """The question's calls in the order they ended, texts resolved, each with its retries."""
        offsets = self._calls.get(question, [])
        if not offsets:
            return []
        chosen: list[dict[str, Any]] = []
        retries: dict[int, list[Retry]] = {}
        texts: dict[str, Any] = {}
        with self.path.open("rb") as fh:
            for offset in offsets:
                fh.seek(offset)
                rec = _load(self.path, fh.readline())
                if rec.get("kind") == "retry":
                    retries.setdefault(int(rec["call"]), []).append(
                        Retry(int(rec.get("attempt") or 0), rec.get("status"), str(rec.get("error") or ""),
                              rec.get("wait")))
                else:
                    chosen.append(rec)
            need = [h for rec in chosen for c in [*(rec.get("messages") or []), rec.get("reply")] for h in _refs(c)]
            for _ in range(_MAX_DEPTH + 1):  # texts may refer to earlier texts: load until none is missing
                more = []
                for h in need:
                    if h not in texts and h in self._texts:
                        fh.seek(self._texts[h])
                        texts[h] = _load(self.path, fh.readline())
                        more += _refs(texts[h])
                need = more
                if not need:
                    break
        calls: list[Call] = []
        by_number: dict[int, Call] = {}
        for rec in chosen:
            c = _call(rec, texts, by_number)
            c.retries = retries.pop(c.number, [])
            by_number[c.number] = c
            calls.append(c)
        return calls


def read_calls(run_dir: Path, question: str) -> list[Call]:
    """One question's calls (see Transcripts.calls)."""
    return Transcripts(run_dir).calls(question)
