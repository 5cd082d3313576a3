"""Benchmark data: loading, verification and selection (the types live in datatypes.py, downloads in dataset/fetch.py).

Why so strict: a malformed row or an unmapped label would otherwise turn into a silently wrong score, so
every problem is a DataError naming file:line, and every known quirk of the data is a counted warning.
Field names, roles, subsets and labels all come from the spec: this module knows no benchmark.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from rubric_engine.dataset.checked import choice_items, item_check, item_text, spec_items
from rubric_engine.dataset.expand import Expansion, expanded, question_of
from rubric_engine.dataset.fetch import default_data_cache_dir, fetch, sha256_file
from rubric_engine.dataset.formats import keyed_rows, reading, with_format
from rubric_engine.dataset.quirks import DataQuirks
from rubric_engine.dataset.references import load_references, row_references, with_references
from rubric_engine.datatypes import MAX_WEIGHT, Criterion, Dataset, Question, QuestionRef, QuestionRows, Turn
from rubric_engine.errors import ConfigError, DataError
from rubric_engine.spec.facts import facts_of
from rubric_engine.spec.limits import MAX_TURNS, check_fits
from rubric_engine.text.surrogates import surrogate_path

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Turn", "Criterion", "Question", "QuestionRef", "QuestionRows", "Dataset", "load_dataset", "parse_rows",
           "select", "default_data_cache_dir", "fetch", "sha256_file", "raw_records"]


def load_dataset(spec: BenchmarkSpec, path: str | Path | None = None,
                 cache_dir: str | Path | None = None, lazy: bool = False) -> Dataset:
    """Load and validate the benchmark's data: `path` (or spec data.path) as-is, else the pinned url.

    Every row is validated now, whatever `lazy` says. `lazy=True` keeps only a `QuestionRef` per
    JSONL row and `questions` is a `QuestionRows` reading each question again when used (a run's
    memory then does not grow with the data); JSON and CSV files are held whole either way."""
    warnings: list[str] = []
    expected = spec.data.sha256
    local = Path(path).expanduser() if path is not None else spec.data_path()
    if local is not None:
        if not local.is_file():
            raise DataError(str(local), "data file not found",
                            fix="check data.path (a relative path is relative to the current directory)")
        digest, source, trust = sha256_file(local), str(local), "local"
        if expected and digest != expected:
            warnings.append(f"{local}: sha256 {digest} differs from the spec's pinned {expected} (data.sha256); "
                            "using the file as given, which is fine if you modified it on purpose — results "
                            "are then not comparable with the pinned data")
    elif spec.data.url:
        local, digest = fetch(spec.data.url, expected, cache_dir, warnings)
        source, trust = spec.data.url, "pinned" if expected else "first_use"
    else:
        raise DataError(str(spec.files[-1]) if spec.files else spec.name,
                        "the spec declares neither data.url nor data.path", fix="pass data.path=<file>")
    quirks = DataQuirks()
    questions: Sequence[Question] = index_rows(spec, local, warnings, quirks) if lazy else \
        _scan(spec, local, warnings, quirks, lambda q, _: q)
    if spec.data.references is not None and path is None:  # a command line's data.path brings its own
        questions = with_references(questions, load_references(spec, cache_dir, warnings))
    return Dataset(questions=questions, source=source, sha256=digest, warnings=warnings, trust=trust,
                   item_tags=frozenset(quirks.item_tags), example_tags=frozenset(quirks.example_tags))


@dataclass(frozen=True)
class _Line:
    number: int  # 1-based line (JSONL, JSON) or row (CSV, the header being 1)
    offset: int = -1  # byte offset of the line (JSONL); -1 where a row is not one line
    crc: int = 0  # crc32 of the line's bytes (JSONL)


def _lines(file: Path) -> Iterable[tuple[_Line, str]]:
    offset = 0
    with open(file, "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            yield _Line(n, offset, zlib.crc32(raw)), _decode(file, n, raw)
            offset += len(raw)


def _decode(file: Path, n: int, raw: bytes) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(str(file), f"not valid UTF-8 ({exc.reason} at byte {exc.start})", line=n,
                        fix="save the file as UTF-8") from exc
    return text.lstrip("\ufeff") if n == 1 else text


def _json_line(file: Path, line: int, text: str) -> Any:
    try:
        row = json.loads(text.rstrip())  # with its newline, a cut-off line's error would point at "column 1"
    except json.JSONDecodeError as exc:
        raise DataError(str(file), f"invalid JSON: {exc.msg} (column {exc.colno})", line=line,
                        fix="each line must be one complete JSON object (JSON Lines)") from exc
    _no_surrogates(file, line, row, text)
    return row


def _no_surrogates(file: Path, line: int, row: Any, source: str | None) -> None:
    """A row holding an unpaired surrogate (JSON "\\ud800") is refused here, before any paid call: it
    cannot be written as UTF-8, so the run would fail on it after the calls."""
    where = surrogate_path(row, source)
    if where is not None:
        raise DataError(str(file), f"{where}: an unpaired UTF-16 surrogate (an escape such as \\ud800 without "
                        "its pair), which is not valid Unicode", line=line,
                        fix="fix or remove that character in the data")


def _weight(value: Any) -> float | None | str:
    """The weight as a number (int kept as int, so prompts show '3' not '3.0'), None, or 'bad'."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) <= MAX_WEIGHT:
        return "bad"  # NaN and inf fail too; two weights of 1e308 would sum to inf
    return value


class _Row:
    """Field access for one row with errors that name the file, line, field and spec key."""

    def __init__(self, file: Path, line: int, row: Any) -> None:
        if not isinstance(row, dict):
            raise DataError(str(file), f"row is a JSON {type(row).__name__}, not an object", line=line,
                            fix="each line must hold one JSON object")
        self.file, self.line, self.row = file, line, row

    def err(self, message: str, fix: str = "") -> DataError:
        return DataError(str(self.file), message, line=self.line, fix=fix)

    def get(self, obj: dict[str, Any], name: str, spec_key: str, where: str = "") -> Any:
        if name not in obj:
            raise self.err(f"{where}missing field {name!r}",
                           fix=f"add it, or fix data.fields.{spec_key} in the spec (keys here: {', '.join(obj)})")
        return obj[name]

    def text(self, obj: dict[str, Any], name: str, spec_key: str, where: str = "", empty_ok: bool = True) -> str:
        value = self.get(obj, name, spec_key, where)
        if value is None and empty_ok:
            return ""
        if not isinstance(value, str) or (not empty_ok and not value.strip()):
            raise self.err(f"{where}{name}: expected a non-empty string", fix=f"got {value!r}")
        return value


def raw_records(file: Path, fmt: str, id_field: str) -> Iterable[tuple[_Line, Any]]:
    """(where, parsed row) for JSONL, JSON (an array of row objects, or an object of them: keyed by id) or CSV."""
    if fmt == "jsonl":
        for where, text in _lines(file):
            if text.strip():
                yield where, _json_line(file, where.number, text)
        return
    text = "".join(t for _, t in _lines(file))
    if fmt == "json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(str(file), f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno,
                            fix="data.format json expects one JSON array of row objects") from exc
        rows = keyed_rows(rows, id_field)  # an object of rows keyed by id, as a list of rows
        if not isinstance(rows, list):
            raise DataError(str(file), f"the file holds a JSON {type(rows).__name__}, not an array of rows",
                            fix="data.format json expects [ {...}, {...} ]; for one object a line use jsonl")
        check = surrogate_path(rows, text) is not None  # one search over the file; rows walked only on a hit
        for n, row in enumerate(rows, start=1):
            if check:
                _no_surrogates(file, n, row, None)
            yield _Line(n), row
        return
    check = "\\u" in text  # only a JSON cell's escape can make one
    reader = csv.DictReader(io.StringIO(text))
    try:
        for n, row in enumerate(reader, start=2):  # line 1 is the header
            cells = {k: _csv_cell(v) for k, v in row.items() if k is not None}
            if check:
                _no_surrogates(file, n, cells, None)
            yield _Line(n), cells
    except csv.Error as exc:  # a cell past the reader's field limit, a NUL byte
        raise DataError(str(file), f"unreadable CSV ({exc})", line=reader.line_num,
                        fix="check that row's quotes; keep long texts in a JSONL data file") from None


def _csv_cell(value: str | None) -> Any:
    """A CSV cell: JSON arrays / objects (dialogue, rubric, tags) are decoded, an empty cell is an absent value
    (no tags, no reference), anything else stays text."""
    v = (value or "").strip()
    if not v:
        return None
    if v[:1] in "[{":
        try:
            return json.loads(v)
        except json.JSONDecodeError:
            return value
    return value


def _turns(spec: BenchmarkSpec, r: _Row, raw: dict[str, Any]) -> list[Turn]:
    f, roles = spec.data.fields, spec.data.roles
    if facts_of(spec).conversation and f.dialogue not in raw:
        return []  # a conversation may start from nothing: its user turns come from the data or a simulator
    dialogue = r.get(raw, f.dialogue, "dialogue")
    if isinstance(dialogue, str) and dialogue.strip():  # a plain-text prompt (CSV, single-turn QA): one user turn
        user = next(k for k, v in roles.items() if v == "user")
        return [Turn(role=user, content=dialogue)]
    if not isinstance(dialogue, list) or not dialogue:
        raise r.err(f"{f.dialogue}: empty or not a list", fix="every question needs at least one dialogue turn")
    turns = []
    for i, t in enumerate(dialogue):
        where = f"{f.dialogue}[{i}]: "
        if not isinstance(t, dict):
            raise r.err(f"{where}turn is not an object", fix=f"got {t!r}")
        role = r.get(t, f.turn_role, "turn_role", where)
        if not isinstance(role, str) or role not in roles:
            raise r.err(f"{where}unknown role {role!r}", fix=f"allowed roles (data.roles): {', '.join(roles)}")
        turns.append(Turn(role=str(role), content=r.text(t, f.turn_content, "turn_content", where, False)))
    return turns


def _chosen_turn(spec: BenchmarkSpec, r: _Row, turns: tuple[str, ...]) -> tuple[str, ...]:
    """A scripted row has as many candidate turns as user turns: judge.turn (scope `turn`) must be one of them."""
    k = spec.judge.turn if spec.judge is not None and spec.judge.scope == "turn" else None
    if k is not None and facts_of(spec).scripted_turns and k > len(turns):
        raise r.err(f"judge.turn is {k} but this row has {len(turns)} user turn(s), so {len(turns)} candidate "
                    "turn(s)", fix=f"give every row at least {k} turns, or choose judge.turn from 1 to {len(turns)}")
    return turns


def _user_turns(r: _Row, raw: dict[str, Any], name: str | None) -> tuple[str, ...]:
    """data.fields.turns: a non-empty list of non-empty strings (the scripted user messages), () when unmapped."""
    if not name:
        return ()
    value = r.get(raw, name, "turns")
    if not isinstance(value, list) or not value or not all(isinstance(t, str) for t in value):
        raise r.err(f"{name}: expected a non-empty list of strings (the user turns)", fix=f"got {str(value)[:80]!r}")
    if len(value) > MAX_TURNS:  # spec/limits.py
        raise r.err(f"{name}: {len(value)} user turns, over the limit of {MAX_TURNS} a row may have", fix="split it")
    if (empty := next((i for i, t in enumerate(value) if not t.strip()), None)) is not None:
        raise r.err(f"{name}[{empty}]: an empty user turn", fix="write the message, or drop the turn")
    return tuple(value)


def _tags(r: _Row, obj: dict[str, Any], name: str | None, spec_key: str, where: str = "") -> tuple[str, ...]:
    if not name or obj.get(name) is None:
        return ()
    value = obj[name]
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise r.err(f"{where}{name}: expected a list of strings", fix=f"got {value!r} (data.fields.{spec_key})")
    return tuple(value)


def _criteria(spec: BenchmarkSpec, r: _Row, raw: dict[str, Any], qid: str, weighted_rule: list[str]) -> list[Criterion]:
    f = spec.data.fields
    if facts_of(spec).rubric == "none":  # a comparison of two replies: no rubric
        return []
    to_ability, to_rule = spec.label_to_ability(), spec.label_to_rule()
    rubric = r.get(raw, f.rubric, "rubric")
    if not isinstance(rubric, list) or not rubric:
        raise r.err(f"{f.rubric}: empty or not a list", fix="every question needs at least one rubric item")
    crits: list[Criterion] = []
    for i, item in enumerate(rubric):
        where = f"{f.rubric}[{i}]: "
        if not isinstance(item, dict):
            raise r.err(f"{where}item is not an object", fix=f"got {item!r}")
        label = r.get(item, f.item_label, "item_label", where) if f.item_label else ""
        ability, rule = (to_ability.get(label), to_rule.get(label)) if isinstance(label, str) else (None, None)
        if ability is None and rule is None and spec.taxonomy is not None:
            raise r.err(f"{where}label {label!r} is not in the taxonomy",
                        fix=f"known labels: {', '.join(list(to_ability) + list(to_rule))}; "
                            "add it to an ability's or rule's data_labels")
        value = r.get(item, f.item_weight, "item_weight", where)
        if spec.data.format == "csv" and isinstance(value, str):  # a weight inside a CSV cell's JSON as text
            value = _number(value.strip())
        weight = _weight(value)
        if weight == "bad" or (weight is None and rule is None):
            raise r.err(f"{where}{f.item_weight}: non-numeric weight {item[f.item_weight]!r}",
                        fix=f"weights must be numbers between -{MAX_WEIGHT:g} and {MAX_WEIGHT:g} (null is allowed only "
                        "for failure-rule items)")
        if rule is not None and weight is not None:
            weighted_rule.append(f"{qid}:{weight}")
        check = item_check(spec, r, item, where)  # None: judged
        crits.append(Criterion(index=i + 1, label=str(label), weight=weight,  # type: ignore[arg-type]
                               text=item_text(r, item, f.item_text, where, check), ability=ability,
                               rule=rule, tags=_tags(r, item, f.item_tags, "item_tags", where), check=check))
    return crits + spec_items(spec, len(crits) + 1)


def _number(text: str) -> Any:
    try:
        return float(text) if any(ch in text for ch in ".eE") else int(text)
    except ValueError:
        return text


def parse_rows(spec: BenchmarkSpec, file: str | Path, warnings: list[str] | None = None) -> list[Question]:
    """Parse and validate a data file against the spec; quirks are appended to `warnings` with counts."""
    return _scan(spec, Path(file), warnings if warnings is not None else [], DataQuirks(), lambda q, _: q)


def index_rows(spec: BenchmarkSpec, file: str | Path, warnings: list[str] | None = None,
               quirks: DataQuirks | None = None) -> QuestionRows:
    """Validate a data file as `parse_rows` does, but keep a `QuestionRef` per JSONL row (offset, crc) instead of
    the question, read again when used (under data.expand a turn's row is its question's: its id, its history)."""
    file = Path(file)
    held: dict[str, Question] = {}

    def keep(q: Question, where: _Line) -> QuestionRef:
        if where.offset < 0:  # JSON / CSV: a row is not one line, so the question is held whole
            held[q.id] = q
        return QuestionRef(sys.intern(q.id), sys.intern(q.subset), sys.intern(q.scenario), where.number,
                           where.offset, where.crc)

    refs = _scan(spec, file, warnings if warnings is not None else [], quirks or DataQuirks(), keep)

    def row(ref: QuestionRef) -> dict[str, Any]:
        if ref.offset < 0:
            return held[ref.id].source_row
        with open(file, "rb") as fh:
            fh.seek(ref.offset)
            raw = fh.readline()
        if zlib.crc32(raw) != ref.crc:
            raise DataError(str(file), f"row of question {ref.id!r} changed since the run validated the file",
                            line=ref.line, fix="restore the data file, or start the run afresh in a new run directory")
        return _json_line(file, ref.line, _decode(file, ref.line, raw))

    def load(ref: QuestionRef) -> Question:
        if ref.offset < 0:
            return held[ref.id]
        raw = row(ref)
        return question_of(spec, _question(spec, _Row(file, ref.line, raw), raw, DataQuirks()), ref)

    return QuestionRows(refs, load, row if spec.data.expand is None else lambda ref: load(ref).source_row)


_T = TypeVar("_T")


def _scan(spec: BenchmarkSpec, file: Path, warnings: list[str], quirks: DataQuirks,
          keep: Callable[[Question, _Line], _T]) -> list[_T]:
    """Validate every row (file:line errors, in file order) and keep what `keep` makes of each question."""
    seen: dict[str, int] = {}
    out: list[_T] = []
    left = Expansion(file)  # data.expand: what the rows' expansion left out, said in one warning
    with reading(spec, file, warnings) as parsed:  # its errors say the format read in, and who chose it
        for where, raw in parsed(raw_records(file, spec.data.format, spec.data.fields.id)):
            r = _Row(file, where.number, raw)
            for q in expanded(spec, _question(spec, r, raw, quirks, seen), where.number, left, seen):
                quirks.note(spec, q)  # each question as asked (an expanded turn ends before its reply)
                out.append(keep(q, where))
        warnings.extend(left.warnings(asked=len(out)))
        if not out:
            raise with_format(DataError(str(file), "no rows", fix="the file is empty: point data.path at the "
                                        "benchmark's data file"), spec, file)
    quirks.check_mapped(spec, file)
    warnings.extend(quirks.finish(file, len(out)))
    return out


def _question(spec: BenchmarkSpec, r: _Row, raw: dict[str, Any], quirks: DataQuirks,
              seen: dict[str, int] | None = None) -> Question:
    """One row as a validated Question: its id, dialogue, rubric, metadata columns and subset value."""
    f = spec.data.fields
    qid = _row_id(r, raw, f.id, seen)
    turns = _turns(spec, r, raw)
    scalar = facts_of(spec).rubric == "optional" and raw.get(f.rubric) is None  # a score's row without a rubric
    # multiple choice: the options and one item, the choice check (dataset/checked.py); else the rubric's items
    choices, crits = choice_items(spec, r, raw) if f.choices else \
        ((), [] if scalar else _criteria(spec, r, raw, qid, quirks.weighted_rule))
    refs = row_references(raw.get(f.reference), f"{r.file}:{r.line}", str(f.reference)) if f.reference else None
    meta = _meta(spec, r, {**raw, str(f.reference): None} if refs is not None else raw, qid, quirks)
    mapped = {f.id, f.dialogue, f.rubric, f.subset, f.scenario, f.secondary_scenario, f.example_tags, f.reference,
              f.turns, f.choices, f.answer}
    q = Question(id=qid, dialogue=tuple(turns), criteria=tuple(crits), subset=meta["subset"], choices=choices,
                    scenario=meta["scenario"], secondary_scenario=meta["secondary_scenario"],
                    tags=_tags(r, raw, f.example_tags, "example_tags"), reference=meta["reference"],
                    turns=_chosen_turn(spec, r, _user_turns(r, raw, f.turns)), references=refs or (),
                    extra={k: v for k, v in raw.items() if k not in mapped}, source_row=raw)
    return check_fits(q, str(r.file), r.line)  # a row too long for any prompt: refused before any call is paid


def _row_id(r: _Row, raw: dict[str, Any], name: str, seen: dict[str, int] | None) -> str:
    qid = r.get(raw, name, "id")
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid) == "":
        raise r.err(f"{name}: expected a non-empty string id", fix=f"got {qid!r}")
    qid = str(qid)
    if seen is not None:
        if qid in seen:
            raise r.err(f"duplicate id {qid!r} (field {name!r}); first seen at line {seen[qid]}",
                        fix="ids must be unique")
        seen[qid] = r.line
    return qid


def _meta(spec: BenchmarkSpec, r: _Row, raw: dict[str, Any], qid: str, quirks: DataQuirks) -> dict[str, str]:
    """subset, scenario, secondary_scenario and reference: optional columns, "" when the file has none."""
    f, d = spec.data.fields, spec.data
    meta: dict[str, str] = {}
    for k in ("subset", "scenario", "secondary_scenario", "reference"):
        name = getattr(f, k)
        optional = k == "reference" and d.references is not None  # the references file is the source then
        if name and name not in raw and not optional:  # optional column: fine if the whole file lacks it (quirks)
            quirks.absent.setdefault((k, name), []).append(r.line)
        meta[k] = r.text(raw, name, k) if name and name in raw else ""
        if k in ("scenario", "secondary_scenario") and name and name in raw and not meta[k].strip():
            quirks.empty_scen.setdefault(name, []).append(qid)
    if f.subset and f.subset in raw and d.subsets and meta["subset"] not in d.subsets:
        raise r.err(f"{f.subset}: unknown subset value {meta['subset']!r}",
                    fix=f"allowed (data.subsets): {', '.join(d.subsets)}")
    return meta


class _Selectable(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def subset(self) -> str: ...


_Q = TypeVar("_Q", bound=_Selectable)


def select(questions: Sequence[_Q], subset: str | None = None, limit: int | None = None,
           ids: Iterable[str] | str | None = None) -> list[_Q]:
    """Filter by subset ('all' or None = every one) and ids, then keep the first `limit`; file order kept.
    Works on questions and on `QuestionRef`s alike (only ids and subsets are read)."""
    out = list(questions)
    if subset not in (None, "", "all"):
        allowed = sorted({q.subset for q in questions if q.subset})
        if subset not in allowed:
            raise ConfigError(f"unknown subset {subset!r}; allowed: {', '.join(allowed) or '(the data has none)'}, all")
        out = [q for q in out if q.subset == subset]
    if ids is not None:
        wanted = [str(i) for i in ([ids] if isinstance(ids, str) else ids)]
        known = {q.id for q in questions}
        missing = [i for i in wanted if i not in known]
        if missing:
            raise ConfigError(f"unknown question id(s): {', '.join(missing)}; check ids= (ids are case-sensitive)")
        keep = set(wanted)
        out = [q for q in out if q.id in keep]
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ConfigError(f"limit must be a non-negative integer, got {limit!r}")
        out = out[:limit]
    return out
