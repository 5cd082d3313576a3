"""Baseline answers for pairwise judging: read from files, one per data group, keyed by question id.

Why apart from the data loader: the baseline's answers are a second input with their own field names
(Arena-Hard publishes `{uid, model, messages: [...]}` rows whose last assistant message is the answer,
one file per baseline model and category). The spec's `baseline.answers` declares the mapping and the
files (downloaded and pinned as data is, dataset/fetch.py); `baseline.answers=FILE` on the command line
is one file in the engine's answers format (the benchmark's id field and `response`). Every selected
question must have an answer before any call is made: a missing one is one line naming the file and the
first missing ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.dataset.fetch import fetch
from rubric_engine.dataset.jsonl import jsonl_rows
from rubric_engine.errors import DataError

if TYPE_CHECKING:
    from rubric_engine.datatypes import QuestionRef
    from rubric_engine.spec.schema import BaselineAnswers, BenchmarkSpec

__all__ = ["load_baseline_answers", "command_line_answers"]


def command_line_answers(spec: "BenchmarkSpec", path: str) -> "BaselineAnswers":
    """`baseline.answers=FILE`: one file in the engine's answers format (the data's id field, `response`)."""
    from rubric_engine.spec.schema import AnswerFile, BaselineAnswers

    return BaselineAnswers(id=spec.data.fields.id, files={"all": AnswerFile(path=path)})


def load_baseline_answers(spec: "BenchmarkSpec", questions: Sequence["QuestionRef"], declared: "BaselineAnswers",
                          *, command_line: bool = False, cache_dir: str | Path | None = None,
                          warnings: list[str] | None = None) -> dict[str, str]:
    """question id -> the baseline's answer, for every question of `questions` (DataError if one is missing).
    `command_line`: the paths are the user's own (not confined to the spec's directory)."""
    by_file: dict[str, list["QuestionRef"]] = {}
    for ref in questions:
        group = "" if declared.by is None else getattr(ref, declared.by)
        name = next(iter(declared.files)) if declared.by is None else group
        if name not in declared.files:
            raise DataError(spec.name, f"baseline.answers.files has no file for {declared.by} {group!r} "
                            f"(question {ref.id})", fix=f"add a file for {group!r} under baseline.answers.files, "
                            f"or leave those questions out with {declared.by}=")
        by_file.setdefault(name, []).append(ref)
    out: dict[str, str] = {}
    for name, refs in by_file.items():
        f = declared.files[name]
        if f.url is not None:
            path, _ = fetch(f.url, f.sha256, cache_dir, warnings)
        elif command_line:
            path = Path(str(f.path)).expanduser()
        else:
            path = spec.declared_file(f"baseline.answers.files.{name}.path", str(f.path))
        answers = _read(path, declared, {r.id for r in refs})
        missing = [r.id for r in refs if r.id not in answers]
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise DataError(str(path), f"no baseline answer for {len(missing)} of {len(refs)} question(s): {shown}",
                            fix="add those answers to the file, or leave the questions out (ids=, subset=, limit=); "
                            "nothing was called yet")
        out.update(answers)
    return out


def _read(path: Path, declared: "BaselineAnswers", wanted: set[str]) -> dict[str, str]:
    """The answers of the `wanted` ids in one JSONL file (other rows are skipped); a blank answer is missing."""
    if not path.is_file():
        raise DataError(str(path), "baseline answers file not found", fix="check the path given for baseline.answers")
    out: dict[str, str] = {}
    for n, row in jsonl_rows(path):
        if not isinstance(row, dict) or declared.id not in row:
            raise DataError(str(path), f"row has no {declared.id!r} field", line=n,
                            fix="set baseline.answers.id to the field holding the question id")
        qid = str(row[declared.id])
        if qid not in wanted:
            continue
        if qid in out:
            raise DataError(str(path), f"a second answer for question {qid!r}", line=n, fix="keep one row per id")
        text = _answer(row.get(declared.response), declared)
        if text is None and declared.response not in row:
            raise DataError(str(path), f"row {qid!r} has no {declared.response!r} field", line=n,
                            fix="set baseline.answers.response to the field holding the answer")
        if text is not None and text.strip():
            out[qid] = text
    return out


def _answer(value: Any, declared: "BaselineAnswers") -> str | None:
    """The answer in a row's response field: a string, or the last `answer_role` message of a list, its text
    at the dotted path `message_content` (`content.answer`; a plain string met on the way is the text)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        for m in reversed(value):
            if isinstance(m, Mapping) and m.get(declared.message_role) == declared.answer_role:
                content: Any = m
                for key in declared.message_content.split("."):
                    if isinstance(content, str):
                        break
                    content = content.get(key) if isinstance(content, Mapping) else None
                return content if isinstance(content, str) else None
    return None
