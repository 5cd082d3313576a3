"""The data types every layer shares: a question, its dialogue turns, its rubric criteria, a dataset.

Why a module of its own: scoring, prompts, the judge and the run directory all need these types, and
none of them should import the module that downloads and validates data (dataset.py) to get them.
Plain frozen dataclasses, no I/O, so importing them costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Turn", "Criterion", "Question", "Dataset"]


@dataclass(frozen=True)
class Turn:
    role: str  # the role label as it appears in the data (e.g. "A", "user"); data.roles maps it
    content: str


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
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    # the row as read, so answers files can repeat the benchmark's own format
    source_row: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass
class Dataset:
    questions: list[Question]
    source: str  # path or URL the rows came from
    sha256: str
    warnings: list[str] = field(default_factory=list)
    # how sha256 was established: "pinned" (spec's data.sha256), "first_use" (recorded on first download,
    # checked after), or "local" (a data.path file, hashed as given)
    trust: str = "local"
