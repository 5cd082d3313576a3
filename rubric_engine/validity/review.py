"""`rubric-engine review export`: draw a stratified, blind sample of items for human review.

Why: the judge is only as trustworthy as its agreement with people, and people can label only a
few hundred items. The sample is stratified (by ability and subset by default) so that every
ability is represented, deterministic for a given seed, and written as a self-contained HTML page
plus a CSV (UTF-8 with BOM, so Excel reads Chinese) that carry the same sheet id. The CSV holds on every row the
question's dialogue and the reply under review, so a rater can label in a spreadsheet alone; a cell longer than a
spreadsheet keeps (Excel: 32,767 characters) is cut with a marker saying how much and where the whole text is.
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError
from rubric_engine.store.layout import write_json, write_text
from rubric_engine.text.csvcells import csv_row
from rubric_engine.validity.items import Item, RunItems, load_items
from rubric_engine.validity.review_page import FontFace, ReviewCriterion, ReviewQuestion, render_review_page

__all__ = ["sample_items", "sheet_id", "export_review", "csv_columns", "USAGE"]

def csv_columns(id_field: str) -> list[str]:
    """The review CSV header; the question column is the benchmark's own id field."""
    return ["sheet_id", "item_key", id_field, "dialogue", "reply", "criterion_index", "criterion", "weight", "met",
            "rater", "note"]


CELL_MAX = 32_000  # under Excel's 32,767 characters per cell, room left for the marker


def _cell_text(text: str) -> str:
    """A long text cut to what a spreadsheet cell holds, with a marker naming the cut (never silently)."""
    if len(text) <= CELL_MAX:
        return text
    return text[:CELL_MAX] + f"\n[... {len(text) - CELL_MAX} more characters cut here; the whole text is in review.html]"


def _dialogue_text(turns: Sequence[tuple[str, str, str]]) -> str:
    """The dialogue as one cell: `Kind (role): text` per turn, as the review page labels them, blank lines between."""
    return "\n\n".join(f"{kind.capitalize() or 'Turn'} ({role}): {text}" for role, kind, text in turns)
USAGE = """usage: rubric-engine review export RUN_DIR [RUN_DIR ...] [n=100] [seed=0]
                                   [stratify=[ability,subset]] [unit=item|reply] [out=DIR] [force=true]

Draw a stratified random sample of (question, criterion) items from one or more run directories
(several candidates, several judges) and write a blind review sheet to out= (default: review/):
  review.html  open it from disk, label each item Met / Not met / Unsure, Save labels
  review.csv   the same items for a spreadsheet (UTF-8 with BOM), each row with the question's
               dialogue and the reply under review; fill `met` and `rater`
  sheet.json   what was sampled, from which runs, with which seed
stratify= any item field: ability, dimension, subset, scenario, weight_sign, candidate, or a
field the data carries. unit=reply samples whole replies (all their criteria), which is what
score-level agreement needs. A directory already holding a sheet is refused (its labels would be
lost): choose another out=, or force=true to replace it.
Then: rubric-engine agree RUN_DIR ... labels=FILE[,FILE...]
"""


def _stratum(item: Item, keys: Sequence[str]) -> tuple[str, ...]:
    out = []
    for k in keys:
        v = item.fields.get(k)
        out.append("+".join(map(str, v)) if isinstance(v, list) else str(v))
    return tuple(out)


def _allocate(sizes: dict[Any, int], n: int) -> dict[Any, int]:
    """Proportional quotas (largest remainder), at least one per stratum when n allows."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    exact = {s: n * k / total for s, k in sizes.items()}
    quota = {s: int(x) for s, x in exact.items()}
    for s in sorted(sizes, key=lambda s: -(exact[s] - quota[s]))[: n - sum(quota.values())]:
        quota[s] += 1
    if n >= len(sizes):
        for s in [s for s in sizes if quota[s] == 0]:
            donor = max(quota, key=lambda d: quota[d])
            quota[donor] -= 1
            quota[s] = 1
    return quota


def sample_items(items: Sequence[Item], n: int, seed: int, stratify: Sequence[str], unit: str = "item") -> list[Item]:
    """A deterministic stratified sample of n items (unit=item) or n whole replies (unit=reply)."""
    known = sorted({k for it in items for k in it.fields})
    for k in stratify:
        if k not in known:
            raise ConfigError(f"review export: cannot stratify by {k!r}: no item has it; fields: {', '.join(known)}")
    units: dict[str, list[Item]] = {}
    for it in items:
        units.setdefault(it.key if unit == "item" else f"{it.qid}@{it.reply_id}", []).append(it)
    strata: dict[tuple[str, ...], list[str]] = {}
    for ukey, members in units.items():
        values = {_stratum(m, stratify) for m in members}
        if len(values) > 1:
            raise ConfigError(f"review export: unit=reply cannot be stratified by {', '.join(stratify)}: "
                              "it varies within a reply; use reply-level fields such as subset or candidate")
        strata.setdefault(values.pop(), []).append(ukey)
    rng = random.Random(seed)
    chosen: set[str] = set()
    quotas = _allocate({s: len(v) for s, v in strata.items()}, n)
    for s in sorted(strata):
        chosen.update(rng.sample(sorted(strata[s]), quotas[s]))
    return [it for ukey, members in units.items() if ukey in chosen for it in members]


def sheet_id(benchmark: str, keys: Sequence[str]) -> str:
    """A short id fixed by the benchmark and the sampled item keys: labels find their sheet by it."""
    digest = hashlib.sha256("\n".join([benchmark, *sorted(keys)]).encode("utf-8")).hexdigest()
    return f"S{digest[:12]}"


def _questions(data: RunItems, picked: Sequence[Item]) -> list[ReviewQuestion]:
    groups: dict[tuple[str, str], list[Item]] = {}
    for it in picked:
        groups.setdefault((it.qid, it.reply_id), []).append(it)
    return [ReviewQuestion(qid=qid, dialogue=data.dialogues.get(qid, []), reply=data.replies[(qid, rid)],
                           criteria=[ReviewCriterion(it.key, it.criterion_index, it.text, it.weight)
                                     for it in sorted(members, key=lambda i: i.criterion_index)])
            for (qid, rid), members in groups.items()]


def _csv(sid: str, questions: Sequence[ReviewQuestion], id_field: str) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(csv_columns(id_field))
    for q in questions:
        dialogue, reply = _cell_text(_dialogue_text(q.dialogue)), _cell_text(q.reply)  # on every row: rows stand alone
        for c in q.criteria:
            weight = "" if c.weight is None else (int(c.weight) if float(c.weight).is_integer() else c.weight)
            w.writerow(csv_row([sid, c.key, q.qid, dialogue, reply, c.index, c.text, weight, "", "", ""]))
    return buf.getvalue()


SHEET_FILES = ("review.html", "review.csv", "sheet.json")


def export_review(dirs: Sequence[Path], out: Path, n: int = 100, seed: int = 0,
                  stratify: Sequence[str] = ("ability", "subset"), unit: str = "item",
                  force: bool = False, font_face: FontFace | None = None) -> dict[str, Any]:
    """Write review.html, review.csv and sheet.json to `out` (each atomically); returns what sheet.json holds.
    A sheet already there may hold people's labels: it is replaced only with `force`. `font_face` embeds the
    page's CJK glyphs (review_page.render_review_page)."""
    if unit not in ("item", "reply"):
        raise ConfigError(f"review export: unit={unit!r}; use unit=item or unit=reply")
    there = [f for f in SHEET_FILES if (out / f).exists() or (out / f).is_symlink()]
    if there and not force:
        raise ConfigError(f"review export: {out} already holds a review sheet ({', '.join(there)}), perhaps with "
                          "labels; choose another out=DIR, or pass force=true to replace it")
    data = load_items(dirs)
    if not data.items:
        raise ConfigError("review export: the runs hold no judged item to review" + (
            " (every item is checked by the engine: no judge verdict to compare with people)" if data.replies
            else " (every candidate call failed?)"))
    picked = sample_items(list(data.items.values()), n, seed, stratify, unit)
    sid = sheet_id(data.benchmark, [it.key for it in picked])
    questions = _questions(data, picked)
    out.mkdir(parents=True, exist_ok=True)
    lang = str(data.spec.get("locale") or "en")
    write_text(out / "review.html", render_review_page(sid, data.benchmark, questions, lang, data.id_field,
                                                          font_face))
    write_text(out / "review.csv", _csv(sid, questions, data.id_field), bom=True)
    sheet = {"sheet_id": sid, "benchmark": data.benchmark, "n": len(picked), "unit": unit, "seed": seed,
             "stratify": list(stratify), "runs": [str(r.dir) for r in data.runs],
             "items": [it.key for it in picked], "replies": len(questions)}
    write_json(out / "sheet.json", sheet)
    return sheet

