"""The samples.jsonl record, typed: one question's outcome as a run writes it and every reader reads it back.

Why typed: the record is the project's central data structure, written by the run (run/record.py, merged per
question by stats/sampling.py for candidate samples) and read by the journal, rescore, the leaderboard's
intervals, review and the reports; as an untyped dict each reader relied on string keys nobody checked. These
are TypedDicts, so a record is still the plain JSON object on disk (no byte of samples.jsonl changes) while
every producer and consumer names its fields and a type checker sees a misspelt key. `RECORD_VERSION` is the
version of this layout: it changes when a field changes meaning (docs/outputs.md); a field only added leaves
older records readable. These TypedDicts are what the run's writer builds (run/record.py); a stored record is
read as typed values through one codec (record/codec.py: `decode` into a `record/types.Record`, `encode` back
to the same bytes), by one reader, `store/runs.RunRecord.iter_records`; a running run reads its journal (the
same records) through `run/journal.read_journal`.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

__all__ = ["RECORD_VERSION", "GroupScore", "TurnRecord", "TurnScoreRecord", "CriterionRecord", "GameRecord",
           "SampleEntry", "SampleRecord"]

RECORD_VERSION = 1


class GroupScore(TypedDict):
    """One taxonomy group's (ability's) or item tag's numbers for a question."""

    raw: float
    lo: float
    hi: float
    score: float | None


class TurnRecord(TypedDict):
    """One turn of a conversation the run generated (`transcript`)."""

    role: str  # "user" | "assistant"
    content: str
    state: NotRequired[dict[str, Any]]  # a simulated user's hidden state (a spec's user_state:), never sent on


class CriterionRecord(TypedDict, total=False):
    """One rubric criterion with the judge's verdict on it (`votes`: every juror's every grading, when graded
    more than once)."""

    index: int
    label: str
    ability: str | None
    rule: str | None
    weight: float | None  # None: an item without a weight in the data (a failure-rule item)
    text: str
    reasoning: str | None
    hit: bool | None
    p_met: float  # P(met) from the judge's token log-probabilities, where its reply carried them
    credit: float  # judge.verdict.use: probability: the share of the item's points counted (p_met, else 1.0 / 0.0)
    votes: dict[str, list[bool | None]]
    tags: list[str]
    check: dict[str, object]  # an item the engine checked (scoring/checks.py); its reasoning says what it found


class TurnScoreRecord(TypedDict):
    """One score judgment: the candidate turn it grades, its number or its error (never both)."""

    turn: int
    score: float | None
    reasoning: str | None
    error: str | None


class _Outcome(TypedDict, total=False):
    """What a reply got: the reply, its errors, the verdicts, the scores and what its calls cost (shared by a
    record and each of its candidate samples)."""

    response: str | None
    candidate_error: str | None
    judge_error: str | None
    judge_raw: list[str]  # every raw judge reply, kept when the judge failed
    criteria: list[CriterionRecord]
    abilities: dict[str, GroupScore]
    item_tags: dict[str, GroupScore]
    score: float | None
    failed_rules: list[str]
    catastrophic: bool
    tokens: dict[str, dict[str, int]]
    cost: dict[str, float | None]
    cache_hits: dict[str, int]
    truncated: bool
    choice: str | None  # multiple choice: the option letter read from the reply (None: none could be read)
    transcript: list[TurnRecord]  # conversations only: the turns generated, in order; `response` = the last reply
    ended: str  # simulated conversations: "stop" | "max_turns"
    user_error: str | None  # simulated conversations: the simulated user failed (the question is not judged)
    turns: list[TurnScoreRecord]  # judge.verdict.kind score: every judgment's number (or error), per candidate turn
    score_votes: dict[str, list[list[float | None]]]  # score verdicts graded more than once: judge -> repeat -> turns


class GameRecord(TypedDict):
    """One pairwise game (judge.verdict.kind: pairwise): its order, the label read, the judge's reply, or the error."""

    order: str  # baseline_first (A = baseline, B = candidate) | candidate_first
    label: str | None
    reasoning: str | None
    error: str | None


class SampleEntry(_Outcome, total=False):
    """One of a question's K candidate samples (`candidate.samples=K`), kept under the record's `samples`."""

    sample: int


class SampleRecord(_Outcome, total=False):
    """One line of samples.jsonl: a question, its reply, the verdicts, the scores and what the calls cost.
    `score` is None for a question that was not scored (a candidate or judge error, counted in the summary);
    with candidate samples the top-level scores are the samples' means."""

    id: str
    subset: str
    scenario: str
    tags: list[str]
    zeroed: str  # aggregation.candidate_errors=zero: why a failed question scores 0
    weight: float  # judgments `score` pools (valid turn scores, game scores); absent = 1 (docs/methodology.md)
    sample_score_sd: float | None
    samples: list[SampleEntry]
    games: list[GameRecord]  # judge.verdict.kind: pairwise
    baseline_response: str | None  # judge.verdict.kind: pairwise
