"""`rubric-engine calibrate`: the benchmark score as people would give it, from a judged run and a few
labelled replies (prediction-powered inference), beside the judge-only score.

Why: `agree` measures how far a judge departs from people but leaves the score as the judge gave it. With
whole replies labelled at random (the review sheet's `unit=reply`), the labelled replies measure the judge's
bias and the unlabelled ones keep the precision: PPI++ (stats/ppi.py) gives an unbiased estimate of the
score people would give the whole run, with a 95% interval, never much wider than people alone would give.
Per criterion group (ability by default) the judge's hit rate beside the people's shows where the bias is.

Each reply's value is its contribution to the spec's overall (validity/replyscore.py), so the mean the
estimator targets is the run's own overall, whatever its aggregation. Several raters per reply: `raters=majority`
takes the majority verdict per criterion (a tie leaves the reply out, counted), `raters=mean` the mean of
the raters' scores of the reply (each rater having labelled all of its criteria).

Everything is checked before anything is written: labels that match no reply of a run, or too few labelled
replies for an interval, stop the command with one line and no file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_engine.datatypes import Criterion
from rubric_engine.errors import ConfigError, DataError
from rubric_engine.record.types import Record
from rubric_engine.stats import agreement as st
from rubric_engine.stats.ppi import paired_rates, ppi_estimate
from rubric_engine.store.layout import CALIBRATION_FILE, write_json, write_text
from rubric_engine.store.runs import RunRecord
from rubric_engine.validity.items import RunItems, item_key, load_items, reply_hash
from rubric_engine.validity.labels import LabelSet, read_labels
from rubric_engine.validity.replyscore import ReplyScorer, contribution, overall_weights

__all__ = ["CALIBRATION_FILE", "MIN_LABELLED", "RATERS", "USAGE", "calibrate_run", "calibrate_command", "human_reference"]

MIN_LABELLED = 10  # labelled replies per run below which the normal interval is not given
RATERS = ("majority", "mean")
USAGE = f"""usage: rubric-engine calibrate RUN_DIR [RUN_DIR ...] labels=FILE[,FILE...] [raters=majority|mean]
                                [by=ability] [power=true]

The score people would give each run, estimated from its judge's scores and the replies people labelled
whole (review export unit=reply), with a 95% interval (PPI++; power=false: plain PPI), beside the
judge-only and the human-only score; the judge's hit rate against the people's per criterion group (by=,
default ability); the number of labelled replies that would halve the interval. Writes
{CALIBRATION_FILE} and calibration.md into each run directory, beside summary.json; `leaderboard` shows them.
raters=majority: the majority verdict per criterion (a tie leaves the reply out); raters=mean: the mean of
the raters' scores of the reply. A run needs at least {MIN_LABELLED} labelled replies and one unlabelled.
"""


@dataclass
class _Reply:
    qid: str
    judge: Any  # QuestionScore from the judge's verdicts
    humans: list[Any] = field(default_factory=list)  # QuestionScore per rater (mean) or the majority's (one)


def human_reference(labels: LabelSet) -> tuple[dict[str, dict[str, bool]], dict[str, bool], int]:
    """Per rater their labels, the majority per item, and the number of tied items (no majority)."""
    humans: dict[str, dict[str, bool]] = {}
    for lab in labels.labels:
        humans.setdefault(lab.rater, {})[lab.key] = lab.met
    ref: dict[str, bool] = {}
    ties = 0
    for k in sorted({k for h in humans.values() for k in h}):
        m = st.majority([h[k] for h in humans.values() if k in h])
        if m is None:
            ties += 1
        else:
            ref[k] = m
    return humans, ref, ties


def _criteria(s: Record) -> list[Criterion]:
    return [Criterion(index=c.index, label=c.label, weight=c.weight, text=c.text, ability=c.ability, rule=c.rule,
                      tags=tuple(c.tags)) for c in s.criteria]


def _human_hits(s: Record, keys: list[str | None], labels: dict[str, bool]) -> list[bool] | None:
    """The reply's hits as `labels` give them (engine checks keep the engine's), or None when one is missing."""
    if not all(k in labels for k in keys if k is not None):
        return None
    return [bool(c.hit) if k is None else labels[k] for c, k in zip(s.criteria, keys)]


def _replies(run: RunRecord, scorer: ReplyScorer, humans: dict[str, dict[str, bool]], ref: dict[str, bool],
             raters: str, counts: Counter) -> list[_Reply]:
    out = []
    for s in run.samples:
        reply = s.response
        if not isinstance(reply, str) or not reply.strip() or s.candidate_error:
            counts["no_reply"] += 1
            continue
        if s.judge_error or any(c.hit is None for c in s.criteria):
            counts["judge_failed"] += 1
            continue
        crits, rid = _criteria(s), reply_hash(reply)
        keys = [None if c.check is not None else item_key(str(s.id), c.index, rid) for c in s.criteria]
        try:
            judged = scorer.score(crits, [bool(c.hit) for c in s.criteria], [c.p_met for c in s.criteria])  # as the run
        except ValueError:
            counts["unscorable"] += 1
            continue
        if judged.score is None:  # no positive points under no_positive_points=exclude, as the run left it out
            counts["unscorable"] += 1
            continue
        r = _Reply(str(s.id), judged)
        sources = [ref] if raters == "majority" else [h for _, h in sorted(humans.items())]
        for labels in sources:
            hits = _human_hits(s, keys, labels)
            if hits is not None:
                r.humans.append(scorer.score(crits, hits))
        if not r.humans and any(k in h for h in humans.values() for k in keys if k is not None):
            counts["partly_labelled"] += 1
        out.append(r)
    return out


def _bias(run: RunRecord, data: RunItems, ref: dict[str, float], by: str) -> dict[str, Any]:
    """Judge vs people hit rate per value of the item field `by`, and over all labelled items; `ref` is the
    people's verdict per item (the majority as 0/1, or the share of raters saying met)."""
    rows: dict[str, tuple[list[bool], list[float], list[str]]] = {}
    for s in run.samples:
        if not isinstance(s.response, str) or s.judge_error or s.candidate_error:
            continue
        rid = reply_hash(s.response)
        for c in s.criteria:
            k = item_key(str(s.id), c.index, rid)
            if c.check is not None or k not in ref or c.hit is None or k not in data.items:
                continue
            v = data.items[k].fields.get(by)
            for g in ["(all)", *([str(x) for x in v] if isinstance(v, list) else [] if v is None else [str(v)])]:
                j, h, q = rows.setdefault(g, ([], [], []))
                j.append(bool(c.hit))
                h.append(ref[k])
                q.append(str(s.id))
    label = data.taxonomy.label if by in ("ability", "dimension") else str
    return {g: {"label": label(g) if g != "(all)" else "all labelled items", **paired_rates(*rows[g])}
            for g in sorted(rows, key=lambda g: (g != "(all)", g))}


def _item_reference(humans: dict[str, dict[str, bool]], ref: dict[str, bool], raters: str) -> dict[str, float]:
    """The people's verdict per item as the bias compares it: the majority (1/0; ties left out) or the share of
    the raters who said met."""
    if raters == "majority":
        return {k: float(v) for k, v in ref.items()}
    said: dict[str, list[bool]] = {}
    for labels in humans.values():
        for k, v in labels.items():
            said.setdefault(k, []).append(v)
    return {k: sum(v) / len(v) for k, v in said.items()}


def _scaled(est: dict[str, Any], scale: float) -> dict[str, Any]:
    def up(x: Any) -> Any:
        return [v * scale for v in x] if isinstance(x, list) else x * scale

    out = {k: (up(v) if k in ("estimate", "se", "interval", "judge_only", "judge_on_labelled") else v)
           for k, v in est.items()}
    out["human_only"] = {k: up(v) for k, v in est["human_only"].items()}
    return out


def calibrate_run(data: RunItems, run: RunRecord, labels: LabelSet, raters: str = "majority", by: str = "ability",
                  power: bool = True) -> dict[str, Any]:
    """calibration.json's content for one run; DataError when its labels cannot give an interval."""
    scorer = ReplyScorer.from_spec(data.spec)
    humans, ref, ties = human_reference(labels)
    counts: Counter = Counter()
    replies = _replies(run, scorer, humans, ref, raters, counts)
    weights = overall_weights([r.judge for r in replies], scorer.how)
    values = [(r, contribution(r.judge, weights),
               sum(contribution(h, weights) for h in r.humans) / len(r.humans) if r.humans else None) for r in replies]
    labelled = [r for r in replies if r.humans]
    y = [h for _, _, h in values if h is not None]
    yhat = [j for _, j, h in values if h is not None]
    unl = [j for _, j, h in values if h is None]
    where = f"calibrate: {run.dir}"
    if not labelled:
        raise DataError(where, "no reply of this run is labelled whole by the labels files"
                        + (f" ({counts['partly_labelled']} partly labelled)" if counts["partly_labelled"] else ""),
                        fix="export the review sheet from this run with unit=reply and label every criterion of each "
                            "reply, or leave this run out")
    if len(labelled) < MIN_LABELLED or not unl:
        raise DataError(where, f"{len(labelled)} labelled and {len(unl)} unlabelled replies; an interval needs at "
                        f"least {MIN_LABELLED} labelled and 1 unlabelled",
                        fix=f"label more whole replies (review export unit=reply n={3 * MIN_LABELLED})")
    est = _scaled(ppi_estimate(y, yhat, unl, power=power), scorer.scale)
    warnings = labels.warnings()
    if ties and raters == "majority":
        warnings.append(f"{ties} item(s) with a tie between raters have no majority; their replies are not labelled")
    for key, words in (("partly_labelled", "reply(ies) labelled on some criteria only are used as unlabelled"),
                       ("judge_failed", "reply(ies) with a failed judge call are left out"),
                       ("no_reply", "question(s) without a reply (candidate error) are left out"),
                       ("unscorable", "reply(ies) the spec cannot score are left out")):
        if counts[key]:
            warnings.append(f"{counts[key]} {words}")
    run_overall = run.summary.get("overall")
    if isinstance(run_overall, (int, float)) and abs(run_overall - est["judge_only"]) > 1e-6 * max(1.0, scorer.scale):
        warnings.append(f"the run's overall ({run_overall:.4g}) differs from the mean judge score these replies give "
                        f"({est['judge_only']:.4g}): its aggregation clips the overall, or replies were left out")
    return {"benchmark": data.benchmark, "run": str(run.dir), "candidate": run.candidate, "judge": run.judge,
            "scale": scorer.scale, "run_overall": run_overall, "raters": raters, "human_raters": sorted(humans),
            "sheets": sorted(labels.sheets), "score": est, "by": by,
            "bias": _bias(run, data, _item_reference(humans, ref, raters), by),
            "replies": {"scored": len(replies), **{k: counts[k] for k in sorted(counts)}},
            "values": [{"id": r.qid, "judge": j * scorer.scale, "human": None if h is None else h * scorer.scale}
                       for r, j, h in values],
            "warnings": warnings,
            "settings": {"interval": "95%, normal approximation", "min_labelled": MIN_LABELLED,
                         "estimator": est["method"]}}


def render_markdown(result: dict[str, Any]) -> str:
    """calibration.md: the corrected score beside the judge's, then the bias per group."""
    sc = result["score"]

    def iv(x: list[float] | None, digits: int = 1) -> str:
        return "-" if not x else f"[{x[0]:.{digits}f}, {x[1]:.{digits}f}]"

    halve = sc["labels_to_halve"]
    lines = [f"# Human-corrected score: {result['candidate']} (judge {result['judge']})", "",
             f"{result['benchmark']}, {sc['labelled']} labelled and {sc['unlabelled']} unlabelled replies, "
             f"raters: {result['raters']} of {', '.join(result['human_raters'])}.", "",
             "| score | estimate | 95% interval |", "|---|---|---|",
             f"| human-corrected ({sc['method']}: {sc['lambda']:.2f}) | {sc['estimate']:.1f} | {iv(sc['interval'])} |",
             f"| human-only ({sc['labelled']} labelled replies) | {sc['human_only']['estimate']:.1f} | "
             f"{iv(sc['human_only']['interval'])} |",
             f"| judge-only | {sc['judge_only']:.1f} | |", "",
             (f"About {halve} labelled replies would halve the interval." if halve is not None else
              "Even labelling every reply of this run but one would not halve the interval."), "",
             f"## Judge vs people per {result['by']} (hit rates on labelled items)", "",
             "| group | items | judge | people | judge - people | 95% interval |", "|---|---|---|---|---|---|"]
    for g in result["bias"].values():
        lines.append(f"| {g['label']} | {g['n']} | {g['judge_rate']:.2f} | {g['human_rate']:.2f} | "
                     f"{g['difference']:+.2f} | {iv(g['interval'], 2)} |")
    if result["warnings"]:
        lines += ["", "Warnings:", "", *[f"- {w}" for w in result["warnings"]]]
    return "\n".join(lines) + "\n"


def calibrate_command(dirs: Sequence[Path], label_files: Sequence[Path], raters: str = "majority", by: str = "ability",
                      power: bool = True) -> list[dict[str, Any]]:
    """Calibrate every run in `dirs`; every run is computed (and any error raised) before a file is written."""
    if raters not in RATERS:
        raise ConfigError(f"calibrate: raters={raters!r}; use raters=majority or raters=mean")
    data = load_items(dirs)
    known = {f for it in data.items.values() for f in it.fields}
    if by not in known:
        raise ConfigError(f"calibrate: by={by}: no item has this field; fields: {', '.join(sorted(known))}")
    labels = read_labels(label_files, data)
    if not labels.labels:
        raise ConfigError(f"calibrate: no usable label in the labels files ({sum(labels.blank.values())} blank, "
                          f"{sum(labels.unsure.values())} unsure)")
    results = [calibrate_run(data, run, labels, raters, by, power) for run in data.runs]
    for run, result in zip(data.runs, results):
        write_json(run.dir / CALIBRATION_FILE, result)
        write_text(run.dir / "calibration.md", render_markdown(result))
    return results
