"""`rubric-engine lint`: deterministic checks on a benchmark's criteria before anyone pays for a run.

Why: a compound criterion ("acknowledges X and offers Y") is met by half an answer, vague wording lets the
judge decide what "appropriately" means, a near-duplicate counts one behaviour twice, and a criterion about an
inner state ("understands the user") names nothing a reader of the reply can see; these are the criteria a
model learns to exploit. Each is found here from the text alone, with no model: the rules are small tables per
locale (authoring/lint_locales.yaml, `locale_rules`), so a spec in another language adds a row, not code. The raw rows are read (not the
loader's questions) so that a label outside the taxonomy is a finding, not the loader's refusal.
Optional `lint.yaml` in the spec directory declares what a spec allows: `weights: {min: A, max: B}` (no range
check without it) and `near_duplicate: 0.8` (the character n-gram Jaccard similarity counted as a near-duplicate).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError

__all__ = ["Finding", "LocaleRules", "locale_rules", "LINT_FILE", "lint_spec", "lint_rows", "normalised",
           "similarity", "rules_for"]

LINT_FILE = "lint.yaml"
DEFAULT_NEAR = 0.8


@dataclass(frozen=True)
class LocaleRules:
    """One locale's tables: `compound` joins two demands, `vague` words leave the judge to decide, `inner` opens a
    criterion about a state of mind rather than something written; `ngram` is the similarity's character n."""
    compound: str
    vague: str
    inner: str
    ngram: int


LOCALES_FILE = "lint_locales.yaml"  # the word tables, shipped beside this module


@lru_cache(maxsize=1)
def locale_rules() -> dict[str, LocaleRules]:
    """Every locale's tables, read once from the shipped file (data, not code: a new language adds an entry)."""
    from importlib.resources import files

    import yaml

    text = files(__package__ or "rubric_engine.authoring").joinpath(LOCALES_FILE).read_text(encoding="utf-8")
    return {name: LocaleRules(str(t["compound"]), str(t["vague"]), str(t["inner"]), int(t["ngram"]))
            for name, t in yaml.safe_load(text).items()}


@dataclass(frozen=True)
class Finding:
    """One defect of one criterion: printed as one line naming the question and the criterion (1-based)."""
    question: str
    criterion: int
    kind: str
    detail: str

    def line(self) -> str:
        return f"{self.question} criterion {self.criterion}: {self.kind}: {self.detail}"


def rules_for(locale: str) -> LocaleRules:
    """The table of `locale` ("zh-CN" -> zh), else English's."""
    rules = locale_rules()
    return rules.get(locale.split("-")[0].split("_")[0].lower(), rules["en"])


def normalised(text: str) -> str:
    """NFKC, case-folded, punctuation and spaces gone: the form duplicates are compared in."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in text if unicodedata.category(ch)[0] in "LN")


def _grams(text: str, n: int) -> set[str]:
    return {text[i:i + n] for i in range(max(len(text) - n + 1, 1))}


def similarity(a: str, b: str, n: int = 3) -> float:
    """Jaccard similarity of the character n-grams of the two normalised texts (1.0: the same text)."""
    ga, gb = _grams(normalised(a), n), _grams(normalised(b), n)
    return len(ga & gb) / len(ga | gb) if ga | gb else 1.0


@dataclass(frozen=True)
class _Item:
    index: int
    text: str
    label: Any
    weight: Any
    checked: bool  # decided by the engine (data.fields.item_check): its text is no instruction to a judge


def _text_findings(qid: str, item: _Item, rules: LocaleRules) -> Iterable[Finding]:
    text = " ".join(item.text.split())
    if not text:
        yield Finding(qid, item.index, "empty", "the criterion has no text")
        return
    if m := re.search(rules.compound, text, re.I):
        yield Finding(qid, item.index, "compound", f"{m.group(0)!r} joins two demands; split it into two criteria")
    if m := re.search(rules.vague, text, re.I):
        yield Finding(qid, item.index, "vague", f"{m.group(0)!r} leaves the judge to decide; say what the reply does")
    if m := re.search(rules.inner, text, re.I):
        yield Finding(qid, item.index, "not observable", f"{m.group(0).strip()!r} names a state of mind; name what "
                      "the reply says or does")


def _duplicates(qid: str, items: Sequence[_Item], n: int, near: float) -> Iterable[Finding]:
    texts = [it for it in items if normalised(it.text)]  # an empty text is its own finding, not a duplicate
    for j, b in enumerate(texts):
        for a in texts[:j]:
            if normalised(a.text) == normalised(b.text):
                yield Finding(qid, b.index, "duplicate", f"same text as criterion {a.index}")
                break
            sim = similarity(a.text, b.text, n)
            if sim >= near:
                yield Finding(qid, b.index, "near-duplicate", f"{sim:.2f} similar to criterion {a.index} "
                              f"(threshold {near:g}); merge them or make them differ")
                break


def _weight_findings(qid: str, item: _Item, bounds: tuple[float, float] | None) -> Iterable[Finding]:
    w = item.weight
    if w is None:
        return
    if isinstance(w, bool) or not isinstance(w, (int, float)):
        yield Finding(qid, item.index, "weight", f"{w!r} is not a number")
    elif bounds and not bounds[0] <= w <= bounds[1]:
        yield Finding(qid, item.index, "weight", f"{w:g} is outside the declared range {bounds[0]:g}..{bounds[1]:g}")


def lint_rows(rows: Iterable[tuple[str, list[Any]]], fields: Any, locale: str, groups: set[str] | None,
              bounds: tuple[float, float] | None = None, near: float = DEFAULT_NEAR) -> list[Finding]:
    """Findings over (question id, rubric items) rows; `groups`: the taxonomy's data labels (None: no taxonomy)."""
    rules, out = rules_for(locale), []
    for qid, rubric in rows:
        items = [_Item(i, str(it.get(fields.item_text) or ""), it.get(fields.item_label) if fields.item_label else None,
                       it.get(fields.item_weight), bool(fields.item_check and it.get(fields.item_check) is not None))
                 for i, it in enumerate(rubric, start=1) if isinstance(it, dict)]
        for item in items:
            if groups is not None and item.label not in groups:
                out.append(Finding(qid, item.index, "group", f"{item.label!r} is not in the taxonomy (known: "
                                   f"{', '.join(sorted(groups))})"))
            out += _weight_findings(qid, item, bounds)
            out += () if item.checked else _text_findings(qid, item, rules)
        out += _duplicates(qid, [it for it in items if not it.checked], rules.ngram, near)
    return sorted(out, key=lambda f: (f.question, f.criterion, f.kind))


def _settings(directory: Path) -> tuple[tuple[float, float] | None, float]:
    from rubric_engine.spec.files import read_bounded_yaml

    file = directory / LINT_FILE
    raw = read_bounded_yaml(file) if file.is_file() else {}
    w, near = raw.get("weights"), raw.get("near_duplicate", DEFAULT_NEAR)
    try:
        bounds = (float(w["min"]), float(w["max"])) if w is not None else None
        near = float(near)
    except (TypeError, KeyError, ValueError):
        raise ConfigError(f"lint: {file}: weights must be {{min: A, max: B}} and near_duplicate a number between 0 "
                          "and 1; fix the file") from None
    if not 0 < near <= 1 or (bounds and bounds[0] > bounds[1]):
        raise ConfigError(f"lint: {file}: near_duplicate must be in (0, 1] and weights.min <= weights.max; fix the file")
    return bounds, near


def _raw_rows(spec: Any, data_path: str | None) -> Iterable[tuple[str, list[Any]]]:
    from rubric_engine.dataset.fetch import fetch
    from rubric_engine.dataset.load import raw_records  # the loader's own reader: JSONL, JSON and CSV alike

    f = spec.data.fields
    local = Path(data_path).expanduser() if data_path else spec.data_path()
    if local is None:
        if not spec.data.url:
            raise ConfigError(f"lint: {spec.name} declares no data; pass data.path=FILE")
        local, _ = fetch(spec.data.url, spec.data.sha256, None, [])
    elif not local.is_file():
        raise ConfigError(f"lint: data file {local} not found; check data.path")
    for n, (_, row) in enumerate(raw_records(Path(local), spec.data.format, f.id), start=1):
        if isinstance(row, dict):
            rubric = row.get(f.rubric)
            yield str(row.get(f.id, f"row {n}")), rubric if isinstance(rubric, list) else []


def lint_spec(spec: Any, data_path: str | None = None) -> list[Finding]:
    """Every finding over a loaded spec's data, with the spec directory's lint.yaml settings."""
    bounds, near = _settings(spec.dir)
    labelled = spec.taxonomy is not None and spec.data.fields.item_label  # no label field: nothing to check
    groups = set(spec.label_to_ability()) | set(spec.label_to_rule()) if labelled else None
    return lint_rows(_raw_rows(spec, data_path), spec.data.fields, spec.locale, groups, bounds, near)
