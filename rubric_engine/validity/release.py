"""`rubric-engine release`: the human blind test before a benchmark version is released, and its check.

Why: a rubric is only as good as the judge that applies it; a published benchmark was released
only after people, blind to the judge, agreed with it on at least 75% of sampled items. Without labels= the command writes the blind sheet:
`review export`'s sheet (validity/review.export_review) with unit=reply (every criterion of a sampled reply)
stratified by candidate and subset, plus the spec version it was drawn for. With labels= it checks: the
labels must be of that sheet and that version, the runs of the spec's current version; the agreement is
`agree`'s (validity/agree.compute_agreement: each judge's raw agreement with the human majority), and it
passes when every judge reaches the threshold. A pass writes RELEASE-<version>.md into the spec directory,
never over an existing note of that version. Every refusal happens before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError
from rubric_engine.store.layout import write_json, write_text
from rubric_engine.validity.agree import MAJORITY, compute_agreement
from rubric_engine.validity.items import RunItems, load_items
from rubric_engine.validity.labels import read_labels
from rubric_engine.validity.review import export_review

__all__ = ["release_sheet", "release_check", "sheet_dir", "note_path", "STRATIFY", "USAGE"]

STRATIFY = ("candidate", "subset")  # the blind sheet covers every model and every question group

USAGE = """usage: rubric-engine release benchmark=NAME|DIR runs=DIR[,DIR...] [n=60] [seed=0] [sheet=DIR]
       rubric-engine release benchmark=NAME|DIR runs=DIR[,DIR...] labels=FILE[,FILE...] [sheet=DIR]

The release gate. Without labels=: writes the human blind test sheet (review.html, review.csv, sheet.json)
sampled from the pilot runs, whole replies (unit=reply) stratified by candidate and subset, into sheet=
(default SPEC_DIR/release/VERSION). With labels= (filled in from that sheet): each judge's raw agreement with
the human majority (as `agree` computes it) must reach the spec's `release.agreement` (default 0.75);
a pass writes SPEC_DIR/RELEASE-VERSION.md with the numbers (never over an existing one). Exit 0 pass, 1 below the
threshold, 2 bad input (labels of another sheet or version, runs of another version): nothing written.
"""


def sheet_dir(spec_dir: Path, version: str) -> Path:
    return spec_dir / "release" / version


def note_path(spec_dir: Path, version: str) -> Path:
    return spec_dir / f"RELEASE-{version}.md"


def _runs_of(data: RunItems, name: str, version: str) -> None:
    """The runs must be of the spec's current version: agreement on another version's rubric says nothing."""
    if data.benchmark != name:
        raise ConfigError(f"release: the runs are of benchmark {data.benchmark!r}, not {name!r}; pass the pilot runs "
                          "of this benchmark (nothing was written)")
    theirs = str(data.spec.get("version", ""))
    if theirs != version:
        raise ConfigError(f"release: the runs are of {data.benchmark} version {theirs!r}, the spec is at version "
                          f"{version!r}; run the pilot again on this version (nothing was written)")


def release_sheet(spec_dir: Path, name: str, version: str, runs: Sequence[Path], out: Path, n: int, seed: int) -> dict[str, Any]:
    """Write the blind sheet of whole replies into `out`, recording the version it was drawn for."""
    _runs_of(load_items(runs), name, version)
    sheet = export_review(runs, out, n=n, seed=seed, stratify=STRATIFY, unit="reply")
    sheet["version"] = version
    write_json(out / "sheet.json", sheet)
    return sheet


def _sheet_of(sheet: Path, version: str) -> dict[str, Any]:
    path = sheet / "sheet.json"
    if not path.is_file():
        raise ConfigError(f"release: no release sheet in {sheet}; write it first with `rubric-engine release "
                          "benchmark=... runs=...` (without labels=), or pass sheet=DIR")
    meta = json.loads(path.read_text(encoding="utf-8"))
    if str(meta.get("version")) != version:
        raise ConfigError(f"release: the sheet in {sheet} was drawn for version {meta.get('version')!r}, the spec "
                          f"is at version {version!r}; export a sheet for this version (nothing was written)")
    return meta


def release_check(spec_dir: Path, name: str, version: str, runs: Sequence[Path], label_files: Sequence[Path], sheet: Path,
                  threshold: float) -> dict[str, Any]:
    """Check the labels against the judge; on a pass write the release note. Returns the numbers."""
    meta = _sheet_of(sheet, version)
    note = note_path(spec_dir, version)
    if note.exists():
        raise ConfigError(f"release: {note} already exists; version {version} was released; raise the spec's "
                          "version for a new release (nothing was written)")
    data = load_items(runs)
    _runs_of(data, name, version)
    labels = read_labels(label_files, data)
    other = sorted(labels.sheets - {meta["sheet_id"]})
    if other or not labels.sheets:
        raise ConfigError(f"release: the labels are of sheet {', '.join(other) or '(none named)'}, the release sheet "
                          f"of version {version} is {meta['sheet_id']}; label that sheet ({sheet / 'review.html'}) "
                          "(nothing was written)")
    result = compute_agreement(data, labels, n_boot=200)
    judges = {p["a"]: p for p in result["pairs"] if p["b"] == MAJORITY}
    passed = bool(judges) and all(p["raw"] is not None and p["raw"] >= threshold for p in judges.values())
    out = {"benchmark": data.benchmark, "version": version, "sheet_id": meta["sheet_id"], "threshold": threshold,
           "passed": passed, "raters": result["raters"]["humans"],
           "judges": {j: {"agreement": p["raw"], "items": p["n"], "questions": p["questions"],
                          "cohen_kappa": p["cohen_kappa"]} for j, p in sorted(judges.items())},
           "warnings": result["warnings"], "note": str(note) if passed else None}
    if passed:
        write_text(note, _note(out, result))
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _note(out: dict[str, Any], result: dict[str, Any]) -> str:
    lines = [f"# {out['benchmark']} {out['version']}: release note", "",
             f"Human blind test: sheet {out['sheet_id']}, {len(out['raters'])} rater(s) "
             f"({', '.join(out['raters'])}); required judge-human agreement {_pct(out['threshold'])}.", "",
             "| judge | agreement with the human majority | items | questions | Cohen's kappa |", "|---|---|---|---|---|"]
    lines += [f"| {j} | {_pct(v['agreement'])} | {v['items']} | {v['questions']} | "
              f"{'n/a' if v['cohen_kappa'] is None else format(v['cohen_kappa'], '.2f')} |" for j, v in out["judges"].items()]
    lines += ["", *[f"{h}" for h in result["headline"].values()]]
    lines += [f"- warning: {w}" for w in out["warnings"]]
    return "\n".join(lines) + "\n"
