"""The anchors' answers (a spec's `anchors:` block): each anchor's file read once, question id -> its reply.

Why apart from dataset/baseline.py: a baseline's file must answer every selected question before any call (a
pairwise run has nothing to compare without it); an anchored run compares each question with several anchors, and
an anchor without an answer to one question is that question's counted error (shapes/anchored.py), not the end of
the run. What is checked before any call is that every file exists and reads (`anchor_answers`, from the
verdict's plan check); the rows are read once per file and kept for the run (keyed by path, size and time, so
an edited file is read again).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rubric_engine.dataset.jsonl import jsonl_rows
from rubric_engine.errors import DataError

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["anchor_answers", "AnchorAnswers", "given_anchor_answers", "ANCHOR_FIELD"]

ANCHOR_FIELD = "anchor"  # the column of a `baseline.answers=FILE` row naming the anchor it answers for


def anchor_answers(spec: "BenchmarkSpec") -> dict[str, dict[str, str]]:
    """anchor name -> (question id -> reply) for every anchor the spec declares (a DataError, one line, for a
    missing or unreadable file)."""
    block = spec.anchors
    assert block is not None, "anchor answers of a spec without an anchors block"
    out: dict[str, dict[str, str]] = {}
    for name, anchor in block.files.items():
        path = spec.declared_file(f"anchors.files.{name}.path", anchor.path)
        if not path.is_file():
            raise DataError(str(path), f"anchor {name}: answers file not found",
                            fix=f"check anchors.files.{name}.path (relative to the spec's directory)")
        st = path.stat()
        if anchor.sha256 is not None and _sha256(str(path.resolve()), st.st_size, st.st_mtime_ns) != anchor.sha256:
            raise DataError(str(path), f"anchor {name}: the file's sha256 is not the pinned anchors.files.{name}.sha256",
                            fix="restore the pinned file, or pin the new one's sha256 (a changed anchor is another "
                                "benchmark)")
        out[name] = _read(str(path.resolve()), st.st_size, st.st_mtime_ns, block.id, block.response)
    return out


class AnchorAnswers(Mapping[str, str]):
    """The anchors' answers a run was given on the command line (`baseline.answers=FILE` under an anchors: block):
    `by_anchor` holds them per anchor name as the file names them (a name the spec does not declare included: a
    question it answers is that question's counted error). As a mapping: `anchor/id` -> reply."""

    def __init__(self, by_anchor: dict[str, dict[str, str]], path: str) -> None:
        self.by_anchor, self.path = by_anchor, path

    def __getitem__(self, key: str) -> str:
        name, _, qid = key.partition("/")
        return self.by_anchor[name][qid]

    def __iter__(self) -> Iterator[str]:
        return (f"{n}/{q}" for n, answers in self.by_anchor.items() for q in answers)

    def __len__(self) -> int:
        return sum(len(a) for a in self.by_anchor.values())


def given_anchor_answers(spec: "BenchmarkSpec", path: str) -> AnchorAnswers:
    """`baseline.answers=FILE` for an anchored spec: one JSONL file of rows {id, anchor, response} (the id and
    response fields are the anchors block's), the user's own path; a DataError, one line, for a missing file or a
    row without its fields."""
    block = spec.anchors
    assert block is not None, "anchor answers of a spec without an anchors block"
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataError(str(file), "anchor answers file not found", fix="check the path given for baseline.answers")
    out: dict[str, dict[str, str]] = {}
    for n, row in jsonl_rows(file):
        if not isinstance(row, dict) or block.id not in row or not isinstance(row.get(ANCHOR_FIELD), str):
            raise DataError(str(file), f"row has no {block.id!r} or no {ANCHOR_FIELD!r} field", line=n,
                            fix=f"each row: {{{block.id!r}: question id, {ANCHOR_FIELD!r}: anchor name, "
                                f"{block.response!r}: the anchor's reply}}")
        text = row.get(block.response)
        if not isinstance(text, str):
            raise DataError(str(file), f"row {row[block.id]!r} has no text in its {block.response!r} field", line=n,
                            fix="give each row the anchor's reply as a string")
        answers = out.setdefault(row[ANCHOR_FIELD], {})
        if str(row[block.id]) in answers:
            raise DataError(str(file), f"a second answer of anchor {row[ANCHOR_FIELD]!r} for question "
                            f"{row[block.id]!r}", line=n, fix="keep one row per anchor and id")
        if text.strip():
            answers[str(row[block.id])] = text
    return AnchorAnswers(out, str(file))


@functools.lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@functools.lru_cache(maxsize=64)
def _read(path: str, size: int, mtime_ns: int, id_field: str, response: str) -> dict[str, str]:
    """One file's replies by id (`size` and `mtime_ns` only key the cache); a blank reply is no reply."""
    out: dict[str, str] = {}
    for n, row in jsonl_rows(Path(path)):
        if not isinstance(row, dict) or id_field not in row:
            raise DataError(path, f"row has no {id_field!r} field", line=n,
                            fix="set anchors.id to the field holding the question id")
        qid, text = str(row[id_field]), row.get(response)
        if qid in out:
            raise DataError(path, f"a second answer for question {qid!r}", line=n, fix="keep one row per id")
        if not isinstance(text, str):
            raise DataError(path, f"row {qid!r} has no text in its {response!r} field", line=n,
                            fix="set anchors.response to the field holding the answer, a string")
        if text.strip():
            out[qid] = text
    return out
