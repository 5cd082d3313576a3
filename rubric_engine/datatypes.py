"""The data types every layer shares: a question, its dialogue turns, its rubric criteria, a dataset.

Why a module of its own: scoring, prompts, the judge and the run directory all need these types, and
none of them should import the module that downloads and validates data (dataset/load.py) to get them.
Plain frozen dataclasses, no I/O, so importing them costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

__all__ = ["Turn", "Criterion", "Question", "QuestionRef", "QuestionRows", "Dataset", "MAX_WEIGHT", "turn_id",
           "dialogue_of"]

MAX_WEIGHT = 1e6  # |weight| bound: sums of weights stay finite (two weights of 1e308 overflow to inf)
TURN_MARK = ".t"  # data.expand: assistant_turns: question `<dialogue id>.t<k>` is the k-th assistant turn (1-based)


def turn_id(dialogue: str, k: int) -> str:
    """The id of a dialogue's k-th assistant turn as a question of its own (`data.expand: assistant_turns`)."""
    return f"{dialogue}{TURN_MARK}{k}"


def dialogue_of(qid: str) -> str:
    """The dialogue an expanded question came from: its id without the last `.t<k>` (the mark is always last,
    so a dialogue id holding `.t` itself is read back whole)."""
    head, mark, k = qid.rpartition(TURN_MARK)
    return head if mark and k.isdigit() else qid


@dataclass(frozen=True)
class Turn:
    role: str  # the role label as it appears in the data (e.g. "A", "user"); data.roles maps it
    content: str


@dataclass(frozen=True)
class StatedTurn(Turn):
    """A simulated user's turn with its hidden state (a spec's user_state:, shapes/userstate.py): its record
    entry's `state`; the candidate's messages never hold it."""
    state: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Criterion:
    """One binary rubric item: an ability item, a failure-rule item, or (without a taxonomy) a plain item."""

    index: int  # 1-based position within its question (the number the judge sees)
    label: str  # the label exactly as written in the data (an ability or failure-rule data label)
    weight: float | None  # None where the data has no weight (e.g. failure-rule items)
    text: str
    ability: str | None = None  # taxonomy ability id, for scored items
    rule: str | None = None  # failure-rule id, for failure-rule items
    tags: tuple[str, ...] = ()  # item tags from the data (e.g. "axis:accuracy"); () when the data has none
    # a deterministic check the engine decides (a scoring.checks model; typed there, as this module sits below
    # scoring); None: a judge decides the item
    check: Any = None


@dataclass(frozen=True)
class Question:
    id: str
    dialogue: tuple[Turn, ...]
    criteria: tuple[Criterion, ...]
    subset: str = ""  # e.g. "normal" / "hard"; "" when the data has none
    scenario: str = ""  # primary scenario label as in the data; "" when empty
    secondary_scenario: str = ""
    tags: tuple[str, ...] = ()  # question-level tags from the data (e.g. "theme:..."); () when none
    reference: str = ""  # a reference answer shown to the judge; "" when the spec maps none
    turns: tuple[str, ...] = ()  # scripted user messages (data.fields.turns); () when the spec maps none
    references: tuple[str, ...] = ()  # one reference answer per turn (a list in the data, or data.references)
    choices: tuple[str, ...] = ()  # multiple choice: the options, lettered A, B, ... in this order; () when none
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    # the row as read, so answers files can repeat the benchmark's own format
    source_row: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class QuestionRef:
    """A validated question without its texts: what selection, ordering and resuming need.

    Why: a run of 100,000 questions must not hold every dialogue and rubric. The full `Question` is
    read again from its row when a worker takes it (`QuestionRows`), so a run keeps ~200 bytes per
    question instead of its parsed row."""

    id: str
    subset: str = ""
    scenario: str = ""
    line: int = 0  # the row's line (or row number), for errors
    offset: int = -1  # byte offset of the row's line in a JSONL file; -1: the question is held whole
    crc: int = 0  # crc32 of the line as validated: a file changed during the run is refused, never mixed in


class QuestionRows(Sequence[Question]):
    """A dataset's questions read again from their rows on access, one at a time.

    A Sequence, so code written for a list of questions works on it unchanged while holding one
    question at a time; `refs` are the compact handles, `row(ref)` the row as read (answers.jsonl
    repeats the benchmark's own row)."""

    def __init__(self, refs: Sequence[QuestionRef], load: Callable[[QuestionRef], Question],
                 row: Callable[[QuestionRef], dict[str, Any]]) -> None:
        self.refs = list(refs)
        self._load, self._row = load, row

    def __len__(self) -> int:
        return len(self.refs)

    @overload
    def __getitem__(self, i: int) -> Question: ...

    @overload
    def __getitem__(self, i: slice) -> "QuestionRows": ...

    def __getitem__(self, i: int | slice) -> "Question | QuestionRows":
        if isinstance(i, slice):
            return self.view(self.refs[i])
        return self._load(self.refs[i])

    def __iter__(self) -> Iterator[Question]:
        for ref in self.refs:
            yield self._load(ref)

    def view(self, refs: Sequence[QuestionRef]) -> "QuestionRows":
        """The same rows for a selection of refs (e.g. the questions still to run)."""
        return QuestionRows(refs, self._load, self._row)

    def question(self, ref: QuestionRef) -> Question:
        return self._load(ref)

    def row(self, ref: QuestionRef) -> dict[str, Any]:
        return self._row(ref)


@dataclass
class Dataset:
    questions: Sequence[Question]  # a list, or QuestionRows when loaded lazily (load_dataset(lazy=True))
    source: str  # path or URL the rows came from
    sha256: str
    warnings: list[str] = field(default_factory=list)
    # how sha256 was established: "pinned" (spec's data.sha256), "first_use" (recorded on first download,
    # checked after), or "local" (a data.path file, hashed as given)
    trust: str = "local"
    # every item tag and example tag in the data: checking report breakdowns needs no question texts
    item_tags: frozenset[str] = frozenset()
    example_tags: frozenset[str] = frozenset()
