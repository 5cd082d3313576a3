"""Adaptive repeats (`judge.repeats=auto`): a first grading of every reply, further gradings only of the judge
requests whose verdicts are unstable by a declared rule, up to a cap.

Why per request and not per question or per criterion: a request is what a call costs. With the whole rubric in
one call a repeat re-grades every criterion of the question; with one criterion per call (granularity
per_criterion) a repeat re-grades that criterion alone. The rule, in order (docs/judge-noise.md):

1. every request is graded once (repeat 0, the cache key of a single grading);
2. a request is graded a second time when one of its criteria is *suspect*: the judge said it was less sure
   of its first verdict than `judge.repeats_confidence` (a spec that declares `judge.verdict.probability`, or a
   server that returns token log-probabilities: P(met) of the decision written, judge/probability.py), or
   the prior (earlier runs of the same judge on the same questions, `judge.repeats_prior=`) saw it flip, or
   holds fewer than two votes for it (nothing known: the conservative reading); with neither a prior nor a
   probability, every request is suspect;
3. a request whose first two gradings disagree on any criterion is graded up to the cap (`judge.repeats_max`);
   one whose two agree stops there.

Every decision is a pure function of the verdicts already received (each in the cache under its repeat index)
and of the prior (fixed before the run): a run killed at any point and resumed makes the same decisions, reads
the gradings it had from the cache and sends nothing twice. A failed call of any grading makes the question a
judge error, never a verdict on the votes that came back (the same rule as fixed repeats, judge/panels.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rubric_engine.datatypes import Question
from rubric_engine.errors import ConfigError
from rubric_engine.judge.grading import JudgeResult, add_usage, judge_response
from rubric_engine.judge.panels import Panel, PanelResult, with_paths
from rubric_engine.judge.probability import mean_probability
from rubric_engine.judge.verdicts import Verdict
from rubric_engine.models.request import Request
from rubric_engine.scoring.votes import combine

if TYPE_CHECKING:
    from rubric_engine.models.client import ModelClient

__all__ = ["AdaptiveRule", "AdaptivePanel", "PriorVotes", "DEFAULT_CAP", "DEFAULT_CONFIDENCE", "unstable"]

DEFAULT_CAP = 5  # judge.repeats_max: gradings of an unstable request at most
DEFAULT_CONFIDENCE = 0.9  # judge.repeats_confidence: a verdict the judge is less sure of is graded again
PriorVotes = Mapping[tuple[str, str], tuple[int, int]]  # (question id, criterion text) -> (minority votes, votes)


@dataclass(frozen=True)
class AdaptiveRule:
    """The declared rule: `cap` gradings at most; `prior` the votes earlier runs of the same judge gave each
    (question, criterion), None when no prior run was given; `sources` the prior runs' ids, recorded in the
    run's identity and summary; `confidence`: a verdict whose probability (when the judge gives one) is below it
    is suspect."""

    cap: int = DEFAULT_CAP
    prior: PriorVotes | None = None
    sources: tuple[str, ...] = ()
    confidence: float = DEFAULT_CONFIDENCE

    def __post_init__(self) -> None:
        if isinstance(self.cap, bool) or not isinstance(self.cap, int) or self.cap < 2:
            raise ConfigError(f"judge.repeats_max={self.cap!r}: must be a whole number >= 2 (the most gradings "
                              "judge.repeats=auto gives a reply whose verdicts wobble)")
        if isinstance(self.confidence, bool) or not isinstance(self.confidence, (int, float)) \
                or not 0.0 <= self.confidence <= 1.0:
            raise ConfigError(f"judge.repeats_confidence={self.confidence!r}: must be a number from 0 to 1 (a verdict "
                              "the judge is less sure of is graded again)")

    def suspect(self, qid: str, texts: Sequence[str], sure: Sequence[float | None] = ()) -> bool:
        """Whether a request grading these criteria of question `qid`, its first verdicts given with the
        probabilities `sure` (None: the judge gave none), earns a second grading (rule 2)."""
        given = [p for p in sure if p is not None]
        if any(p < self.confidence for p in given):
            return True
        if self.prior is None:
            return not given
        for text in texts:
            minority, votes = self.prior.get((qid, text), (0, 0))
            if votes < 2 or minority > 0:
                return True
        return False


def unstable(first: Sequence[Verdict] | None, second: Sequence[Verdict] | None) -> bool:
    """Rule 3: the two gradings of one request disagree on a criterion."""
    a = {v.index: v.hit for v in first or []}
    return any(a.get(v.index) != v.hit for v in second or [])


def _sure(v: Verdict) -> float | None:
    """How sure the judge was of verdict `v`: the probability it stated, else the one its token log-probabilities
    give the decision it wrote (P(met) for a met verdict, 1 - P(met) for one not met); None: neither."""
    if v.probability is not None:
        return v.probability
    return None if v.p_met is None else (v.p_met if v.hit else 1.0 - v.p_met)


def _texts(question: Question, request: Request) -> list[str]:
    """The criteria one request grades, by their text (stable across runs where indices are renumbered)."""
    index = request.context.get("criterion")
    return [c.text for c in question.criteria if index is None or c.index == index]


@dataclass
class AdaptivePanel(Panel):
    """A Panel whose repeats follow `rule` rather than a fixed count; `repeats` is the cap (sample s of a reply
    grades with cache indices s x cap + r, as fixed repeats=cap would: an earlier fixed run's gradings are reused).
    `votes[judge][r]` holds grading r's verdicts on the criteria it graded (fewer than all for r >= 1)."""

    adaptive: AdaptiveRule = field(default_factory=AdaptiveRule)

    @property
    def plain(self) -> bool:
        return False  # votes are always kept: the noise section counts the gradings each criterion got

    async def judge(self, question: Question, response: str, first_repeat: int = 0,
                    transcript: Sequence[Mapping[str, str]] | None = None) -> JudgeResult:
        assert self.plan is not None, "an adaptive panel is built by a verdict, which plans its requests"
        requests = self.plan(question, response, transcript)
        runs = await asyncio.gather(*(self._one(c, question, response, first_repeat, transcript, requests)
                                      for c in self.clients))
        return self._combine(list(runs))

    async def _one(self, client: "ModelClient", question: Question, response: str, first: int,
                   transcript: Sequence[Mapping[str, str]] | None,
                   requests: list[Request]) -> list[JudgeResult]:
        """One judge's gradings of one reply, grading by grading (each round waits for the one before it)."""

        async def grade(repeat: int, chosen: list[Request]) -> JudgeResult:
            return await judge_response(client, self.spec, question, response, repeat=first + repeat,
                                        transcript=transcript, plan=lambda *_: chosen)

        out = [await grade(0, requests)]
        suspect = [r for r in requests if self.adaptive.suspect(question.id, _texts(question, r),
                                                                 [_sure(v) for v in _graded(out[0], r)])]
        if out[0].error or not suspect:
            return out
        out.append(await grade(1, suspect))
        if out[1].error:
            return out
        shaky = [r for r in suspect if unstable(_graded(out[0], r), _graded(out[1], r))]
        if shaky:
            out += await asyncio.gather(*(grade(k, shaky) for k in range(2, self.repeats)))
        return out

    def _combine(self, runs: list[list[JudgeResult]]) -> PanelResult:
        out = PanelResult(verdicts=None, error=None)
        add_usage(out, [r for rs in runs for r in rs])
        failed = [(name, i, r.error) for name, rs in zip(self.names, runs) for i, r in enumerate(rs, 1) if r.error]
        for name, rs in zip(self.names, runs):
            out.votes[name] = [r.verdicts for r in rs]
            with_paths(out, rs, [name], len(rs))  # each judge's replies per path, under its own name
        if failed:  # counted as the question's judge error, never scored on the votes that came back
            name, rep, err = failed[0]
            more = f" (+{len(failed) - 1} more failed calls)" if len(failed) > 1 else ""
            out.error = f"judge {name} grading {rep}: {err}{more}"
            return out
        for name in self.names:
            out.judge_verdicts[name] = _majority([v for g in out.votes[name] for v in g or []], "majority", self.tie)
        ballots = list(out.judge_verdicts.values())
        out.verdicts = ballots[0] if len(ballots) == 1 else _majority([v for b in ballots for v in b], self.rule,
                                                                       self.tie)
        return out


def _graded(result: JudgeResult, request: Request) -> list[Verdict]:
    index = request.context.get("criterion")
    return [v for v in result.verdicts or [] if index is None or v.index == index]


def _majority(votes: Sequence[Verdict], rule: str, tie: str) -> list[Verdict]:
    """Criterion by criterion (by index, in first-seen order), every vote it got combined by `rule`; the reasoning
    kept is the first vote that agrees with the outcome."""
    by: dict[int, list[Verdict]] = {}
    for v in votes:
        by.setdefault(v.index, []).append(v)
    out = []
    for index, vs in by.items():
        hit = combine([v.hit for v in vs], rule, tie)
        out.append(Verdict(index=index, reasoning=next((v.reasoning for v in vs if v.hit == hit), vs[0].reasoning),
                           hit=hit, p_met=mean_probability([v.p_met for v in vs])))  # P(met): the votes' mean
    return out
