"""`rubric-engine items`: criterion, question and group diagnostics of a rubric from stored runs (and a hard set).

Why here: like `agree` and `audit`, the command only reads runs made the ordinary way (a sweep of several
candidates, with repeats or a jury if you have them), so it costs no call. Runs are read through the one
reader (store/runs.RunRecord.iter_records) into `Reply` values; the statistics live in stats/rubricitems.py,
stats/itemstats.py and stats/hardset.py; validity/items_report.py writes the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.record.types import CriterionVerdict, Record
from rubric_engine.stats.hardset import HardSet, compare_sets, decay, propose_hard
from rubric_engine.stats.rubricitems import (CriterionInfo, CriterionStats, GroupStats, QuestionStats, Reply,
                                             criterion_table, group_table, model_means, question_table)
from rubric_engine.store.layout import SAMPLES_FILE
from rubric_engine.store.runs import RunRecord, RunTaxonomy, collect_runs, failed_jobs, incomplete_runs

__all__ = ["ItemsResult", "read_replies", "compute_items", "human_disagreement", "USAGE", "FEW_REPLIES"]

FEW_REPLIES = 10  # judged replies per criterion below which the command warns that its numbers are weak

USAGE = """usage: rubric-engine items RUN_OR_SWEEP_DIR [DIR ...] [labels=FILE,...] [out=DIR] [hard=FRACTION]
                            [n_boot=1000] [seed=0]

Diagnose the rubric from stored runs of several candidates: per criterion the pass rate (overall and per
model), discrimination (corrected item-total point-biserial r, best-minus-worst model spread), saturated /
dead flags, the judge's flip rate (judge.repeats > 1), juror disagreement (a jury), human disagreement
(labels=) and a review-first order; per question difficulty and discrimination; per ability and item tag
Cronbach's alpha (KR-20) with a bootstrap interval over models. Writes items.csv, items.md, items.html and
items.json to out= (default: DIR/items). hard=0.3 also proposes a hard set of 30% of the questions (hardest
for the strongest models, still discriminating), writes it as hard_set.ids (an ids=[...] override), and
compares it with the spec's declared subsets.
"""


@dataclass
class ItemsResult:
    benchmark: str
    runs: list[str]
    models: list[str]
    replies: int
    skipped: int  # replies not usable: candidate or judge error
    criteria: list[CriterionStats]
    questions: list[QuestionStats]
    groups: list[GroupStats]
    labels: list[str] = field(default_factory=list)
    hard: HardSet | None = None
    hard_compare: list[dict[str, Any]] = field(default_factory=list)
    scale: float = 100.0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": 1, **asdict(self)}


def _criterion_info(qid: str, c: CriterionVerdict, where: str) -> CriterionInfo:
    idx = c.index
    if not isinstance(idx, int) or isinstance(idx, bool):
        raise DataError(where, f"question {qid}: a criterion without an integer 'index'",
                        fix="re-run or re-score this run directory")
    group = c.ability or (f"rule:{c.rule}" if c.rule else "unknown")
    return CriterionInfo(qid=qid, index=idx, text=str(c.text), weight=c.weight, group=group,
                         tags=tuple(str(t) for t in c.tags))


def _replies_of(rec: Record, model: str) -> tuple[list[Reply], int]:
    out, skipped = [], 0
    for entry in rec.entries():
        if entry.candidate_error or entry.judge_error or not entry.criteria:
            skipped += 1
            continue
        score = entry.score
        out.append(Reply(qid=str(rec.id), model=model,
                         score=float(score) if isinstance(score, (int, float)) else None,
                         hits={int(c.index): c.hit for c in entry.criteria if c.index is not None},
                         votes={int(c.index): c.votes for c in entry.criteria
                                if c.index is not None and isinstance(c.votes, dict)}))
    return out, skipped


def read_replies(runs: Sequence[RunRecord]) -> tuple[list[CriterionInfo], list[Reply], dict[str, str], int]:
    """(criteria in question order, replies, question id -> subset, skipped replies) from the runs."""
    criteria: dict[tuple[str, int], CriterionInfo] = {}
    replies: list[Reply] = []
    subsets: dict[str, str] = {}
    skipped = 0
    for run in runs:
        where = str(run.dir / SAMPLES_FILE)
        for rec in run.iter_records():
            qid = str(rec.id)
            subsets.setdefault(qid, str(rec.subset or ""))
            for c in rec.criteria:
                info = _criterion_info(qid, c, where)
                criteria.setdefault((qid, info.index), info)
            got, n = _replies_of(rec, run.candidate)
            replies += got
            skipped += n
    return list(criteria.values()), replies, subsets, skipped


def human_disagreement(dirs: Sequence[Path], label_files: Sequence[Path]) -> tuple[dict[tuple[str, int], tuple[int, int]],
                                                                                    list[str]]:
    """(question id, criterion index) -> (judge verdicts differing from the human majority, verdicts compared),
    matched by the same item keys as `agree` (validity/items.py), and the labels' warnings."""
    from rubric_engine.stats.agreement import majority
    from rubric_engine.validity.items import load_items
    from rubric_engine.validity.labels import read_labels

    data = load_items(dirs)
    labels = read_labels(label_files, data)
    by_key: dict[str, list[bool]] = {}
    for lab in labels.labels:
        by_key.setdefault(lab.key, []).append(lab.met)
    ref = {k: m for k, v in by_key.items() if (m := majority(v)) is not None}
    out: dict[tuple[str, int], list[int]] = {}
    for v in data.verdicts:
        if v.hit is None or v.key not in ref:
            continue
        it = data.items[v.key]
        cell = out.setdefault((it.qid, it.criterion_index), [0, 0])
        cell[0] += v.hit != ref[v.key]
        cell[1] += 1
    if not out:
        raise ConfigError("items: no labelled item matches a judged reply in these runs; pass the labels of a "
                          "review sheet exported from these runs (rubric-engine review export)")
    return {k: (a, b) for k, (a, b) in out.items()}, labels.warnings()


def _compare(result: ItemsResult, hard: HardSet, means: dict[str, dict[str, float]], subsets: dict[str, str],
             tax: RunTaxonomy) -> list[dict[str, Any]]:
    """The proposal against each declared subset; with a declared decay, the decay on both sets."""
    values = [s for s in tax.subsets if any(v == s for v in subsets.values())]
    proposed = set(hard.ids)
    rest = {q for q in subsets if q not in proposed}
    out = []
    for s in values:
        members = {q for q, v in subsets.items() if v == s}
        row: dict[str, Any] = {"subset": s, **compare_sets(proposed, members)}
        if tax.decay and tax.decay[1] == s:
            base = "hard" if tax.decay[2] == s else "rest"
            published = {q for q, v in subsets.items() if v == tax.decay[0]}
            row["decay_published"] = decay(means, members, published, base)
            row["decay_proposed"] = decay(means, proposed, rest, base)
            row["decay_base"] = tax.decay[2]
        out.append(row)
    if not values:
        result.warnings.append("the spec declares no subsets: the proposed hard set is not compared with one")
    return out


def compute_items(dirs: Sequence[Path], label_files: Sequence[Path] = (), hard: float | None = None,
                  n_boot: int = 1000, seed: int = 0) -> ItemsResult:
    """Every table of items.md from run (or sweep) directories of one benchmark."""
    runs = collect_runs([Path(d) for d in dirs])
    tax = RunTaxonomy.from_spec(runs[0].spec, str(runs[0].dir))
    criteria, replies, subsets, skipped = read_replies(runs)
    if not replies:
        raise ConfigError(f"items: no judged reply in {len(runs)} run(s) (every question failed); nothing to "
                          "diagnose")
    human, label_warnings = (human_disagreement(dirs, label_files) if label_files else ({}, []))
    # a failed or unfinished job of the sweep is left out: said, since it changes every per-model number
    warnings = [w.replace("not ranked", "left out") for w in (*failed_jobs(dirs), *incomplete_runs(dirs))]
    warnings += label_warnings
    models = sorted({r.model for r in replies})
    if len(models) < 2:
        warnings.append(f"one model ({models[0]}): no per-model spread, question discrimination or group alpha; "
                        "run several candidates (a sweep: rubric-engine -m candidate=a,b,c ...)")
    if skipped:
        warnings.append(f"{skipped} repl(y/ies) with a candidate or judge error are left out")
    crit = criterion_table(criteria, replies, human)
    judged = sorted(c.replies for c in crit if c.replies)
    if judged and judged[len(judged) // 2] < FEW_REPLIES:
        warnings.append(f"a criterion has {judged[len(judged) // 2]} judged replies (median): its rates and flags are "
                        f"weak evidence below {FEW_REPLIES}; add candidates, or candidate.samples=K replies per question")
    questions = question_table(replies, subsets, crit)
    result = ItemsResult(benchmark=runs[0].benchmark, runs=[str(r.dir) for r in runs], models=models,
                         replies=len(replies), skipped=skipped, criteria=crit, questions=questions,
                         groups=group_table(criteria, replies, n_boot=n_boot, seed=seed),
                         labels=[str(f) for f in label_files], scale=tax.scale, warnings=warnings)
    if hard is not None:
        result.hard = propose_hard(questions, hard)
        if len(result.hard.ids) < result.hard.target:
            warnings.append(f"hard={hard:g}: only {len(result.hard.ids)} of the {result.hard.target} questions asked "
                            "for discriminate between models; the proposal is shorter")
        result.hard_compare = _compare(result, result.hard, model_means(replies), subsets, tax)
    return result
