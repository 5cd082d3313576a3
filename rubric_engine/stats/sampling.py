"""Candidate sampling (`candidate.samples=K`) and the hierarchical interval, from samples.jsonl records.

Why a module of its own: a sampled question is K replies, each judged like any reply; the runner only
hands this module the K per-sample records, and `rescore` and the leaderboard hand it stored records.
The same functions turn records into the question record (scores = mean over samples), into the
hierarchical bootstrap's values (stats/nested.py) and into the summary's `sampling` block and interval, so a
run, its rescore and its leaderboard row agree exactly. Pure: no I/O, no UI, no model client.

Record shape (docs/judge-noise.md, "Candidate sampling"): a sampled question's record keeps sample 0's
reply and verdicts at the top (tools that read one reply per question see sample 0), the question's
scores as the mean over its K samples, and `samples`: every sample's reply, verdicts (with votes) and
scores. A question with any failed sample (candidate or judge) is an error, never scored on the rest.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from rubric_engine.datatypes import Criterion
from rubric_engine.errors import ConfigError, DataError
from rubric_engine.record.codec import encode
from rubric_engine.record.types import Record
from rubric_engine.records import SampleRecord
from rubric_engine.scoring.aggregate import aggregate, scored_from_samples
from rubric_engine.scoring.votes import combine
from rubric_engine.stats.nested import LEVELS, MAX_RESAMPLED_REPEATS, Nested, multisets, nested_stats

__all__ = ["check_samples", "merge_record", "rescored_record", "nested_of", "summary_sections", "SectionsFold", "compact"]

OVERALL = "overall"
_SCORE_KEYS = ("abilities", "item_tags", "score", "failed_rules", "catastrophic")


def check_samples(k: Any) -> int:
    """candidate.samples must be a whole number >= 1: one line naming the fix otherwise."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"candidate.samples={k!r}: must be a whole number >= 1 (replies drawn per question; "
                          "1 = one reply)")
    return k


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _merge_groups(groups: Sequence[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per group: lo / hi (the same in every sample), the mean raw and the mean score over the samples."""
    out: dict[str, dict[str, Any]] = {}
    for name, first in groups[0].items():
        parts: list[Mapping[str, Any]] = [g[name] for g in groups]
        out[name] = {"raw": _mean([float(p["raw"]) for p in parts]), "lo": first["lo"], "hi": first["hi"],
                     "score": _mean([float(p["score"]) for p in parts])}
    return out


def merge_scores(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The question's score fields from its samples' own: means over samples; rules fired in any sample;
    catastrophic when a rule zeroed any sample; `sample_score_sd` the SD (n-1) of the sample scores."""
    scores = [e.get("score") for e in entries]
    if any(s is None for s in scores):  # no positive points under `exclude`: unscored like a single reply
        return {"abilities": {}, "score": None, "failed_rules": [], "catastrophic": False}
    out: dict[str, Any] = {"abilities": _merge_groups([e["abilities"] for e in entries])}
    if entries[0].get("item_tags"):
        out["item_tags"] = _merge_groups([e["item_tags"] for e in entries])
    fired = [r for e in entries for r in e.get("failed_rules") or []]
    values = [float(s) for s in scores if s is not None]  # every one (checked above)
    out.update(score=_mean(values), failed_rules=list(dict.fromkeys(fired)),
               catastrophic=any(bool(e.get("catastrophic")) for e in entries),
               sample_score_sd=statistics.stdev(values))
    return out


def _entry(s: int, rec: Mapping[str, Any]) -> dict[str, Any]:
    """One sample as kept under `samples`: its reply, errors, verdicts (index, hit, reasoning, votes, and P(met) and
    credit where written: what its score counted, for rescore and the interval), scores."""
    keep = ("response", "candidate_error", "judge_error", "judge_raw", *_SCORE_KEYS, "tokens", "cost",
            "cache_hits", "truncated", "choice", "transcript", "ended", "user_error")  # the last three: conversations
    out: dict[str, Any] = {"sample": s, **{k: rec[k] for k in keep if k in rec}}
    out["criteria"] = [{k: c[k] for k in ("index", "hit", "reasoning", "votes", "p_met", "credit") if k in c}
                       for c in rec["criteria"]]
    return out


def _error(entries: Sequence[Mapping[str, Any]], key: str) -> str | None:
    failed = [(e["sample"], e[key]) for e in entries if e.get(key)]
    if not failed:
        return None
    more = f" (+{len(failed) - 1} more failed samples)" if len(failed) > 1 else ""
    return f"sample {failed[0][0] + 1} of {len(entries)}: {failed[0][1]}{more}"


def merge_record(records: Sequence[SampleRecord]) -> SampleRecord:
    """One samples.jsonl record for a question from its K per-sample records (run.record.sample_record each)."""
    entries = [_entry(s, r) for s, r in enumerate(records)]
    out = {k: v for k, v in records[0].items() if k not in (*_SCORE_KEYS, "judge_raw", "sample_score_sd", "choice")}
    cand, judge = _error(entries, "candidate_error"), _error(entries, "judge_error")
    out.update(candidate_error=cand, judge_error=None if cand else judge,
               abilities={}, score=None, failed_rules=[], catastrophic=False)
    if cand is None and judge is not None:
        out["judge_raw"] = next(e.get("judge_raw", []) for e in entries if e.get("judge_error"))
    if cand is None and judge is None:
        out.update(merge_scores(entries))
    roles = list(records[0]["tokens"])  # candidate, judge (and user: a simulated user)
    out["tokens"] = {role: {k: sum(int(r["tokens"][role][k]) for r in records) for k in ("prompt", "completion")}
                     for role in roles}
    out["cost"] = {role: None if any(r["cost"][role] is None for r in records)
                   else math.fsum(cast(float, r["cost"][role]) for r in records) for role in roles}
    out["cache_hits"] = {role: sum(int(r["cache_hits"][role]) for r in records) for role in roles}
    user = _error(entries, "user_error")  # a simulated user failed in some sample: the question's user_error
    if user is not None:  # (else the first sample's, None, stays where it was, or none was written)
        out["user_error"] = user
    out["truncated"] = any(bool(r.get("truncated")) for r in records)
    out["samples"] = entries
    return cast(SampleRecord, out)


def rescored_record(rec: Record, criteria: list[Criterion], rules: bool, where: str,
                    score: Callable[[list[Criterion], list[bool], list[Any]], Mapping[str, Any]]) -> SampleRecord:
    """A sampled record, as its JSON object, with every sample's scores recomputed from its stored verdicts (and
    P(met), counted where the spec says so) by `score` (scores.score_fields bound to the spec), then the question's
    means; errors stay errors."""
    out = encode(rec)
    if rec.judge_error or rec.candidate_error:
        return cast(SampleRecord, out)
    keep = [i for i, c in enumerate(criteria) if rules or c.rule is None]
    entries = []
    for e in rec.samples:
        hits = [c.hit for c in e.criteria]
        if len(hits) != len(criteria) or any(h not in (True, False) for h in hits):
            raise DataError(where, f"question {rec.id!r} sample {e.sample}: a criterion without a "
                            "verdict", fix="re-score the run from its answers (stage=score from_run=...)")
        new = {k: v for k, v in encode(e).items() if k not in _SCORE_KEYS}
        p_met = [c.p_met for c in e.criteria]
        new.update(score([criteria[i] for i in keep], [bool(hits[i]) for i in keep], [p_met[i] for i in keep]))
        entries.append(new)
    for k in (*_SCORE_KEYS, "sample_score_sd"):
        out.pop(k, None)
    out.update(merge_scores(entries))
    out["samples"] = entries
    return cast(SampleRecord, out)


def compact(rec: Record) -> dict[str, Any]:
    """What the interval and the sampling block read of a stored record (no texts), as the run's compact values."""
    def verdicts(r: Record) -> list[dict[str, Any]]:
        return [{"index": c.index, "hit": c.hit, **({"votes": c.votes} if c.votes is not None else {}),
                 **({"p_met": c.p_met} if c.p_met is not None else {})} for c in r.criteria]

    out = {"id": rec.id, "subset": rec.subset, "scenario": rec.scenario, "tags": list(rec.tags) or None,
           "score": rec.score, "abilities": rec.abilities if rec.stored("abilities") else None,
           "catastrophic": rec.catastrophic if rec.stored("catastrophic") else None,
           "item_tags": rec.item_tags if rec.stored("item_tags") else None, "judge_error": rec.judge_error,
           "candidate_error": rec.candidate_error, "criteria": verdicts(rec)}
    if rec.samples:
        out["samples"] = [{"score": e.score, "abilities": e.abilities if e.stored("abilities") else None,
                           "catastrophic": e.catastrophic if e.stored("catastrophic") else None,
                           "item_tags": e.item_tags if e.stored("item_tags") else None, "criteria": verdicts(e)}
                          for e in rec.samples]
    return out


def _entries(rec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(rec["samples"]) if "samples" in rec else [rec]


def _combined(c: Mapping[str, Any], ms: Sequence[int], rule: str, tie: str) -> bool:
    """The verdict on one criterion from the gradings in `ms`, combined as jury.Panel does it."""
    votes = c.get("votes")
    if not votes:
        return bool(c["hit"])
    per_judge = [combine([bool(v[r]) for r in ms], "majority", tie) for v in votes.values()]
    return per_judge[0] if len(per_judge) == 1 else combine(per_judge, rule, tie)


class _NestedRows:
    """The hierarchical bootstrap's values built one scored record at a time (question order kept): each
    (question, sample) scored under every multiset of its gradings (up to MAX_RESAMPLED_REPEATS repeats)."""

    def __init__(self, spec: Any, repeats: int, rule: str, tie: str, rules: bool) -> None:
        self.spec, self.rule, self.tie, self.rules = spec, rule, tie, rules
        how = spec.aggregation_rule()
        self.columns = ["__score__"] if how.overall == "mean_over_questions" else spec.ability_ids()
        self.col = {c: i for i, c in enumerate(self.columns)}
        self.clip = how.clip in ("group", "overall")
        self.r = repeats if 1 < repeats <= MAX_RESAMPLED_REPEATS else 1
        self.sets = multisets(self.r)
        self.ids: list[str] = []
        self.rows: list[np.ndarray] = []  # per question: (samples, multisets, columns)

    def add(self, rec: Mapping[str, Any], criteria: list[Criterion]) -> None:
        from rubric_engine.stats.scores import credits, question_score  # the one per-question scoring path

        keep = [i for i, c in enumerate(criteria) if self.rules or c.rule is None]
        entries = _entries(rec)
        if self.rows and len(entries) != self.rows[0].shape[0]:
            raise ValueError(f"question {rec.get('id')!r} has {len(entries)} samples, others {self.rows[0].shape[0]}")
        values = np.full((len(entries), len(self.sets), len(self.columns)), np.nan)
        if rec.get("zeroed"):  # a candidate error scored 0 (candidate_errors: zero): 0 in every sample and grading
            for a in ["__score__"] if "__score__" in self.col else rec["abilities"]:
                values[:, :, self.col[a]] = 0.0
            entries = []
        for s, e in enumerate(entries):
            marks = e.get("criteria") or []
            # use: probability: each item's P(met) as stored (the mean over its gradings: votes keep decisions only,
            # so resampled gradings change the verdicts, and the rules they fire, not the expected points)
            credit = credits(self.spec, [marks[i].get("p_met") for i in keep])
            done: dict[tuple[bool, ...], np.ndarray] = {}
            for j, ms in enumerate(self.sets):
                hits = tuple(_combined(marks[i], ms, self.rule, self.tie) if self.r > 1 else bool(marks[i]["hit"])
                             for i in keep)
                if hits not in done:
                    qs = question_score(self.spec, [criteria[i] for i in keep], list(hits), credit)
                    row = np.full(len(self.columns), np.nan)
                    if "__score__" in self.col:
                        row[0] = qs.score
                    else:
                        for a, g in qs.abilities.items():
                            row[self.col[a]] = g.score
                    done[hits] = row
                values[s, j] = done[hits]
        self.ids.append(str(rec["id"]))
        self.rows.append(values)

    def nested(self) -> Nested:
        values = (np.stack(self.rows) if self.rows
                  else np.full((0, 1, len(self.sets), len(self.columns)), np.nan))
        return Nested(self.ids, values, self.r, self.clip)


def nested_of(spec: Any, records: Iterable[Mapping[str, Any]], criteria_of: Callable[[Mapping[str, Any]], list[Criterion]],
              repeats: int, rule: str = "majority", tie: str = "not_met", rules: bool = True) -> Nested:
    """The hierarchical bootstrap's values for the scored records (question order kept): each (question,
    sample) scored under every multiset of its gradings (up to MAX_RESAMPLED_REPEATS repeats)."""
    rows = _NestedRows(spec, repeats, rule, tie, rules)
    for rec in records:
        if rec.get("score") is not None:
            rows.add(rec, criteria_of(rec))
    return rows.nested()


class SectionsFold:
    """summary.json's `sampling` block and hierarchical `interval`, folded one record at a time in question
    order (`add`, then `sections`): per question only its bootstrap values and a few scores are kept, so a
    run computes them by streaming its journal, and `rescore` from its stored records, the same way."""

    def __init__(self, spec: Any, *, samples: int, repeats: int, rule: str = "majority", tie: str = "not_met",
                 rules: bool = True) -> None:
        self.spec, self.samples, self.repeats, self.rule, self.tie, self.rules = spec, samples, repeats, rule, tie, rules
        self.nested = _NestedRows(spec, repeats, rule, tie, rules)
        self.per_sample: list[list[Any]] = [[] for _ in range(samples)]  # sample s of every scored question
        self.q_sd: dict[str, list[float]] = {OVERALL: []}

    def add(self, rec: Mapping[str, Any], criteria_of: Callable[[Mapping[str, Any]], list[Criterion]]) -> None:
        if rec.get("score") is None:
            return
        if self.samples > 1:
            self._spread(rec)
        self.nested.add(rec, criteria_of(rec))

    def _spread(self, rec: Mapping[str, Any]) -> None:
        scale = self.spec.scoring.scale
        # a zeroed question (candidate error, candidate_errors: zero) is 0 in every sample
        entries = [rec] * len(rec["samples"]) if rec.get("zeroed") else rec["samples"]
        for s, e in enumerate(entries):
            self.per_sample[s] += scored_from_samples([{
                "id": rec["id"], "subset": rec.get("subset"), "scenario": rec.get("scenario"), "tags": rec.get("tags"),
                "score": e["score"], "abilities": e["abilities"], "catastrophic": e["catastrophic"],
                "item_tags": e.get("item_tags") or {}}])
        self.q_sd[OVERALL].append(statistics.stdev([float(e["score"]) for e in entries]) * scale)
        for a in entries[0]["abilities"]:
            self.q_sd.setdefault(a, []).append(statistics.stdev([float(e["abilities"][a]["score"]) for e in entries]) * scale)

    def _sampling(self) -> dict[str, Any]:
        """Per-question SD across samples (mean over questions) and the SD of the K overall (and ability)
        scores, sample s scored from every question's s-th reply."""
        spec = self.spec
        runs = [aggregate(sq, spec.dimensions_map(), scale=spec.scoring.scale, how=spec.aggregation_rule())
                for sq in self.per_sample]
        groups: dict[str, Any] = {}
        for g in dict.fromkeys([OVERALL, *spec.ability_ids()]):
            values = [r["overall"] if g == OVERALL else r["abilities"].get(g) for r in runs]
            sds = self.q_sd.get(g, [])
            groups[g] = {"question_score_sd": _mean(sds) if sds else None,
                         "score_sd_across_samples": statistics.stdev(values) if None not in values and len(values) > 1 else None,
                         "sample_scores": values}
        return {"samples": self.samples, "groups": groups}

    def sections(self, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
        """`sampling` (samples > 1) and `interval` from the hierarchical bootstrap; {} when nothing scored."""
        out: dict[str, Any] = {}
        if self.samples > 1:
            out["sampling"] = self._sampling()
        n = self.nested.nested()
        if n.ids:
            levels = [lv for lv in LEVELS if lv == "questions" or (lv == "samples" and self.samples > 1)
                      or (lv == "repeats" and n.repeats > 1)]
            st = nested_stats(n, n_boot, seed, scale=self.spec.scoring.scale, levels=levels)
            out["interval"] = {"samples": n_boot, "seed": seed, "alpha": 0.05, "lo": st["lo"], "hi": st["hi"],
                               "std": st["std"], "nested": {"levels": levels, "candidate_samples": self.samples,
                                                             "repeats": self.repeats, "rule": self.rule, "tie": self.tie,
                                                             "failure_rules": self.rules}}
        return out


def summary_sections(spec: Any, records: Iterable[Mapping[str, Any]],
                     criteria_of: Callable[[Mapping[str, Any]], list[Criterion]], *, samples: int, repeats: int,
                     rule: str = "majority", tie: str = "not_met", rules: bool = True, n_boot: int = 1000,
                     seed: int = 0) -> dict[str, Any]:
    """The summary keys of a sampled or repeated run: `interval` from the hierarchical bootstrap (questions,
    samples, gradings) and, with samples > 1, `sampling`. Records in question order; {} when nothing scored."""
    fold = SectionsFold(spec, samples=samples, repeats=repeats, rule=rule, tie=tie, rules=rules)
    for rec in records:
        fold.add(rec, criteria_of)
    return fold.sections(n_boot, seed)
