"""Run directories as reviewable items: one (question, reply, criterion) with each judge's verdict.

Why a module of its own: the review export and `agree` must agree exactly on what an item is and
how it is keyed. An item is a criterion of a question *for one reply*: two candidates' replies to
the same question are different items, while two judges scoring the same reply (same text) share
one item, so one human label is compared with both judges. The key is
`<question id>#<criterion index>@<reply hash>`; the reply hash is the first 10 hex digits of the
sha256 of the reply text.

Items the engine checked (a `check` on the criterion) are not items: a check is no judge verdict, so review
sheets never show them and agreement never counts them.

Fields beyond the ones named here (tags, extra columns another spec adds) are kept in `fields`
so breakdowns and stratification can use them without this module knowing them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_engine.record.codec import encode, encode_criterion
from rubric_engine.errors import DataError
from rubric_engine.store.layout import SAMPLES_FILE, SPEC_FILE
from rubric_engine.store.runs import RunRecord, RunTaxonomy, collect_runs, read_dialogues

__all__ = ["Item", "ItemVerdict", "RunItems", "load_items", "reply_hash", "item_key"]

RULE_DIMENSION = "failure_rule"


def reply_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


def item_key(qid: str, index: int, reply: str) -> str:
    return f"{qid}#{index}@{reply}"


@dataclass
class Item:
    key: str
    qid: str
    criterion_index: int
    reply_id: str
    text: str  # the criterion
    weight: float | None
    fields: dict[str, Any]  # ability, dimension, subset, scenario, weight_sign, candidate, + extras
    n_criteria: int  # how many criteria the question has (for range checks)
    label: str = ""  # the item's data label, as in samples.jsonl
    ability: str | None = None  # taxonomy ability id (scored items)
    rule: str | None = None  # failure-rule id (failure-rule items)


@dataclass(frozen=True)
class ItemVerdict:
    rater: str  # "judge:<name>" (with "@<run dir>" when one judge scored the same reply twice)
    key: str
    hit: bool | None  # None: the judge failed on this question (counted, never compared)


@dataclass
class RunItems:
    benchmark: str
    items: dict[str, Item]  # by key, in run / question / criterion order
    verdicts: list[ItemVerdict]
    replies: dict[tuple[str, str], str]  # (question id, reply id) -> reply text
    dialogues: dict[str, list[tuple[str, str, str]]]  # question id -> [(role label, role kind, text)]
    taxonomy: RunTaxonomy
    spec: dict[str, Any]
    runs: list[RunRecord]
    id_field: str = "id"  # the spec's question-id field: labels files and sheets name the column so
    skipped_no_reply: int = 0
    candidates: dict[str, list[str]] = field(default_factory=dict)  # reply key -> candidate names


def _scalar_fields(obj: dict[str, Any], skip: set[str]) -> dict[str, Any]:
    """Extra fields usable for grouping: strings, numbers, booleans, lists of those."""
    out = {}
    for k, v in obj.items():
        if k in skip:
            continue
        if isinstance(v, (str, int, float, bool)) or (isinstance(v, list) and all(isinstance(x, (str, int)) for x in v)):
            out[k] = v
    return out


_SAMPLE_KNOWN = {"id", "response", "criteria", "candidate_error", "judge_error", "judge_raw", "abilities",
                 "score", "failed_rules", "catastrophic", "tokens", "cost", "cache_hits"}
_CRIT_KNOWN = {"index", "label", "ability", "rule", "weight", "text", "reasoning", "hit", "met", "check"}


def load_items(dirs: Sequence[Path]) -> RunItems:
    """Read run (or sweep) directories of one benchmark into items and verdicts."""
    runs = collect_runs([Path(d) for d in dirs])
    spec = runs[0].spec
    for r in runs:
        if (r.dir / SPEC_FILE).is_file() and r.spec.get("taxonomy") != spec.get("taxonomy"):
            raise DataError(str(r.dir / SPEC_FILE), "a different taxonomy from the first run's",
                            fix="compare runs of the same benchmark version")
    tax = RunTaxonomy.from_spec(spec, str(runs[0].dir / SPEC_FILE))
    ability_dim = {a: d for d, abilities in tax.dimensions.items() for a in abilities}
    # one judge scoring the same reply in two runs: tell the runs apart in the rater name
    seen: dict[tuple[str, str], set[str]] = {}
    for r in runs:
        for s in r.samples:
            if isinstance(s.response, str):
                seen.setdefault((r.judge, f"{s.id}@{reply_hash(s.response)}"), set()).add(str(r.dir))
    twice = {j for (j, _), ds in seen.items() if len(ds) > 1}
    id_field = str(((spec.get("data") or {}).get("fields") or {}).get("id") or "id")
    out = RunItems(benchmark=runs[0].benchmark, items={}, verdicts=[], replies={}, dialogues={}, taxonomy=tax,
                   spec=spec, runs=runs, id_field=id_field)
    for r in runs:
        rater = f"judge:{r.judge}" + (f"@{r.dir.name}" if r.judge in twice else "")
        for qid, turns in read_dialogues(r).items():
            out.dialogues.setdefault(qid, turns)
        for s in r.samples:
            qid, reply = str(s.id), s.response
            if not isinstance(reply, str) or not reply.strip() or s.candidate_error:
                out.skipped_no_reply += 1
                continue
            rid = reply_hash(reply)
            out.replies[(qid, rid)] = reply
            cands = out.candidates.setdefault(f"{qid}@{rid}", [])
            if r.candidate not in cands:
                cands.append(r.candidate)
            criteria = s.criteria
            extras = _scalar_fields(encode(s), _SAMPLE_KNOWN)  # every stored field, the unknown ones too
            for c in criteria:
                if c.check is not None:
                    continue  # decided by the engine, not a judge: nothing for a person to agree with
                idx = c.index
                if not isinstance(idx, int) or isinstance(idx, bool):
                    raise DataError(str(r.dir / SAMPLES_FILE), f"question {qid}: a criterion without an integer 'index'",
                                    fix="re-run or re-score this run directory")
                key = item_key(qid, idx, rid)
                if key not in out.items:
                    ability, rule, w = c.ability, c.rule, c.weight
                    fields = {**extras, **_scalar_fields(encode_criterion(c), _CRIT_KNOWN)}
                    fields.update(
                        ability=ability or f"rule:{rule}",
                        dimension=ability_dim.get(ability, RULE_DIMENSION if rule else "unknown"),
                        subset=str(s.subset or ""), scenario=str(s.scenario or ""),
                        weight_sign="rule" if w is None else ("negative" if w < 0 else "positive"),
                        candidate=cands, reply_length=len(reply))
                    out.items[key] = Item(key=key, qid=qid, criterion_index=idx, reply_id=rid,
                                          text=str(c.text), weight=w, fields=fields,
                                          n_criteria=len(criteria), label=str(c.label),
                                          ability=ability, rule=rule)
                hit = c.hit if not s.judge_error else None
                out.verdicts.append(ItemVerdict(rater=rater, key=key, hit=hit if isinstance(hit, bool) else None))
    return out
