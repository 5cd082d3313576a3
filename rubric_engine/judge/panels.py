"""Repeated judging and juries: more judge calls through judge/grading.py's one loop, combined before scoring.

Why one path: `judge.repeats=K` and `judge=[a,b,c]` are only more calls of `judge_response` (the repeat
index is part of each call's cache key, each judge has its own client). Their verdicts are combined by
one pure function, `scoring.votes.combine` (a vote per criterion: majority with a declared tie rule, or any / all),
first over a judge's repeats, then over the judges. If any call of a question fails, the question is a
judge error (recorded, never scored on the remaining votes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rubric_engine.datatypes import Question
from rubric_engine.errors import ConfigError
from rubric_engine.judge.grading import JudgeResult, Planner, add_usage, judge_response
from rubric_engine.judge.probability import mean_probability
from rubric_engine.judge.scores import combine_scores, judge_scores
from rubric_engine.judge.verdicts import Verdict
from rubric_engine.scoring.votes import RULES, TIES, combine

if TYPE_CHECKING:
    from rubric_engine.models.client import ModelClient
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Panel", "ScorePanel", "PanelResult", "check_panel", "with_paths"]

def check_panel(n_judges: int, repeats: int | str, rule: str, tie: str) -> None:
    """One clear line for each setting that cannot run."""
    if repeats != "auto" and (not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1):
        raise ConfigError(f"judge.repeats={repeats!r}: must be a whole number >= 1 (how many times each reply is "
                          "judged; 1 = once) or auto (judge/adaptive.py)")
    if rule not in RULES:
        raise ConfigError(f"jury.rule={rule!r} is not a rule; use one of {', '.join(RULES)}")
    if tie not in TIES:
        raise ConfigError(f"judge.tie={tie!r} is not a tie rule; use one of {', '.join(TIES)}")
    if n_judges < 1:
        raise ConfigError("no judge: pass judge=<name> or a jury judge=[a,b,c]")


@dataclass
class PanelResult(JudgeResult):
    """A question's combined result; `votes[judge][repeat]` keeps every call's verdicts (None on error)."""

    votes: dict[str, list[list[Verdict] | None]] = field(default_factory=dict)
    judge_verdicts: dict[str, list[Verdict]] = field(default_factory=dict)  # each judge over its repeats


@dataclass
class Panel:
    """Judges x repeats for one run. `names` label the judges in samples and the summary."""

    clients: Sequence["ModelClient"]
    names: Sequence[str]
    spec: "BenchmarkSpec"
    repeats: int = 1
    rule: str = "majority"
    tie: str = "not_met"
    plan: Planner | None = None  # a reply's judge requests, from the verdict that built the panel (shapes/)

    @property
    def plain(self) -> bool:
        """One judge, once: results are exactly judge_response's (no votes recorded)."""
        return len(self.clients) == 1 and self.repeats == 1

    async def judge(self, question: Question, response: str, first_repeat: int = 0,
                    transcript: Sequence[Mapping[str, str]] | None = None) -> JudgeResult:
        """Every judge, every repeat, started together (they pipeline under each client's concurrency).
        `first_repeat`: cache index of the first grading (candidate sample s grades with s x repeats + r, so
        two samples with the same reply are still graded independently, each paid once)."""
        calls = [judge_response(c, self.spec, question, response, repeat=first_repeat + r, transcript=transcript,
                                plan=self.plan) for c in self.clients for r in range(self.repeats)]
        results = list(await asyncio.gather(*calls))
        return with_paths(results[0] if self.plain else self._merge(results), results, self.names, self.repeats)

    def _merge(self, results: list[JudgeResult]) -> PanelResult:
        out = PanelResult(verdicts=None, error=None)
        add_usage(out, results)
        k = self.repeats
        for j, name in enumerate(self.names):
            out.votes[name] = [r.verdicts for r in results[j * k:(j + 1) * k]]
        failed = [(name, i, r.error) for j, name in enumerate(self.names)
                  for i, r in enumerate(results[j * k:(j + 1) * k], 1) if r.error]
        if failed:
            name, rep, err = failed[0]
            more = f" (+{len(failed) - 1} more failed calls)" if len(failed) > 1 else ""
            out.error = f"judge {name} repeat {rep}: {err}{more}"
            return out
        for name, reps in out.votes.items():
            out.judge_verdicts[name] = _vote(reps, "majority", self.tie)  # repeats: always a majority
        if len(self.names) == 1:
            out.verdicts = out.judge_verdicts[self.names[0]]
        else:
            out.verdicts = _vote(list(out.judge_verdicts.values()), self.rule, self.tie)
        return out


def with_paths(out: JudgeResult, results: Sequence[JudgeResult], names: Sequence[str], repeats: int) -> JudgeResult:
    """`out` with each judge's verdict replies counted per path (judge/structured.py), over its repeats."""
    for j, name in enumerate(names):
        counts = out.judge_paths.setdefault(name, {})
        for r in results[j * repeats:(j + 1) * repeats]:
            for path, n in r.paths.items():
                counts[path] = counts.get(path, 0) + n
    return out


def _vote(ballots: Sequence[list[Verdict] | None], rule: str, tie: str) -> list[Verdict]:
    """Combine aligned verdict lists criterion by criterion; the reasoning kept is the first vote that
    agrees with the outcome (so a sample shows a reason for the verdict it reports)."""
    lists = [b for b in ballots if b is not None]
    out: list[Verdict] = []
    for pos, first in enumerate(lists[0]):
        votes = [b[pos] for b in lists]
        hit = combine([v.hit for v in votes], rule, tie)
        reason = next((v.reasoning for v in votes if v.hit == hit), first.reasoning)
        out.append(Verdict(index=first.index, reasoning=reason, hit=hit,  # P(met): the votes' mean
                           p_met=mean_probability([v.p_met for v in votes])))
    return out


@dataclass
class ScorePanel(Panel):
    """Judges x repeats of a score verdict (judge/scores.py): each call grades what `judge.scope` asks of the
    `transcript`, and the calls combine by the mean (the shape's strategy, shapes/score.py, builds this panel)."""

    async def judge(self, question: Question, response: str, first_repeat: int = 0,
                    transcript: Sequence[Mapping[str, str]] | None = None) -> JudgeResult:
        scored = list(await asyncio.gather(*(
            judge_scores(c, self.spec, question, response, transcript, repeat=first_repeat + r)
            for c in self.clients for r in range(self.repeats))))
        out = scored[0] if self.plain else combine_scores(scored, self.names, self.repeats)
        return with_paths(out, scored, self.names, self.repeats)
