"""`rubric-engine robustness`: re-judge a seeded sample of a finished run under a changed prompt.

Why: a verdict should depend on the reply and the criterion, not on where the criterion sits in the list
(`check=order`: the judged criteria shown in a seeded permuted order, the verdicts mapped back) or on whether
it is judged with the others or alone (`check=granularity`: one criterion per call, each shown as the only
item of the run's own all-criteria template) or on its wording (`check=paraphrase`: every judged criterion
reworded by a declared model, validity/paraphrase.py, then the reply judged again as the run judged it). The
run's spec, its answers file (the benchmark's own rows plus the replies) and its verdicts are read back; the
judge is the run's, called through the one judge path (judge/grading.judge_response) with every call in the call cache, so a re-run pays nothing and
`dry_run=true` counts the calls (and how many are cached) without making one. The statistics are
stats/robustness.py's. A failed re-judgment is counted, never compared.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rubric_engine.datatypes import Question
from rubric_engine.errors import ConfigError, DataError
from rubric_engine.judge.checked import judged_question
from rubric_engine.judge.grading import judge_response, shape_of
from rubric_engine.judge.prompts import judge_messages
from rubric_engine.spec.facts import facts_of
from rubric_engine.stats.robustness import Rejudged, compare_verdicts, permutation, position_rates
from rubric_engine.store import layout as rundir
from rubric_engine.store.runs import collect_runs

__all__ = ["CHECKS", "USAGE", "Target", "Unit", "load_targets", "plan_units", "robustness_command"]

CHECKS = ("order", "granularity", "paraphrase")
USAGE = ("rubric-engine robustness RUN_DIR check=order|granularity|paraphrase [n=50] [seed=0] [dry_run=true] "
         "[n_boot=1000] [paraphraser=ENTRY] [out=DIR]")


@dataclass(frozen=True)
class Target:
    """One judged reply of the run: the question as its judge was shown it (judged items 1..m), the reply,
    and the run's verdict on each shown item."""

    qid: str
    question: Question
    reply: str
    original: tuple[bool, ...]


@dataclass(frozen=True)
class Unit:
    """One judge call of a check: `question` holds the criteria as the check shows them; `shown[k]` is the
    item (1..m of the target's question) shown at position k + 1."""

    target: Target
    question: Question
    shown: tuple[int, ...]


def _questions(spec: Any, run_dir: Path) -> dict[str, Question]:
    """The run's questions, from its answers file: every row as the benchmark wrote it, plus the reply."""
    from rubric_engine.dataset.load import parse_rows

    path = run_dir / rundir.ANSWERS_FILE
    if not path.is_file():
        raise ConfigError(f"robustness: {path} is missing; robustness needs a complete run directory (its "
                          "answers and verdicts)")
    jsonl = spec.model_copy(update={"data": spec.data.model_copy(update={"format": "jsonl"})})
    return {q.id: q for q in parse_rows(jsonl, path)}


def _refuse(spec: Any, run: Any, where: str) -> None:
    """One line for the runs this command cannot re-judge faithfully."""
    facts, why = facts_of(spec), None
    if not facts.per_criterion_verdicts:
        why = "its judge gives no per-criterion verdicts (no judge, or a score / pairwise judge)"
    elif facts.conversation:
        why = "it judged conversations (not supported yet)"
    elif spec.data.references is not None:
        why = "its spec adds references from a second file (not supported yet)"
    elif (run.summary.get("interval") or {}).get("nested"):
        why = "it sampled several replies per question (candidate.samples; not supported yet)"
    if why:
        raise ConfigError(f"robustness: {where}: cannot re-judge this run: {why}")


def load_targets(run: Any, spec: Any) -> tuple[list[Target], int]:
    """Every reply of the run its judge scored (judge or candidate errors and unscored records are left
    out and counted)."""
    questions = _questions(spec, run.dir)
    where = str(run.dir / rundir.SAMPLES_FILE)
    targets, skipped = [], 0
    for rec in run.samples:
        qid, reply = str(rec.id), rec.response
        hits = [c.hit for c in rec.criteria if c.check is None]
        if (rec.judge_error or rec.candidate_error or not isinstance(reply, str) or not hits
                or any(not isinstance(h, bool) for h in hits)):
            skipped += 1
            continue
        q = questions.get(qid)
        shown = judged_question(q) if q is not None else None
        if shown is None or len(shown.criteria) != len(hits):
            raise DataError(where, f"question {qid!r}: its verdicts do not match the run's answers file",
                            fix="re-run or re-score this run directory")
        targets.append(Target(qid=qid, question=shown, reply=reply, original=tuple(hits)))
    return targets, skipped


def sample_targets(targets: Sequence[Target], n: int, seed: int) -> list[Target]:
    """A seeded sample of n replies with at least two judged criteria (one alone has no order and no
    other granularity), in the run's order."""
    able = [t for t in targets if len(t.original) > 1]
    chosen = set(random.Random(seed).sample(range(len(able)), min(n, len(able))))
    return [t for i, t in enumerate(able) if i in chosen]


def plan_units(check: str, targets: Sequence[Target], seed: int) -> list[Unit]:
    """The calls of a check: order, one per reply with its criteria permuted; granularity, one per criterion."""
    units = []
    for t in targets:
        crit = t.question.criteria
        if check == "order":
            perm = permutation(len(crit), seed, t.qid)
            shown = tuple(replace(crit[p - 1], index=k) for k, p in enumerate(perm, 1))
            units.append(Unit(t, replace(t.question, criteria=shown), tuple(perm)))
        else:
            units += [Unit(t, replace(t.question, criteria=(replace(c, index=1),)), (i,))
                      for i, c in enumerate(crit, 1)]
    return units


def _requests(spec: Any, units: Sequence[Unit]) -> list[list[dict[str, str]]]:
    """The judge requests of the units as judge_response sends them: one per unit, or one per criterion when
    the spec judges per criterion (paraphrase on such a run)."""
    if spec.judge.verdict.granularity == "all_criteria":
        return [judge_messages(spec, u.question, u.target.reply) for u in units]
    return [judge_messages(spec, u.question, u.target.reply, c.index) for u in units for c in u.question.criteria]


def _cached(units: Sequence[Unit], spec: Any, judge: Any, cache: Any) -> int:
    """How many of the judge requests are in the cache (the format a judge is first asked with, or none)."""
    from rubric_engine.models.entries import cache_key

    if cache is None:
        return 0
    fmt = shape_of(spec).response_format()
    return sum(any(cache.get(cache_key(judge, msgs, f)) is not None for f in (fmt, None))
               for msgs in _requests(spec, units))


async def _rejudge(units: Sequence[Unit], spec: Any, client: Any) -> tuple[list[Rejudged], list[dict[str, str]]]:
    results = await asyncio.gather(*(judge_response(client, spec, u.question, u.target.reply) for u in units))
    rows: list[Rejudged] = []
    errors: list[dict[str, str]] = []
    for u, res in zip(units, results):
        if res.verdicts is None:
            errors.append({"id": u.target.qid, "error": str(res.error)})
            continue
        for k, v in enumerate(res.verdicts):
            item = u.shown[k]
            rows.append(Rejudged(qid=u.target.qid, index=u.target.question.criteria[item - 1].index,
                                 original=u.target.original[item - 1], new=v.hit, position=k + 1,
                                 shown=len(u.shown)))
    return rows, errors


def cell(text: Any) -> str:
    """Text as one markdown table cell (a criterion or a model's paraphrase: data, never table syntax)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _markdown(report: dict[str, Any]) -> str:
    def pct(x: float | None) -> str:
        return "—" if x is None else f"{100 * x:.1f}%"

    def ci(c: Sequence[float] | None) -> str:
        return "—" if not c else f"[{100 * c[0]:.1f}, {100 * c[1]:.1f}]"

    cmp = report["comparison"]
    lines = [f"# Robustness: {report['check']}", "", report["paragraph"], "",
             f"Replies re-judged: {report['replies']} (seed {report['seed']}); calls: {report['calls']} "
             f"({report['cache_hits']} from the cache); failed re-judgments: {len(report['errors'])}.", "",
             "| | value | 95% interval |", "|---|---:|---|",
             f"| agreement with the run's verdicts | {pct(cmp['agreement'])} | {ci(cmp['agreement_ci'])} |",
             f"| flip rate | {pct(cmp['flip_rate'])} | {ci(cmp['flip_rate_ci'])} |",
             f"| Cohen's kappa | {'—' if cmp['cohen_kappa'] is None else format(cmp['cohen_kappa'], '.3f')} | "
             + ("—" if not cmp["kappa_ci"] else f"[{cmp['kappa_ci'][0]:.3f}, {cmp['kappa_ci'][1]:.3f}]") + " |"]
    if report.get("positions"):
        lines += ["", "## Hit rate by shown position", "",
                  "| position | items | hit rate | 95% interval (Wilson) | same items in the run |",
                  "|---|---:|---:|---|---:|"]
        lines += [f"| {p['position']} | {p['n']} | {pct(p['hit_rate'])} | {ci(p['ci'])} | {pct(p['original_hit_rate'])} |"
                  for p in report["positions"]]
    flipped = sorted((p for p in report.get("paraphrases") or [] if p["flips"]), key=lambda p: -p["flips"] / p["judged"])
    if flipped:
        lines += ["", "## Reworded criteria whose verdict changed", "", "| criterion | paraphrase | flips |",
                  "|---|---|---:|"]
        lines += [f"| {cell(p['text'])} | {cell(p['paraphrase'])} | {p['flips']} of {p['judged']} |" for p in flipped]
    failed = [p for p in report.get("paraphrases") or [] if p["error"]]
    if failed:
        lines += ["", f"{len(failed)} criteria could not be reworded (their replies were not compared); see "
                  "paraphrase.json."]
    lines += ["", *[f"- {n}" for n in cmp["notes"]], ""]
    return "\n".join(lines)


def _paragraph(check: str, cmp: dict[str, Any], positions: Sequence[dict[str, Any]]) -> str:
    if not cmp["n"]:
        return "No criterion was re-judged: nothing to compare."
    what = {"order": "with the criteria in another order", "granularity": "one criterion per call",
            "paraphrase": "with every criterion reworded"}[check]
    text = (f"Re-judged {what}, the judge changed {100 * cmp['flip_rate']:.1f}% of {cmp['n']} verdicts "
            f"(kappa with the run's verdicts {'undefined' if cmp['cohen_kappa'] is None else format(cmp['cohen_kappa'], '.2f')}).")
    first = next((p for p in positions if p["position"] == "1"), None)
    last = next((p for p in positions if p["position"] == "last"), None)
    if first and last and first["ci"] and last["ci"]:
        sep = last["ci"][1] < first["ci"][0] or first["ci"][1] < last["ci"][0]
        text += (f" Criteria shown first were met {100 * first['hit_rate']:.1f}% of the time, criteria shown last "
                 f"{100 * last['hit_rate']:.1f}%: " + ("the intervals do not overlap, the judge looks position-biased."
                                                      if sep else "the intervals overlap."))
    return text


def _paraphrased(t: Target, para: dict[str, tuple[str | None, str | None]]) -> Unit | None:
    """The reply's question with every judged criterion reworded (same order), or None when one could not be."""
    texts = [para.get(c.text, (None, None))[0] for c in t.question.criteria]
    if any(x is None for x in texts):
        return None
    crit = tuple(replace(c, text=str(x)) for c, x in zip(t.question.criteria, texts))
    return Unit(t, replace(t.question, criteria=crit), tuple(range(1, len(crit) + 1)))


def _cached_paraphrases(texts: Sequence[str], model: Any, cache: Any) -> dict[str, tuple[str | None, str | None]]:
    """The paraphrases already in the cache (a dry run counts what a run would still pay for)."""
    from rubric_engine.models.entries import cache_key
    from rubric_engine.validity.paraphrase import accept_paraphrase, paraphrase_messages

    out: dict[str, tuple[str | None, str | None]] = {}
    for t in dict.fromkeys(texts):
        hit = cache.get(cache_key(model, paraphrase_messages(t), None)) if cache is not None else None
        if hit is not None:
            try:
                out[t] = (accept_paraphrase(t, str(hit.get("text", ""))), None)
            except ValueError:
                pass
    return out


def robustness_command(run_dir: Path, check: str, judge: Any, spec_of: Any, *, n: int = 50, seed: int = 0,
                       dry_run: bool = False, n_boot: int = 1000, out: Path | None = None, cache: Any = None,
                       limits: dict[str, Any] | None = None, paraphraser: Any = None) -> dict[str, Any]:
    """Re-judge, compare and write `<out>/<check>.json` and `.md` (out: RUN_DIR/robustness). `judge` is the
    run's judge ModelSpec; `paraphraser` the model rewording criteria (default: the judge); `cache` the call
    cache (None: every call is made); `limits` the clients' concurrency, rpm and max_retries;
    `spec_of(run_dir, summary)` the run's BenchmarkSpec as the run loaded it (its templates too). Returns the
    report (with dry_run: the call counts only)."""
    if check not in CHECKS:
        raise ConfigError(f"robustness: check={check!r} is not a check; use check=order, granularity or paraphrase")
    runs = collect_runs([Path(run_dir)])  # a complete run, read as every reader reads it
    if len(runs) != 1:
        raise ConfigError(f"robustness: {run_dir} holds {len(runs)} runs; give one run directory (a sweep's job)")
    run = runs[0]
    spec = spec_of(run.dir, run.summary)
    _refuse(spec, run, str(run.dir))
    if check != "paraphrase" and spec.judge.verdict.granularity != "all_criteria":
        raise ConfigError(f"robustness: {run.dir}: the run judged one criterion per call, so check={check} has "
                          "nothing to change (order and granularity need a run that judged all criteria at once)")
    targets, skipped = load_targets(run, spec)
    chosen = sample_targets(targets, n, seed)
    if not chosen:
        raise ConfigError(f"robustness: {run.dir}: no judged reply with two or more judged criteria to re-judge")
    paraphraser = paraphraser or judge
    texts = [c.text for t in chosen for c in t.question.criteria] if check == "paraphrase" else []
    if dry_run:
        if check != "paraphrase":
            units = plan_units(check, chosen, seed)
            return {"check": check, "replies": len(chosen), "calls": len(units),
                    "cached": _cached(units, spec, judge, cache)}
        known = _cached_paraphrases(texts, paraphraser, cache)
        units = [u for u in (_paraphrased(t, known) for t in chosen) if u is not None]
        per_reply = spec.judge.verdict.granularity == "all_criteria"
        judged = len(chosen) if per_reply else sum(len(t.original) for t in chosen)
        return {"check": check, "replies": len(chosen), "calls": len(set(texts)) + judged,
                "cached": len(known) + _cached(units, spec, judge, cache)}
    from rubric_engine.models.client import ModelClient
    from rubric_engine.models.interrupt import SignalStop, check_stopped
    from rubric_engine.validity.paraphrase import paraphrase_all

    para: dict[str, tuple[str | None, str | None]] = {}

    async def go() -> tuple[list[Rejudged], list[dict[str, str]], int, int]:
        nonlocal para
        failed: list[dict[str, str]] = []
        made = 0
        if check == "paraphrase":
            async with ModelClient(paraphraser, cache=cache, role="paraphraser", **(limits or {})) as pc:
                para = await paraphrase_all(pc, texts)
                hits, made = pc.stats.cache_hits, pc.stats.calls
            units = []
            for t in chosen:
                u = _paraphrased(t, para)
                if u is None:
                    why = next(str(para[c.text][1]) for c in t.question.criteria if para[c.text][0] is None)
                    failed.append({"id": t.qid, "error": f"a criterion could not be reworded: {why}"})
                else:
                    units.append(u)
        else:
            units, hits = plan_units(check, chosen, seed), 0
        async with ModelClient(judge, cache=cache, role="judge", **(limits or {})) as client:
            rows, errors = await _rejudge(units, spec, client)
            return rows, failed + errors, hits + client.stats.cache_hits, made + client.stats.calls

    async def guarded() -> tuple[list[Rejudged], list[dict[str, str]], int, int]:
        stop = SignalStop().install()  # the first Ctrl-C / SIGTERM: no new request, calls in flight cancelled
        try:
            return await go()
        finally:
            stop.restore()

    try:
        rows, errors, hits, calls = asyncio.run(guarded())
    except asyncio.CancelledError:
        check_stopped()  # a signal: Interrupted (exit 130 / 143); completed calls are cached
        raise
    cmp = compare_verdicts(rows, n_boot=n_boot, seed=seed)
    positions = position_rates(rows) if check == "order" else []
    report = {"schema_version": 1, "check": check, "run": str(run.dir), "judge": judge.name, "seed": seed, "n": n,
              "replies": len(chosen), "replies_not_judged_in_run": skipped, "calls": calls, "cache_hits": hits,
              "errors": errors, "comparison": cmp, "positions": positions,
              "paragraph": _paragraph(check, cmp, positions),
              "verdicts": [{"id": r.qid, "index": r.index, "original": r.original, "new": r.new,
                            "position": r.position} for r in rows]}
    if check == "paraphrase":
        report["paraphraser"] = paraphraser.name
        text_of = {(t.qid, c.index): c.text for t in chosen for c in t.question.criteria}
        tally: dict[str, list[int]] = {}
        for r in rows:
            tally.setdefault(text_of[(r.qid, r.index)], [0, 0])[r.new != r.original] += 1
        report["paraphrases"] = [{"text": t, "paraphrase": p, "error": e, "judged": sum(tally.get(t, [0, 0])),
                                  "flips": tally.get(t, [0, 0])[1]} for t, (p, e) in para.items()]
    target = Path(out) if out is not None else run.dir / "robustness"
    rundir.write_json(target / f"{check}.json", report)
    rundir.write_text(target / f"{check}.md", _markdown(report))
    report["out"] = str(target)
    return report
