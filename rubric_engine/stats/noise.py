"""summary.json's `noise` (judge.repeats > 1) and `jury` (several judges) sections, folded from the journal.

Why apart from the runner: these are pure numbers over every vote of every grading, which each samples.jsonl
record keeps (`criteria[].votes`, per sample under `samples`); the runner streams the finished journal in
question order through `PanelFold`, which keeps only compact values per question (counts, a few floats,
one byte per vote), never the records or typed results. Definitions (docs/judge-noise.md):

- flip rate: share of (judge, question, criterion) units whose K repeat verdicts are not all equal, with a
  95% percentile bootstrap interval over questions (1000 resamples, seed 0). With an independent flip
  probability p per verdict its expectation is 1 - p^K - (1-p)^K.
- question score SD: for each question the sample SD (n-1) of its K repeat scores, averaged over questions.
- overall SD: the sample SD of the K overall scores, repeat r scored from every judge's r-th grading
  (combined across judges by the jury rule). Per ability likewise.
- jury: each judge's own scores (its repeats combined by majority) and Krippendorff's nominal alpha between
  the judges per ability (stats/agreement.py).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rubric_engine.datatypes import Question
from rubric_engine.record.summary import Summary
from rubric_engine.scoring.aggregate import ScoredQuestion, aggregate, scored_question
from rubric_engine.scoring.question import score_question
from rubric_engine.scoring.votes import combine
from rubric_engine.stats.agreement import krippendorff_alpha, multi_rater_alpha

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["PanelFold", "gradings", "flip_rate", "pair_noise"]

OVERALL = "overall"

# one grading of one reply: (criterion indices in order, votes[judge][repeat][position] = met)
Grading = tuple[Sequence[int], Mapping[str, Sequence[Sequence[bool]]]]


def _sd(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) if len(values) >= 2 else None


def _scored(spec: "BenchmarkSpec", q: Question, hits: Sequence[bool]) -> ScoredQuestion | None:
    qs = score_question(q.criteria, list(hits), spec.formula(), spec.scoring.params, spec.failure_rules,
                        spec.aggregation_rule())
    return scored_question(q, qs)


def _aggregate(spec: "BenchmarkSpec", scored: Sequence[ScoredQuestion]) -> dict[str, Any]:
    agg = aggregate(scored, spec.dimensions_map(), scale=spec.scoring.scale, how=spec.aggregation_rule())
    return {"overall": agg["overall"], "abilities": agg["abilities"]}


def flip_rate(units: Sequence[tuple[str, bool]], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Share of flipped units [(question id, flipped)], with a bootstrap interval over questions."""
    by_q: dict[str, list[int]] = {}
    for qid, flipped in units:
        by_q.setdefault(qid, [0, 0])
        by_q[qid][0] += int(flipped)
        by_q[qid][1] += 1
    return _flip_rate(list(by_q.values()), n_boot, seed)


def _flip_rate(counts: Sequence[Sequence[int]], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """flip_rate from [flipped, units] per question (first-seen order): what PanelFold keeps."""
    if not counts:
        return {"rate": None, "units": 0, "ci": None}
    rate = sum(c[0] for c in counts) / sum(c[1] for c in counts)
    rng = random.Random(seed)
    reps = []
    for _ in range(n_boot):
        draw = [counts[rng.randrange(len(counts))] for _ in counts]
        reps.append(sum(c[0] for c in draw) / sum(c[1] for c in draw))
    reps.sort()
    lo, hi = reps[int(0.025 * (n_boot - 1))], reps[int(0.975 * (n_boot - 1))]
    return {"rate": rate, "units": sum(c[1] for c in counts), "ci": [lo, hi]}


def gradings(rec: Mapping[str, Any], names: Sequence[str], repeats: int) -> Iterator[Grading]:
    """Every judged reply of a samples.jsonl record (each sample of a sampled one) with its votes; replies
    whose candidate or judge failed are left out (they are counted as errors elsewhere)."""
    for entry in rec["samples"] if "samples" in rec else [rec]:
        if entry.get("candidate_error") or entry.get("judge_error"):
            continue
        marks = entry.get("criteria") or []
        if any("votes" not in c for c in marks if "check" not in c):
            continue  # not graded by a panel (no votes kept)
        yield ([int(c["index"]) for c in marks],  # a checked item: its one result stands for every grading
               {n: [[bool(c["votes"][n][r] if "check" not in c else c["hit"]) for c in marks] for r in range(repeats)]
                for n in names})


class PanelFold:
    """The noise and jury sections, folded one grading at a time in question order (`add`), then `sections`.

    Kept per question: flip counts per group, one ScoredQuestion per repeat and per judge, a few SDs and
    one byte per (criterion, judge) for the agreement matrix: no texts, no records."""

    def __init__(self, spec: "BenchmarkSpec", names: Sequence[str], repeats: int, rule: str, tie: str) -> None:
        self.spec, self.names, self.repeats, self.rule, self.tie = spec, list(names), repeats, rule, tie
        self.flips: dict[str, dict[str, list[int]]] = {OVERALL: {}}  # group -> question id -> [flipped, units]
        self.per_repeat: list[list[ScoredQuestion]] = [[] for _ in range(repeats)]
        self.q_sd: dict[str, list[float]] = {OVERALL: []}
        self.own: dict[str, list[ScoredQuestion]] = {n: [] for n in self.names}  # each judge alone
        self.cols: dict[str, tuple[list[str], bytearray]] = {OVERALL: ([], bytearray())}  # group -> (ids, votes)
        self.positions: list[int] = []  # the judged items' positions in the grading being added

    def add(self, q: Question, grading: Grading) -> None:
        indices, votes = grading
        ability = {c.index: c.ability for c in q.criteria}
        groups = [str(ability[index]) if ability.get(index) else None for index in indices]  # None: no ability
        checked = {c.index for c in q.criteria if c.check is not None}  # never flip, never disagree: not counted
        self.positions = [i for i, index in enumerate(indices) if index not in checked]
        if self.repeats > 1:
            self._noise(q, groups, votes)
        if len(self.names) > 1:
            self._jury(q, groups, votes)

    def _noise(self, q: Question, groups: Sequence[str | None], votes: Mapping[str, Sequence[Sequence[bool]]]) -> None:
        for reps in votes.values():
            for pos, group in ((p, groups[p]) for p in self.positions):
                flipped = len({r[pos] for r in reps}) > 1
                for g in (OVERALL,) if group is None else (OVERALL, group):
                    c = self.flips.setdefault(g, {}).setdefault(q.id, [0, 0])
                    c[0] += int(flipped)
                    c[1] += 1
        rep_scores = []
        for r in range(self.repeats):
            ballots = [reps[r] for reps in votes.values()]
            hits = [combine([b[i] for b in ballots], self.rule, self.tie) for i in range(len(ballots[0]))]
            sq = _scored(self.spec, q, hits)
            if sq is not None:
                self.per_repeat[r].append(sq)
                rep_scores.append(sq)
        if len(rep_scores) == self.repeats:
            scale = self.spec.scoring.scale
            self.q_sd[OVERALL].append(statistics.stdev([s.score for s in rep_scores]) * scale)
            for a in rep_scores[0].abilities:
                if all(a in s.abilities for s in rep_scores):
                    self.q_sd.setdefault(a, []).append(statistics.stdev([s.abilities[a] for s in rep_scores]) * scale)

    def _jury(self, q: Question, groups: Sequence[str | None], votes: Mapping[str, Sequence[Sequence[bool]]]) -> None:
        own = {n: [combine([rep[i] for rep in votes[n]], "majority", self.tie) for i in range(len(groups))]
               for n in self.names}  # each judge over its repeats: always a majority (jury.Panel)
        for n in self.names:
            if (sq := _scored(self.spec, q, own[n])) is not None:
                self.own[n].append(sq)
        for pos, group in ((p, groups[p]) for p in self.positions):
            col = bytes(int(own[n][pos]) for n in self.names)
            for g in (OVERALL,) if group is None else (OVERALL, group):
                ids, marks = self.cols.setdefault(g, ([], bytearray()))
                ids.append(q.id)
                marks += col

    def sections(self) -> dict[str, Any]:
        """`noise` (repeats > 1) and `jury` (2+ judges)."""
        out: dict[str, Any] = {}
        if self.repeats > 1:
            out["noise"] = self._noise_section()
        if len(self.names) > 1:
            out["jury"] = self._jury_section()
        return out

    def _noise_section(self) -> dict[str, Any]:
        runs = [_aggregate(self.spec, scored) for scored in self.per_repeat]
        groups = list(dict.fromkeys([OVERALL, *self.flips, *self.q_sd, *(runs[0]["abilities"] if runs else {})]))
        out: dict[str, Any] = {"repeats": self.repeats, "groups": {}}
        for g in groups:
            values = [r["overall"] if g == OVERALL else r["abilities"].get(g) for r in runs]
            known = [v for v in values if v is not None]
            sds = self.q_sd.get(g, [])
            out["groups"][g] = {"flip_rate": _flip_rate(list(self.flips.get(g, {}).values())),
                                "question_score_sd": sum(sds) / len(sds) if sds else None,
                                "score_sd_across_repeats": _sd(known) if len(known) == len(values) else None,
                                "repeat_scores": values}
        return out

    def _jury_section(self) -> dict[str, Any]:
        judges = {n: _aggregate(self.spec, self.own[n]) for n in self.names}
        alpha: dict[str, Any] = {}
        for g, (ids, marks) in self.cols.items():
            matrix = np.frombuffer(bytes(marks), dtype=np.uint8).reshape(-1, len(self.names)).astype(float).T
            if g == OVERALL:
                alpha[g] = multi_rater_alpha(matrix, ids, n_boot=200) if ids else None
            else:
                alpha[g] = {"krippendorff_alpha": krippendorff_alpha(matrix), "units": len(ids)}
        return {"rule": self.rule, "tie": self.tie, "judges": judges, "alpha": alpha}


def pair_noise(a: Summary, b: Summary) -> float | None:
    """The judge-noise SD of the difference of two runs' overall scores: sqrt(sd_a^2 + sd_b^2), each sd the
    run's SD of its overall across repeats (one grading's noise; 0 when the judge never flipped). None when
    neither run was judged more than once (the noise is then unmeasured, and nothing is marked)."""
    sds = [((s.get("noise") or {}).get("groups") or {}).get(OVERALL, {}).get("score_sd_across_repeats")
           for s in (a, b)]
    known = [x for x in sds if x is not None]
    return float(sum(x * x for x in known) ** 0.5) if known else None
