"""The typed record: one question's outcome as a reader sees it, its judgment one of a few variants tagged by kind.

Why frozen dataclasses (slots) rather than pydantic models: the record is read 100k times by the leaderboard and
the statistics, which must stay light (tests/project/test_structure.py: scoring/ and stats/ load no pydantic); a slotted
dataclass builds in about a microsecond and imports nothing. What is common to every shape lives here: the
question's identity, the reply (one reply, or a conversation's transcript: `Reply` / `Transcript`), the errors,
the per-item verdicts (every record carries the rubric items it was judged on, empty for a score or a comparison),
the score fields and the usage. What only one verdict kind stores is its `Judgment` variant, in the module of
that kind (record/score.py, record/pairwise.py; the criteria kind's verdicts are the items here). `Layout`
remembers which keys a stored object had and in what order, and any key this version does not know, so a record
read and written again is the same bytes (record/codec.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, overload

from rubric_engine.records import GroupScore

__all__ = ["Layout", "NO_LAYOUT", "CriterionVerdict", "Criteria", "Turn", "Reply", "Transcript", "Judgment", "NotJudged",
           "CriteriaJudgment", "Judged", "Record"]


@dataclass(frozen=True, slots=True)
class Layout:
    """A stored object's keys in their order, and the values of keys this version does not read (kept as they are).
    One Layout is shared by every object of the same keys (record/codec.py interns them)."""

    keys: tuple[str, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] = field(default=frozenset(), compare=False, repr=False)  # `keys` as a set

    def __post_init__(self) -> None:
        object.__setattr__(self, "present", frozenset(self.keys))

    def has(self, key: str) -> bool:
        return key in self.present


NO_LAYOUT = Layout(())


@dataclass(frozen=True, slots=True)
class CriterionVerdict:
    """One rubric item with the judge's verdict on it (`votes`: every juror's every grading, when graded more than
    once; `check`: the engine's check of an item it decides, its finding in `reasoning`)."""

    index: int
    label: str = ""
    ability: str | None = None
    rule: str | None = None
    weight: float | None = None  # None: an item without a weight in the data (a failure-rule item)
    text: str = ""
    reasoning: str | None = None
    hit: bool | None = None
    votes: Mapping[str, list[bool | None]] | None = None
    tags: tuple[str, ...] = ()
    check: Mapping[str, Any] | None = None
    p_met: float | None = None  # P(met) from the judge's token log-probabilities (judge/probability.py)
    # judge.verdict.use: probability: the share of the item's points its score counted, `p_met` where the item has
    # one, else its verdict's 1.0 or 0.0 (`hit` stays the verdict); None: not written (the verdict counted)
    credit: float | None = None
    layout: Layout = NO_LAYOUT


NOT_AN_ITEM = CriterionVerdict(index=None)  # type: ignore[arg-type]  # a stored entry that is no JSON object


class Criteria(Sequence[CriterionVerdict]):
    """A record's rubric items with their verdicts, decoded when first read: ranking 100k records reads their
    scores, not their items, and a CriterionVerdict per item would triple the time to read a file (bench/
    bench_records.py). The stored items were checked when the record was decoded (record/codec.py); a stored
    entry that is no JSON object reads as an item without an index (`index` None: a reader that needs one
    refuses or skips it, as it did before). The codec writes `stored` back (the items are immutable, so the
    stored list is what they say)."""

    __slots__ = ("_stored", "_decode", "_items")

    def __init__(self, stored: Sequence[Any] = (), decode: Callable[[Any], CriterionVerdict] | None = None) -> None:
        self._stored, self._decode = stored, decode
        self._items: tuple[CriterionVerdict, ...] | None = None if decode is not None else tuple(stored)

    def _all(self) -> tuple[CriterionVerdict, ...]:
        if self._items is None:
            assert self._decode is not None
            self._items = tuple(self._decode(c) if isinstance(c, Mapping) else NOT_AN_ITEM for c in self._stored)
        return self._items

    @overload
    def __getitem__(self, i: int) -> CriterionVerdict: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[CriterionVerdict]: ...

    def __getitem__(self, i: int | slice) -> CriterionVerdict | Sequence[CriterionVerdict]:
        return self._all()[i]

    def __len__(self) -> int:
        return len(self._stored)

    @property
    def stored(self) -> Sequence[Any] | None:
        """The stored list these items were read from (None: items made in memory)."""
        return self._stored if self._decode is not None else None

    def __iter__(self) -> Iterator[CriterionVerdict]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Criteria) and self._all() == other._all()

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return f"Criteria({list(self._all())!r})"


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation the run generated."""

    role: str  # "user" | "assistant"
    content: str
    state: Mapping[str, Any] | None = None  # a simulated user's hidden state that turn (a spec's user_state: block)
    layout: Layout = NO_LAYOUT


@dataclass(frozen=True, slots=True)
class Reply:
    """The candidate's one reply (None: it failed; the record's candidate_error says why)."""

    text: str | None = None
    kind: ClassVar[str] = "single"


@dataclass(frozen=True, slots=True)
class Transcript(Reply):
    """A conversation: its turns in order, the last reply as `text`, how it ended (simulated: "stop" or
    "max_turns"), the simulated user's error (the question is then not judged)."""

    turns: tuple[Turn, ...] = ()
    ended: str | None = None
    user_error: str | None = None
    kind: ClassVar[str] = "conversation"


class Judgment:
    """What the judge stored of a reply, tagged by `kind`. A verdict kind with fields of its own (a score's turn
    judgments, a comparison's games) is a subclass in its own module, registered in record/codec.py."""

    __slots__ = ()
    kind: ClassVar[str] = "none"
    owns: ClassVar[tuple[str, ...]] = ()  # the record keys only this variant writes and reads
    marks: ClassVar[tuple[str, ...]] = ()  # of those, the keys whose presence says a stored record is this variant
    # Where a fresh record (the run's writer) places this variant's keys: `early` right after the question's own
    # fields (before judge_raw), `late` after the score's (before the usage); a shared key listed here (`weight`)
    # goes there too. The stored order of every shipped spec's records (record/codec.encode_new).
    early: ClassVar[tuple[str, ...]] = ()
    late: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def decode(cls, obj: Mapping[str, Any], layout_of: Any) -> "Judgment":
        """This variant read from a stored record's keys (`layout_of` keeps a nested object's key order)."""
        return cls()

    def encoded(self) -> dict[str, Any]:
        """This variant's record keys and values (the codec places them in the stored order)."""
        return {}

    def written(self) -> tuple[str, ...]:
        """The keys of `owns` a fresh record of this judgment writes (an optional one left out when empty)."""
        return self.owns


@dataclass(frozen=True, slots=True)
class NotJudged(Judgment):
    """No judgment stored: no item has a verdict and no variant's keys are present (a candidate or judge error
    before any verdict; the record's candidate_error / judge_error say which)."""

    kind: ClassVar[str] = "none"


@dataclass(frozen=True, slots=True)
class CriteriaJudgment(Judgment):
    """Verdicts per rubric item (judge.verdict.kind criteria, or every item checked by the engine): the verdicts
    are the record's `criteria`, so this variant holds no field of its own."""

    kind: ClassVar[str] = "criteria"


@dataclass(frozen=True, slots=True)
class Judged:
    """What a verdict kind adds to a fresh record (shapes/*.py `judged`): its judgment variant; the question's score
    when the verdict computed it (None: not scored by the verdict) and the `weight` it pools (None: not stored);
    the judge's replies kept for audit (None: none kept)."""

    judgment: Judgment = NotJudged()
    score: float | None = None
    weight: float | None = None
    judge_raw: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """One line of samples.jsonl, typed (docs/outputs.md names each field); a candidate sample kept under
    `samples` is a Record too (its `sample` set, no id). A value the file holds is kept as stored (a hand-edited
    file may hold a string where a number belongs): the reader that computes with it checks it, as before."""

    id: str | None = None
    subset: str | None = None
    scenario: str | None = None
    tags: tuple[str, ...] = ()
    reply: Reply = Reply()
    candidate_error: str | None = None
    judge_error: str | None = None
    judge_raw: tuple[str, ...] = ()
    criteria: Criteria = Criteria()
    judgment: Judgment = NotJudged()
    abilities: Mapping[str, GroupScore] = field(default_factory=dict)
    item_tags: Mapping[str, GroupScore] = field(default_factory=dict)
    score: float | None = None
    weight: float = 1  # judgments `score` pools (valid turn scores, games); stored only when not 1
    failed_rules: tuple[str, ...] = ()
    catastrophic: bool = False
    zeroed: str | None = None  # aggregation.candidate_errors=zero: why a failed question scores 0
    choice: str | None = None  # multiple choice: the letter read (None: none, or no choices)
    tokens: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    cost: Mapping[str, float | None] = field(default_factory=dict)
    cache_hits: Mapping[str, int] = field(default_factory=dict)
    truncated: bool = False
    samples: tuple["Record", ...] = ()
    sample: int | None = None  # a candidate sample's number (0-based), under its question's `samples`
    sample_score_sd: float | None = None
    # judge name -> how many of its verdict replies took each path (structured, plain, reasked: judge/structured.py)
    verdict_paths: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    layout: Layout = NO_LAYOUT

    @property
    def response(self) -> str | None:
        """The candidate's reply (a conversation's last one)."""
        return self.reply.text

    def stored(self, key: str) -> bool:
        """Whether the stored object had the field (a reader that refuses a record missing a required one)."""
        return self.layout.has(key)

    def entries(self) -> tuple["Record", ...]:
        """The candidate samples, or the record itself when it has none."""
        return self.samples or (self,)
