"""summary.json's `noise` of a `judge.repeats=auto` run: the calls its rule made against a single pass and fixed
repeats at its cap, and the flip rate it reached, folded from the journal's records one at a time.

Why apart from stats/noise.py: fixed repeats give every criterion K votes, aligned by repeat (scores per repeat,
SDs across repeats); auto gives each criterion the votes its rule asked for (1, 2 or the cap), so only counts
per criterion are kept here. Definitions (docs/judge-noise.md, "Adaptive repeats"):

- calls: judge requests sent for the judged replies: per request, the gradings it got (a request grades the whole
  rubric, or one criterion with granularity per_criterion); single_pass_calls: one grading of each; fixed_calls:
  the cap's gradings of each (judge.repeats=cap); saved_calls = fixed_calls - calls.
- flip_rate: over the criteria graded at least twice, the share whose votes are not all equal (95% bootstrap
  interval over questions, as for fixed repeats).
- final_flip_rate: the estimated share of final verdicts that would come out the other way if the judge were
  asked as often again: per criterion with n votes, m of them the minority, P(Bin(n, m/n) > n/2) plus half
  P(Bin(n, m/n) = n/2), averaged over every judged criterion. A plug-in estimate: a criterion graded once, or
  twice with agreeing votes, counts 0 (the rule judged it stable), so it is a lower bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import comb
from typing import Any

from rubric_engine.stats.noise import OVERALL, _flip_rate

__all__ = ["AdaptiveFold", "majority_flip"]


def majority_flip(n: int, minority: int) -> float:
    """P(a majority of n fresh votes takes the other side) when each vote does with probability minority / n;
    an even split counts half."""
    p = minority / n
    tail = sum(comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(n // 2 + 1, n + 1))
    return tail + (0.5 * comb(n, n // 2) * (p * (1 - p)) ** (n // 2) if n % 2 == 0 else 0.0)


class AdaptiveFold:
    """Counts per record: `per_criterion` True when each judge request grades one criterion (else one request
    grades the whole rubric); `cap` and `sources` are the rule's (judge/adaptive.AdaptiveRule)."""

    def __init__(self, judge: str, cap: int, per_criterion: bool, sources: Sequence[str]) -> None:
        self.judge, self.cap, self.per_criterion, self.sources = judge, cap, per_criterion, list(sources)
        self.calls = self.single = self.again = self.to_cap = 0
        self.flips: dict[str, dict[str, list[int]]] = {OVERALL: {}}  # group -> question id -> [flipped, units]
        self.final: list[float] = []

    def add(self, rec: Mapping[str, Any], ability: Mapping[int, str | None]) -> None:
        """One samples.jsonl record; `ability`: its criteria's ability by index. A reply whose judge failed
        is left out (its question is a judge error, counted with the run's errors)."""
        for entry in rec.get("samples") or [rec]:
            if entry.get("candidate_error") or entry.get("judge_error"):
                continue
            counts = [self._criterion(str(rec["id"]), c, ability) for c in entry.get("criteria") or []
                      if "check" not in c and (c.get("votes") or {}).get(self.judge)]
            if counts:
                requests = counts if self.per_criterion else [max(counts)]
                self.calls += sum(requests)
                self.single += len(requests)
                self.again += sum(n >= 2 for n in requests)
                self.to_cap += sum(n >= self.cap for n in requests)

    def _criterion(self, qid: str, c: Mapping[str, Any], ability: Mapping[int, str | None]) -> int:
        votes = [bool(v) for v in c["votes"][self.judge] if v is not None]
        n, minority = len(votes), min(sum(votes), len(votes) - sum(votes))
        self.final.append(majority_flip(n, minority))
        if n >= 2:
            group = ability.get(int(c["index"]))
            for g in (OVERALL,) if group is None else (OVERALL, str(group)):
                got = self.flips.setdefault(g, {}).setdefault(qid, [0, 0])
                got[0] += int(minority > 0)
                got[1] += 1
        return n

    def section(self) -> dict[str, Any]:
        """summary.json's `noise` for the run."""
        fixed = self.cap * self.single
        adaptive = {"repeats_max": self.cap, "prior": self.sources, "calls": self.calls,
                    "single_pass_calls": self.single, "fixed_calls": fixed, "saved_calls": fixed - self.calls,
                    "calls_per_single_pass": self.calls / self.single if self.single else None,
                    "graded_again": self.again, "graded_to_cap": self.to_cap,
                    "final_flip_rate": sum(self.final) / len(self.final) if self.final else None}
        groups: dict[str, dict[str, Any]] = {g: {"flip_rate": _flip_rate(list(by_q.values())), "question_score_sd": None,
                      "score_sd_across_repeats": None, "repeat_scores": []} for g, by_q in self.flips.items()}
        return {"repeats": "auto", "adaptive": adaptive, "groups": groups}
