"""One question per assistant turn (`data.expand: assistant_turns`): turn-based evaluation of dialogues.

Why at loading time: an expanded turn is an ordinary single-reply question whose dialogue is the gold
history before that turn, so every shape, the plan of calls, `limit`, `ids=`, the journal and resuming
work on it unchanged. Its id is `<dialogue id>.t<k>` (datatypes.turn_id; k counts assistant turns from 1),
stable across runs, and names its dialogue for the aggregation back to dialogues (stats/dialogues.py).

A dialogue with no assistant turn to ask (none at all, or only one opening the dialogue, which has no
history to answer) yields no question: it is counted and named in one data warning, never silently dropped
and never the end of the run. An assistant turn that opens a dialogue is counted in the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.datatypes import Question, QuestionRef, turn_id
from rubric_engine.errors import DataError

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Expansion", "expanded", "question_of"]


@dataclass
class Expansion:
    """What expanding a file's rows left out, for its one data warning."""

    file: Path
    empty: list[str] = field(default_factory=list)  # "<id> (line n)" of dialogues with no turn to ask
    openers: int = 0  # assistant turns opening a dialogue (no history before them): not asked

    def warnings(self, asked: int) -> list[str]:
        """The data warnings; none asked at all from rows that were read is an error, not an empty run."""
        file = self.file
        if not asked and (self.empty or self.openers):
            raise DataError(str(file), f"no assistant turn to ask in any of its {len(self.empty)} dialogue(s) "
                            "(data.expand: assistant_turns)", fix="check data.roles: the replying speaker's label "
                            "must map to assistant, and each dialogue needs a turn before it")
        out = []
        if self.empty:
            shown = ", ".join(self.empty[:5]) + (f" and {len(self.empty) - 5} more" if len(self.empty) > 5 else "")
            out.append(f"{file}: {len(self.empty)} dialogue(s) with no assistant turn to ask (data.expand: "
                       f"assistant_turns), left out of the run: {shown}")
        if self.openers:
            out.append(f"{file}: {self.openers} assistant turn(s) open their dialogue (no history before them) "
                       "and are not asked (data.expand: assistant_turns)")
        return out


def expanded(spec: BenchmarkSpec, q: Question, line: int, left: Expansion | None = None,
             ids: dict[str, int] | None = None) -> list[Question]:
    """The questions a row stands for: itself, or under `data.expand: assistant_turns` one per assistant turn
    with a history, each the row's question with the turns before it as its dialogue. `left` counts what was
    not asked; `ids` (id -> line of every question so far) refuses a turn id another row already holds."""
    if spec.data.expand is None:
        return [q]
    roles = spec.data.roles
    out: list[Question] = []
    k = 0
    for i, turn in enumerate(q.dialogue):
        if roles.get(turn.role) != "assistant":
            continue
        k += 1
        if i == 0:
            if left is not None:
                left.openers += 1
            continue
        out.append(replace(q, id=turn_id(q.id, k), dialogue=q.dialogue[:i], source_row=_row(spec, q, k, i)))
        if ids is not None and left is not None:
            _unique(out[-1].id, line, ids, left.file)
    if not out and left is not None:
        left.empty.append(f"{q.id} (line {line})")
    return out


def question_of(spec: BenchmarkSpec, q: Question, ref: QuestionRef) -> Question:
    """The question `ref` names among those the row read again as `q` stands for: the row itself, or one turn."""
    return next(e for e in expanded(spec, q, ref.line) if e.id == ref.id)


def _row(spec: BenchmarkSpec, q: Question, k: int, i: int) -> dict[str, Any]:
    """The row as the k-th turn's question reads it (answers.jsonl repeats it): its id, the history before it."""
    f, row = spec.data.fields, dict(q.source_row)
    row[f.id] = turn_id(q.id, k)
    if isinstance(row.get(f.dialogue), list):
        row[f.dialogue] = row[f.dialogue][:i]
    return row


def _unique(qid: str, line: int, ids: dict[str, int], file: Path) -> None:
    if qid in ids:
        raise DataError(str(file), f"turn id {qid!r} (data.expand: assistant_turns) is also the id of the question "
                        f"at line {ids[qid]}", line=line, fix="rename one of the two dialogues")
    ids[qid] = line
