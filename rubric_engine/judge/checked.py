"""Grading a reply whose rubric mixes checked and judged items: checks by the engine, the rest by the judges.

Why one wrapper around the panel: a checked item (scoring/checks.py) is never sent to a judge, so the judge is
shown only the judged items, numbered 1..m as it must answer them, and its verdicts are mapped back to each
item's own index; the checks are computed once per reply (never repeated or voted by a jury) and merged in, so
the verdict list stays aligned with the rubric and is scored by the one formula. A reply whose items are all
checks makes no judge call at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from rubric_engine.datatypes import Question
from rubric_engine.judge.grading import JudgeResult
from rubric_engine.judge.panels import Panel, PanelResult
from rubric_engine.judge.verdicts import Verdict
from rubric_engine.scoring.checks import CheckResult, run_check

__all__ = ["Grader", "judged_question"]


def _back(verdicts: Sequence[Verdict] | None, original: Sequence[int]) -> list[Verdict] | None:
    """Verdicts on the items as shown (1..m) under the items' own indices."""
    if verdicts is None:
        return None
    return [replace(v, index=original[v.index - 1]) for v in verdicts]


def judged_question(question: Question) -> Question | None:
    """The question as the judge is shown it: its judged items only, numbered 1..m (None: every item is
    checked, no judge call). The same question object when no item is checked."""
    judged = [c for c in question.criteria if c.check is None]
    if len(judged) == len(question.criteria):
        return question
    return replace(question, criteria=tuple(replace(c, index=i) for i, c in enumerate(judged, 1))) if judged else None


@dataclass
class Grader:
    """The judge stage of a run: `panel` (None when the spec declares no judge) grades the judged items."""

    panel: Panel | None

    @property
    def repeats(self) -> int:
        return self.panel.repeats if self.panel is not None else 1

    async def judge(self, question: Question, response: str, first_repeat: int = 0,
                    transcript: Sequence[Mapping[str, str]] | None = None) -> JudgeResult:
        """`grade`'s verdicts alone: a drop-in for `Panel.judge` where what each check found is not kept."""
        return (await self.grade(question, response, first_repeat, transcript))[0]

    async def grade(self, question: Question, response: str, first_repeat: int = 0,
                    transcript: Sequence[Mapping[str, str]] | None = None) -> tuple[JudgeResult, dict[int, CheckResult]]:
        """The reply's verdicts on every item, in rubric order, and what each check found (by item index);
        `transcript`: a conversation's turns, passed to the panel as they are."""
        checks = {c.index: run_check(c.check, response) for c in question.criteria if c.check is not None}
        shown = judged_question(question)
        if shown is None:
            result = JudgeResult(verdicts=[], error=None)
        elif not checks:
            assert self.panel is not None
            return await self.panel.judge(question, response, first_repeat, transcript), checks
        else:
            assert self.panel is not None  # data loading refuses a judged item when the spec has no judge
            result = await self.panel.judge(shown, response, first_repeat, transcript)
            original = [c.index for c in question.criteria if c.check is None]
            result.verdicts = _back(result.verdicts, original)
            if isinstance(result, PanelResult):
                result.votes = {n: [_back(rep, original) for rep in reps] for n, reps in result.votes.items()}
                result.judge_verdicts = {n: _back(vs, original) or [] for n, vs in result.judge_verdicts.items()}
        if result.verdicts is not None:
            mine = [Verdict(index=i, reasoning=r.found, hit=r.hit) for i, r in checks.items()]
            result.verdicts = sorted(result.verdicts + mine, key=lambda v: v.index)
        return result, checks
