"""A finished run as a typed value (`EvalResult`): the scores, their interval, the counts, cost, tokens and the
run directory, read from summary.json's dict; and when a finished run counts as failed (`nothing_scored`).

Why apart from the summary builder: summary.json is the stable file format (docs/outputs.md); this is the Python
face of it, for code that imports the engine (rubric_engine.evaluate). Attributes name what a caller reads
first, and the whole summary stays reachable (`EvalResult.summary`) for every section not lifted out here.
`nothing_scored` is the one rule the command line (exit 1) and the Python API (`NothingScored`) share.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from rubric_engine.record.summary import CountsSection, Summary

__all__ = ["EvalResult", "Interval", "Counts", "result_of", "nothing_scored"]


@dataclass(frozen=True)
class Interval:
    """The overall score's bootstrap interval: [lo, hi] at level 1 - alpha, from `samples` resamples."""

    lo: float
    hi: float
    alpha: float
    samples: int
    std: float | None = None


@dataclass(frozen=True)
class Counts:
    """How the questions ended. `scored`: questions with a score (under candidate_errors=zero, the zeroed ones
    too: `zeroed`); `candidate_errors`: candidate calls that failed for good or answers missing from an answers
    file; `judge_errors`: judge calls that failed or whose verdict could not be read (unparsable) after the
    re-asks. `other`: the summary's further counts (catastrophic, truncated, no_choice, user_errors, ...)."""

    questions: int
    scored: int
    candidate_errors: int
    judge_errors: int
    zeroed: int = 0
    other: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def failed(self) -> int:
        """Questions left without a score: a failed or missing answer, or a judgment that failed."""
        return self.questions - self.scored + self.zeroed


@dataclass(frozen=True)
class EvalResult:
    """One finished run (see docs/python-api.md). Scores are on the spec's scale (`scoring.scale`, e.g. 0-100; a
    score verdict's own scale: summary["scale"]; pairwise: win rates in percent); `None` where there is no number.
    `groups`: breakdown id -> group -> score, as the report's tables show them (dimensions, abilities, subsets,
    scenarios, or the breakdowns the spec declares). `cost`: USD per role, None
    where LiteLLM priced no call; `tokens`: role -> {prompt, completion}. `summary`: summary.json, whole."""

    benchmark: str
    run_dir: Path
    overall: float | None
    interval: Interval | None
    groups: Mapping[str, Mapping[str, float | None]]
    counts: Counts
    cost: Mapping[str, float | None]
    tokens: Mapping[str, Mapping[str, int]]
    candidate: str | None
    judge: str | None
    summary: Mapping[str, Any]
    notes: tuple[str, ...] = ()  # what the run would have printed (warnings, resume notes) when nothing was printed

    @property
    def total_cost(self) -> float | None:
        """USD over every role LiteLLM could price; None when it priced none."""
        known = [c for c in self.cost.values() if c is not None]
        return sum(known) if known else None

    @property
    def total_tokens(self) -> int:
        """Prompt and completion tokens of every role."""
        return sum(int(n) for role in self.tokens.values() for n in role.values() if isinstance(n, (int, float)))


def _frozen(value: Any) -> Any:
    """A read-only view of a JSON value: mappings become MappingProxyType, lists tuples, all the way down."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _interval(section: Any) -> Interval | None:
    if not isinstance(section, Mapping) or section.get("lo") is None or section.get("hi") is None:
        return None
    return Interval(lo=float(section["lo"]), hi=float(section["hi"]), alpha=float(section.get("alpha", 0.05)),
                    samples=int(section.get("samples", 0)), std=section.get("std"))


_NAMED_COUNTS = ("questions", "scored", "candidate_errors", "judge_errors", "candidate_errors_zeroed")


def _counts(section: CountsSection) -> Counts:
    return Counts(questions=int(section.get("questions", 0)), scored=int(section.get("scored", 0)),
                  candidate_errors=int(section.get("candidate_errors", 0)),
                  judge_errors=int(section.get("judge_errors", 0)),
                  zeroed=int(section.get("candidate_errors_zeroed", 0)),
                  other=MappingProxyType(cast(dict[str, int], {k: v for k, v in section.items() if k not in _NAMED_COUNTS})))


def result_of(summary: Summary, run_dir: Path, notes: tuple[str, ...] = ()) -> EvalResult:
    """The typed result of the run in `run_dir` whose summary.json is `summary`; `notes`: what it said. Read by
    summary.json's typed keys (record/summary.py); `summary` is kept whole, read-only."""
    candidate, judge = summary.get("candidate") or {}, summary.get("judge") or {}
    return EvalResult(benchmark=str(summary.get("benchmark")), run_dir=Path(run_dir), overall=summary.get("overall"),
                      interval=_interval(summary.get("interval")),
                      groups=_frozen(summary.get("breakdowns") or {}), counts=_counts(summary.get("counts") or {}),
                      cost=_frozen(summary.get("cost") or {}), tokens=_frozen(summary.get("tokens") or {}),
                      candidate=candidate.get("name"), judge=judge.get("name"), summary=_frozen(summary),
                      notes=tuple(notes))


def nothing_scored(summary: Summary) -> str | None:
    """Why a finished run counts as failed (exit 1, `NothingScored`), or None: a run that scored nothing is not a
    success."""
    c: CountsSection = summary.get("counts", {})
    n, cand, judge = c.get("questions", 0), c.get("candidate_errors", 0), c.get("judge_errors", 0)
    if summary.get("stage") == "generate":
        if n and cand >= n:
            return f"nothing was generated: all {n} candidate calls failed ({cand} errors); see answers.jsonl"
        return None
    if c.get("scored", 0) - c.get("candidate_errors_zeroed", 0) == 0:  # zeros for failed calls are not scores
        users = f", {c['user_errors']} simulated-user errors" if c.get("user_errors") else ""
        return (f"nothing was scored: 0 of {n} questions ({cand} candidate errors, {judge} judge errors{users}); "
                "see samples.jsonl for each error")
    return None
