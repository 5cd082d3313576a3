"""Labels files read one row at a time (labels.read_labels): a CSV of many rows, with long note and
criterion cells the agreement never uses, gives exactly the labels a reader of the whole file would, and
its errors still name the spreadsheet row. (Memory is measured in bench/bench_labels.py, not here.)"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rubric_engine.errors import DataError
from rubric_engine.validity.items import Item, RunItems
from rubric_engine.validity.labels import read_labels

QUESTIONS, CRITERIA, RATERS = 300, 8, 5
HEADER = ["sheet_id", "item_key", "question_id", "criterion_index", "criterion", "weight", "met", "rater", "note"]


def _items() -> RunItems:
    items = {}
    for q in range(QUESTIONS):
        for c in range(1, CRITERIA + 1):
            key = f"q{q}#{c}@r{q:04d}"
            items[key] = Item(key=key, qid=f"q{q}", criterion_index=c, reply_id=f"r{q:04d}", text="crit", weight=1.0,
                              fields={}, n_criteria=CRITERIA)
    return RunItems(benchmark="b", items=items, verdicts=[], replies={}, dialogues={}, taxonomy=None,  # type: ignore[arg-type]
                    spec={}, runs=[], id_field="question_id")


def _met(q: int, c: int, r: int) -> str:
    return ["yes", "no", "1", "0", "TRUE", "", "unsure"][(q * 7 + c * 3 + r) % 7]


def _write(path: Path, rows: list[list[object]]) -> None:
    with open(path, "w", encoding="utf-8-sig", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(HEADER)
        w.writerows(rows)


def _rows() -> list[list[object]]:
    note = "a long note, with commas, \"quotes\" and a line\nbreak " * 20
    rows: list[list[object]] = []
    for r in range(RATERS):
        for q in range(QUESTIONS):
            for c in range(1, CRITERIA + 1):
                key = f"q{q}#{c}@r{q:04d}" if (q + r) % 2 else ""  # half with item_key, half by id + index
                rows.append(["s1", key, f"q{q}", c, f"=criterion {c}\nof {q}", 1, _met(q, c, r), f"rater{r}", note])
    return rows


def test_a_csv_of_many_rows_gives_every_label_once(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    _write(path, _rows())
    got = read_labels([path], _items())
    expected = {(f"rater{r}", f"q{q}#{c}@r{q:04d}"): _met(q, c, r).lower() in ("yes", "1", "true")
                for r in range(RATERS) for q in range(QUESTIONS) for c in range(1, CRITERIA + 1)
                if _met(q, c, r) not in ("", "unsure")}
    assert {(lab.rater, lab.key): lab.met for lab in got.labels} == expected
    assert len(got.labels) == len(expected)  # each once
    n = RATERS * QUESTIONS * CRITERIA
    assert got.blank[str(path)] == sum(_met(q, c, r) == "" for r in range(RATERS) for q in range(QUESTIONS)
                                       for c in range(1, CRITERIA + 1))
    assert got.blank[str(path)] + got.unsure[str(path)] + len(got.labels) == n
    assert got.sheets == {"s1"} and got.raters == [f"rater{r}" for r in range(RATERS)]


def test_a_duplicate_far_into_a_big_csv_names_both_rows(tmp_path: Path) -> None:
    rows = _rows()
    first = next(i for i, row in enumerate(rows) if row[6] in ("yes", "no"))
    rows.append(list(rows[first]))
    path = tmp_path / "labels.csv"
    _write(path, rows)
    with pytest.raises(DataError) as err:
        read_labels([path], _items())
    text = str(err.value)
    # every row spans 21 physical lines (the note's 20 line breaks + the criterion's one), yet rows are numbered as a
    # spreadsheet shows them (header = 1, docs/agreement.md), since review.csv's dialogue and reply cells span lines
    assert f"first at {path}:{first + 2}" in text and f"{path}:{len(rows) + 1}" in text, text


def test_jsonl_and_csv_labels_agree(tmp_path: Path) -> None:
    rows = _rows()[: QUESTIONS * CRITERIA]
    csv_path, jsonl_path = tmp_path / "a.csv", tmp_path / "b.jsonl"
    _write(csv_path, rows)
    jsonl_path.write_text("".join(json.dumps(dict(zip(HEADER, row))) + "\n" for row in rows), encoding="utf-8")
    a, b = read_labels([csv_path], _items()), read_labels([jsonl_path], _items())
    assert [(x.rater, x.key, x.met) for x in a.labels] == [(x.rater, x.key, x.met) for x in b.labels]
