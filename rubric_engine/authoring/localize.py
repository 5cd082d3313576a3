"""`rubric-engine localize`: translate and culturally adapt a benchmark's data with any LiteLLM model.

Why through the structured-output loop (judge/structured.py, the judge's too): every question is one cached
request, a translation with the wrong shape is re-asked, never cached or written as if it were fine, and an
interrupted run resumes without paying twice, re-asks included. The model returns only texts; ids, roles,
weights, labels and subsets are copied from the source row, so a translation cannot change what is scored.
A human can then edit review.csv and apply it. The command line lives in cli/localize.py.
"""

from __future__ import annotations

import asyncio
import copy
import csv
import io
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.judge.structured import ask_structured
from rubric_engine.judge.verdicts import VerdictError, extract_json
from rubric_engine.store.layout import write_text
from rubric_engine.text.csvcells import cell_value, csv_row

if TYPE_CHECKING:
    from rubric_engine.datatypes import Dataset
    from rubric_engine.models.client import CallStats, ModelClient
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["LocalizeOptions", "TranslationError", "translation_messages", "check_translation", "localize",
           "apply_review", "calls_summary", "REVIEW_COLUMNS", "REPORT_FILE", "REVIEW_FILE"]

REPORT_FILE = "localize_report.json"
REVIEW_FILE = "review.csv"
REVIEW_COLUMNS = ("id", "kind", "index", "source", "translation")
_LANGUAGES = {"en": "English", "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "fr": "French", "de": "German",
              "es": "Spanish", "pt": "Portuguese", "it": "Italian", "nl": "Dutch", "ru": "Russian", "ar": "Arabic",
              "hi": "Hindi", "id": "Indonesian", "vi": "Vietnamese", "th": "Thai", "tr": "Turkish", "pl": "Polish"}


class TranslationError(ValueError):
    """A model's translation has the wrong structure (raised inside accept=, so it is never cached)."""


@dataclass
class LocalizeOptions:
    """What to translate, with which model, where to write (localize_cli.parse_options builds it from argv)."""

    source: str
    target: str
    locale: str | None = None
    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    data_path: str | None = None
    data_cache_dir: str | None = None
    limit: int | None = None
    ids: list[str] | None = None
    out: Path = Path(".")
    review: Path | None = None
    concurrency: int = 8
    rpm: float | None = None
    timeout: float = 120.0
    max_reasks: int = 1  # a translation still malformed after one re-ask is reported, never written
    cache_dir: str | None = None
    benchmark_dirs: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------------------- one translation

def _language(locale: str | None) -> str:
    code = (locale or "").split("-")[0].split("_")[0].lower()
    return _LANGUAGES.get(code, locale or "the source language")


def translation_messages(qid: str, turns: Sequence[tuple[str, str]], criteria: Sequence[tuple[str, Any, str]],
                         source_locale: str | None, target_locale: str) -> list[dict[str, str]]:
    """The one request per question: turns as (role user|other, text), criteria as (label, weight, text)."""
    src, tgt = _language(source_locale), _language(target_locale)
    system = (
        f"You translate evaluation data for a benchmark of conversational AI from {src} into {tgt} and adapt it "
        f"culturally. Each item is a conversation (turns by the user and by another person who spoke earlier) plus "
        f"rubric criteria describing how a reply to the user's last turn should or should not behave. Rewrite every "
        f"text so it reads as if it had been written by and for {tgt}-speaking people: replace names, places, "
        f"institutions, holidays, money, food, idioms and social customs with natural equivalents of the target "
        f"culture, while keeping each turn's meaning, emotional tone and the facts the criteria refer to. Keep the "
        f"criteria consistent with the adapted conversation (when a criterion quotes or mentions a detail of a turn, "
        f"use the same adapted wording). Never add, drop, merge, split or reorder turns or criteria, and never change "
        f"who speaks. Labels and weights are shown only as context and are not translated; a negative weight marks "
        f"a behaviour to avoid, so keep each criterion's polarity.")
    payload = {"id": qid, "source_locale": source_locale, "target_locale": target_locale,
               "turns": [{"n": i, "speaker": role, "text": text} for i, (role, text) in enumerate(turns, 1)],
               "criteria": [{"n": i, "label": lab, "weight": w, "text": text}
                            for i, (lab, w, text) in enumerate(criteria, 1)]}
    user = (f"Translate and adapt into {tgt}:\n{json.dumps(payload, ensure_ascii=False, indent=1)}\n\n"
            f"Answer with one JSON object and nothing else: {{\"turns\": [...], \"criteria\": [...]}} where turns is "
            f"a list of exactly {len(turns)} strings and criteria a list of exactly {len(criteria)} strings, "
            f"in the order given.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _json_object(text: str) -> Any:
    """The answer's JSON, tolerating a code fence or a sentence around the object (the judge's extractor)."""
    try:
        return extract_json(text)
    except VerdictError:
        raise TranslationError("the answer is not a JSON object") from None


def check_translation(text: str, n_turns: int, n_criteria: int) -> tuple[list[str], list[str]]:
    """(turn texts, criterion texts) from a model answer; TranslationError saying exactly what is wrong."""
    obj = _json_object(text)
    if not isinstance(obj, dict):
        raise TranslationError(f"expected a JSON object with 'turns' and 'criteria', got a JSON {type(obj).__name__}")
    out: list[list[str]] = []
    for key, n in (("turns", n_turns), ("criteria", n_criteria)):
        items = obj.get(key)
        if not isinstance(items, list):
            raise TranslationError(f"'{key}' is missing or not a list")
        if len(items) != n:
            raise TranslationError(f"'{key}' has {len(items)} items, expected exactly {n}")
        texts = []
        for i, item in enumerate(items, 1):
            value = item.get("text") if isinstance(item, dict) else item
            if not isinstance(value, str) or not value.strip():
                raise TranslationError(f"{key}[{i}] is not a non-empty string")
            texts.append(value.strip())
        out.append(texts)
    return out[0], out[1]


@dataclass
class _Result:
    qid: str
    turns: list[str] | None = None
    criteria: list[str] | None = None
    error: str | None = None
    cached: bool = False


def _reask(problem: str, n_turns: int, n_criteria: int) -> str:
    return (f"That answer cannot be used: {problem}. Answer again with one JSON object {{\"turns\": [...], "
            f"\"criteria\": [...]}} holding exactly {n_turns} turn strings and {n_criteria} criterion strings, and "
            "nothing else.")


async def _translate_one(client: "ModelClient", qid: str, messages: list[dict[str, str]], n_turns: int,
                         n_criteria: int, max_reasks: int) -> _Result:
    """One question through the structured-output loop (judge/structured.py): a malformed answer is re-asked
    naming the problem; the accepted one is cached under the first request, so a rerun pays nothing."""
    got = await ask_structured(client, messages, lambda text: check_translation(text, n_turns, n_criteria),
                               reask=lambda problem: _reask(problem, n_turns, n_criteria), max_reasks=max_reasks,
                               what="translation", role="translator")
    if got.value is None:
        return _Result(qid, error=got.error)
    return _Result(qid, *got.value, cached=got.cached)


# ----------------------------------------------------------------------------------------------- the command

def _source_file(spec: "BenchmarkSpec", opts: LocalizeOptions) -> Path:
    """The source data file: data.path= given here, the spec's data.path, or the pinned download (cached)."""
    from rubric_engine.dataset.fetch import fetch

    if opts.data_path:
        local = Path(opts.data_path).expanduser()
    elif spec.data_path() is not None:
        local = spec.data_path()
    elif spec.data.url:
        local, _ = fetch(spec.data.url, spec.data.sha256, opts.data_cache_dir)
    else:
        raise DataError(str(spec.files[-1]), "the source declares neither data.url nor data.path",
                        fix="pass data.path=<file>")
    return local


def _texts(spec: "BenchmarkSpec", row: dict[str, Any]) -> tuple[list[tuple[str, str]], list[tuple[str, Any, str]]]:
    f, roles = spec.data.fields, dict(spec.data.roles)
    turns = [(roles.get(t[f.turn_role], "other"), t[f.turn_content]) for t in row[f.dialogue]]
    crits = [(i[f.item_label], i.get(f.item_weight), i[f.item_text]) for i in row[f.rubric]]
    return turns, crits


def _translated_row(spec: "BenchmarkSpec", row: dict[str, Any], turns: list[str], crits: list[str]) -> dict[str, Any]:
    """The source row with only texts replaced: ids, roles, weights, labels and subsets cannot change."""
    f, new = spec.data.fields, copy.deepcopy(row)
    for t, text in zip(new[f.dialogue], turns, strict=True):
        t[f.turn_content] = text
    for item, text in zip(new[f.rubric], crits, strict=True):
        item[f.item_text] = text
    return new


def _review_rows(spec: "BenchmarkSpec", src: dict[str, Any], new: dict[str, Any]) -> list[list[Any]]:
    f, qid = spec.data.fields, str(src[spec.data.fields.id])
    out = [[qid, "turn", i, a[f.turn_content], b[f.turn_content]]
           for i, (a, b) in enumerate(zip(src[f.dialogue], new[f.dialogue]), 1)]
    return out + [[qid, "criterion", i, a[f.item_text], b[f.item_text]]
                  for i, (a, b) in enumerate(zip(src[f.rubric], new[f.rubric]), 1)]


def calls_summary(stats: "CallStats") -> dict[str, Any]:
    """The calls a command made, for its report: the cost is unknown (null) as soon as one call's price is
    unknown, never a partial sum."""
    return {**{k: v for k, v in stats.as_dict().items() if k != "cost_unknown_calls"},
            "cost": None if stats.cost_unknown_calls else stats.cost}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def localize(opts: LocalizeOptions) -> dict[str, Any]:
    """Translate the selected questions; write <target>.jsonl, review.csv and the report; return the report."""
    from rubric_engine.dataset.load import load_dataset, select
    from rubric_engine.models.cache import ResultCache, default_cache_dir
    from rubric_engine.models.client import ModelClient
    from rubric_engine.models.entries import ModelSpec
    from rubric_engine.models.entries import check_keys
    from rubric_engine.spec.files import benchmark_search_path
    from rubric_engine.spec.load import load_spec

    assert opts.model and opts.locale
    spec = load_spec(opts.source, benchmark_search_path(opts.benchmark_dirs))
    local = _source_file(spec, opts)
    ds = load_dataset(spec, local, opts.data_cache_dir)  # validates every row (file:line errors) first
    with open(local, encoding="utf-8-sig") as fh:  # raw rows: the output keeps the source schema exactly
        rows = {str(r[spec.data.fields.id]): r for r in (json.loads(x) for x in fh if x.strip())}
    questions = select(ds.questions, limit=opts.limit, ids=opts.ids)
    if not questions:
        raise ConfigError("localize: the selection holds no question; check limit= / ids=")
    model = ModelSpec(name=opts.model.split("/", 1)[-1], model=opts.model, api_base=opts.api_base,
                      api_key_env=opts.api_key_env, timeout=opts.timeout)
    check_keys(model)  # before the first call: one line naming the variable
    cache = ResultCache(opts.cache_dir or default_cache_dir())
    _log(f"localize: {len(questions)} question(s) of {spec.name} ({spec.locale}) -> {opts.target} ({opts.locale}) "
         f"with {opts.model}; completed calls are cached, so an interrupted run resumes where it stopped")

    async def run() -> tuple[list[_Result], "CallStats"]:
        client = ModelClient(model, cache=cache, concurrency=opts.concurrency, rpm=opts.rpm, role="translator")
        done = 0

        async def one(qid: str) -> _Result:
            nonlocal done
            turns, crits = _texts(spec, rows[qid])
            res = await _translate_one(client, qid, translation_messages(qid, turns, crits, spec.locale,
                                                                         str(opts.locale)), len(turns), len(crits),
                                     opts.max_reasks)
            done += 1
            state = f"FAILED: {res.error}" if res.error else ("ok (cached)" if res.cached else "ok")
            _log(f"[{done}/{len(questions)}] {qid} {state}")
            return res

        try:
            return list(await asyncio.gather(*(one(q.id) for q in questions))), client.stats
        finally:
            await client.aclose()

    try:
        results, stats = asyncio.run(run())
    finally:
        cache.close()
    return _write_outputs(spec, opts, ds, rows, results, stats)


def _write_outputs(spec: "BenchmarkSpec", opts: LocalizeOptions, ds: "Dataset", rows: dict[str, dict[str, Any]],
                   results: list[_Result], stats: "CallStats") -> dict[str, Any]:
    from rubric_engine.dataset.load import sha256_file

    opts.out.mkdir(parents=True, exist_ok=True)
    data_file, review_file, report_file = opts.out / f"{opts.target}.jsonl", opts.out / REVIEW_FILE, opts.out / REPORT_FILE
    ok = [r for r in results if r.error is None]
    new_rows = {r.qid: _translated_row(spec, rows[r.qid], r.turns or [], r.criteria or []) for r in ok}
    write_text(data_file, "".join(json.dumps(new_rows[r.qid], ensure_ascii=False) + "\n" for r in ok))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([REVIEW_COLUMNS] + [csv_row(line) for r in ok for line in _review_rows(
        spec, rows[r.qid], new_rows[r.qid])])
    previous = json.loads(report_file.read_text("utf-8")) if report_file.is_file() else {}
    if review_file.is_file() and previous.get("review_sha256") not in (None, sha256_file(review_file)):
        review_file = opts.out / "review.new.csv"  # the human edited review.csv: never overwrite their work
        _log(f"note: {opts.out / REVIEW_FILE} was edited since the last run; the fresh one is {review_file}")
    write_text(review_file, buf.getvalue(), bom=True)
    report = {
        "source": spec.name, "source_locale": spec.locale, "source_data": ds.source, "source_sha256": ds.sha256,
        "target": opts.target, "locale": opts.locale, "model": opts.model, "api_base": opts.api_base,
        "questions": len(results), "translated": len(ok), "failed": len(results) - len(ok),
        "failures": [{"id": r.qid, "error": r.error} for r in results if r.error is not None],
        "output": str(data_file.resolve()), "output_sha256": sha256_file(data_file),
        "review": str(review_file.resolve()), "review_sha256": sha256_file(review_file),
        "calls": calls_summary(stats),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if review_file.name != REVIEW_FILE:
        report["review_sha256"] = previous.get("review_sha256")
    write_text(report_file, json.dumps(report, ensure_ascii=False, indent=2) + "\n")
    return report


def apply_review(opts: LocalizeOptions) -> dict[str, Any]:
    """Apply an edited review.csv onto <out>/<target>.jsonl, validating every id / kind / index first."""
    from rubric_engine.dataset.load import sha256_file
    from rubric_engine.spec.files import benchmark_search_path
    from rubric_engine.spec.load import load_spec

    assert opts.review is not None
    spec = load_spec(opts.source, benchmark_search_path(opts.benchmark_dirs))
    f, data_file = spec.data.fields, opts.out / f"{opts.target}.jsonl"
    if not data_file.is_file():
        raise ConfigError(f"localize: {data_file} not found; run localize first, or pass the out= of that run")
    rows = [json.loads(line) for line in data_file.read_text("utf-8-sig").split("\n") if line.strip()]
    by_id = {str(r[f.id]): r for r in rows}
    try:  # (first physical line, record): a text with line breaks spans several lines of the file
        with open(opts.review, encoding="utf-8-sig", newline="") as fh:
            reader, table, line = csv.reader(fh), [], 1
            for rec in reader:
                table.append((line, [cell_value(c) for c in rec]))
                line = reader.line_num + 1
    except OSError as exc:
        raise DataError(str(opts.review), f"cannot read the review file: {exc.strerror or exc}") from exc
    except csv.Error as exc:  # e.g. a cell past the reader's field limit, a stray quote
        raise DataError(str(opts.review), f"unreadable CSV ({exc})", line=line,
                        fix="check that row's quotes; edit only the translation column") from None
    if not table or [c.strip() for c in table[0][1][:len(REVIEW_COLUMNS)]] != list(REVIEW_COLUMNS):
        raise DataError(str(opts.review), "the header must be " + ",".join(REVIEW_COLUMNS), line=1,
                        fix="start from the review.csv that localize wrote and edit only the translation column")
    seen: dict[tuple[str, str, int], int] = {}
    changed = 0
    for n, rec in table[1:]:
        def bad(message: str, fix: str = "") -> DataError:
            return DataError(str(opts.review), message, line=n, fix=fix)

        if not any(c.strip() for c in rec):
            continue
        if len(rec) < len(REVIEW_COLUMNS):
            raise bad(f"{len(rec)} columns, expected {len(REVIEW_COLUMNS)}")
        qid, kind, index, text = rec[0].strip(), rec[1].strip(), rec[2].strip(), rec[4]
        if qid not in by_id:
            raise bad(f"id {qid!r} is not in {data_file.name}", "ids must match the localized file")
        if kind not in ("turn", "criterion"):
            raise bad(f"kind {kind!r} must be 'turn' or 'criterion'")
        items = by_id[qid][f.dialogue if kind == "turn" else f.rubric]
        if not index.isdigit() or not 1 <= int(index) <= len(items):
            raise bad(f"{qid}: {kind} index {index!r} out of range 1..{len(items)}")
        if (qid, kind, int(index)) in seen:
            raise bad(f"{qid} {kind} {index} appears twice (first at line {seen[qid, kind, int(index)]})")
        if not text.strip():
            raise bad(f"{qid} {kind} {index}: empty translation", "write the text, or copy it from the source column")
        seen[qid, kind, int(index)] = n
        fld = f.turn_content if kind == "turn" else f.item_text
        if items[int(index) - 1][fld] != text:
            items[int(index) - 1][fld], changed = text, changed + 1
    write_text(data_file, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return {"output": str(data_file.resolve()), "changed": changed, "rows": len(seen),
            "output_sha256": sha256_file(data_file)}
