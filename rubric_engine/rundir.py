"""The files of a run directory: what a run leaves behind and what later runs read back.

Why a module of its own: the runner writes these files, and score-only runs, resumed runs and
leaderboards read them back, so their layout is a public, versioned format (see README).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .datatypes import Question
from .errors import AnswersError

__all__ = [
    "ANSWERS_FILE",
    "SAMPLES_FILE",
    "SUMMARY_FILE",
    "SPEC_FILE",
    "SUMMARY_SCHEMA_VERSION",
    "write_json",
    "write_jsonl",
    "read_jsonl",
    "read_summary",
    "answer_rows",
    "read_answers",
]

ANSWERS_FILE = "answers.jsonl"
SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"
SPEC_FILE = "spec.resolved.json"
SUMMARY_SCHEMA_VERSION = 1


def write_json(path: Path, obj: Any) -> None:
    """Write atomically (temp file + rename) so a kill never leaves half a summary behind."""
    _atomic_write(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    _atomic_write(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read a JSON Lines file; raise AnswersError naming file and line on a bad row."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise AnswersError(f"{path}: cannot read the file ({exc.__class__.__name__}: {exc})") from exc
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AnswersError(f"{path}:{n}: not valid JSON ({exc.msg}); each line must be one JSON object") from exc
        if not isinstance(row, dict):
            raise AnswersError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
        rows.append(row)
    return rows


def read_summary(run_dir: Path) -> dict[str, Any]:
    """A run directory's summary.json as a dict (OSError / ValueError when absent or not a JSON object)."""
    data = json.loads((Path(run_dir) / SUMMARY_FILE).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{Path(run_dir) / SUMMARY_FILE}: expected a JSON object")
    return data


def answer_rows(questions: Sequence[Question], responses: Mapping[str, str | None], id_field: str) -> list[dict]:
    """The benchmark's own rows plus a `response` field: the format score-only runs accept."""
    rows = []
    for q in questions:
        row = dict(q.source_row or {id_field: q.id})
        row["response"] = responses.get(q.id)
        rows.append(row)
    return rows


def read_answers(path: Path, id_field: str, known_ids: Iterable[str]) -> dict[str, str | None]:
    """Map question id -> response from an answers file; ids the benchmark lacks are an error.

    A row whose response is missing, null or blank maps to None: the runner records it as a
    missing answer (counted), never as an empty reply to be judged.
    """
    path = Path(path)
    if path.is_dir():
        raise AnswersError(f"{path}: is a directory; for an earlier run use from_run={path}")
    known = set(known_ids)
    out: dict[str, str | None] = {}
    for n, row in enumerate(read_jsonl(path), 1):
        qid = row.get(id_field)
        if not isinstance(qid, str) or not qid:
            raise AnswersError(f"{path}: row {n}: no '{id_field}' field; answers rows are the benchmark's rows plus 'response'")
        if "response" not in row:
            raise AnswersError(f"{path}: row {n} ({qid}): no 'response' field; add the candidate's reply as 'response'")
        if qid in out:
            raise AnswersError(f"{path}: row {n}: duplicate {id_field} {qid!r}")
        resp = row["response"]
        if resp is not None and not isinstance(resp, str):
            raise AnswersError(f"{path}: row {n} ({qid}): 'response' must be a string or null, got {type(resp).__name__}")
        out[qid] = resp if resp and resp.strip() else None
    unknown = sorted(set(out) - known)
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise AnswersError(f"{path}: {len(unknown)} id(s) not in this benchmark's data: {shown}; is it the right benchmark?")
    return out
