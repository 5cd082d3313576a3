"""Human labels files: the JSONL the review page saves, the review CSV filled in a spreadsheet, or
any JSONL/CSV with `<id field>, criterion_index, rater, met` (labels collected elsewhere); the
question-id column is named as the benchmark's own id field (data.fields.id), as in its data.

Why strict: a label matched to the wrong item silently corrupts every agreement number. So a
label for another sheet or benchmark, an unknown question, an index out of range, a `met` value
that is not 1/0/true/false/yes/no/blank, or one rater labelling one item twice is an error naming
file and row; blanks and "unsure" are counted and reported, never dropped without a word.
"""

from __future__ import annotations

import csv
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_engine.errors import DataError
from rubric_engine.store.layout import iter_jsonl
from rubric_engine.text.csvcells import cell_value
from rubric_engine.validity.items import RunItems

__all__ = ["Label", "LabelSet", "read_labels", "parse_met"]

_TRUE = {"1", "true", "yes", "y", "met"}
_FALSE = {"0", "false", "no", "n", "not met", "not_met"}
_REQUIRED = ("criterion_index", "rater", "met")  # plus the id field


@dataclass(frozen=True, slots=True)  # slots: a labels file may hold hundreds of thousands
class Label:
    rater: str
    key: str
    met: bool
    file: str
    row: int


@dataclass
class LabelSet:
    labels: list[Label] = field(default_factory=list)
    blank: Counter = field(default_factory=Counter)  # file -> rows with no label
    unsure: Counter = field(default_factory=Counter)  # file -> rows marked unsure
    sheets: set[str] = field(default_factory=set)

    @property
    def raters(self) -> list[str]:
        return sorted({lab.rater for lab in self.labels})

    def warnings(self) -> list[str]:
        out = [f"{f}: {n} row(s) with no label (blank) not used" for f, n in sorted(self.blank.items())]
        out += [f"{f}: {n} row(s) marked unsure not used" for f, n in sorted(self.unsure.items())]
        return out


def parse_met(value: Any) -> bool | str | None:
    """True / False, 'unsure', or None for blank; ValueError for anything else."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text == "":
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if text in ("unsure", "?"):
        return "unsure"
    raise ValueError(value)


_USED = ("benchmark", "met", "rater", "criterion_index", "item_key", "sheet_id")  # plus the id field


def _rows(path: Path, id_field: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, row) pairs, read one row at a time; JSONL rows are numbered by line, CSV rows as a
    spreadsheet shows them. Why streaming: a labels file may be 100 MB of notes and criterion texts, and only
    a few cells of each row are used (`_USED`): a CSV row keeps only those."""
    if path.suffix.lower() != ".csv":
        yield from iter_jsonl(path, error=DataError,
                              fix=f"each line must be one JSON object with {id_field}, criterion_index, rater, met")
        return
    reader = None
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            required = (id_field, *_REQUIRED)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise DataError(str(path), f"missing column(s) {', '.join(missing)}", line=1,
                                fix=f"a labels CSV needs the columns {', '.join(required)}")
            used = [c for c in (id_field, *_USED) if c in reader.fieldnames]  # type: ignore[operator]
            # numbered as a spreadsheet shows the rows (header = 1), not by physical line: review.csv's dialogue and
            # reply cells span lines; cell_value undoes the formula guard review.csv was written with
            for number, r in enumerate(reader, start=2):
                yield number, {k: cell_value(r[k]) for k in used}
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(str(path), f"cannot read the labels file ({exc.__class__.__name__}: {exc})",
                        fix="give a JSONL or CSV file saved as UTF-8") from None
    except csv.Error as exc:  # e.g. a cell past the reader's 131,072-character field limit
        raise DataError(str(path), f"unreadable CSV ({exc})", line=reader.line_num if reader else 1,
                        fix="a label cell holds met / rater / note; check that row's quotes") from None


def read_labels(files: Sequence[Path], data: RunItems) -> LabelSet:
    """Read and check every labels file against the items of the runs."""
    result = LabelSet()
    by_question: dict[str, set[str]] = {}
    n_criteria: dict[str, int] = {}
    for it in data.items.values():
        by_question.setdefault(it.qid, set()).add(it.reply_id)
        n_criteria[it.qid] = it.n_criteria
    seen: dict[str, dict[str, Label]] = {}  # rater -> item key -> its label (the duplicate check)
    for path in map(Path, files):
        if not path.is_file():
            raise DataError(str(path), "no such labels file", fix="pass labels=FILE[,FILE...] (JSONL or CSV)")
        name = str(path)
        for n, row in _rows(path, data.id_field):
            def bad(msg: str, fix: str = "") -> DataError:
                return DataError(str(path), msg, line=n, fix=fix)

            bench = str(row.get("benchmark") or "").strip()
            if bench and bench != data.benchmark:
                raise bad(f"labels for benchmark {bench!r}, but the runs are {data.benchmark!r}",
                          "pass the run directories the sheet was exported from")
            try:
                met = parse_met(row.get("met"))
            except ValueError:
                raise bad(f"met={row.get('met')!r} is not one of 1/0/true/false/yes/no/unsure/blank") from None
            if met is None:
                result.blank[str(path)] += 1
                continue
            if met == "unsure":
                result.unsure[str(path)] += 1
                continue
            rater = str(row.get("rater") or "").strip()
            if not rater:
                raise bad("no rater", "fill the rater column with the reviewer's name")
            qid = str(row.get(data.id_field) or "").strip()
            try:
                idx = int(str(row.get("criterion_index")).strip())
            except ValueError:
                raise bad(f"criterion_index={row.get('criterion_index')!r} is not a whole number") from None
            key = str(row.get("item_key") or "").strip()
            sheet = str(row.get("sheet_id") or "").strip()
            if key:
                if key not in data.items:
                    where = f"sheet {sheet}" if sheet else "another sheet"
                    raise bad(f"item {key!r} is not in these runs (labels of {where}, or of other runs?)",
                              "pass the run directories the sheet was exported from")
                it = data.items[key]
                if (it.qid, it.criterion_index) != (qid or it.qid, idx):
                    raise bad(f"item_key {key!r} does not match {data.id_field}={qid!r}, criterion_index={idx}")
            else:
                if qid not in by_question:
                    raise bad(f"{data.id_field} {qid!r} is not in these runs", "is it the right benchmark or run?")
                if not 1 <= idx <= n_criteria[qid]:
                    raise bad(f"criterion_index {idx} out of range for {qid} (1..{n_criteria[qid]})")
                if len(by_question[qid]) > 1:
                    raise bad(f"question {qid} has {len(by_question[qid])} different replies in these runs, so "
                              f"{data.id_field} + criterion_index is ambiguous", "add the item_key column from the review sheet")
                key = next(k for k in (f"{qid}#{idx}@{r}" for r in by_question[qid]) if k in data.items)
            if sheet:
                result.sheets.add(sheet)
            rater = sys.intern(rater)  # one string per rater, not one per row
            mine = seen.setdefault(rater, {})
            if key in mine:
                raise bad(f"rater {rater!r} labelled item {key} twice (first at {mine[key].file}:{mine[key].row})",
                          "keep one label per rater and item")
            label = mine[key] = Label(rater=rater, key=key, met=bool(met), file=name, row=n)
            result.labels.append(label)
    return result
