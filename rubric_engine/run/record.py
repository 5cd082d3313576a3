"""One question's outcome and its samples.jsonl record.

Why apart from the runner: the record is the run's audit trail and what `rescore` and the
leaderboard read back; building it is pure (no I/O), so it is kept away from the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from rubric_engine.datatypes import Criterion, Question, Turn
from rubric_engine.judge.grading import JudgeResult
from rubric_engine.models.redact import redact
from rubric_engine.record.codec import encode_new
from rubric_engine.record.types import Criteria, CriterionVerdict, Record, Reply, Transcript
from rubric_engine.record.types import Turn as StoredTurn
from rubric_engine.records import SampleRecord
from rubric_engine.shapes.registry import shape_for
from rubric_engine.scoring.checks import CheckResult, check_dict
from rubric_engine.scoring.question import QuestionScore
from rubric_engine.spec.facts import facts_of
from rubric_engine.spec.schema import BenchmarkSpec
from rubric_engine.stats.scores import group_scores


@dataclass
class Outcome:
    """What happened to one question across both stages."""

    question: Question
    response: str | None = None
    candidate_error: str | None = None
    cand_tokens: tuple[int, int] = (0, 0)
    cand_cost: float | None = None
    cand_cached: int = 0
    truncated: bool = False  # the candidate's reply was cut off (finish_reason "length")
    judge: JudgeResult | None = None
    score: QuestionScore | None = None
    checks: dict[int, CheckResult] = field(default_factory=dict)  # what each checked item's check found, by index
    samples: list["Outcome"] = field(default_factory=list)  # candidate.samples > 1: one outcome per sample
    # conversations (run/dialogue.py); None / 0 for a single reply, and then absent from the record
    transcript: list[Turn] | None = None  # the turns this run generated, user turns included
    ended: str | None = None  # simulated: "stop" (the user's signal), "max_turns" (cut), "state" (a user_state rule)
    user_error: str | None = None  # the simulated user failed or said nothing: not judged
    user_tokens: tuple[int, int] | None = None  # None: no simulated user in this run
    user_cost: float | None = None
    user_cached: int = 0
    cand_calls: int = 0  # candidate calls of a conversation (its cost is a sum over them)
    user_calls: int = 0


def sample_record(spec: BenchmarkSpec, o: Outcome) -> SampleRecord:
    """One samples.jsonl record: everything needed to audit or re-aggregate this question, built as the typed
    Record and written by the codec (record/codec.encode_new: the one place that knows the record's keys and their
    order). Every text a server wrote (reply, reasoning, error) is redacted here, before any file holds it:
    answers.jsonl and report.html are made from this record, and a server may echo the key it was sent."""
    q, jr = o.question, o.judge
    judged = shape_for(spec).verdict.judged(spec, jr, _clip)  # a score's turns, a comparison's games, ...
    error = redact(jr.error) if jr is not None and jr.error else None
    kept = ["choice"] if q.choices and o.checks else []  # multiple choice: the letter read, None when none could be
    raw = tuple(redact(_clip(r)) for r in jr.raw_replies) if error and jr is not None else judged.judge_raw
    if raw is not None:
        kept.append("judge_raw")
    if judged.weight is not None:
        kept.append("weight")
    if o.user_tokens is not None:
        kept.append("user_error")
    qs = o.score if error is None else None
    counts = facts_of(spec).expected_points and qs is not None  # each item says what its score counted
    rec = Record(
        id=q.id, subset=q.subset, scenario=q.scenario, tags=tuple(q.tags), reply=_reply(o),
        candidate_error=o.candidate_error, judge_error=error, judge_raw=raw or (),
        criteria=Criteria(tuple(_criterion(c, o.checks.get(c.index), _verdicts(jr).get(c.index), jr, counts)
                                for c in q.criteria)),
        judgment=judged.judgment, score=qs.score if qs is not None else judged.score,
        abilities=group_scores(qs.abilities) if qs is not None else {},
        item_tags=group_scores(qs.tags) if qs is not None else {},
        failed_rules=tuple(qs.failed_rules) if qs is not None else (), catastrophic=bool(qs and qs.catastrophic),
        weight=judged.weight if judged.weight is not None else 1,
        choice=next((r.choice for r in o.checks.values()), None) if "choice" in kept else None,
        **_usage(o, jr, shape_for(spec).verdict.extra_usage(jr)), truncated=o.truncated,
        verdict_paths=_paths(jr))
    return cast(SampleRecord, encode_new(rec, kept))


def _verdicts(jr: JudgeResult | None) -> dict[int, Any]:
    return {v.index: v for v in (jr.verdicts or [])} if jr else {}


def _criterion(c: Criterion, found: CheckResult | None, v: Any, jr: JudgeResult | None,
               counts: bool = False) -> CriterionVerdict:
    """One rubric item with its verdict: a checked item's is what its check found (even when the judge failed).
    `counts` (judge.verdict.use: probability, a scored question): a scored item's `credit`, the share of its points
    the score counted: its P(met) where it has one, else its verdict's 1.0 or 0.0 (a check's always)."""
    hit = found.hit if found else v.hit if v else None
    p_met = None if found or v is None else v.p_met
    credit = (p_met if p_met is not None else float(hit)) if counts and c.rule is None and hit is not None else None
    return CriterionVerdict(index=c.index, label=c.label, ability=c.ability, rule=c.rule, weight=c.weight,
                            text=c.text, reasoning=found.found if found else redact(v.reasoning) if v else None,
                            hit=hit,
                            votes=_votes(jr, c.index) if c.check is None else None,
                            check=check_dict(c.check) if c.check is not None else None, tags=tuple(c.tags),
                            p_met=p_met, credit=credit)


def _reply(o: Outcome) -> Reply:
    """The reply; a conversation's turns as this run generated them, how it ended, the simulated user's error."""
    text = redact(o.response)
    if o.transcript is None:
        return Reply(text)
    turns = tuple(StoredTurn(t.role, redact(t.content) or "", _state(t)) for t in o.transcript)
    return Transcript(text, turns=turns, ended=o.ended, user_error=redact(o.user_error))


def _state(turn: Turn) -> dict[str, Any] | None:
    """A simulated user's hidden state that turn (datatypes.StatedTurn), kept beside its words; None: none."""
    state = getattr(turn, "state", None)
    return None if state is None else dict(state)


def _usage(o: Outcome, jr: JudgeResult | None, base: dict[str, Any] | None) -> dict[str, Any]:
    """Tokens, cost and cache hits per role: candidate, judge, a verdict's further role (a pairwise baseline), a
    simulated user."""
    tokens: dict[str, dict[str, int]] = {
        "candidate": {"prompt": o.cand_tokens[0], "completion": o.cand_tokens[1]},
        "judge": {"prompt": jr.prompt_tokens if jr else 0, "completion": jr.completion_tokens if jr else 0}}
    cost: dict[str, float | None] = {"candidate": o.cand_cost, "judge": jr.cost if jr else None}
    hits = {"candidate": o.cand_cached, "judge": jr.cache_hits if jr else 0}
    if base is not None:
        tokens["baseline"], cost["baseline"], hits["baseline"] = base["tokens"], base["cost"], base["cache_hits"]
    if o.user_tokens is not None:
        tokens["user"] = {"prompt": o.user_tokens[0], "completion": o.user_tokens[1]}
        cost["user"], hits["user"] = o.user_cost, o.user_cached
    return {"tokens": tokens, "cost": cost, "cache_hits": hits}


def _paths(jr: JudgeResult | None) -> dict[str, dict[str, int]]:
    """Per judge, how many verdict replies took each path (judge/structured.py); a bare result's under "judge"."""
    if jr is None:
        return {}
    return {k: dict(v) for k, v in jr.judge_paths.items() if v} or ({"judge": dict(jr.paths)} if jr.paths else {})


def _votes(jr: JudgeResult | None, index: int) -> dict[str, list[bool | None]] | None:
    """Every repeat's verdict of every judge on one criterion (None for a single grading; None in the list: that
    repeat failed). A grading that did not grade this criterion (judge.repeats=auto, judge/adaptive.py) adds no vote."""
    votes = getattr(jr, "votes", None)
    if not votes:
        return None
    return {name: [next((v.hit for v in rep or [] if v.index == index), None) for rep in reps
                   if rep is None or any(v.index == index for v in rep)]
            for name, reps in votes.items()}


def _clip(text: str, limit: int = 20_000) -> str:
    """A raw reply kept for audit, bounded: a 1 MB reply must not make samples.jsonl unreadable."""
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text) - limit} more characters not kept]"



