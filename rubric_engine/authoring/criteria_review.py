"""`rubric-engine review criteria` and `review merge`: experts accept, edit or reject drafted criteria.

Why: a drafted criterion (authoring/draft.py) reaches a benchmark's data only here. `review criteria` writes one
CSV sheet per expert (UTF-8 with BOM) and a page experts can work in offline instead (authoring/criteria_page.py,
which saves the same CSV), all carrying a sheet id fixed by the drafts file's bytes. `review merge` reads several
experts' sheets, refuses a sheet of another drafts file or version (nothing written), keeps a criterion by the
declared rule (majority: more than half of the experts accept or edit it; all: every expert does; an expert who
left it undecided does not keep it), reports how far the experts agreed (percent agreement over expert pairs and
Krippendorff's alpha, nominal, over keep/reject) and writes the kept criteria, as edited, into a NEW data file
beside the original, never over it.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from rubric_engine.authoring.criteria_page import render_criteria_page
from rubric_engine.authoring.draft import POLARITIES, drafts_sha, read_drafts
from rubric_engine.errors import ConfigError, DataError
from rubric_engine.store.layout import write_json, write_text
from rubric_engine.text.csvcells import cell_value, csv_row

__all__ = ["COLUMNS", "DECISIONS", "RULES", "export_criteria_sheets", "merge_sheets", "agreement"]

COLUMNS = ("sheet_id", "key", "id", "text", "weight", "group", "polarity", "reason", "decision", "expert", "note")
DECISIONS = ("accept", "edit", "reject")
RULES = ("majority", "all")
FontFace = Callable[[str], "tuple[str, str]"]


def _sheet_id(drafts: Path) -> str:
    return "C" + drafts_sha(drafts)[:12]


def _csv(sid: str, rows: Sequence[dict[str, Any]], expert: str) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow(csv_row([sid, r["key"], r["id"], r["text"], r["weight"], r["group"] or "", r["polarity"],
                            r["reason"], "", expert, ""]))
    return buf.getvalue()


def export_criteria_sheets(drafts: Path, experts: Sequence[str], out: Path,
                           font_face: FontFace | None = None) -> dict[str, Any]:
    """One CSV per expert (criteria-EXPERT.csv), criteria.html and sheet.json in `out`; refuses to replace a sheet."""
    from rubric_engine.dataset.load import load_dataset
    from rubric_engine.spec.load import load_spec

    rows, meta = read_drafts(drafts)
    if not rows:
        raise ConfigError(f"review criteria: {drafts} holds no drafted criterion; run `rubric-engine draft` first")
    if (out / "sheet.json").exists():
        raise ConfigError(f"review criteria: {out} already holds a sheet (perhaps with decisions); choose another out=")
    spec = load_spec(Path(meta["spec_dir"]))
    ds = load_dataset(spec, meta["data"])
    asked = {r["id"] for r in rows}
    dialogues = {q.id: [(t.role, t.content) for t in q.dialogue] for q in ds.questions if q.id in asked}
    sid = _sheet_id(drafts)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for expert in experts:
        path = out / f"criteria-{expert}.csv"
        write_text(path, _csv(sid, rows, expert), bom=True)
        files.append(str(path))
    write_text(out / "criteria.html", render_criteria_page(sid, meta["benchmark"], rows, dialogues, font_face))
    sheet = {"sheet_id": sid, "drafts": str(drafts.resolve()), "drafts_sha256": drafts_sha(drafts),
             "experts": list(experts), "criteria": len(rows), "sheets": files}
    write_json(out / "sheet.json", sheet)
    return sheet


# ------------------------------------------------------------------------------------------------------ merge

def _read_sheet(path: Path) -> list[tuple[int, dict[str, str]]]:
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            reader = csv.reader(fh)
            table = [(reader.line_num, [str(cell_value(c)) for c in rec]) for rec in reader]
    except (OSError, csv.Error) as exc:
        raise DataError(str(path), f"cannot read the sheet ({exc})") from None
    if not table or tuple(c.strip() for c in table[0][1]) != COLUMNS:
        raise DataError(str(path), "the header must be " + ",".join(COLUMNS), line=1,
                        fix="start from a sheet `rubric-engine review criteria` wrote")
    return [(n, dict(zip(COLUMNS, rec))) for n, rec in table[1:] if any(c.strip() for c in rec)]


def agreement(decisions: dict[str, dict[str, bool]]) -> dict[str, Any]:
    """Keep/reject agreement: key -> expert -> kept. Percent agreement is the share of agreeing expert pairs over
    every criterion two or more experts decided; alpha is Krippendorff's (nominal, missing allowed)."""
    import numpy as np

    from rubric_engine.stats.agreement import krippendorff_alpha

    experts = sorted({x for d in decisions.values() for x in d})
    agree = pairs = 0
    for d in decisions.values():
        for a, b in combinations(sorted(d), 2):
            pairs, agree = pairs + 1, agree + int(d[a] == d[b])
    m = np.array([[float(d[x]) if x in d else np.nan for d in decisions.values()] for x in experts], dtype=float)
    return {"experts": experts, "criteria": len(decisions), "pairs": pairs,
            "percent_agreement": None if not pairs else agree / pairs,
            "krippendorff_alpha": krippendorff_alpha(m) if len(experts) > 1 else None}


def _chosen(votes: Sequence[dict[str, str]], draft: dict[str, Any], name: str) -> str:
    """The value most accepting experts wrote; a tie goes to the draft's own value when tied, else the first."""
    counts = Counter(v[name].strip() for v in votes)
    top = max(counts.values())
    tied = [v for v in counts if counts[v] == top]
    original = str(draft[name] if draft[name] is not None else "")
    return original if original in tied else next(v[name].strip() for v in votes if v[name].strip() in tied)


def merge_sheets(sheets: Sequence[Path], rule: str, into: Path | None = None,
                 sheet_dir: Path | None = None) -> dict[str, Any]:
    """Merge experts' sheets by `rule`; write kept criteria into a new data file; return the merge report."""
    if rule not in RULES:
        raise ConfigError(f"review merge: rule={rule!r}; use rule=majority or rule=all")
    read = [(p, _read_sheet(p)) for p in sheets]
    ids = {r["sheet_id"].strip() for _, rows in read for _, r in rows}
    meta_file = sheet_dir / "sheet.json" if sheet_dir else sheets[0].parent / "sheet.json"
    if not meta_file.is_file():
        raise DataError(str(meta_file), "no sheet.json here", fix="pass sheet=DIR, the directory `review criteria` "
                        "wrote (sheets saved from criteria.html land elsewhere)")
    sheet = json.loads(meta_file.read_text(encoding="utf-8"))
    drafts = Path(sheet["drafts"])
    current = _sheet_id(drafts) if drafts.is_file() else None
    if ids != {sheet["sheet_id"]} or current != sheet["sheet_id"]:
        raise DataError(str(sheets[0]), f"the sheet(s) carry {', '.join(sorted(ids)) or 'no sheet id'} but the "
                        f"drafts file {drafts} is now {current or 'missing'}: a sheet of another drafts file or version",
                        fix="export fresh sheets with `rubric-engine review criteria` and review those; nothing written")
    rows, meta = read_drafts(drafts)
    by_key = {r["key"]: r for r in rows}
    votes: dict[str, dict[str, dict[str, str]]] = {k: {} for k in by_key}
    experts: dict[str, Path] = {}  # every sheet's expert counts, decided or not: a blank decision keeps nothing
    for path, table in read:
        for n, r in table:
            key, decision, expert = r["key"].strip(), r["decision"].strip().lower(), r["expert"].strip()
            if key not in by_key:
                raise DataError(str(path), f"criterion {key!r} is not in the drafts", line=n)
            if decision not in DECISIONS and decision:
                raise DataError(str(path), f"decision {decision!r} must be accept, edit or reject", line=n)
            if not expert:
                raise DataError(str(path), "the expert column is empty", line=n, fix="write your name")
            if experts.setdefault(expert, path) != path:
                raise DataError(str(path), f"expert {expert!r} also filled {experts[expert]}", line=n,
                                fix="give each expert's sheet once (one vote per expert)")
            if decision:
                votes[key][expert] = r
    kept_votes = {k: {x: r["decision"].strip().lower() != "reject" for x, r in v.items()} for k, v in votes.items()}
    need = (lambda yes: yes * 2 > len(experts)) if rule == "majority" else (lambda yes: yes == len(experts))
    kept = [k for k in by_key if need(sum(kept_votes[k].values()))]
    merged = [_merged(by_key[k], [r for r in votes[k].values() if r["decision"].strip().lower() != "reject"])
              for k in kept]
    target = _write_data(meta, merged, into)
    report = {"rule": rule, "experts": sorted(experts), "drafted": len(by_key), "kept": len(kept),
              "kept_keys": kept, "agreement": agreement({k: v for k, v in kept_votes.items() if v}),
              "into": str(target), "sheet_id": sheet["sheet_id"]}
    write_json(target.with_suffix(".merge.json"), report)
    return report


def _merged(draft: dict[str, Any], votes: Sequence[dict[str, str]]) -> dict[str, Any]:
    out = {name: _chosen(votes, draft, name) for name in ("text", "weight", "group", "polarity")}
    if out["polarity"] not in POLARITIES:
        raise DataError(draft["key"], f"polarity {out['polarity']!r} must be positive or pitfall")
    try:
        weight = float(out["weight"])
    except ValueError:
        raise DataError(draft["key"], f"weight {out['weight']!r} is not a number") from None
    weight = -abs(weight) if out["polarity"] == "pitfall" else abs(weight)
    return {**out, "id": draft["id"], "weight": int(weight) if weight.is_integer() else weight}


def _write_data(meta: dict[str, Any], merged: Sequence[dict[str, Any]], into: Path | None) -> Path:
    """The original data file's rows with the kept criteria appended to their question's rubric, as a new file."""
    from rubric_engine.dataset.load import sha256_file
    from rubric_engine.spec.load import load_spec

    source = Path(meta["data"])
    target = into or source.with_name(f"{source.stem}.reviewed{source.suffix}")
    if target.resolve() == source.resolve() or target.exists():
        raise ConfigError(f"review merge: {target} exists (or is the original data); choose a new into=FILE")
    if sha256_file(source) != meta["data_sha256"]:
        raise DataError(str(source), "the data changed since the criteria were drafted from it",
                        fix="draft again from this data (`rubric-engine draft`) and review those drafts")
    f = load_spec(Path(meta["spec_dir"])).data.fields
    raw = [json.loads(x) for x in source.read_text(encoding="utf-8-sig").splitlines() if x.strip()]
    for row in raw:
        for c in (c for c in merged if c["id"] == str(row[f.id])):
            item = {f.item_text: c["text"], f.item_weight: c["weight"]}
            if f.item_label and c["group"]:
                item[f.item_label] = c["group"]
            row[f.rubric].append(item)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text(target, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in raw))
    return target
