"""Per-turn reference answers: from a list in the row's reference field, or from a second pinned file.

Why a second file: some benchmarks publish their reference answers apart from the questions (MT-Bench: a
strong model's answers to every turn, shown to the judge of its math, reasoning and coding questions). The
spec names it as `data.references` ({url + sha256 | path, id, answer}): `id` is the file's question-id field,
`answer` a dotted path to a string or a list of per-turn strings (e.g. `choices.0.turns`). A question gets
them as `Question.references` (the judge template's `references`, and `reference` for the graded turn); the
file is checked like the data (sha256, one JSON object a line, no id twice). When the data comes from the
command line (`data.path=`), the spec's references file is not read: it belongs to the pinned data, and a
local file carries its references in its own rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.dataset.fetch import fetch, sha256_file
from rubric_engine.dataset.jsonl import jsonl_rows
from rubric_engine.datatypes import Question, QuestionRows
from rubric_engine.errors import DataError

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["row_references", "load_references", "with_references"]


def row_references(value: Any, where: str, name: str) -> tuple[str, ...] | None:
    """A reference field holding a list: one reference per turn (None when it is not a list)."""
    if not isinstance(value, list):
        return None
    if not all(isinstance(v, str) for v in value):
        raise DataError(where, f"{name}: a list of references must hold strings, one per turn",
                        fix=f"got {value!r} (data.fields.reference)")
    return tuple(value)


def _walk(row: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(row, list) and part.isdigit() and int(part) < len(row):
            row = row[int(part)]
        elif isinstance(row, dict) and part in row:
            row = row[part]
        else:
            return None
    return row


def _file(spec: "BenchmarkSpec", cache_dir: str | Path | None, warnings: list[str]) -> Path:
    ref = spec.data.references
    assert ref is not None
    if ref.path:
        p, o = Path(ref.path).expanduser(), spec.origin("data.references.path")
        path = p if p.is_absolute() else (o[0].parent if o else spec.dir) / p
        spec._confine(path, "data.references.path", ref.path, o, shipped_data=True)
        if not path.is_file():
            raise DataError(str(path), "references file not found", fix="check data.references.path in the spec")
        if ref.sha256 and sha256_file(path) != ref.sha256:
            warnings.append(f"{path}: sha256 differs from the spec's pinned data.references.sha256; using the file "
                            "as given")
        return path
    if not ref.url:
        raise DataError(str(spec.files[-1]) if spec.files else spec.name, "data.references declares neither url "
                        "nor path", fix="give data.references.url (with sha256) or data.references.path")
    return fetch(ref.url, ref.sha256, cache_dir, warnings)[0]


def load_references(spec: "BenchmarkSpec", cache_dir: str | Path | None = None,
                    warnings: list[str] | None = None) -> dict[str, tuple[str, ...]]:
    """question id -> its per-turn references, from the spec's references file."""
    ref = spec.data.references
    assert ref is not None
    file = _file(spec, cache_dir, warnings if warnings is not None else [])
    out: dict[str, tuple[str, ...]] = {}
    for n, row in jsonl_rows(Path(file)):
        qid, answer = _walk(row, ref.id), _walk(row, ref.answer)
        if qid is None or isinstance(qid, (dict, list, bool)):
            raise DataError(str(file), f"no question id at {ref.id!r}", line=n, fix="check data.references.id")
        if isinstance(answer, str):
            answer = [answer]
        if not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
            raise DataError(str(file), f"no reference text (a string or a list of strings) at {ref.answer!r}",
                            line=n, fix="check data.references.answer (a dotted path such as choices.0.turns)")
        if str(qid) in out:
            raise DataError(str(file), f"question id {qid!r} appears twice", line=n, fix="ids must be unique")
        out[str(qid)] = tuple(answer)
    return out


def with_references(questions: Sequence[Question], refs: Mapping[str, tuple[str, ...]]) -> Sequence[Question]:
    """The questions, each with the references the file holds for it: the declared file is the source (as
    MT-Bench's judge reads its reference file, not the rows' own); a question the file lacks keeps its row's."""
    def attach(q: Question) -> Question:
        return dataclasses.replace(q, references=refs[q.id]) if q.id in refs else q

    if isinstance(questions, QuestionRows):
        load = questions._load
        return QuestionRows(questions.refs, lambda ref: attach(load(ref)), questions._row)
    return [attach(q) for q in questions]
