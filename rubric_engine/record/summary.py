"""summary.json as types: the run's stable output (docs/outputs.md), section by section.

Why TypedDicts here rather than dataclasses: summary.json's bytes must not change (tests pin them), its sections
are written by several builders (run/summary.py, stats/scores.score_summary, the shapes' sections: a score's
`scale` / `turns` / `group_intervals`, a comparison's `pairwise`, a panel's `noise` / `jury` / `sampling`) and read
as JSON by tools outside the engine; a TypedDict names every key for the type checker while the value stays the
plain JSON object. `total=False`: a section only some runs write (a shape's, a panel's, a rescore's) is absent
from the others, and older summaries lack later keys.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["Party", "IntervalSection", "AggregationSection", "CountsSection", "Selection", "Summary"]


class Party(TypedDict, total=False):
    """A model of the run (candidate, judge, simulated user) as summary.json names it."""

    name: str
    model: str | None
    family: str | None


class IntervalSection(TypedDict, total=False):
    """The overall's bootstrap interval (`nested`: a sampled or repeated run's hierarchical one; `unit`: what was
    resampled when not questions, `dialogues` under data.expand)."""

    unit: str
    samples: int
    seed: int
    alpha: float
    lo: float
    hi: float
    std: float
    nested: dict[str, Any]


class AggregationSection(TypedDict, total=False):
    formula: str
    question: str
    overall: str
    clip: str
    no_positive_points: str
    candidate_errors: str


class CountsSection(TypedDict, total=False):
    """What happened to the questions; the keys after `truncated` only where a run has them."""

    questions: int
    scored: int
    judge_errors: int
    candidate_errors: int
    catastrophic: int
    truncated: int
    no_choice: int  # multiple choice
    unscored: int  # no_positive_points: exclude
    candidate_errors_zeroed: int  # candidate_errors: zero
    turn_errors: int  # a score verdict
    user_errors: int  # a simulated user
    cut_at_max_turns: int


class Selection(TypedDict):
    subset: str | None
    limit: int | None
    ids: list[str] | None


class Summary(TypedDict, total=False):
    """summary.json. The score keys (overall .. length) come from stats/scores.score_summary, shared with rescore."""

    schema_version: int
    benchmark: str
    benchmark_version: str
    data_sha256: str
    data_trust: str
    data_path: str | None
    candidate: Party
    judge: Party | None
    user: Party  # a simulated conversation
    overall: float | None
    abilities: dict[str, float | None]
    dimensions: dict[str, float | None]
    subsets: dict[str, Any]
    scenarios: dict[str, float | None]
    breakdowns: dict[str, dict[str, float | None]]
    interval: IntervalSection | None
    aggregation: AggregationSection
    counts: CountsSection
    length: dict[str, Any] | None
    scale: dict[str, Any]  # a score verdict: its scale and scope
    turns: dict[str, Any]  # a score verdict: per-turn means with their intervals
    group_intervals: dict[str, Any]
    tokens: dict[str, dict[str, int]]
    cost: dict[str, float | None]
    calls: dict[str, Any]
    selection: Selection
    stage: str
    created: str
    spec_hash: str
    run_id: str
    provenance: dict[str, Any]
    noise: dict[str, Any]  # graded more than once
    jury: dict[str, Any]
    sampling: dict[str, Any]  # candidate samples
    pairwise: dict[str, Any]  # a comparison: wins, ties, losses, position consistency
    vetoes: dict[str, int]  # failure rules: how many questions each zeroed (a veto group's count)
    rating: dict[str, Any]  # ratings against a reference: each pass's number and counts, the best-pass choice
    dialogues: dict[str, Any]  # data.expand: per-turn questions aggregated to their dialogues
    wall_seconds: dict[str, float | None]
    verdict_paths: dict[str, dict[str, int]]  # judge name -> verdict replies per path (structured, plain, reasked)
    rescore: dict[str, Any]  # a re-scored summary: what it was re-scored from and how
