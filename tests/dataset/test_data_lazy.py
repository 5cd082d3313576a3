"""Lazy data loading (a run's questions read again from their rows): the same questions, warnings, errors
and hash as loading everything, a small fraction of the memory, and a data file changed mid-run refused."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dataset.load import QuestionRef, QuestionRows, load_dataset, select
from rubric_engine.errors import DataError
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import BenchmarkSpec

from conftest import REPO as ROOT


@pytest.fixture(scope="module")
def spec() -> BenchmarkSpec:
    return load_spec(ROOT / "benchmarks" / "heartbench")


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def write(path: Path, rows: list[dict[str, Any]], sep: str = "\n") -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + sep for r in rows), encoding="utf-8")
    return path


def same_as_eager(spec: BenchmarkSpec, path: Path) -> None:
    eager, lazy = load_dataset(spec, path), load_dataset(spec, path, lazy=True)
    assert isinstance(lazy.questions, QuestionRows) and isinstance(eager.questions, list)
    assert all(isinstance(r, QuestionRef) for r in lazy.questions.refs)
    assert list(lazy.questions) == eager.questions  # every field the dataclass compares
    for e, r in zip(eager.questions, lazy.questions.refs):
        q = lazy.questions.question(r)
        assert (q.extra, q.source_row) == (e.extra, e.source_row)
        assert lazy.questions.row(r) == e.source_row
        assert (r.id, r.subset, r.scenario) == (e.id, e.subset, e.scenario)
    assert (lazy.sha256, lazy.warnings, lazy.source, lazy.trust) == (eager.sha256, eager.warnings, eager.source,
                                                                     eager.trust)
    assert lazy.item_tags == eager.item_tags and lazy.example_tags == eager.example_tags


def test_lazy_equals_eager_on_the_mini_file(spec: BenchmarkSpec, mini_file: Path) -> None:
    same_as_eager(spec, mini_file)


def test_lazy_equals_eager_on_the_real_file(spec: BenchmarkSpec, heartbench_file: Path) -> None:
    same_as_eager(spec, heartbench_file)


def test_offsets_survive_a_bom_blank_lines_and_crlf(spec: BenchmarkSpec, mini_file: Path, tmp_path: Path) -> None:
    rows = rows_of(mini_file)
    text = "\ufeff" + "\r\n\r\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\r\n"
    f = tmp_path / "bom.jsonl"
    f.write_text(text, encoding="utf-8", newline="")
    same_as_eager(spec, f)
    lazy = load_dataset(spec, f, lazy=True).questions
    assert isinstance(lazy, QuestionRows)
    assert [r.line for r in lazy.refs][:3] == [1, 3, 5]


def test_csv_data_is_held_whole(mini_file: Path) -> None:
    qa = load_spec(ROOT / "benchmarks" / "reference_qa")
    eager, lazy = load_dataset(qa), load_dataset(qa, lazy=True)
    assert isinstance(lazy.questions, QuestionRows) and all(r.offset == -1 for r in lazy.questions.refs)
    assert list(lazy.questions) == eager.questions and lazy.warnings == eager.warnings


def test_select_works_on_refs(spec: BenchmarkSpec, mini_file: Path) -> None:
    eager, lazy = load_dataset(spec, mini_file).questions, load_dataset(spec, mini_file, lazy=True).questions
    assert isinstance(lazy, QuestionRows)
    for kw in ({"subset": "hard"}, {"limit": 5}, {"ids": [eager[7].id, eager[1].id]}):
        assert [r.id for r in select(lazy.refs, **kw)] == [q.id for q in select(eager, **kw)]


@pytest.mark.parametrize("row", [1, 2])
def test_bad_rows_are_reported_as_before(spec: BenchmarkSpec, mini_file: Path, tmp_path: Path, row: int) -> None:
    rows = rows_of(mini_file)[:4]
    rows[row]["rubric"][0]["score"] = "3"
    rows[3]["question_id"] = rows[0]["question_id"]
    f = write(tmp_path / "bad.jsonl", rows)
    errors = []
    for lazy in (False, True):
        with pytest.raises(DataError) as info:
            load_dataset(spec, f, lazy=lazy)
        errors.append(str(info.value))
    assert errors[0] == errors[1] and errors[0].startswith(f"{f}:{row + 1}: rubric[0]: score: non-numeric weight")


def test_a_row_changed_after_validation_is_refused(spec: BenchmarkSpec, mini_file: Path, tmp_path: Path) -> None:
    rows = rows_of(mini_file)
    f = write(tmp_path / "rows.jsonl", rows)
    lazy = load_dataset(spec, f, lazy=True).questions
    assert isinstance(lazy, QuestionRows)
    assert lazy[2].id == rows[2]["question_id"]
    rows[2]["dialogue"][0]["content"] = "changed: " + rows[2]["dialogue"][0]["content"]
    write(f, rows)
    with pytest.raises(DataError, match=rf"rows.jsonl:3: row of question '{rows[2]['question_id']}' changed since"):
        lazy.question(lazy.refs[2])
    assert lazy[0].id == rows[0]["question_id"]  # rows before the change still read: only the moved ones fail


def test_lazy_holds_a_small_fraction_of_the_rows(spec: BenchmarkSpec, mini_file: Path, tmp_path: Path) -> None:
    base = rows_of(mini_file)
    rows = [dict(base[i % len(base)], question_id=f"q{i:05d}") for i in range(1200)]
    f = write(tmp_path / "many.jsonl", rows)
    few = write(tmp_path / "few.jsonl", rows[:3])
    for lazy in (False, True):  # whatever either path imports on first use is imported before anything is traced
        load_dataset(spec, few, lazy=lazy)
    held = {}
    for lazy in (False, True):
        gc.collect()
        tracemalloc.start()
        ds = load_dataset(spec, f, lazy=lazy)
        gc.collect()  # what the dataset holds, not garbage the collector has not reached yet (seen in CI: the
        held[lazy] = tracemalloc.get_traced_memory()[0]  # lazy path's parsed-and-dropped rows counted as held)
        tracemalloc.stop()
        assert len(ds.questions) == 1200
        del ds
    assert held[True] < held[False] / 5, held
