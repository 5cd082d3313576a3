"""Judging by a score on a scale (`judge.verdict.kind: score`): the judge's number for what `judge.scope`
grades, per candidate turn, its repeats and jurors combined by the mean.

Why here: what the run does differently for a score is gathered in one class: the panel that asks for numbers
(judge/panels.ScorePanel), its judge requests (judge/scores.score_request: one per judgment, the run's and the
plan's), the record's `turns` (and the question's score from them, scoring/scalar.py), the
variables its template gets (`turn`, `references`), validate's scoring line and the plan it refuses
(several candidate samples). The score's spec rules stay in spec/scales.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rubric_engine.datatypes import Question
from rubric_engine.errors import ConfigError
from rubric_engine.judge.grading import JudgeResult
from rubric_engine.judge.panels import Panel, ScorePanel
from rubric_engine.judge.scores import ScoreResult, score_requests
from rubric_engine.models.request import Request
from rubric_engine.models.redact import redact
from rubric_engine.record.codec import encode
from rubric_engine.record.score import ScoreJudgment, TurnScore
from rubric_engine.record.types import Judged, Record
from rubric_engine.scoring.scalar import scalar_fields
from rubric_engine.shapes.base import Verdict, judge_of

if TYPE_CHECKING:
    from rubric_engine.models.client import ModelClient
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Score"]

_SCOPES = {"conversation": "one judgment of the whole conversation", "last_turn": "one judgment of the last reply",
           "each_turn": "one judgment per candidate turn", "turn": "one judgment of candidate turn {turn}"}


class Score(Verdict):
    """The verdict of `judge.verdict.kind: score`."""
    name = "score"
    criterion_votes = False  # its votes are numbers, kept in the record's score_votes

    def check_plan(self, spec: "BenchmarkSpec", samples: int) -> None:
        if samples > 1:
            raise ConfigError(f"samples={samples} with judge.verdict.kind score is not supported: a score run grades "
                              "one reply per question (use judge.repeats or a jury to average several gradings)")

    def panel(self, clients: Sequence["ModelClient"], names: Sequence[str], spec: "BenchmarkSpec", repeats: int = 1,
              rule: str = "majority", tie: str = "not_met", adaptive: Any = None) -> Panel:
        return ScorePanel(list(clients), list(names), spec, repeats, rule, tie)

    def judge_requests(self, spec: "BenchmarkSpec", question: Question, reply: str,
                       transcript: Sequence[Mapping[str, str]] | None) -> list[Request]:
        """One request per judgment `judge.scope` asks for (judge/scores.turn_units: each candidate turn, one
        chosen turn, or the whole exchange), each with the variables the run gives it: judge/scores.score_request,
        the function the run renders each judgment with."""
        return score_requests(spec, question, reply, transcript)

    def judged(self, spec: "BenchmarkSpec", result: JudgeResult | None, clip: Callable[[str], str]) -> Judged:
        """The turns' numbers (and errors), the question's score from them (and their count as its weight when not
        1), every call's score by judge, the judge's replies."""
        if not isinstance(result, ScoreResult):
            return Judged()
        turns = tuple(TurnScore(t.turn, t.score, redact(clip(t.reasoning)) if t.reasoning else t.reasoning,
                                redact(t.error) if t.error else None, expected=t.expected) for t in result.turns)
        fields = scalar_fields([{"score": t.score, "error": t.error} for t in turns])
        return Judged(ScoreJudgment(turns, result.score_votes or None), fields.get("score"), fields.get("weight"),
                      tuple(redact(clip(r)) for r in result.raw_replies) if result.raw_replies else None)

    def compact(self, rec: Record) -> dict[str, Any]:
        """`turns`: [turn, score] pairs (None: the judgment failed), for the per-turn table (stats/turns.py)."""
        judged = rec.judgment
        if not isinstance(judged, ScoreJudgment) or not judged.turns:
            return {}
        return {"turns": [[int(t.turn), None if t.error else t.score] for t in judged.turns]}

    def rescored(self, spec: "BenchmarkSpec", rec: Record, rules: bool, where: str) -> dict[str, Any]:
        """The question's score again from its stored turn scores (a record without turns: never judged)."""
        judged = rec.judgment
        if not isinstance(judged, ScoreJudgment):
            return super().rescored(spec, rec, rules, where)
        out = encode(rec)
        out.pop("weight", None)
        if not rec.judge_error and not rec.candidate_error:
            out.update(scalar_fields([{"score": t.score, "error": t.error} for t in judged.turns]))
        return out

    def scoring_line(self, spec: "BenchmarkSpec") -> str:
        j = judge_of(spec)
        v = j.verdict
        pattern = v.pattern if not isinstance(v.pattern, list) else " or ".join(v.pattern)  # tried in order
        return (f"scoring: the judge's score from {v.min:g} to {v.max:g} "
                f"({f'pattern {pattern}' if pattern else f'JSON field {v.field}'}), "
                f"{_SCOPES[j.scope].format(turn=j.turn)} (judge.scope {j.scope}); question score = mean of its "
                "valid judgments, overall = mean over every valid judgment (pooled)")
