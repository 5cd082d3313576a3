"""Per-criterion, per-question and per-group diagnostics of a rubric, from judged replies (pure: no I/O).

Why: a benchmark author needs to know which criteria carry no signal (met by every reply, by none, or by
strong and weak models alike), which the judge flips on, which jurors or humans dispute, and which questions
are hard yet still separate models. validity/itemsdiag.py reads the runs into `Reply` values; this module
turns them into typed tables; the definitions are in docs/authoring.md ("Make your rubric better").

- pass rate: share of judged replies whose verdict is "met" (for a penalty or failure-rule criterion "met"
  is the bad outcome); saturated at >= 95%, dead at <= 5%.
- discrimination: the corrected item-total point-biserial r across the question's replies, the criterion
  oriented so that 1 favours the reply (a met reward, an unmet penalty) against the count of the question's
  OTHER criteria that favour it (undefined below MIN_R_REPLIES replies); and the spread: best minus worst model pass rate.
- no signal: saturated, dead, or (spread < 0.10 and r < 0.10 or undefined).
- review-first score: 1 for no signal, 1 for r < 0 (the criterion goes against its own rubric), plus the flip
  rate, the juror disagreement and the human disagreement (each 0-1, 0 when not measured); highest first.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from rubric_engine.scoring.votes import combine
from rubric_engine.stats.itemstats import AlphaInterval, alpha_interval, pearson
from rubric_engine.stats.selfpref import is_pass

__all__ = ["CriterionInfo", "Reply", "CriterionStats", "QuestionStats", "GroupStats", "criterion_table",
           "question_table", "group_table", "model_means", "SATURATED", "DEAD", "FLAT_SPREAD", "FLAT_R",
           "MIN_R_REPLIES"]

SATURATED, DEAD = 0.95, 0.05  # pass-rate bounds of the flags
FLAT_SPREAD, FLAT_R = 0.10, 0.10  # below both: the criterion does not separate models
MIN_R_REPLIES = 5  # fewer fully judged replies to a question: no item-total r (three points correlate by chance)


@dataclass(frozen=True)
class CriterionInfo:
    qid: str
    index: int
    text: str
    weight: float | None  # None: a failure-rule item
    group: str  # ability id, or "rule:<id>"
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reply:
    """One judged reply to one question (a run's record, or one of its candidate samples)."""

    qid: str
    model: str
    score: float | None  # 0-1 question score (None: not scored)
    hits: Mapping[int, bool | None]  # criterion index -> the (combined) verdict
    votes: Mapping[int, Mapping[str, Sequence[bool | None]]] = field(default_factory=dict)  # juror -> repeats


@dataclass
class CriterionStats:
    qid: str
    index: int
    text: str
    weight: float | None
    group: str
    tags: tuple[str, ...]
    replies: int
    pass_rate: float | None
    per_model: dict[str, float]
    discrimination: float | None
    spread: float | None
    flag: str  # "saturated", "dead" or ""
    no_signal: bool
    flip_rate: float | None
    flip_units: int
    juror_disagreement: float | None
    juror_units: int
    human_disagreement: float | None
    human_units: int
    review_score: float = 0.0
    review_rank: int = 0


@dataclass
class QuestionStats:
    qid: str
    subset: str
    replies: int
    mean_score: float | None  # difficulty: mean over models of the model's mean score (0-1)
    per_model: dict[str, float]
    spread: float | None  # best minus worst model mean score
    discrimination: float | None  # r(reply score, the model's mean score on the other questions)
    criteria: int
    no_signal_criteria: int


@dataclass
class GroupStats:
    group: str
    kind: str  # "ability" or "tag"
    criteria: int
    models: int
    interval: AlphaInterval


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def _flips(votes: Sequence[Mapping[str, Sequence[bool | None]]]) -> tuple[int, int]:
    """(flipped, units): a unit is one juror's repeated gradings of one reply (two or more verdicts)."""
    flipped = units = 0
    for v in votes:
        for reps in v.values():
            seen = [x for x in reps if x is not None]
            if len(seen) >= 2:
                units += 1
                flipped += len(set(seen)) > 1
    return flipped, units


def _juror_split(votes: Sequence[Mapping[str, Sequence[bool | None]]]) -> tuple[int, int]:
    """(split, units): a unit is a reply graded by two or more jurors; split when their own verdicts (each
    juror's repeats combined by majority) are not all the same."""
    split = units = 0
    for v in votes:
        own = [combine([x for x in reps if x is not None], "majority", "not_met") for reps in v.values()
               if any(x is not None for x in reps)]
        if len(own) >= 2:
            units += 1
            split += len(set(own)) > 1
    return split, units


def criterion_table(criteria: Sequence[CriterionInfo], replies: Sequence[Reply],
                    human: Mapping[tuple[str, int], tuple[int, int]] | None = None) -> list[CriterionStats]:
    """One row per criterion, in review-first order (review_rank 1 first). human: (qid, index) ->
    (disagreements, compared) of the judge's verdicts with the human majority."""
    by_q: dict[str, list[Reply]] = defaultdict(list)
    for r in replies:
        by_q[r.qid].append(r)
    crit_by_q: dict[str, list[CriterionInfo]] = defaultdict(list)
    for c in criteria:
        crit_by_q[c.qid].append(c)
    out: list[CriterionStats] = []
    for qid, crits in crit_by_q.items():
        reps = by_q.get(qid, [])
        # corrected item-total r on replies with a verdict on every criterion of the question
        full = [r for r in reps if all(r.hits.get(c.index) is not None for c in crits)]
        fav = np.array([[is_pass(bool(r.hits[c.index]), c.weight) for c in crits] for r in full], dtype=float)
        for j, c in enumerate(crits):
            judged = [r for r in reps if r.hits.get(c.index) is not None]
            met = sum(bool(r.hits[c.index]) for r in judged)
            models: dict[str, list[int]] = defaultdict(lambda: [0, 0])
            for r in judged:
                models[r.model][0] += bool(r.hits[c.index])
                models[r.model][1] += 1
            per_model = {m: k / n for m, (k, n) in sorted(models.items())}
            spread = max(per_model.values()) - min(per_model.values()) if len(per_model) >= 2 else None
            r_it = pearson(fav[:, j], fav.sum(axis=1) - fav[:, j]) if len(crits) >= 2 and len(full) >= MIN_R_REPLIES else None
            rate = _rate(met, len(judged))
            flag = "" if rate is None else ("saturated" if rate >= SATURATED else ("dead" if rate <= DEAD else ""))
            flat = spread is not None and spread < FLAT_SPREAD and (r_it is None or r_it < FLAT_R)
            votes = [r.votes[c.index] for r in judged if c.index in r.votes]
            flipped, flip_units = _flips(votes)
            split, juror_units = _juror_split(votes)
            h_dis, h_units = (human or {}).get((qid, c.index), (0, 0))
            out.append(CriterionStats(
                qid=qid, index=c.index, text=c.text, weight=c.weight, group=c.group, tags=c.tags, replies=len(judged),
                pass_rate=rate, per_model=per_model, discrimination=r_it, spread=spread, flag=flag,
                no_signal=bool(flag) or flat, flip_rate=_rate(flipped, flip_units), flip_units=flip_units,
                juror_disagreement=_rate(split, juror_units), juror_units=juror_units,
                human_disagreement=_rate(h_dis, h_units), human_units=h_units))
    for s in out:
        s.review_score = (float(s.no_signal) + float(s.discrimination is not None and s.discrimination < 0)
                          + (s.flip_rate or 0.0) + (s.juror_disagreement or 0.0) + (s.human_disagreement or 0.0))
    out.sort(key=lambda s: (-s.review_score, -s.replies, s.qid, s.index))
    for i, s in enumerate(out, 1):
        s.review_rank = i
    return out


def model_means(replies: Sequence[Reply]) -> dict[str, dict[str, float]]:
    """model -> question -> the model's mean score on that question (scored replies only)."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in replies:
        if r.score is not None:
            acc[r.model][r.qid].append(r.score)
    return {m: {q: float(np.mean(v)) for q, v in qs.items()} for m, qs in acc.items()}


def question_table(replies: Sequence[Reply], subsets: Mapping[str, str],
                   criteria: Sequence[CriterionStats] = ()) -> list[QuestionStats]:
    """One row per question (in `subsets` order): difficulty, per-model means, spread and the corrected r of
    the reply's score with its model's mean score on the other questions."""
    means = model_means(replies)
    n_crit: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for c in criteria:
        n_crit[c.qid][0] += 1
        n_crit[c.qid][1] += c.no_signal
    by_q: dict[str, list[Reply]] = defaultdict(list)
    for r in replies:
        if r.score is not None:
            by_q[r.qid].append(r)
    out = []
    for qid, subset in subsets.items():
        reps = by_q.get(qid, [])
        per_model = {m: qs[qid] for m, qs in sorted(means.items()) if qid in qs}
        rest = {m: float(np.mean([v for q, v in qs.items() if q != qid])) for m, qs in means.items()
                if any(q != qid for q in qs)}
        pairs = [(r.score, rest[r.model]) for r in reps if r.model in rest]
        out.append(QuestionStats(
            qid=qid, subset=subset, replies=len(reps),
            mean_score=float(np.mean(list(per_model.values()))) if per_model else None, per_model=per_model,
            spread=max(per_model.values()) - min(per_model.values()) if len(per_model) >= 2 else None,
            discrimination=pearson([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None,  # type: ignore[misc]
            criteria=n_crit[qid][0], no_signal_criteria=n_crit[qid][1]))
    return out


def group_table(criteria: Sequence[CriterionInfo], replies: Sequence[Reply], n_boot: int = 1000,
                seed: int = 0) -> list[GroupStats]:
    """Internal consistency per ability and per item tag: Cronbach's alpha (KR-20 when every cell is 0/1) over
    the group's criteria, the models as examinees (cell: the model's favourable-verdict rate on the criterion,
    over its replies), criteria some model has no verdict on left out; interval: bootstrap over models."""
    acc: dict[tuple[str, int], dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    info = {(c.qid, c.index): c for c in criteria}
    for r in replies:
        for idx, hit in r.hits.items():
            c = info.get((r.qid, idx))
            if c is not None and hit is not None:
                cell = acc[(r.qid, idx)][r.model]
                cell[0] += is_pass(hit, c.weight)
                cell[1] += 1
    models = sorted({m for cells in acc.values() for m in cells})
    groups: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    for c in criteria:
        groups[("ability", c.group)].append((c.qid, c.index))
        for t in c.tags:
            groups[("tag", t)].append((c.qid, c.index))
    out = []
    for (kind, name), keys in sorted(groups.items()):
        cols = [[acc[k][m][0] / acc[k][m][1] for m in models] for k in keys
                if k in acc and all(acc[k][m][1] for m in models)]
        matrix = np.array(cols, dtype=float).T if cols else np.zeros((len(models), 0))
        out.append(GroupStats(group=name, kind=kind, criteria=len(cols), models=len(models),
                              interval=alpha_interval(matrix, n_boot=n_boot, seed=seed)))
    return out
