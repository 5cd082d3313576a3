"""Per-turn reference answers (dataset/references.py), in-process so the mutation tool sees them.

The rules the module docstring and docs/authoring.md state: a reference field holding a list gives one
reference per turn and must hold strings; a second file (`data.references`: path or url + sha256, `id`,
`answer` as a dotted path such as `choices.0.turns`) is checked like the data (found, sha256, one JSON object
a line, no id twice, an id and a text at the declared paths, errors naming the file and the line); the file
is the source for the questions it holds, a question it lacks keeps its row's. No call leaves this machine:
a URL's file is placed in the download cache under its pinned sha256 (an unreachable 127.0.0.1 port otherwise).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dataset.load import load_dataset
from rubric_engine.dataset.references import load_references, row_references, with_references
from rubric_engine.datatypes import Question
from rubric_engine.errors import DataError
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import References

from conftest import DATA


def _spec(tmp_path: Path, rows: list[Any] | None = None, text: str | None = None, **ref: Any) -> tuple[Any, Path]:
    """scripted_mini copied into tmp_path, with a references file `refs.jsonl` beside its spec."""
    root = tmp_path / "bench"
    shutil.copytree(DATA / "scripted_mini", root)
    refs = root / "refs.jsonl"
    refs.write_text(text if text is not None else "".join(json.dumps(r) + "\n" for r in rows or []), encoding="utf-8")
    spec = load_spec(root)
    spec.data.references = References(**({"path": "refs.jsonl"} | ref))
    return spec, refs


def test_a_reference_list_in_the_row_is_one_reference_per_turn() -> None:
    assert row_references(["r1", "r2"], "f.jsonl:3", "reference") == ("r1", "r2")
    assert row_references([], "f.jsonl:3", "reference") == ()
    assert row_references("one text", "f.jsonl:3", "reference") is None
    assert row_references(None, "f.jsonl:3", "reference") is None
    with pytest.raises(DataError) as e:
        row_references(["r1", 2], "f.jsonl:3", "ref")
    assert str(e.value) == ("f.jsonl:3: ref: a list of references must hold strings, one per turn; "
                            "got ['r1', 2] (data.fields.reference)")


def test_the_file_s_id_and_answer_are_read_at_their_dotted_paths(tmp_path: Path) -> None:
    rows = [{"question_id": 81, "choices": [{"turns": ["A1", "A2"]}, {"turns": ["wrong"]}]},
            {"question_id": "x2", "choices": [{"turns": "only one"}]},
            {"question_id": "x3", "choices": {"0": {"turns": ["key 0 of an object"]}}}]
    spec, _ = _spec(tmp_path, rows, id="question_id", answer="choices.0.turns")
    warnings: list[str] = []
    assert load_references(spec, warnings=warnings) == {  # an int id read as its text; a string as one turn
        "81": ("A1", "A2"), "x2": ("only one",), "x3": ("key 0 of an object",)}
    assert warnings == []


def test_a_blank_line_is_skipped_and_the_default_fields_are_id_and_reference(tmp_path: Path) -> None:
    spec, _ = _spec(tmp_path, text='{"id": "a", "reference": ["r"]}\n\n{"id": "b", "reference": "s"}\n')
    assert load_references(spec) == {"a": ("r",), "b": ("s",)}


@pytest.mark.parametrize(("row", "line", "message"), [
    ({"answer": ["r"]}, 2, "no question id at 'qid'"),
    ({"qid": {"n": 1}, "answer": ["r"]}, 2, "no question id at 'qid'"),
    ({"qid": ["a"], "answer": ["r"]}, 2, "no question id at 'qid'"),
    ({"qid": True, "answer": ["r"]}, 2, "no question id at 'qid'"),
])
def test_a_row_without_a_usable_id_names_the_file_and_line(tmp_path: Path, row: Any, line: int, message: str) -> None:
    spec, refs = _spec(tmp_path, [{"qid": "ok", "answer": ["r"]}, row], id="qid", answer="answer")
    with pytest.raises(DataError) as e:
        load_references(spec)
    assert str(e.value) == f"{refs}:{line}: {message}; check data.references.id"


@pytest.mark.parametrize("answer", [None, 3, ["r", 4], {"t": "r"}])
def test_a_row_without_reference_text_names_the_file_and_line(tmp_path: Path, answer: Any) -> None:
    row: dict[str, Any] = {"qid": "b"} if answer is None else {"qid": "b", "a": {"b": answer}}
    spec, refs = _spec(tmp_path, [{"qid": "a", "a": {"b": "ok"}}, row], id="qid", answer="a.b")
    with pytest.raises(DataError) as e:
        load_references(spec)
    assert str(e.value) == (f"{refs}:2: no reference text (a string or a list of strings) at 'a.b'; "
                            "check data.references.answer (a dotted path such as choices.0.turns)")


def test_an_index_past_the_list_or_into_a_text_is_no_text(tmp_path: Path) -> None:
    # "c.1" on a one-element list and "c.0" on a string: both read as nothing, never as a neighbour's text
    for value in (["only"], "text"):
        spec, refs = _spec(tmp_path / str(type(value).__name__), [{"id": "a", "c": value}], answer="c.1")
        with pytest.raises(DataError, match="no reference text"):
            load_references(spec)
    spec, _ = _spec(tmp_path / "ok", [{"id": "a", "c": ["first", "second"]}], answer="c.1")
    assert load_references(spec) == {"a": ("second",)}


def test_an_id_twice_names_the_second_line_even_as_a_number_and_a_text(tmp_path: Path) -> None:
    spec, refs = _spec(tmp_path, [{"id": 7, "reference": "r"}, {"id": "x", "reference": "r"},
                                  {"id": "7", "reference": "r"}])
    with pytest.raises(DataError) as e:
        load_references(spec)
    assert str(e.value) == f"{refs}:3: question id '7' appears twice; ids must be unique"


def test_a_missing_file_or_one_whose_sha256_differs(tmp_path: Path) -> None:
    spec, refs = _spec(tmp_path, [{"id": "a", "reference": "r"}])
    pinned = hashlib.sha256(refs.read_bytes()).hexdigest()
    spec.data.references = References(path="refs.jsonl", sha256=pinned)
    warnings: list[str] = []
    assert load_references(spec, warnings=warnings) == {"a": ("r",)} and warnings == []
    spec.data.references = References(path="refs.jsonl", sha256="0" * 64)
    assert load_references(spec, warnings=warnings) == {"a": ("r",)}  # used as given, with one warning
    assert warnings == [f"{refs}: sha256 differs from the spec's pinned data.references.sha256; using the file as given"]
    spec.data.references = References(path="gone.jsonl")
    with pytest.raises(DataError) as e:
        load_references(spec)
    assert str(e.value) == f"{refs.parent / 'gone.jsonl'}: references file not found; check data.references.path in the spec"


def test_a_path_outside_the_spec_s_directories_is_refused(tmp_path: Path) -> None:
    spec, _ = _spec(tmp_path, [{"id": "a", "reference": "r"}])
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text('{"id": "a", "reference": "r"}\n', encoding="utf-8")
    spec.data.references = References(path=str(outside))
    with pytest.raises(Exception, match="data.references.path"):
        load_references(spec)


def test_neither_url_nor_path_names_the_spec_file_or_its_name(tmp_path: Path) -> None:
    spec, _ = _spec(tmp_path, [])
    spec.data.references = References()
    rest = ("data.references declares neither url nor path; give data.references.url (with sha256) or "
            "data.references.path")
    with pytest.raises(DataError) as e:
        load_references(spec)
    assert str(e.value) == f"{spec.files[-1]}: {rest}" and spec.files[-1].name == "benchmark.yaml"
    spec._files = []
    with pytest.raises(DataError) as e:
        load_references(spec)
    assert str(e.value) == f"{spec.name}: {rest}"


def test_a_url_s_file_comes_from_the_download_cache_under_its_sha256(tmp_path: Path) -> None:
    spec, _ = _spec(tmp_path, [])
    body = b'{"id": "a", "reference": ["from the url"]}\n'
    digest = hashlib.sha256(body).hexdigest()
    cache = tmp_path / "cache"
    (cache / digest).mkdir(parents=True)
    (cache / digest / "refs.jsonl").write_bytes(body)
    url = "http://127.0.0.1:9/refs.jsonl"  # nothing listens there: only the cached copy can answer
    spec.data.references = References(url=url, sha256=digest)
    assert load_references(spec, cache) == {"a": ("from the url",)}
    # unpinned: the cached copy is trusted on first use, and the caller's warnings say so
    unpinned = cache / ("unverified-" + hashlib.sha256(url.encode()).hexdigest()[:16])
    unpinned.mkdir()
    (unpinned / "refs.jsonl").write_bytes(body)
    spec.data.references = References(url=url)
    warnings: list[str] = []
    assert load_references(spec, str(cache), warnings) == {"a": ("from the url",)}
    assert len(warnings) == 1 and url in warnings[0]


def test_the_file_wins_for_the_questions_it_holds_and_the_rest_keep_their_own(tmp_path: Path) -> None:
    spec = load_spec(DATA / "scripted_mini")
    ds = load_dataset(spec, DATA / "scripted_mini" / "scripted_mini.jsonl")
    a, b = ds.questions[0], ds.questions[1]
    b_own = Question(**{**b.__dict__, "references": ("row's own",)}) if hasattr(b, "__dict__") else b
    refs = {a.id: ("file 1", "file 2"), "not-in-data": ("x",)}
    got = with_references([a, b_own], refs)
    assert [q.references for q in got] == [("file 1", "file 2"), b_own.references]
    assert got[1] is b_own and got[0].id == a.id and got[0].turns == a.turns
    lazy = load_dataset(spec, DATA / "scripted_mini" / "scripted_mini.jsonl", lazy=True).questions
    got_lazy = with_references(lazy, refs)
    assert type(got_lazy) is type(lazy) and len(got_lazy) == len(lazy)
    assert got_lazy[0].references == ("file 1", "file 2") and got_lazy[1].references == lazy[1].references
    assert got_lazy.row(got_lazy.refs[1]) == lazy.row(lazy.refs[1])  # the rows as read stay reachable


def test_a_relative_path_is_read_beside_the_spec_file_that_declared_it(tmp_path: Path) -> None:
    # the base declares the file; a spec in another directory extends it: refs.jsonl is the base's
    _, refs = _spec(tmp_path, [{"id": "a", "reference": "the base's"}])
    base = refs.parent
    yaml = (base / "benchmark.yaml").read_text(encoding="utf-8")
    (base / "benchmark.yaml").write_text(yaml.replace("  fields:\n", "  references: {path: refs.jsonl}\n  fields:\n", 1),
                                         encoding="utf-8")
    child = tmp_path / "child"
    child.mkdir()
    (child / "benchmark.yaml").write_text("extends: ../bench\nname: child\n", encoding="utf-8")
    (child / "refs.jsonl").write_text('{"id": "a", "reference": "the child\'s"}\n', encoding="utf-8")
    spec = load_spec(child)
    assert spec.origin("data.references.path")[0] == (base / "benchmark.yaml").resolve()
    assert load_references(spec) == {"a": ("the base's",)}


def test_a_spec_built_in_memory_reads_a_relative_path_from_its_directory(tmp_path: Path) -> None:
    spec, refs = _spec(tmp_path, [{"id": "a", "reference": "r"}])
    spec._origins = {}  # no file declared anything
    assert spec.origin("data.references.path") is None
    assert load_references(spec) == {"a": ("r",)}


def test_warnings_default_to_a_list_of_the_call_s_own(tmp_path: Path) -> None:
    spec, refs = _spec(tmp_path, [{"id": "a", "reference": "r"}])
    spec.data.references = References(path="refs.jsonl", sha256="1" * 64)
    assert load_references(spec) == {"a": ("r",)}  # the differing sha256 is a warning nobody asked for: no crash


def test_the_refusal_of_a_path_outside_names_the_declaring_line_and_the_data_path_way_out(tmp_path: Path) -> None:
    spec, _ = _spec(tmp_path, [])
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text('{"id": "a", "reference": "r"}\n', encoding="utf-8")
    spec.data.references = References(path=str(outside))
    o = spec.origin("data.references.path")
    assert o is not None
    from rubric_engine.errors import SpecError

    with pytest.raises(SpecError) as e:
        load_references(spec)
    assert str(e.value) == (f"{o[0]}:{o[1]}: data.references.path: the path leads outside the spec's directory "
                            f"(symlinks count where they point) (got '{outside}'); keep the file inside "
                            f"{o[0].parent.resolve()}, or pass data.path=FILE on the command line")


def test_the_package_s_own_data_directory_may_hold_the_file(tmp_path: Path) -> None:
    from rubric_engine.spec.files import shipped_data_dir

    spec, _ = _spec(tmp_path, [])
    shipped = shipped_data_dir() / "heartbench_en_sample.jsonl"
    spec.data.references = References(path=str(shipped), id="question_id", answer="rubric.0.content")
    refs = load_references(spec)  # not refused as outside the spec's directory
    assert len(refs) > 1 and all(len(v) == 1 for v in refs.values())
