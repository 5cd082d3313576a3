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
    role: str  # the role label as it appears in the data (e.g. "A", "B")
    content: str


@dataclass(frozen=True)
class Criterion:
    """One binary rubric item. Exactly one of `ability` / `rule` is set."""

    index: int  # 1-based position within its question (the number the judge sees)
    label: str  # the label exactly as written in the data (an ability or failure-rule data label)
    weight: float | None  # None where the data has no weight (e.g. failure-rule items)
    text: str
    ability: str | None = None  # taxonomy ability id, for scored items
    rule: str | None = None  # failure-rule id, for failure-rule items


@dataclass(frozen=True)
class Question:
    id: str
    dialogue: tuple[Turn, ...]
    criteria: tuple[Criterion, ...]
    subset: str = ""  # e.g. "normal" / "hard"; "" when the data has none
    scenario: str = ""  # primary scenario label as in the data; "" when empty
    secondary_scenario: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    # the row as read, so answers files can repeat the benchmark's own format
    source_row: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass
class Dataset:
    questions: list[Question]
    source: str  # path or URL the rows came from
    sha256: str
    warnings: list[str] = field(default_factory=list)
