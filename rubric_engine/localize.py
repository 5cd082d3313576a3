"""`rubric-engine localize`: translate and culturally adapt a benchmark's data with any LiteLLM model.

Why through ModelClient with an accept= check: every question is one cached call, so an interrupted run
resumes without paying twice, and a translation with the wrong shape is never cached or written as if it
were fine. The model returns only texts; ids, roles, weights, labels and subsets are copied from the source
row, so a translation cannot change what is scored. A human can then edit review.csv and apply it.
"""

from __future__ import annotations

import asyncio
import copy
import csv
import hashlib
import io
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .errors import ConfigError, DataError, FatalModelError, ModelCallError
from .verdicts import VerdictError, extract_json

__all__ = ["LocalizeOptions", "TranslationError", "parse_options", "translation_messages", "check_translation",
           "localize", "apply_review", "localize_command", "REVIEW_COLUMNS", "REPORT_FILE", "REVIEW_FILE"]

REPORT_FILE = "localize_report.json"
REVIEW_FILE = "review.csv"
REVIEW_COLUMNS = ("id", "kind", "index", "source", "translation")
_LANGUAGES = {"en": "English", "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "fr": "French", "de": "German",
              "es": "Spanish", "pt": "Portuguese", "it": "Italian", "nl": "Dutch", "ru": "Russian", "ar": "Arabic",
              "hi": "Hindi", "id": "Indonesian", "vi": "Vietnamese", "th": "Thai", "tr": "Turkish", "pl": "Polish"}
_USAGE = ("usage: rubric-engine localize source=NAME target=NAME locale=LL model=PROVIDER/MODEL [api_base=URL] "
          "[api_key_env=VAR] [data.path=FILE] [limit=N] [ids=a,b] [out=DIR] [concurrency=N] | "
          "rubric-engine localize source=NAME target=NAME review=EDITED.csv [out=DIR]")


class TranslationError(ValueError):
    """A model's translation has the wrong structure (raised inside accept=, so it is never cached)."""


@dataclass
class LocalizeOptions:
    """Parsed `key=value` arguments of the localize command (see _OPTIONS for the command-line keys)."""

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
    cache_dir: str | None = None
    benchmark_dirs: list[str] = field(default_factory=list)


def _split_list(value: str) -> list[str]:
    return [s for s in re.split(r"[,\s]+", value.strip().strip("[]")) if s]


def _at_least(kind: Callable[[str], Any], minimum: float) -> Callable[[str], Any]:
    def convert(value: str) -> Any:
        n = kind(value)
        if n < minimum:
            raise ValueError(f"must be >= {minimum}")
        return n
    return convert


_OPTIONS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "source": ("source", str), "target": ("target", str), "locale": ("locale", str), "model": ("model", str),
    "api_base": ("api_base", str), "api_key_env": ("api_key_env", str), "data.path": ("data_path", str),
    "data.cache_dir": ("data_cache_dir", str), "limit": ("limit", _at_least(int, 0)), "ids": ("ids", _split_list),
    "out": ("out", lambda v: Path(v).expanduser()), "review": ("review", lambda v: Path(v).expanduser()),
    "concurrency": ("concurrency", _at_least(int, 1)), "rpm": ("rpm", _at_least(float, 1e-9)),
    "timeout": ("timeout", _at_least(float, 1e-9)), "cache.dir": ("cache_dir", str),
    "benchmark_dirs": ("benchmark_dirs", _split_list),
}


def parse_options(args: Sequence[str]) -> LocalizeOptions:
    """key=value arguments -> LocalizeOptions; ConfigError naming the bad argument and the fix."""
    values: dict[str, Any] = {}
    for a in args:
        key, eq, value = a.partition("=")
        key, value = key.lstrip("+"), value.strip()
        if not eq or not key:
            raise ConfigError(f"localize: argument {a!r} is not key=value; {_USAGE}")
        if key not in _OPTIONS:
            raise ConfigError(f"localize: unknown key {key!r}; allowed: {', '.join(_OPTIONS)}")
        if value and value.lower() not in ("null", "none"):
            attr, convert = _OPTIONS[key]
            try:
                values[attr] = convert(value)
            except ValueError as exc:
                raise ConfigError(f"localize: {key}={value!r} is not valid ({exc})") from None
    required = ("source", "target") + (() if values.get("review") else ("locale", "model"))
    missing = [k for k in required if not values.get(k)]
    if missing:
        raise ConfigError(f"localize: missing {', '.join(k + '=' for k in missing)}; {_USAGE}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", values["target"]):
        raise ConfigError(f"localize: target={values['target']!r} must be a benchmark name (letters, digits, _ . -)")
    values.setdefault("out", Path("localized") / values["target"])
    return LocalizeOptions(**values)


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


def _final_key(spec: Any, messages: list[dict[str, str]]) -> str:
    """Cache key of a question's final (re-asked) translation, so a rerun does not pay the first ask again."""
    from .models import cache_key

    return hashlib.sha256(f"localize-final:{cache_key(spec, messages, None)}".encode()).hexdigest()


async def _translate_one(client: Any, qid: str, messages: list[dict[str, str]], n_turns: int,
                         n_criteria: int) -> _Result:
    """One call, one re-ask naming the structural problem; a second failure is reported, never written."""
    seen: dict[str, str] = {}
    cache = getattr(client, "cache", None)
    final_key = _final_key(client.spec, messages) if cache is not None else None
    memo = cache.get(final_key) if cache is not None and final_key else None
    if memo is not None and isinstance(memo.get("text"), str):  # a run that needed the re-ask already paid
        turns, crits = check_translation(memo["text"], n_turns, n_criteria)
        return _Result(qid, turns, crits, cached=True)

    def accept(text: str) -> None:
        seen["text"] = text
        check_translation(text, n_turns, n_criteria)

    for attempt in (1, 2):
        try:
            res = await client.complete(messages, accept=accept)
            turns, crits = check_translation(res.text, n_turns, n_criteria)
            if attempt == 2 and cache is not None and final_key:
                cache.set(final_key, {"text": res.text})
            return _Result(qid, turns, crits, cached=res.cached)
        except TranslationError as exc:
            if attempt == 2:
                return _Result(qid, error=f"invalid translation after one re-ask: {exc}")
            messages = messages + [
                {"role": "assistant", "content": seen.get("text") or "(empty answer)"},
                {"role": "user", "content": f"That answer cannot be used: {exc}. Answer again with one JSON object "
                                            f"{{\"turns\": [...], \"criteria\": [...]}} holding exactly {n_turns} "
                                            f"turn strings and {n_criteria} criterion strings, and nothing else."}]
        except FatalModelError:
            raise
        except ModelCallError as exc:
            return _Result(qid, error=str(exc))
    raise AssertionError("unreachable")


# ----------------------------------------------------------------------------------------------- the command

def _source_file(spec: Any, opts: LocalizeOptions) -> Path:
    """The source data file: data.path= given here, the spec's data.path, or the pinned download (cached)."""
    from .dataset import fetch

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


def _texts(spec: Any, row: dict[str, Any]) -> tuple[list[tuple[str, str]], list[tuple[str, Any, str]]]:
    f, roles = spec.data.fields, dict(spec.data.roles)
    turns = [(roles.get(t[f.turn_role], "other"), t[f.turn_content]) for t in row[f.dialogue]]
    crits = [(i[f.item_label], i.get(f.item_weight), i[f.item_text]) for i in row[f.rubric]]
    return turns, crits


def _translated_row(spec: Any, row: dict[str, Any], turns: list[str], crits: list[str]) -> dict[str, Any]:
    """The source row with only texts replaced: ids, roles, weights, labels and subsets cannot change."""
    f, new = spec.data.fields, copy.deepcopy(row)
    for t, text in zip(new[f.dialogue], turns, strict=True):
        t[f.turn_content] = text
    for item, text in zip(new[f.rubric], crits, strict=True):
        item[f.item_text] = text
    return new


def _review_rows(spec: Any, src: dict[str, Any], new: dict[str, Any]) -> list[list[Any]]:
    f, qid = spec.data.fields, str(src[spec.data.fields.id])
    out = [[qid, "turn", i, a[f.turn_content], b[f.turn_content]]
           for i, (a, b) in enumerate(zip(src[f.dialogue], new[f.dialogue]), 1)]
    return out + [[qid, "criterion", i, a[f.item_text], b[f.item_text]]
                  for i, (a, b) in enumerate(zip(src[f.rubric], new[f.rubric]), 1)]


def _write_text(path: Path, text: str, bom: bool = False) -> None:
    """Temp file + rename: a kill never leaves half a data file. A BOM lets spreadsheets detect UTF-8."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8-sig" if bom else "utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def localize(opts: LocalizeOptions) -> dict[str, Any]:
    """Translate the selected questions; write <target>.jsonl, review.csv and the report; return the report."""
    from .cache import ResultCache, default_cache_dir
    from .dataset import load_dataset, select
    from .models import ModelClient, ModelSpec
    from .spec import benchmark_search_path, load_spec

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
    cache = ResultCache(opts.cache_dir or default_cache_dir())
    _log(f"localize: {len(questions)} question(s) of {spec.name} ({spec.locale}) -> {opts.target} ({opts.locale}) "
         f"with {opts.model}; completed calls are cached, so an interrupted run resumes where it stopped")

    async def run() -> tuple[list[_Result], Any]:
        client = ModelClient(model, cache=cache, concurrency=opts.concurrency, rpm=opts.rpm, role="translator")
        done = 0

        async def one(qid: str) -> _Result:
            nonlocal done
            turns, crits = _texts(spec, rows[qid])
            res = await _translate_one(client, qid, translation_messages(qid, turns, crits, spec.locale,
                                                                         str(opts.locale)), len(turns), len(crits))
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


def _write_outputs(spec: Any, opts: LocalizeOptions, ds: Any, rows: dict[str, dict[str, Any]],
                   results: list[_Result], stats: Any) -> dict[str, Any]:
    from .dataset import sha256_file

    opts.out.mkdir(parents=True, exist_ok=True)
    data_file, review_file, report_file = opts.out / f"{opts.target}.jsonl", opts.out / REVIEW_FILE, opts.out / REPORT_FILE
    ok = [r for r in results if r.error is None]
    new_rows = {r.qid: _translated_row(spec, rows[r.qid], r.turns or [], r.criteria or []) for r in ok}
    _write_text(data_file, "".join(json.dumps(new_rows[r.qid], ensure_ascii=False) + "\n" for r in ok))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([REVIEW_COLUMNS] + [line for r in ok for line in _review_rows(
        spec, rows[r.qid], new_rows[r.qid])])
    previous = json.loads(report_file.read_text("utf-8")) if report_file.is_file() else {}
    if review_file.is_file() and previous.get("review_sha256") not in (None, sha256_file(review_file)):
        review_file = opts.out / "review.new.csv"  # the human edited review.csv: never overwrite their work
        _log(f"note: {opts.out / REVIEW_FILE} was edited since the last run; the fresh one is {review_file}")
    _write_text(review_file, buf.getvalue(), bom=True)
    report = {
        "source": spec.name, "source_locale": spec.locale, "source_data": ds.source, "source_sha256": ds.sha256,
        "target": opts.target, "locale": opts.locale, "model": opts.model, "api_base": opts.api_base,
        "questions": len(results), "translated": len(ok), "failed": len(results) - len(ok),
        "failures": [{"id": r.qid, "error": r.error} for r in results if r.error is not None],
        "output": str(data_file.resolve()), "output_sha256": sha256_file(data_file),
        "review": str(review_file.resolve()), "review_sha256": sha256_file(review_file),
        "calls": {k: getattr(stats, k, None) for k in ("calls", "cache_hits", "requests", "retries", "rejected",
                                                       "errors", "prompt_tokens", "completion_tokens", "cost")},
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if review_file.name != REVIEW_FILE:
        report["review_sha256"] = previous.get("review_sha256")
    _write_text(report_file, json.dumps(report, ensure_ascii=False, indent=2) + "\n")
    return report


def apply_review(opts: LocalizeOptions) -> dict[str, Any]:
    """Apply an edited review.csv onto <out>/<target>.jsonl, validating every id / kind / index first."""
    from .dataset import sha256_file
    from .spec import benchmark_search_path, load_spec

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
                table.append((line, rec))
                line = reader.line_num + 1
    except OSError as exc:
        raise DataError(str(opts.review), f"cannot read the review file: {exc.strerror or exc}") from exc
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
    _write_text(data_file, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return {"output": str(data_file.resolve()), "changed": changed, "rows": len(seen),
            "output_sha256": sha256_file(data_file)}


def _next_steps(opts: LocalizeOptions, data_file: str, sha: str) -> str:
    """What to do with the file: create the variant if needed, point its data.path here, validate."""
    from .spec import SPEC_FILE, benchmark_search_path, list_benchmarks

    variant = list_benchmarks(benchmark_search_path(opts.benchmark_dirs)).get(opts.target)
    steps = [] if variant else [f"  create the variant: rubric-engine new {opts.target} extends={opts.source}"
                                                      + (f" --locale {opts.locale}" if opts.locale else "")]
    path = os.path.relpath(data_file, variant) if variant else data_file
    yaml_file = variant / SPEC_FILE if variant else Path(opts.target) / SPEC_FILE
    steps += [f"  point it at the data: in {yaml_file} set data: {{url: null, path: {path}, sha256: {sha}}}",
              f"  check it: rubric-engine validate benchmark={opts.target}  (or pass data.path={data_file} to a run)"]
    return "next:\n" + "\n".join(steps)


def localize_command(args: list[str]) -> int:
    """CLI entry (the dispatcher passes argv after `localize`); 0 = all translated, 1 = some failed."""
    opts = parse_options(args)
    if opts.review is not None:
        res = apply_review(opts)
        print(f"applied {opts.review}: {res['changed']} text(s) changed in {res['output']} "
              f"(sha256 {res['output_sha256']})")
        print(_next_steps(opts, res["output"], res["output_sha256"]))
        return 0
    rep = localize(opts)
    print(f"translated {rep['translated']}/{rep['questions']} question(s) -> {rep['output']}")
    print(f"review: {rep['review']} (edit the translation column, then rerun with review={rep['review']})")
    if rep["failed"]:
        print(f"FAILED: {rep['failed']} question(s), not written: "
              f"{', '.join(x['id'] for x in rep['failures'])}; details in {opts.out / REPORT_FILE}; "
              "rerun the same command to retry them (completed ones come from the cache)")
    print(_next_steps(opts, rep["output"], rep["output_sha256"]))
    return 1 if rep["failed"] else 0
