"""specfile: YAML errors word for word, bounds, aliases, duplicate keys, version text, extends by path, the
search path and where an error points after a merge. Written against survivors of
`python bench/mutation.py specfile`; every spec here is our own few lines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rubric_engine.errors import SpecError
from rubric_engine.spec.files import (MAX_SPEC_BYTES, _fmt, _get, _load_chain, _lookup, _parse, _split_key,
                                      benchmark_search_path, deep_merge, list_benchmarks)

from conftest import REPO as ROOT


def spec_file(tmp_path: Path, text: str | bytes, name: str = "b") -> Path:
    d = tmp_path / name
    d.mkdir(parents=True, exist_ok=True)
    f = d / "benchmark.yaml"
    f.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return f


def error(fn, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError) as err:
        fn(*args)
    return str(err.value)


def test_key_paths_print_and_split_the_same_way() -> None:
    assert _fmt(("judge", "model", "name")) == "judge.model.name"
    assert _fmt(("taxonomy", "dimensions", 0, "abilities", 12)) == "taxonomy.dimensions[0].abilities[12]"
    assert _fmt(()) == ""
    assert _split_key("taxonomy.dimensions[0].abilities[12].id") == ("taxonomy", "dimensions", 0, "abilities", 12, "id")
    origins = {(): (Path("f"), 1), ("a",): (Path("f"), 3), ("a", "b", 0): (Path("f"), 5)}
    assert _lookup(origins, ("a", "b", 0, "c")) == (Path("f"), 5)  # nearest written ancestor
    assert _lookup(origins, ("a", "x")) == (Path("f"), 3)
    assert _lookup({}, ("a",)) is None
    assert _get({"a": [{"b": 1}]}, ("a", 0, "b")) == 1
    assert _get({"a": [1]}, ("a", 5)) is None
    assert _get({"a": 1}, ("a", "b")) is None  # attribute lookup on a scalar finds nothing


def test_parse_records_line_of_every_key_and_item(tmp_path: Path) -> None:
    f = spec_file(tmp_path, "name: x\njudge:\n  model: m\nlist:\n  - 1\n  - {k: v}\n")
    data, marks = _parse(f)
    assert data == {"name": "x", "judge": {"model": "m"}, "list": [1, {"k": "v"}]}
    assert marks == {(): (f, 1), ("name",): (f, 1), ("judge",): (f, 2), ("judge", "model"): (f, 3),
                     ("list",): (f, 4), ("list", 0): (f, 5), ("list", 1): (f, 6), ("list", 1, "k"): (f, 6)}


def test_version_written_as_a_number_keeps_its_text(tmp_path: Path) -> None:
    assert _parse(spec_file(tmp_path, "version: 1.10\n"))[0]["version"] == "1.10"
    assert _parse(spec_file(tmp_path, "version: 2\n"))[0]["version"] == "2"
    assert _parse(spec_file(tmp_path, "version: '1.0'\nother: 1.10\n"))[0] == {"version": "1.0", "other": 1.1}


def test_empty_file_is_an_empty_mapping_and_bom_is_skipped(tmp_path: Path) -> None:
    f = spec_file(tmp_path, "")
    assert _parse(f) == ({}, {(): (f, 1)})
    assert _parse(spec_file(tmp_path, "\ufeffname: x\n"))[0] == {"name": "x"}


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    f = spec_file(tmp_path, "- a\n- b\n")
    assert error(_parse, f) == f"{f}: <root>: the top level must be a mapping of keys (got 'list')"


def test_duplicate_key_points_at_both_lines(tmp_path: Path) -> None:
    f = spec_file(tmp_path, "judge:\n  model: a\n  repeats: 1\n  model: b\n")
    assert error(_parse, f) == f"{f}:4: judge.model: duplicate key; it is already set at line 2; keep one"


def test_size_limit_and_encoding(tmp_path: Path) -> None:
    f = spec_file(tmp_path, "name: x\n" + "#" * MAX_SPEC_BYTES)
    size = f.stat().st_size
    assert error(_parse, f) == (f"{f}: <root>: spec file is {size} bytes (limit 262144); a benchmark.yaml is a "
                                "few KB; keep data in data files")
    f = spec_file(tmp_path, "#" * (MAX_SPEC_BYTES - 8) + "\nname: x", name="edge")
    assert f.stat().st_size == MAX_SPEC_BYTES and _parse(f)[0] == {"name": "x"}  # exactly at the limit is fine
    f = spec_file(tmp_path, b"name: \xff\n", name="latin")
    assert error(_parse, f) == (f"{f}: <root>: spec file is not UTF-8 (invalid start byte at byte 6); "
                                "save the file as UTF-8")
    assert error(_parse, tmp_path / "absent.yaml").startswith(f"{tmp_path / 'absent.yaml'}: <root>: cannot read spec "
                                                              "file: No such file or directory")


def test_yaml_syntax_error_names_line_and_context(tmp_path: Path) -> None:
    f = spec_file(tmp_path, "name: x\njudge: {model: a\nother: 1\n")
    msg = error(_parse, f)
    assert msg.startswith(f"{f}:3: <root>: YAML syntax error: ")
    assert "(while parsing a flow mapping at line 2)" in msg
    assert msg.endswith("; fix the YAML at that line (indentation, quotes, a missing ':')")


def test_aliases_are_refused_with_their_line(tmp_path: Path) -> None:
    f = spec_file(tmp_path, "a: &x [1]\nb: 2\nc: *x\n")
    assert error(_parse, f) == (f"{f}:3: <root>: YAML aliases (*name) are not allowed in spec files; "
                                "write the value out, or share settings with extends:")


def test_deep_merge_replaces_lists_and_scalars_and_merges_mappings() -> None:
    base = {"a": {"b": 1, "c": {"d": 1, "e": 2}}, "l": [1, 2], "s": 1}
    over = {"a": {"c": {"e": None}}, "l": [3], "s": {"now": "mapping"}}
    assert deep_merge(base, over) == {"a": {"b": 1, "c": {"d": 1, "e": None}}, "l": [3], "s": {"now": "mapping"}}
    assert base["a"]["c"] == {"d": 1, "e": 2}  # inputs untouched


def test_extends_by_relative_path_and_merged_origins(tmp_path: Path) -> None:
    base = spec_file(tmp_path, "name: base\njudge:\n  model: a\n  repeats: 1\nlist:\n  - x: 1\n", name="base")
    child = spec_file(tmp_path, "extends: ../base\nname: child\njudge:\n  model: b\nlist: []\n", name="child")
    data, marks, files = _load_chain(child.parent, None, [])
    assert data == {"name": "child", "extends": "../base", "judge": {"model": "b", "repeats": 1}, "list": []}
    assert files == [base, child]
    # a key set by the child points at the child, a key kept from the base at the base; the base's list items
    # are gone with the list the child replaced
    assert marks[("judge", "model")] == (child, 4) and marks[("judge", "repeats")] == (base, 4)
    assert marks[("name",)] == (child, 2) and ("list", 0) not in marks and ("list", 0, "x") not in marks


def test_extends_errors(tmp_path: Path) -> None:
    f = spec_file(tmp_path, "name: a\nextends: ../nowhere\n", name="a")
    assert error(_load_chain, f.parent, None, []) == (f"{f}:2: extends: no benchmark.yaml in that directory "
                                                      "(got '../nowhere'); point extends at a benchmark directory")
    f = spec_file(tmp_path, "name: a\nextends: [x]\n", name="a")
    assert error(_load_chain, f.parent, None, []) == (f"{f}:2: extends: must be a benchmark name (got ['x']); "
                                                      "write extends: <name of another benchmark directory>")
    f = spec_file(tmp_path, "name: a\nextends: ''\n", name="a")
    assert "extends: must be a benchmark name (got '')" in error(_load_chain, f.parent, None, [])
    f = spec_file(tmp_path, "extends: a\n", name="a")
    assert error(_load_chain, f.parent, None, []) == (f"{f}: extends: extends cycle: a -> a; remove one of the extends")


def test_extends_finds_a_sibling_before_the_search_path(tmp_path: Path) -> None:
    spec_file(tmp_path, "name: sib\nscale: 1\n", name="sib")
    child = spec_file(tmp_path, "extends: sib\nname: c\n", name="c")
    data, _, files = _load_chain(child.parent, [ROOT / "benchmarks"], [])
    assert data["scale"] == 1 and files[0] == tmp_path / "sib" / "benchmark.yaml"


def test_unknown_benchmark_ranks_close_names_first(tmp_path: Path) -> None:
    for name in ("alpha", "beta_long", "betb"):
        spec_file(tmp_path / "lib", "name: x\n", name=name)
    f = spec_file(tmp_path, "extends: beta\n", name="c")
    msg = error(_load_chain, f.parent, [tmp_path / "lib"], [])
    assert msg == (f"{f}:1: extends: unknown benchmark (got 'beta'); did you mean 'betb'? known benchmarks: betb, "
                   f"beta_long, alpha; searched: {tmp_path / 'lib'}")
    f = spec_file(tmp_path, "extends: zzzz\n", name="d")
    assert error(_load_chain, f.parent, [tmp_path / "empty"], []) == (
        f"{f}:1: extends: unknown benchmark (got 'zzzz'); known benchmarks: (none); searched: {tmp_path / 'empty'}")


def test_search_path_expands_home_and_drops_duplicates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RUBRIC_ENGINE_BENCHMARKS", os.pathsep.join(["~/a", "", "~/a", str(tmp_path / "b")]))
    monkeypatch.chdir(tmp_path)
    path = benchmark_search_path(["~/x"])
    assert path[:4] == [tmp_path / "x", tmp_path / "a", tmp_path / "b", tmp_path / "benchmarks"]
    assert path[4].name == "benchmarks" and (path[4] / "heartbench" / "benchmark.yaml").is_file()
    assert len(path) == 5


def test_list_benchmarks_needs_a_spec_file_and_first_dir_wins(tmp_path: Path) -> None:
    spec_file(tmp_path / "one", "name: a\n", name="a")
    spec_file(tmp_path / "two", "name: a2\n", name="a")
    spec_file(tmp_path / "two", "name: b\n", name="b")
    (tmp_path / "two" / "empty").mkdir()
    (tmp_path / "two" / "file.yaml").write_text("x: 1")
    found = list_benchmarks([tmp_path / "one", tmp_path / "two", tmp_path / "missing"])
    assert found == {"a": tmp_path / "one" / "a", "b": tmp_path / "two" / "b"}
    assert list(found) == ["a", "b"]


def test_get_on_lists_and_mappings() -> None:
    assert _get({"a": [1]}, ("a", 1)) is None  # one past the end
    assert _get({"a": [1]}, ("a", "x")) is None  # a name on a list
    assert _get({"a": {0: "zero"}}, ("a", 0)) == "zero"


def test_search_path_without_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUBRIC_ENGINE_BENCHMARKS", raising=False)
    monkeypatch.chdir(tmp_path)
    path = benchmark_search_path()
    assert path[0] == tmp_path / "benchmarks" and len(path) == 2


def test_unknown_name_lists_the_default_search_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rubric_engine.spec.load import load_spec

    monkeypatch.setenv("RUBRIC_ENGINE_BENCHMARKS", str(tmp_path / "mine"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as err:
        load_spec("no_such_benchmark")
    assert f"searched: {tmp_path / 'mine'}{os.pathsep}{tmp_path / 'benchmarks'}{os.pathsep}" in str(err.value)


def test_a_chain_of_names_is_resolved_on_the_given_search_path(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    spec_file(lib, "name: grand\nlevel: 0\nkeep: 1\n", name="grand")
    spec_file(lib, "extends: grand\nname: parent\nlevel: 1\n", name="parent")
    child = spec_file(tmp_path / "elsewhere", "extends: parent\nname: child\n", name="child")
    data, _, files = _load_chain(child.parent, [lib], [])
    assert (data["level"], data["keep"], data["name"]) == (1, 1, "child")
    assert [f.parent.name for f in files] == ["grand", "parent", "child"]
