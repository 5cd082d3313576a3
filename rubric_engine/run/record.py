"""One question's outcome and its samples.jsonl record.

Why apart from the runner: the record is the run's audit trail and what `rescore` and the
leaderboard read back; building it is pure (no I/O), so it is kept away from the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rubric_engine.datatypes import Question, Turn
from rubric_engine.judge.grading import JudgeResult
from rubric_engine.models.redact import redact
from rubric_engine.records import CriterionRecord, SampleRecord, TurnRecord
from rubric_engine.shapes.registry import shape_for
from rubric_engine.scoring.checks import CheckResult, check_dict
from rubric_engine.scoring.question import QuestionScore
from rubric_engine.spec.schema import BenchmarkSpec
from rubric_engine.stats.scores import record_fields


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
    """One samples.jsonl record: everything needed to audit or re-aggregate this question. Every text a
    server wrote (reply, reasoning, error) is redacted here, before any file holds it: answers.jsonl and
    report.html are made from this record, and a server may echo the key it was sent."""
    q, jr = o.question, o.judge
    rec: SampleRecord = {"id": q.id, "subset": q.subset, "scenario": q.scenario, "response": redact(o.response),
                           "candidate_error": o.candidate_error, "judge_error": None, "criteria": [],
                           "abilities": {}, "score": None, "failed_rules": [], "catastrophic": False}
    verdicts = {v.index: v for v in (jr.verdicts or [])} if jr else {}
    if q.tags:
        rec["tags"] = list(q.tags)
    for c in q.criteria:
        v = verdicts.get(c.index)
        found = o.checks.get(c.index)  # a checked item: what its check found, even when the judge failed
        rec["criteria"].append({"index": c.index, "label": c.label, "ability": c.ability, "rule": c.rule,
                                "weight": c.weight, "text": c.text,
                                "reasoning": found.found if found else redact(v.reasoning) if v else None,
                                "hit": found.hit if found else v.hit if v else None,
                                **(_votes(jr, c.index) if c.check is None else {"check": check_dict(c.check)}),
                                **({"tags": list(c.tags)} if c.tags else {})})
    if q.choices and o.checks:  # multiple choice: the option letter read from the reply (None: none could be read)
        rec["choice"] = next((r.choice for r in o.checks.values()), None)
    verdict = shape_for(spec).verdict
    rec.update(verdict.judged_fields(jr, _clip))  # a score on a scale: the turns' numbers (shapes/score.py)
    if jr is not None and jr.error:
        rec["judge_error"], rec["judge_raw"] = redact(jr.error), [redact(_clip(r)) for r in jr.raw_replies]
    elif o.score is not None:
        rec.update(record_fields(o.score))  # the same record fields `rescore` writes (stats/scores.py)
    rec.update(verdict.outcome_fields(spec, jr, _clip))  # a comparison: its games (shapes/pairwise.py)
    rec["tokens"] = {"candidate": {"prompt": o.cand_tokens[0], "completion": o.cand_tokens[1]},
                     "judge": {"prompt": jr.prompt_tokens if jr else 0, "completion": jr.completion_tokens if jr else 0}}
    rec["cost"] = {"candidate": o.cand_cost, "judge": jr.cost if jr else None}
    rec["cache_hits"] = {"candidate": o.cand_cached, "judge": jr.cache_hits if jr else 0}
    base = verdict.extra_usage(jr)
    if base is not None:
        for key in ("tokens", "cost", "cache_hits"):
            rec[key]["baseline"] = base[key]
    rec["truncated"] = o.truncated
    if o.transcript is not None:
        _conversation_fields(rec, o)
    return rec


def _turn(turn: Turn) -> TurnRecord:
    """A transcript entry: the turn's words, and a simulated user's hidden state (run/dialogue.StatedTurn)."""
    out: TurnRecord = {"role": turn.role, "content": redact(turn.content) or ""}
    state = getattr(turn, "state", None)
    if state is not None:
        out["state"] = dict(state)
    return out


def _conversation_fields(rec: SampleRecord, o: Outcome) -> None:
    """A conversation's record fields (docs/outputs.md): the transcript, how it ended, the simulated user's
    error and calls; absent from a single reply's record, whose bytes stay as they were."""
    rec["transcript"] = [_turn(t) for t in o.transcript or ()]
    if o.ended is not None:
        rec["ended"] = o.ended
    if o.user_tokens is not None:
        rec["user_error"] = redact(o.user_error)
        rec["tokens"]["user"] = {"prompt": o.user_tokens[0], "completion": o.user_tokens[1]}
        rec["cost"]["user"] = o.user_cost
        rec["cache_hits"]["user"] = o.user_cached


def _votes(jr: JudgeResult | None, index: int) -> CriterionRecord:
    """Every repeat's verdict of every judge on one criterion ({} for a single grading)."""
    votes = getattr(jr, "votes", None)
    if not votes:
        return {}
    return {"votes": {name: [next((v.hit for v in rep or [] if v.index == index), None) for rep in reps]
                      for name, reps in votes.items()}}


def _clip(text: str, limit: int = 20_000) -> str:
    """A raw reply kept for audit, bounded: a 1 MB reply must not make samples.jsonl unreadable."""
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text) - limit} more characters not kept]"



