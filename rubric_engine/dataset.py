"""Benchmark data: the question / criterion types, loading, verification and selection.

Why so strict: a malformed row or an unmapped label would otherwise turn into a silently wrong score, so
every problem is a DataError naming file:line, and every known quirk of the data is a counted warning.
Field names, roles, subsets and labels all come from the spec: this module knows no benchmark.
"""

from __future__ import annotations

import csv
import hashlib
import http.client
import io
import json
import math
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .datatypes import Criterion, Dataset, Question, Turn
from .errors import ConfigError, DataError

if TYPE_CHECKING:
    from .spec import BenchmarkSpec

__all__ = ["Turn", "Criterion", "Question", "Dataset", "load_dataset", "parse_rows", "select",
           "default_data_cache_dir", "fetch", "sha256_file"]


def default_data_cache_dir() -> Path:
    """$XDG_CACHE_HOME/rubric-engine/data (default ~/.cache/rubric-engine/data)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rubric-engine" / "data"


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(url: str, sha256: str | None, cache_dir: str | Path | None = None,
          warnings: list[str] | None = None, timeout: float = 60.0) -> tuple[Path, str]:
    """Download `url` once into `<cache_dir>/<sha256>/<filename>`; return (path, sha256).

    Written to a temp file and renamed, so an interrupted download never leaves a half file behind; a
    pinned sha256 is checked on every use, and a bad file is deleted rather than kept.
    """
    warnings = warnings if warnings is not None else []
    name = Path(urllib.parse.urlparse(url).path).name or "data"
    sub = sha256 or "unverified-" + hashlib.sha256(url.encode()).hexdigest()[:16]
    target = Path(cache_dir or default_data_cache_dir()).expanduser() / sub / name
    first_use = target.with_name(target.name + ".sha256")  # trust on first use, when nothing is pinned
    if target.is_file():
        digest = sha256_file(target)
        if sha256 is None and first_use.is_file() and first_use.read_text().strip() != digest:
            raise DataError(str(target), f"sha256 {digest} differs from {first_use.read_text().strip()} recorded when "
                            "it was first downloaded (trust on first use): the cached file changed",
                            fix=f"delete {target.parent} to download and trust it again, or pin data.sha256")
        if sha256 is None or digest == sha256:
            return target, digest
        target.unlink()
        warnings.append(f"cached copy {target} had sha256 {digest}, expected {sha256}: deleted and downloaded again")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            for chunk in iter(lambda: resp.read(1 << 20), b""):
                h.update(chunk)
                out.write(chunk)
        digest = h.hexdigest()
        if sha256 and digest != sha256:
            raise DataError(url, f"downloaded file has sha256 {digest} but the spec expects {sha256} "
                            "(data.sha256); the bad file was deleted",
                            fix="the upstream file changed or the download was corrupted: check data.url and "
                                "data.sha256, or download the file yourself and pass data.path=<file>")
        os.replace(tmp, target)
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DataError(url, f"download failed: {reason}",
                        fix="check the network / data.url, or download the file and pass data.path=<file>") from exc
    finally:
        tmp.unlink(missing_ok=True)
    if not sha256:
        first_use.write_text(digest + "\n")
        warnings.append(f"the spec pins no data.sha256: {url} was trusted on first use; its sha256 {digest} is "
                        f"recorded in {first_use} and checked on every later use")
    return target, digest


def load_dataset(spec: BenchmarkSpec, path: str | Path | None = None,
                 cache_dir: str | Path | None = None) -> Dataset:
    """Load and validate the benchmark's data: `path` (or spec data.path) as-is, else the pinned url."""
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
    questions = parse_rows(spec, local, warnings)
    return Dataset(questions=questions, source=source, sha256=digest, warnings=warnings, trust=trust)


def _lines(file: Path) -> Iterable[tuple[int, str]]:
    with open(file, "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(str(file), f"not valid UTF-8 ({exc.reason} at byte {exc.start})", line=n,
                                fix="save the file as UTF-8") from exc
            yield n, text.lstrip("\ufeff") if n == 1 else text


def _weight(value: Any) -> float | None | str:
    """The weight as a number (int kept as int, so prompts show '3' not '3.0'), None, or 'bad'."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "bad"
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


def _records(file: Path, fmt: str) -> Iterable[tuple[int, Any]]:
    """(line or row number, parsed row) for JSONL, JSON (a list of objects) or CSV (list cells as JSON)."""
    if fmt == "jsonl":
        for line, text in _lines(file):
            if not text.strip():
                continue
            try:
                yield line, json.loads(text)
            except json.JSONDecodeError as exc:
                raise DataError(str(file), f"invalid JSON: {exc.msg} (column {exc.colno})", line=line,
                                fix="each line must be one complete JSON object (JSON Lines)") from exc
        return
    text = "".join(t for _, t in _lines(file))
    if fmt == "json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(str(file), f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno,
                            fix="data.format json expects one JSON array of row objects") from exc
        if not isinstance(rows, list):
            raise DataError(str(file), f"the file holds a JSON {type(rows).__name__}, not an array of rows",
                            fix="data.format json expects [ {...}, {...} ]; for one object a line use jsonl")
        yield from enumerate(rows, start=1)
        return
    for n, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):  # line 1 is the header
        yield n, {k: _csv_cell(v) for k, v in row.items() if k is not None}


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


def _tags(r: _Row, obj: dict[str, Any], name: str | None, spec_key: str, where: str = "") -> tuple[str, ...]:
    if not name or obj.get(name) is None:
        return ()
    value = obj[name]
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise r.err(f"{where}{name}: expected a list of strings", fix=f"got {value!r} (data.fields.{spec_key})")
    return tuple(value)


def _criteria(spec: BenchmarkSpec, r: _Row, raw: dict[str, Any], qid: str, stats: dict[str, Any]) -> list[Criterion]:
    f = spec.data.fields
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
                        fix="weights must be numbers (null is allowed only for failure-rule items)")
        if rule is not None and weight is not None:
            stats["weighted_rule"].append(f"{qid}:{weight}")
        crits.append(Criterion(index=i + 1, label=str(label), weight=weight,  # type: ignore[arg-type]
                               text=r.text(item, f.item_text, "item_text", where, False), ability=ability,
                               rule=rule, tags=_tags(r, item, f.item_tags, "item_tags", where)))
    return crits


def _number(text: str) -> Any:
    try:
        return float(text) if any(ch in text for ch in ".eE") else int(text)
    except ValueError:
        return text


def parse_rows(spec: BenchmarkSpec, file: str | Path, warnings: list[str] | None = None) -> list[Question]:
    """Parse and validate a data file against the spec; quirks are appended to `warnings` with counts."""
    file = Path(file)
    warnings = warnings if warnings is not None else []
    f, d = spec.data.fields, spec.data
    mapped = {f.id, f.dialogue, f.rubric, f.subset, f.scenario, f.secondary_scenario, f.example_tags, f.reference}
    seen: dict[str, int] = {}
    out: list[Question] = []
    empty_scen: dict[str, list[str]] = {}
    absent: dict[tuple[str, str], list[int]] = {}
    stats: dict[str, Any] = {"weighted_rule": []}
    only_negative, no_rule, last_not_user = 0, [], []
    for line, raw in _records(file, d.format):
        r = _Row(file, line, raw)
        qid = r.get(raw, f.id, "id")
        if isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid) == "":
            raise r.err(f"{f.id}: expected a non-empty string id", fix=f"got {qid!r}")
        qid = str(qid)
        if qid in seen:
            raise r.err(f"duplicate id {qid!r} (field {f.id!r}); first seen at line {seen[qid]}",
                        fix="ids must be unique")
        seen[qid] = line
        turns = _turns(spec, r, raw)
        if d.roles[turns[-1].role] != "user":
            last_not_user.append(qid)
        crits = _criteria(spec, r, raw, qid, stats)
        meta: dict[str, str] = {}
        for k in ("subset", "scenario", "secondary_scenario", "reference"):
            name = getattr(f, k)
            if name and name not in raw:  # an optional column: fine if the whole file lacks it (below)
                absent.setdefault((k, name), []).append(line)
            meta[k] = r.text(raw, name, k) if name and name in raw else ""
            if k in ("scenario", "secondary_scenario") and name and name in raw and not meta[k].strip():
                empty_scen.setdefault(name, []).append(qid)
        if f.subset and f.subset in raw and d.subsets and meta["subset"] not in d.subsets:
            raise r.err(f"{f.subset}: unknown subset value {meta['subset']!r}",
                        fix=f"allowed (data.subsets): {', '.join(d.subsets)}")
        signs: dict[str, bool] = {}
        for c in crits:
            if c.ability is not None:
                signs[c.ability] = signs.get(c.ability, False) or (c.weight or 0) > 0
        only_negative += sum(1 for positive in signs.values() if not positive)
        if spec.failure_rules and not any(c.rule for c in crits):
            no_rule.append(qid)
        out.append(Question(id=qid, dialogue=tuple(turns), criteria=tuple(crits), subset=meta["subset"],
                            scenario=meta["scenario"], secondary_scenario=meta["secondary_scenario"],
                            tags=_tags(r, raw, f.example_tags, "example_tags"), reference=meta["reference"],
                            extra={k: v for k, v in raw.items() if k not in mapped}, source_row=raw))
    if not out:
        raise DataError(str(file), "no rows", fix="the file is empty: point data.path at the benchmark's data file")
    for (k, name), lines in absent.items():
        if len(lines) < len(out):
            raise DataError(str(file), f"missing field {name!r} (other rows have it)", line=lines[0],
                            fix=f"add it to every row, or fix data.fields.{k} in the spec")
        warnings.append(f"no row has the field {name!r} (data.fields.{k}): {k} left empty for all "
                        f"{len(out)} questions, so nothing can be selected or reported by it")
    warnings.extend(_quirks(empty_scen, only_negative, no_rule, stats["weighted_rule"], last_not_user))
    return out


def _ids(ids: Sequence[str], n: int = 5) -> str:
    return ", ".join(ids[:n]) + (f", ... (+{len(ids) - n})" if len(ids) > n else "")


def _quirks(empty: dict[str, list[str]], only_negative: int, no_rule: list[str], weighted_rule: list[str],
            last_not_user: list[str]) -> list[str]:
    """One counted warning per kind of quirk: reported, never silently fixed."""
    out = [f"{len(ids)} question(s) have an empty {name!r}: {_ids(ids)}" for name, ids in empty.items()]
    if only_negative:
        out.append(f"{only_negative} (question, ability) pair(s) have only negative-weight items (max = 0): "
                   "such an ability can only lose points in that question")
    if no_rule:
        out.append(f"{len(no_rule)} question(s) have no failure-rule item, so no failure rule can fire there: "
                   f"{_ids(no_rule)}")
    if weighted_rule:
        out.append(f"{len(weighted_rule)} failure-rule item(s) carry a weight (question:weight {_ids(weighted_rule)})")
    if last_not_user:
        out.append(f"{len(last_not_user)} dialogue(s) do not end with a 'user' turn: {_ids(last_not_user)}")
    return out


def select(questions: Sequence[Question], subset: str | None = None, limit: int | None = None,
           ids: Iterable[str] | str | None = None) -> list[Question]:
    """Filter by subset ('all' or None = every one) and ids, then keep the first `limit`; file order kept."""
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
