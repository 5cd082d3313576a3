"""`rubric-engine agree`: how well each judge in the runs agrees with human labels, and why not.

Why: a raw agreement percentage alone misleads when most items are "not met" (a judge that always
says no agrees often). So every comparison shows the constant-rater chance floor beside the raw
rate, chance-corrected statistics with question-level bootstrap intervals, the direction of the
errors (false pass / false fail against the human majority), the human-human ceiling on the same
items, breakdowns that show where disagreement concentrates, and whether it moves the scores.
The statistics live in stats/agreement.py; this module only matches items and groups them.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_engine.datatypes import Criterion
from rubric_engine.errors import ConfigError
from rubric_engine.stats import agreement as st
from rubric_engine.stats.lengths import spearman
from rubric_engine.store.layout import write_json, write_text
from rubric_engine.validity.items import RunItems, load_items
from rubric_engine.validity.labels import LabelSet, read_labels
from rubric_engine.validity.replyscore import ReplyScorer

__all__ = ["compute_agreement", "agree_command", "BREAKDOWNS", "MAJORITY", "USAGE"]

MAJORITY = "human majority"
BREAKDOWNS = ("ability", "dimension", "subset", "candidate", "weight_sign", "reply_length")
USAGE = """usage: rubric-engine agree RUN_DIR [RUN_DIR ...] labels=FILE[,FILE...] [out=DIR]
                            [by=[FIELD,...]] [n_boot=1000] [seed=0]

Compare every judge in the runs with every human rater and with each other, on the items both
labelled, and write agreement.json, agreement.md and agreement.html to out= (default:
RUN_DIR/agreement).
labels= files: the JSONL saved by review.html, the filled review.csv, or any JSONL/CSV with
QUESTION-ID, criterion_index, rater, met (QUESTION-ID: the benchmark's id field; met: 1/0/true/false/yes/no; blank and unsure are
counted, not used). by= adds breakdowns by further item fields (e.g. tags) to the built-in
ability, dimension, subset, candidate, weight sign and reply-length tercile.
"""


def _terciles(data: RunItems, keys: Sequence[str]) -> dict[str, str]:
    """Reply-length tercile name per item key, cut on the lengths of the distinct replies compared."""
    lengths = {(data.items[k].qid, data.items[k].reply_id): data.items[k].fields["reply_length"] for k in keys}
    if not lengths:
        return {}
    lo, hi = (float(x) for x in np.quantile(np.array(list(lengths.values()), dtype=float), [1 / 3, 2 / 3]))
    names = (f"short (<= {lo:.0f} chars)", f"medium ({lo:.0f}-{hi:.0f} chars)", f"long (> {hi:.0f} chars)")
    out = {}
    for k in keys:
        n = data.items[k].fields["reply_length"]
        out[k] = names[0] if n <= lo else (names[1] if n <= hi else names[2])
    return out


def _group_values(data: RunItems, key: str, field: str, terciles: dict[str, str]) -> list[str]:
    if field == "reply_length":
        return [terciles[key]]
    v = data.items[key].fields.get(field)
    if v is None:
        return []
    return [str(x) for x in v] if isinstance(v, list) else [str(v)]


def _pair(a: dict[str, bool], b: dict[str, bool], data: RunItems, n_boot: int, seed: int,
          keys: Sequence[str] | None = None) -> dict[str, Any]:
    common = [k for k in (keys if keys is not None else a) if k in a and k in b]
    clusters = [data.items[k].qid for k in common]
    _, tables = st.cluster_tables([a[k] for k in common], [b[k] for k in common], clusters)
    return st.pair_summary(tables, n_boot=n_boot, seed=seed)


def _ceiling(humans: dict[str, dict[str, bool]], keys: Sequence[str], data: RunItems, n_boot: int,
             seed: int) -> dict[str, Any] | None:
    """Human-human agreement on these items: all pairs of raters pooled into one table per question."""
    raters = [r for r in humans if any(k in humans[r] for k in keys)]
    if len(raters) < 2:
        return None
    pooled: dict[str, np.ndarray] = {}
    for r1, r2 in itertools.combinations(raters, 2):
        common = [k for k in keys if k in humans[r1] and k in humans[r2]]
        names, tables = st.cluster_tables([humans[r1][k] for k in common], [humans[r2][k] for k in common],
                                          [data.items[k].qid for k in common])
        for q, t in zip(names, tables):
            pooled[q] = pooled.get(q, np.zeros(4)) + t
    if not pooled:
        return None
    s = st.pair_summary(np.array(list(pooled.values())), n_boot=n_boot, seed=seed)
    return {k: s[k] for k in ("n", "raw", "cohen_kappa", "gwet_ac1", "krippendorff_alpha", "ci")}


def _score_level(data: RunItems, judge: dict[str, bool], ref: dict[str, bool], n_boot: int, seed: int) -> dict[str, Any]:
    """Question scores from the human majority vs from the judge, on replies whose items all have both."""
    scorer = ReplyScorer.from_spec(data.spec)  # the spec's declared formula, rules and aggregation
    scale = scorer.scale
    replies: dict[tuple[str, str], list[str]] = {}
    for k, it in data.items.items():
        replies.setdefault((it.qid, it.reply_id), []).append(k)
    pairs: dict[str, list[tuple[float, float]]] = {}
    per_candidate: dict[str, list[tuple[float, float]]] = {}
    for (qid, rid), keys in replies.items():
        if not all(k in judge and k in ref for k in keys):
            continue
        items = sorted((data.items[k] for k in keys), key=lambda i: i.criterion_index)
        crits = [Criterion(index=i.criterion_index, label=i.label, weight=i.weight, text=i.text, ability=i.ability,
                           rule=i.rule) for i in items]
        try:
            js = scorer.score(crits, [judge[i.key] for i in items]).score
            hs = scorer.score(crits, [ref[i.key] for i in items]).score
        except ValueError:
            continue
        if js is None or hs is None:  # no positive points under no_positive_points: exclude
            continue
        j, h = js * scale, hs * scale
        pairs.setdefault(qid, []).append((j, h))
        for cand in data.candidates.get(f"{qid}@{rid}", []):
            per_candidate.setdefault(cand, []).append((j, h))
    flat = [p for v in pairs.values() for p in v]
    out: dict[str, Any] = {"replies": len(flat), "scale": scale,
                           "mean_difference": st.mean_difference(pairs, n_boot, seed),
                           "spearman": spearman([p[0] for p in flat], [p[1] for p in flat])}
    out["candidates"] = {c: {"replies": len(v), "judge": float(np.mean([p[0] for p in v])),
                             "human": float(np.mean([p[1] for p in v]))} for c, v in sorted(per_candidate.items())}
    cands = list(out["candidates"].values())
    out["kendall_tau"] = (st.kendall_tau([c["judge"] for c in cands], [c["human"] for c in cands])
                          if len(cands) >= 3 else None)
    if not flat:
        out["note"] = ("no reply has every criterion labelled by a human majority and judged; export with "
                       "unit=reply to label whole replies")
    elif len(cands) < 3:
        out["note_ranking"] = "fewer than 3 candidates with fully labelled replies: no ranking comparison"
    return out


def _disputed(data: RunItems, judge: dict[str, bool], ref: dict[str, bool], top: int = 10) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for k in judge:
        if k not in ref:
            continue
        it = data.items[k]
        r = rows.setdefault(it.text, {"criterion": it.text, "question": it.qid,
                                      "ability": it.fields.get("ability"), "n": 0, "false_pass": 0, "false_fail": 0})
        r["n"] += 1
        r["false_pass"] += int(judge[k] and not ref[k])
        r["false_fail"] += int(ref[k] and not judge[k])
    out = [dict(r, disagreements=r["false_pass"] + r["false_fail"]) for r in rows.values()]
    out = [r for r in out if r["disagreements"]]
    out.sort(key=lambda r: (-r["disagreements"], -r["disagreements"] / r["n"], r["criterion"]))
    return out[:top]


def compute_agreement(data: RunItems, labels: LabelSet, n_boot: int = 1000, seed: int = 0,
                      by: Sequence[str] = ()) -> dict[str, Any]:
    """Everything agreement.json holds, from items, judges' verdicts and human labels."""
    humans: dict[str, dict[str, bool]] = {}
    for lab in labels.labels:
        humans.setdefault(lab.rater, {})[lab.key] = lab.met
    judges: dict[str, dict[str, bool]] = {}
    judge_failed: Counter = Counter()
    for v in data.verdicts:
        if v.hit is None:
            judge_failed[v.rater] += 1
        else:
            judges.setdefault(v.rater, {})[v.key] = v.hit
    labelled = sorted({k for h in humans.values() for k in h})
    ties = 0
    ref: dict[str, bool] = {}
    for k in labelled:
        m = st.majority([h[k] for h in humans.values() if k in h])
        if m is None:
            ties += 1
        else:
            ref[k] = m
    warnings = labels.warnings()
    if not labels.labels:
        raise ConfigError(f"agree: no usable label in the labels files ({sum(labels.blank.values())} blank, "
                          f"{sum(labels.unsure.values())} unsure)")
    if not any(k in j for j in judges.values() for k in ref):
        raise ConfigError("agree: no item is both labelled by the humans and judged in these runs "
                          "(judge errors on every labelled item, or labels tied); nothing to compare")
    if ties:
        warnings.append(f"{ties} item(s) with a tie between human raters have no majority and are left out "
                        "of the judge-vs-majority comparison")
    for r, n in sorted(judge_failed.items()):
        warnings.append(f"{r}: {n} item(s) with a failed judge call are not compared")
    pairs = []
    for j in sorted(judges):
        pairs.append({"a": j, "b": MAJORITY, **_pair(judges[j], ref, data, n_boot, seed, labelled)})
        for h in sorted(humans):
            pairs.append({"a": j, "b": h, **_pair(judges[j], humans[h], data, n_boot, seed, labelled)})
    for h1, h2 in itertools.combinations(sorted(humans), 2):
        pairs.append({"a": h1, "b": h2, **_pair(humans[h1], humans[h2], data, n_boot, seed)})
    for j1, j2 in itertools.combinations(sorted(judges), 2):
        pairs.append({"a": j1, "b": j2, **_pair(judges[j1], judges[j2], data, n_boot, seed)})
    for p in pairs:
        if p["a"] in judges and p["b"] in (MAJORITY, *humans):
            p["ceiling"] = _ceiling(humans, [k for k in labelled if k in judges[p["a"]]], data, n_boot, seed)
    raters = sorted(humans)
    matrix = np.array([[humans[r].get(k, np.nan) for k in labelled] for r in raters], dtype=float)
    human_block = {"raters": raters, "items": len(labelled), "items_with_2plus": int(np.sum(np.sum(np.isfinite(matrix), 0) >= 2)),
                   "ties": ties, **st.multi_rater_alpha(matrix, [data.items[k].qid for k in labelled], n_boot, seed)}
    if len(raters) < 2:
        human_block["note"] = "one rater: no human-human agreement, so no ceiling; the majority is that rater"
    terciles = _terciles(data, labelled)
    fields = [*BREAKDOWNS, *[f for f in by if f not in BREAKDOWNS]]
    known = {f for it in data.items.values() for f in it.fields}
    unknown = [f for f in fields if f not in known and f != "reply_length"]
    if unknown:
        raise ConfigError(f"agree: by={','.join(unknown)}: no item has this field; fields: {', '.join(sorted(known))}")
    by_out: dict[str, Any] = {}
    score_level: dict[str, Any] = {}
    disputed: dict[str, Any] = {}
    for j in sorted(judges):
        keys = [k for k in labelled if k in judges[j] and k in ref]
        groups: dict[str, dict[str, list[str]]] = {f: {} for f in fields}
        for k in keys:
            for f in fields:
                for v in _group_values(data, k, f, terciles):
                    groups[f].setdefault(v, []).append(k)
        by_out[j] = {f: {v: {"label": data.taxonomy.label(v) if f in ("ability", "dimension") else v,
                             **_pair(judges[j], ref, data, n_boot, seed, ks),
                             "ceiling": _ceiling(humans, ks, data, n_boot, seed)}
                         for v, ks in sorted(g.items())} for f, g in groups.items()}
        score_level[j] = _score_level(data, judges[j], ref, n_boot, seed)
        disputed[j] = _disputed(data, judges[j], ref)
    result = {"benchmark": data.benchmark, "sheets": sorted(labels.sheets), "raters": {"humans": raters, "judges": sorted(judges)},
              "pairs": pairs, "humans": human_block, "by": by_out, "score_level": score_level, "disputed": disputed,
              "warnings": warnings, "settings": {"n_boot": n_boot, "seed": seed, "interval": "95% percentile, "
                                                 "bootstrap resampling questions"}}
    from rubric_engine.validity.agree_report import headline

    result["headline"] = {j: headline(result, j) for j in sorted(judges)}
    return result


def agree_command(dirs: Sequence[Path], label_files: Sequence[Path], out: Path, n_boot: int = 1000, seed: int = 0,
                  by: Sequence[str] = ()) -> dict[str, Any]:
    """Read runs and labels, compute, write agreement.json and agreement.md to `out`."""
    from rubric_engine.validity.agree_report import render_html, render_markdown

    data = load_items(dirs)
    labels = read_labels(label_files, data)
    result = compute_agreement(data, labels, n_boot=n_boot, seed=seed, by=by)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "agreement.json", result)
    markdown = render_markdown(result)
    write_text(out / "agreement.md", markdown)
    write_text(out / "agreement.html", render_html(markdown, f"Judge-human agreement: {data.benchmark}"))
    return result

