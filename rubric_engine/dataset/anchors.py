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
from pathlib import Path
from typing import TYPE_CHECKING

from rubric_engine.dataset.jsonl import jsonl_rows
from rubric_engine.errors import DataError

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["anchor_answers"]


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
        out[name] = _read(str(path.resolve()), st.st_size, st.st_mtime_ns, block.id, block.response)
    return out


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
