"""`rubric-engine filter`: keep a criterion only if the judge, applying it, separates replies known to differ.

Why: a drafted criterion may read well and still carry no signal (both replies meet it, neither does) or point
the wrong way; the consistency filter of rubric-from-preference work keeps a criterion only when it reproduces
a known preference. Input: a pairs file (JSONL), one line per pair of replies to one question, the better one
as `strong` (or `chosen`) and the worse as `weak` (or `rejected`), the question named by the spec's id field
(or `id`). Each reply is judged through the one judge path (judge/grading.judge_response) by the judge= entry,
every call in the call cache (a re-run pays nothing) and counted.

The rule, per criterion over its question's pairs (a pair counts when both replies have a verdict): it
separates a pair when its verdict favours the strong reply and not the weak one (a reward met by the strong
only, a penalty or failure-rule item hit by the weak only), and reverses it in the opposite case. Kept: it
separates more than half of the counted pairs and reverses none. With by=question the unit is the question's
whole rubric: the signed weighted sum of met items (strong minus weak) must be positive in more than half of
the pairs. A failed judge call is counted and never a pass: a criterion with no counted pair is dropped
("no verdict"), as is one whose question has no pair ("not measured"). Items the engine checks itself
(no judge) are kept as they are. The filtered data (JSONL, each row's rubric reduced to the kept items;
a row left with none is left out; no file when nothing is kept) is written beside, never over an existing file.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric_engine.datatypes import Question
from rubric_engine.errors import ConfigError, DataError
from rubric_engine.judge.checked import judged_question
from rubric_engine.judge.grading import judge_response
from rubric_engine.spec.facts import facts_of
from rubric_engine.stats.selfpref import is_pass
from rubric_engine.store.layout import iter_jsonl, write_json, write_jsonl

__all__ = ["Pair", "read_pairs", "decide", "check_filterable", "filter_command", "USAGE"]

USAGE = """usage: rubric-engine filter benchmark=NAME|DIR pairs=FILE judge=ENTRY [by=criterion|question] [out=FILE]

The consistency filter: judge each pair's strong and weak reply with judge= (every call cached and counted)
and keep a criterion (by=question: a question's whole rubric) only when it separates more than half of the
question's pairs and reverses none. Prints the kept and dropped lists with why; writes the filtered data to
out= (default: SPEC_DIR/<data file>.filtered.jsonl) and the reasons to <out>.filter.json, never over an
existing file. Exit 0 when every judge call answered and a criterion was kept; 1 when a call failed (counted,
never a pass) or nothing was kept (no data file written); 2 bad input.
"""

_STRONG, _WEAK = ("strong", "chosen"), ("weak", "rejected")


@dataclass(frozen=True)
class Pair:
    qid: str
    strong: str
    weak: str
    line: int


def _text(row: Mapping[str, Any], keys: Sequence[str], path: Path, n: int) -> str:
    value = next((row[k] for k in keys if k in row), None)
    if not isinstance(value, str) or not value.strip():
        raise DataError(str(path), f"no {' or '.join(keys)} reply (a non-empty string)", line=n,
                        fix="give each pair a strong (or chosen) and a weak (or rejected) reply")
    return value


def read_pairs(path: Path, id_field: str, questions: Mapping[str, Question]) -> list[Pair]:
    """The pairs file's lines, each checked against the spec's questions; DataError names file and line."""
    if not path.is_file():
        raise ConfigError(f"filter: no pairs file {path}; pass pairs=FILE (JSONL: {id_field}, strong, weak)")
    out = []
    for n, row in iter_jsonl(path, error=DataError, fix=f"one JSON object per line: {id_field}, strong, weak"):
        qid = str(row.get(id_field, row.get("id", "")))
        if qid not in questions:
            raise DataError(str(path), f"question {qid!r} is not in the benchmark's data", line=n,
                            fix=f"name the question by its {id_field}")
        out.append(Pair(qid, _text(row, _STRONG, path, n), _text(row, _WEAK, path, n), n))
    if not out:
        raise ConfigError(f"filter: {path} holds no pair; add lines with {id_field}, strong and weak")
    return out


def _signed(weight: float | None) -> float:
    return 0.0 if weight is None else float(weight)


def decide(question: Question, verdicts: Sequence[tuple[dict[int, bool] | None, dict[int, bool] | None]],
           by: str) -> list[dict[str, Any]]:
    """Kept or dropped, with why, per judged criterion of `question` (by=question: the same verdict for all);
    `verdicts`: per pair, (strong, weak) criterion index -> hit, None for a failed judge call."""
    judged = [c for c in question.criteria if c.check is None]
    both = [(s, w) for s, w in verdicts if s is not None and w is not None]
    failed = len(verdicts) - len(both)
    rows = []
    if by == "question":
        sep = sum(sum(_signed(c.weight) * (s[c.index] - w[c.index]) for c in judged) > 0 for s, w in both)
        kept, why = _rule(sep, 0, len(both), failed, len(verdicts))
        return [{"qid": question.id, "index": c.index, "text": c.text, "kept": kept, "why": why, "separated": sep,
                 "reversed": 0, "pairs": len(both), "failed": failed} for c in judged]
    for c in judged:
        fav = [(is_pass(s[c.index], c.weight), is_pass(w[c.index], c.weight)) for s, w in both]
        sep = sum(a and not b for a, b in fav)
        rev = sum(b and not a for a, b in fav)
        kept, why = _rule(sep, rev, len(both), failed, len(verdicts))
        if not kept and sep == rev == 0 and both:
            why = "favours both replies" if all(a for a, _ in fav) else ("favours neither reply" if not any(
                a or b for a, b in fav) else why)
        rows.append({"qid": question.id, "index": c.index, "text": c.text, "kept": kept, "why": why,
                     "separated": sep, "reversed": rev, "pairs": len(both), "failed": failed})
    return rows


def _rule(sep: int, rev: int, counted: int, failed: int, pairs: int) -> tuple[bool, str]:
    if not pairs:
        return False, "not measured: no pair for this question"
    if not counted:
        return False, f"no verdict: the judge failed on {failed} of {pairs} pair(s)"
    if rev:
        return False, f"reverses {rev} of {counted} pair(s) (favours the weak reply)"
    if 2 * sep > counted:
        return True, f"separates {sep} of {counted} pair(s)"
    return False, f"separates only {sep} of {counted} pair(s)"


async def _judge_all(client: Any, spec: Any, questions: Mapping[str, Question], pairs: Sequence[Pair]) -> list[Any]:
    jobs = []
    for p in pairs:
        q = judged_question(questions[p.qid])
        for reply in (p.strong, p.weak):
            jobs.append(judge_response(client, spec, q, reply) if q is not None else asyncio.sleep(0, None))
    return list(await asyncio.gather(*jobs))


def _hits(question: Question, result: Any) -> dict[int, bool] | None:
    """criterion index -> hit from a judge result (None: the call failed or a verdict is missing)."""
    if result is None or result.verdicts is None:
        return None
    judged = [c for c in question.criteria if c.check is None]
    hits = {c.index: v.hit for c, v in zip(judged, result.verdicts)}
    return hits if len(hits) == len(judged) else None


def _filtered_rows(spec: Any, questions: Mapping[str, Question], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The data rows with each rubric reduced to its kept items (engine-checked items stay)."""
    kept = {(r["qid"], r["index"]) for r in rows if r["kept"]}
    dropped = {(r["qid"], r["index"]) for r in rows if not r["kept"]}
    field = spec.data.fields.rubric
    out = []
    for q in questions.values():
        items = [item for c, item in zip(q.criteria, q.source_row[field]) if (q.id, c.index) not in dropped]
        if any((q.id, c.index) in kept for c in q.criteria):
            out.append({**q.source_row, field: items})
    return out


def check_filterable(spec: Any, by: str) -> None:
    """One line, before the data is read or a call made, for what the filter cannot measure."""
    if by not in ("criterion", "question"):
        raise ConfigError(f"filter: by={by!r}; use by=criterion or by=question")
    facts = facts_of(spec)
    if not facts.per_criterion_verdicts or facts.conversation:
        raise ConfigError(f"filter: {spec.name}: its judge gives no per-criterion verdicts on one reply (no judge, a "
                          "score or pairwise judge, or conversations); the filter needs a criteria judge of a reply")


def _run_stoppable(go: Any) -> Any:
    """asyncio.run(go()) where the first Ctrl-C / SIGTERM sends no new request and cancels the calls in flight;
    completed calls are in the cache, so the same command resumes (models/interrupt.py, as `robustness`)."""
    from rubric_engine.models.interrupt import SignalStop, check_stopped

    async def guarded() -> Any:
        stop = SignalStop().install()
        try:
            return await go()
        finally:
            stop.restore()

    try:
        return asyncio.run(guarded())
    except asyncio.CancelledError:
        check_stopped()  # a signal: Interrupted (exit 130 / 143)
        raise


def filter_command(spec: Any, questions: Mapping[str, Question], pairs_file: Path, judge: Any, cache: Any,
                   out: Path, by: str = "criterion") -> dict[str, Any]:
    """Judge the pairs, decide per criterion, write the filtered data and the reasons; returns the report."""
    from rubric_engine.models.client import ModelClient

    check_filterable(spec, by)
    report_path = out.with_name(out.name + ".filter.json")
    for path in (out, report_path):
        if path.exists():
            raise ConfigError(f"filter: {path} already exists; choose another out=FILE (nothing was written)")
    pairs = read_pairs(pairs_file, spec.data.fields.id, questions)

    async def go() -> tuple[list[Any], int, int]:
        async with ModelClient(judge, cache=cache, role="judge") as client:
            results = await _judge_all(client, spec, questions, pairs)
            return results, client.stats.calls - client.stats.cache_hits, client.stats.cache_hits  # made, cached

    results, calls, hits = _run_stoppable(go)
    per_q: dict[str, list[tuple[dict[int, bool] | None, dict[int, bool] | None]]] = defaultdict(list)
    for k, p in enumerate(pairs):
        q = questions[p.qid]
        per_q[p.qid].append((_hits(q, results[2 * k]), _hits(q, results[2 * k + 1])))
    rows = [r for q in questions.values() for r in decide(q, per_q.get(q.id, []), by)]
    failed = sum(r is not None and r.verdicts is None for r in results)
    report = {"benchmark": spec.name, "version": str(spec.version), "by": by, "pairs": len(pairs),
              "replies": 2 * len(pairs), "failed_replies": failed, "calls": calls, "cache_hits": hits,
              "kept": sum(r["kept"] for r in rows), "dropped": sum(not r["kept"] for r in rows), "criteria": rows,
              "out": str(out), "errors": sorted({str(r.error) for r in results if r is not None and r.error})}
    data = _filtered_rows(spec, questions, rows)
    report["rows"] = len(data)
    out.parent.mkdir(parents=True, exist_ok=True)
    if data:  # nothing kept: no data file (it would hold no question), the reasons still written
        write_jsonl(out, data)
    write_json(report_path, report)
    return report
