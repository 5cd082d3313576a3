"""dataset: the counted quirk warnings word for word, CSV and JSON files, plain-text prompts, selection
errors, trust labels. Written against survivors of `python bench/mutation.py dataset`; rows are our own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dataset.load import default_data_cache_dir, load_dataset, parse_rows, select, sha256_file
from rubric_engine.errors import ConfigError, DataError
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import BenchmarkSpec

from conftest import REPO as ROOT
HEART = load_spec(ROOT / "benchmarks" / "heartbench")
# how every error reading a file says the format it was read in (dataset/formats.py)
READ_AS = f"read as data.format jsonl, set in {ROOT / 'benchmarks' / 'heartbench' / 'benchmark.yaml'}:21"
QA = load_spec(ROOT / "benchmarks" / "reference_qa")


def row(qid: Any, *, rubric: list[dict[str, Any]] | None = None, dialogue: Any = None, **extra: Any) -> dict[str, Any]:
    out = {"question_id": qid,
           "dialogue": dialogue if dialogue is not None else [{"role": "A", "content": "我最近睡不好。"}],
           "rubric": rubric if rubric is not None else [{"dimension": "温暖", "score": 2, "content": "语气温和"},
                                                        {"dimension": "其他", "score": None, "content": "角色混淆"}],
           "difficulty": "normal", "primary_scene": "家庭", "secondary_scene": "睡眠"}
    out.update(extra)
    return out


def write(tmp_path: Path, rows: list[dict[str, Any]], name: str = "rows.jsonl") -> Path:
    f = tmp_path / name
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return f


def with_data(spec: BenchmarkSpec, **changes: Any) -> BenchmarkSpec:
    return spec.model_copy(update={"data": spec.data.model_copy(update=changes)})


def test_quirk_warnings_are_counted_and_list_at_most_five_ids(tmp_path: Path) -> None:
    negative = [{"dimension": "温暖", "score": -1, "content": "说教"}, {"dimension": "其他", "score": 2, "content": "x"}]
    other_last = [{"role": "A", "content": "你好"}, {"role": "B", "content": "嗯"}]
    rows = [row(f"e{i}", primary_scene="") for i in range(7)]
    rows += [row("neg", rubric=negative), row("norule", rubric=[{"dimension": "温暖", "score": 1, "content": "x"}]),
             row("last", dialogue=other_last)]
    warnings: list[str] = []
    qs = parse_rows(HEART, write(tmp_path, rows), warnings)
    assert len(qs) == 10
    assert warnings == [
        "7 question(s) have an empty 'primary_scene': e0, e1, e2, e3, e4, ... (+2)",
        "1 (question, ability) pair(s) have only negative-weight items (max = 0): such an ability can only lose "
        "points in that question",
        "1 question(s) have no failure-rule item, so no failure rule can fire there: norule",
        "1 failure-rule item(s) carry a weight (question:weight neg:2)",
        "1 dialogue(s) do not end with a 'user' turn: last",
    ]


def test_a_clean_file_has_no_warnings(tmp_path: Path) -> None:
    warnings: list[str] = []
    qs = parse_rows(HEART, write(tmp_path, [row("a"), row(7)]), warnings)
    assert warnings == []
    assert [q.id for q in qs] == ["a", "7"]  # an integer id is read as text
    a = qs[0]
    assert (a.subset, a.scenario, a.secondary_scenario, a.reference) == ("normal", "家庭", "睡眠", "")
    assert [(c.index, c.label, c.weight, c.ability, c.rule) for c in a.criteria] == [
        (1, "温暖", 2, "warmth", None), (2, "其他", None, None, "role_confusion")]
    assert isinstance(a.criteria[0].weight, int)  # kept as 3, not 3.0, for the prompt


def test_optional_column_absent_from_every_row_is_a_warning(tmp_path: Path) -> None:
    rows = [row("a"), row("b")]
    for r in rows:
        del r["secondary_scene"]
    warnings: list[str] = []
    qs = parse_rows(HEART, write(tmp_path, rows), warnings)
    assert warnings == ["no row has the field 'secondary_scene' (data.fields.secondary_scenario): secondary_scenario "
                        "left empty for all 2 questions, so nothing can be selected or reported by it"]
    assert qs[0].secondary_scenario == ""


def test_partly_missing_column_names_the_first_row(tmp_path: Path) -> None:
    rows = [row("a"), row("b"), row("c")]
    del rows[1]["primary_scene"], rows[2]["primary_scene"]
    with pytest.raises(DataError) as err:
        parse_rows(HEART, write(tmp_path, rows))
    assert str(err.value).startswith(f"{tmp_path / 'rows.jsonl'}:2: missing field 'primary_scene' (other rows have it)")
    assert "fix data.fields.scenario in the spec" in str(err.value)


@pytest.mark.parametrize("edit, message", [
    ({"question_id": True}, "question_id: expected a non-empty string id"),
    ({"question_id": 1.5}, "question_id: expected a non-empty string id"),
    ({"dialogue": "  "}, "dialogue: empty or not a list"),
    ({"dialogue": [{"role": "A", "content": "  "}]}, "dialogue[0]: content: expected a non-empty string"),
    ({"dialogue": [{"role": "A"}]}, "dialogue[0]: missing field 'content'"),
    ({"rubric": ["x"]}, "rubric[0]: item is not an object"),
    ({"rubric": [{"dimension": "温暖", "score": float("inf"), "content": "x"}]}, "rubric[0]: score: non-numeric weight"),
    ({"rubric": {"dimension": "温暖"}}, "rubric: empty or not a list"),
    ({"primary_scene": 3}, "primary_scene: expected a non-empty string"),
])
def test_row_errors_name_the_field(tmp_path: Path, edit: dict[str, Any], message: str) -> None:
    f = tmp_path / "rows.jsonl"
    f.write_text(json.dumps(row("a")) + "\n" + json.dumps(row("b", **edit)) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        parse_rows(HEART, f)
    assert str(err.value).startswith(f"{f}:2: {message}")


def test_missing_field_error_lists_the_rows_keys(tmp_path: Path) -> None:
    r = row("a")
    del r["rubric"]
    with pytest.raises(DataError) as err:
        parse_rows(HEART, write(tmp_path, [r]))
    assert ("add it, or fix data.fields.rubric in the spec (keys here: question_id, dialogue, difficulty, "
            "primary_scene, secondary_scene)") in str(err.value)


def test_first_line_bom_is_ignored_and_blank_lines_skipped(tmp_path: Path) -> None:
    f = tmp_path / "bom.jsonl"
    f.write_bytes("\ufeff".encode() + json.dumps(row("a")).encode() + b"\n\n  \n" + json.dumps(row("b")).encode())
    assert [q.id for q in parse_rows(HEART, f)] == ["a", "b"]


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "empty.jsonl"
    f.write_text("\n")
    with pytest.raises(DataError) as err:
        parse_rows(HEART, f)
    assert str(err.value).startswith(f"{f}: no rows")


def test_tags_must_be_lists_of_strings(tmp_path: Path) -> None:
    spec = with_data(HEART, fields=HEART.data.fields.model_copy(update={"example_tags": "tags", "item_tags": "tags"}))
    rubric = [{"dimension": "温暖", "score": 1, "content": "x", "tags": ["axis:a"]},
              {"dimension": "其他", "score": None, "content": "y"}]
    (q,) = parse_rows(spec, write(tmp_path, [row("a", rubric=rubric, tags=["theme:t", "x"])]))
    assert q.tags == ("theme:t", "x") and q.criteria[0].tags == ("axis:a",) and q.criteria[1].tags == ()
    with pytest.raises(DataError) as err:
        parse_rows(spec, write(tmp_path, [row("a", tags="theme:t")]))
    assert "tags: expected a list of strings" in str(err.value) and "got 'theme:t' (data.fields.example_tags)" in str(err.value)
    with pytest.raises(DataError, match=r"rubric\[0\]: tags: expected a list of strings"):
        parse_rows(spec, write(tmp_path, [row("a", rubric=[{"dimension": "温暖", "score": 1, "content": "x",
                                                              "tags": [1]}])]))


# ------------------------------------------------------------------------------------ CSV and JSON files

def test_csv_cells_hold_json_lists_and_text_weights(tmp_path: Path) -> None:
    f = tmp_path / "qa.csv"
    checks = [{"check": "Says 4.", "points": "2"}, {"check": "Shows work.", "points": "0.5"},
              {"check": "Exp.", "points": "1e0"}]
    f.write_text("\ufeffid,question,reference,topics,checks\n"
                 f"q1,2+2?,4,\"[\"\"topic:math\"\"]\",\"{json.dumps(checks).replace(chr(34), chr(34) * 2)}\"\n"
                 "q2,[not json,,,\"[{\"\"check\"\": \"\"x\"\", \"\"points\"\": 1}]\"\n", encoding="utf-8")
    q1, q2 = parse_rows(with_data(QA, path=str(f)), f)
    assert [c.weight for c in q1.criteria] == [2, 0.5, 1.0]
    assert isinstance(q1.criteria[0].weight, int) and isinstance(q1.criteria[2].weight, float)
    assert q1.tags == ("topic:math",) and q1.reference == "4"
    assert q1.dialogue[0].role == "user" and q1.dialogue[0].content == "2+2?"
    assert q2.dialogue[0].content == "[not json"  # a cell that only looks like JSON stays text
    assert q2.tags == () and q2.reference == ""  # empty cells: no tags (this was an error), no reference


def test_csv_text_weight_that_is_not_a_number(tmp_path: Path) -> None:
    f = tmp_path / "qa.csv"
    f.write_text('id,question,reference,topics,checks\nq1,hi,,,"[{""check"": ""x"", ""points"": ""two""}]"\n')
    with pytest.raises(DataError) as err:
        parse_rows(with_data(QA, path=str(f)), f)
    assert str(err.value).startswith(f"{f}:2: checks[0]: points: non-numeric weight 'two'")


def test_json_file_must_be_an_array(tmp_path: Path) -> None:
    spec = with_data(HEART, format="json")
    f = tmp_path / "rows.json"
    f.write_text(json.dumps([row("a"), row("b")], ensure_ascii=False))
    assert [q.id for q in parse_rows(spec, f)] == ["a", "b"]
    f.write_text(json.dumps(row("a")))
    with pytest.raises(DataError) as err:
        parse_rows(spec, f)
    assert str(err.value).startswith(f"{f}: the file holds a JSON dict, not an array of rows")
    f.write_text("[\n{\"a\": 1},\n{oops}\n]")
    with pytest.raises(DataError) as err:
        parse_rows(spec, f)
    assert str(err.value).startswith(f"{f}:3: invalid JSON")


def test_a_json_object_of_row_objects_is_rows_keyed_by_id(tmp_path: Path) -> None:
    """A JSON object whose every value is a row object (EQ-Bench's question files) is read as rows in file
    order, each key the row's id field unless the row names its own."""
    spec = with_data(HEART, format="json")
    f = tmp_path / "rows.json"
    a, b = row("a"), row("b")
    del a["question_id"]
    f.write_text(json.dumps({"7": a, "8": b}, ensure_ascii=False))
    assert [q.id for q in parse_rows(spec, f)] == ["7", "b"]
    f.write_text(json.dumps({"7": a, "8": [b]}, ensure_ascii=False))  # one value not a row: not rows at all
    with pytest.raises(DataError, match="the file holds a JSON dict, not an array of rows"):
        parse_rows(spec, f)


# --------------------------------------------------------------------------------------- loading, selection

def test_local_file_trust_and_pinned_mismatch_warning(tmp_path: Path) -> None:
    f = write(tmp_path, [row("a")])
    ds = load_dataset(HEART, f)
    assert ds.trust == "local" and ds.source == str(f) and ds.sha256 == sha256_file(f)
    assert ds.warnings == [f"{f}: sha256 {ds.sha256} differs from the spec's pinned {HEART.data.sha256} (data.sha256); "
                           "using the file as given, which is fine if you modified it on purpose — results are then "
                           "not comparable with the pinned data"]
    pinned = with_data(HEART, sha256=sha256_file(f))
    assert load_dataset(pinned, f).warnings == []
    assert load_dataset(with_data(HEART, sha256=None), f).warnings == []


def test_data_path_expands_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    write(tmp_path, [row("a")])
    assert [q.id for q in load_dataset(HEART, "~/rows.jsonl").questions] == ["a"]


def test_default_data_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_data_cache_dir() == tmp_path / "rubric-engine" / "data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_data_cache_dir() == Path.home() / ".cache" / "rubric-engine" / "data"


def test_select_messages_and_single_id(tmp_path: Path) -> None:
    qs = parse_rows(HEART, write(tmp_path, [row("a"), row("b", difficulty="hard"), row("c")]))
    assert select(qs, ids="b") == [qs[1]]
    assert select(qs, subset="") == qs and select(qs, subset="normal", limit=1) == [qs[0]]
    with pytest.raises(ConfigError) as err:
        select(qs, subset="easy")
    assert str(err.value) == "unknown subset 'easy'; allowed: hard, normal, all"
    with pytest.raises(ConfigError) as err:
        select(qs, ids=["z", "a", "y"])
    assert str(err.value) == "unknown question id(s): z, y; check ids= (ids are case-sensitive)"
    for bad in (True, -1, 1.0):
        with pytest.raises(ConfigError) as err:
            select(qs, limit=bad)  # type: ignore[arg-type]
        assert str(err.value) == f"limit must be a non-negative integer, got {bad!r}"
    no_subsets = [q.__class__(**{**q.__dict__, "subset": ""}) for q in qs]
    with pytest.raises(ConfigError, match=r"allowed: \(the data has none\), all"):
        select(no_subsets, subset="normal")


# ------------------------------------------------------------------------------------------------ download

@pytest.fixture
def www(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A static server on 127.0.0.1 serving tmp_path/www; yields (base url, dir)."""
    import functools
    import http.server
    import threading

    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    root = tmp_path / "www"
    root.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", root
    finally:
        srv.shutdown()
        srv.server_close()


def test_unpinned_download_is_trusted_on_first_use_with_its_path(www, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import hashlib

    from rubric_engine.dataset.fetch import fetch

    base, root = www
    write(root, [row("a")], "rows.jsonl")
    url = f"{base}/rows.jsonl"
    path, digest = fetch(url, None, tmp_path / "cache")  # no warnings list passed: still fine
    sub = "unverified-" + hashlib.sha256(url.encode()).hexdigest()[:16]
    assert path == tmp_path / "cache" / sub / "rows.jsonl" and digest == sha256_file(path)
    assert (path.parent / "rows.jsonl.sha256").read_text() == digest + "\n"
    spec = with_data(HEART, url=url, sha256=None, path=None)
    ds = load_dataset(spec, cache_dir=tmp_path / "cache2")
    assert ds.trust == "first_use" and ds.source == url
    assert ds.warnings[0] == (f"the spec pins no data.sha256: {url} was trusted on first use; its sha256 {digest} is "
                              f"recorded in {tmp_path / 'cache2' / sub / 'rows.jsonl.sha256'} and checked on every "
                              "later use")
    pinned = load_dataset(with_data(spec, sha256=digest), cache_dir=tmp_path / "cache3")
    assert pinned.trust == "pinned" and pinned.warnings == [] and pinned.sha256 == digest


def test_a_url_without_a_file_name_is_stored_as_data(www, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from rubric_engine.dataset.fetch import fetch

    base, root = www
    (root / "index.html").write_text("x")
    path, _ = fetch(f"{base}/", None, tmp_path / "c", [])
    assert path.name == "data" and path.read_text() == "x"


def test_a_changed_first_use_file_is_refused(www, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from rubric_engine.dataset.fetch import fetch

    base, root = www
    (root / "f.jsonl").write_text("one")
    path, digest = fetch(f"{base}/f.jsonl", None, tmp_path / "c", [])
    path.write_text("two")
    with pytest.raises(DataError) as err:
        fetch(f"{base}/f.jsonl", None, tmp_path / "c", [])
    now = sha256_file(path)
    assert str(err.value) == (f"{path}: sha256 {now} differs from {digest} recorded when it was first downloaded "
                              "(trust on first use): the cached file changed; delete "
                              f"{path.parent} to download and trust it again, or pin data.sha256")


def test_download_error_messages(www, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import socket

    from rubric_engine.dataset.fetch import fetch

    base, root = www
    (root / "f.jsonl").write_text("one")
    pin = "0" * 64
    with pytest.raises(DataError) as err:
        fetch(f"{base}/f.jsonl", pin, tmp_path / "c", [])
    got = sha256_file(root / "f.jsonl")
    assert str(err.value) == (f"{base}/f.jsonl: downloaded file has sha256 {got} but the spec expects {pin} "
                              "(data.sha256); the bad file was deleted; the upstream file changed or the download "
                              "was corrupted: check data.url and data.sha256, or download the file yourself and pass "
                              "data.path=<file>")
    with pytest.raises(DataError) as err:
        fetch(f"{base}/missing.jsonl", None, tmp_path / "c", [])
    assert str(err.value) == (f"{base}/missing.jsonl: download failed: File not found; check the "
                              "network / data.url, or download the file and pass data.path=<file>")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DataError) as err:
        fetch(f"http://127.0.0.1:{port}/x.jsonl", None, tmp_path / "c", [])
    assert str(err.value).startswith(f"http://127.0.0.1:{port}/x.jsonl: download failed: [Errno 111] Connection refused;")


def test_missing_local_file_message(tmp_path: Path) -> None:
    with pytest.raises(DataError) as err:
        load_dataset(HEART, tmp_path / "nope.jsonl")
    assert str(err.value) == (f"{tmp_path / 'nope.jsonl'}: data file not found; check data.path (a relative path is "
                              "relative to the current directory)")


def test_exactly_five_ids_are_listed_without_a_remainder(tmp_path: Path) -> None:
    warnings: list[str] = []
    parse_rows(HEART, write(tmp_path, [row(f"e{i}", primary_scene="") for i in range(5)]), warnings)
    assert warnings == ["5 question(s) have an empty 'primary_scene': e0, e1, e2, e3, e4"]


def test_capital_exponent_weight_in_csv(tmp_path: Path) -> None:
    f = tmp_path / "qa.csv"
    f.write_text('id,question,reference,topics,checks\nq1,hi,,,"[{""check"": ""x"", ""points"": ""2E0""}]"\n')
    (q,) = parse_rows(with_data(QA, path=str(f)), f)
    assert q.criteria[0].weight == 2.0


def test_select_one_id_given_as_text(tmp_path: Path) -> None:
    qs = parse_rows(HEART, write(tmp_path, [row("q10"), row("q1"), row("0")]))
    assert select(qs, ids="q10") == [qs[0]]


# ------------------------------------------------------------------------------------- rows read again (lazy)

def crc_twin(line: bytes, crc: int, hole: bytes = b"@@@@@@@@") -> bytes:
    """`line` with its `hole` filled by ASCII letters chosen so that crc32(result) == crc.

    crc32 over messages of one length is affine in their bits, so flipping the low five bits of each hole
    byte (0x40-0x5f stays printable, never a quote, newline or non-ASCII byte) spans every crc: a changed
    row whose crc matches the validated one is possible, and its errors must still name file and line."""
    import zlib

    start = line.index(hole)
    bits = [(start + i, b) for i in range(len(hole)) for b in range(5)]
    base = zlib.crc32(line)
    rows = []  # one equation per crc bit, over the hole's bits (Gaussian elimination over GF(2))
    for pos, b in bits:
        flipped = bytearray(line)
        flipped[pos] ^= 1 << b
        rows.append(zlib.crc32(bytes(flipped)) ^ base)
    want, chosen, pivots = crc ^ base, [], []
    for k, col in enumerate(rows):  # reduce each column against the pivots so far
        combo = 1 << k
        for p_col, p_combo, p_bit in pivots:
            if col >> p_bit & 1:
                col, combo = col ^ p_col, combo ^ p_combo
        if col:
            pivots.append((col, combo, col.bit_length() - 1))
    for p_col, p_combo, p_bit in sorted(pivots, key=lambda p: -p[2]):
        if want >> p_bit & 1:
            want ^= p_col
            chosen.append(p_combo)
    assert want == 0, "the hole is too small to reach every crc"
    mask = 0
    for combo in chosen:
        mask ^= combo
    out = bytearray(line)
    for k, (pos, b) in enumerate(bits):
        if mask >> k & 1:
            out[pos] ^= 1 << b
    assert zlib.crc32(bytes(out)) == crc
    return bytes(out)


def lazy_with_second_row(tmp_path: Path, second: bytes) -> tuple[Path, Any]:
    """A two-row file loaded lazily, then its second line swapped for a same-length line of the same crc."""
    import zlib

    f = tmp_path / "rows.jsonl"
    first = json.dumps(row("a"), ensure_ascii=False).encode() + b"\n"
    valid = json.dumps(row("b", pad="x" * len(second)), ensure_ascii=False).encode() + b"\n"
    f.write_bytes(first + valid)
    questions = load_dataset(HEART, f, lazy=True).questions
    twin = crc_twin(second.ljust(len(valid) - 1) + b"\n", zlib.crc32(valid))
    assert len(twin) == len(valid) and b"\n" not in twin[:-1]
    f.write_bytes(first + twin)
    return f, questions


def test_a_crc_twin_row_that_is_not_json_is_reported_with_file_and_line(tmp_path: Path) -> None:
    f, questions = lazy_with_second_row(tmp_path, b'{"question_id": "b", @@@@@@@@')
    with pytest.raises(DataError) as err:
        questions.row(questions.refs[1])
    assert str(err.value).startswith(f"{f}:2: invalid JSON")
    assert questions[0].id == "a"


def test_a_crc_twin_row_that_is_not_utf8_is_reported_with_file_and_line(tmp_path: Path) -> None:
    f, questions = lazy_with_second_row(tmp_path, b'{"question_id": "\xff\xfe", "x": "@@@@@@@@"}')
    with pytest.raises(DataError) as err:
        questions[1]
    assert str(err.value).startswith(f"{f}:2: ") and "UTF-8" in str(err.value)


def test_a_crc_twin_row_that_is_no_valid_question_is_reported_with_file_and_line(tmp_path: Path) -> None:
    bad = json.dumps({**row("b"), "rubric": [], "x": "@@@@@@@@"}, ensure_ascii=False).encode()
    f, questions = lazy_with_second_row(tmp_path, bad)
    assert questions.row(questions.refs[1])["rubric"] == []  # the row itself reads: the question is refused
    with pytest.raises(DataError) as err:
        questions[1]
    assert str(err.value) == f"{f}:2: rubric: empty or not a list; every question needs at least one rubric item"


def test_a_changed_row_error_says_what_to_do(tmp_path: Path) -> None:
    f = write(tmp_path, [row("a"), row("b")])
    questions = load_dataset(HEART, f, lazy=True).questions
    write(tmp_path, [row("a"), row("B")])
    with pytest.raises(DataError) as err:
        questions[1]
    assert str(err.value) == (f"{f}:2: row of question 'b' changed since the run validated the file; restore the "
                              "data file, or start the run afresh in a new run directory")


def test_index_rows_without_a_warnings_list(tmp_path: Path) -> None:
    from rubric_engine.dataset.load import index_rows

    f = write(tmp_path, [row("a", primary_scene=""), row("b")])
    rows = index_rows(HEART, f)
    assert [q.id for q in rows] == ["a", "b"] and [r.line for r in rows.refs] == [1, 2]
    warnings: list[str] = []
    index_rows(HEART, f, warnings)
    assert warnings == ["1 question(s) have an empty 'primary_scene': a"]


def test_a_spec_without_data_names_its_last_file_or_its_name(tmp_path: Path) -> None:
    spec = with_data(HEART, url=None, path=None)
    with pytest.raises(DataError) as err:
        load_dataset(spec, cache_dir=tmp_path)
    assert str(err.value) == (f"{HEART.files[-1]}: the spec declares neither data.url nor data.path; "
                              "pass data.path=<file>")
    built = spec.model_copy()
    built._files = []  # a spec built in Python has no files
    with pytest.raises(DataError) as err:
        load_dataset(built, cache_dir=tmp_path)
    assert str(err.value) == "heartbench: the spec declares neither data.url nor data.path; pass data.path=<file>"


# --------------------------------------------------------------------------------- row errors, word for word

def one_row_error(tmp_path: Path, text: str, spec: BenchmarkSpec = HEART) -> str:
    f = tmp_path / "rows.jsonl"
    f.write_text(json.dumps(row("a"), ensure_ascii=False) + "\n" + text + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        parse_rows(spec, f)
    return str(err.value).replace(str(f), "<file>")


@pytest.mark.parametrize("edit, message", [
    ({"dialogue": [{"role": "A"}]}, "<file>:2: dialogue[0]: missing field 'content'; add it, or fix "
     "data.fields.turn_content in the spec (keys here: role)"),
    ({"dialogue": [{"role": "A", "content": 3}]}, "<file>:2: dialogue[0]: content: expected a non-empty string; got 3"),
    ({"primary_scene": ["家庭"]}, "<file>:2: primary_scene: expected a non-empty string; got ['家庭']"),
    ({"rubric": [{"dimension": "温暖", "score": 1}]}, "<file>:2: rubric[0]: missing field 'content'; add it, or fix "
     "data.fields.item_text in the spec (keys here: dimension, score)"),
    ({"dialogue": []}, "<file>:2: dialogue: empty or not a list; every question needs at least one dialogue turn"),
    ({"dialogue": [{"content": "x"}]}, "<file>:2: dialogue[0]: missing field 'role'; add it, or fix "
     "data.fields.turn_role in the spec (keys here: content)"),
    ({"rubric": [{"score": 1, "content": "x"}]}, "<file>:2: rubric[0]: missing field 'dimension'; add it, or fix "
     "data.fields.item_label in the spec (keys here: score, content)"),
    ({"rubric": [["温暖", 1]]}, "<file>:2: rubric[0]: item is not an object; got ['温暖', 1]"),
    ({"rubric": [{"dimension": "温暖", "content": "x"}]}, "<file>:2: rubric[0]: missing field 'score'; add it, or fix "
     "data.fields.item_weight in the spec (keys here: dimension, content)"),
    ({"rubric": [{"dimension": "温暖", "score": None, "content": "x"}]}, "<file>:2: rubric[0]: score: non-numeric "
     "weight None; weights must be numbers between -1e+06 and 1e+06 (null is allowed only for failure-rule items)"),
    ({"dialogue": ["hi"]}, "<file>:2: dialogue[0]: turn is not an object; got 'hi'"),
    ({"dialogue": [{"role": "C", "content": "x"}]}, "<file>:2: dialogue[0]: unknown role 'C'; allowed roles "
     "(data.roles): A, B"),
    ({"rubric": [{"dimension": "温暖", "score": 1, "content": ""}]}, "<file>:2: rubric[0]: content: expected a "
     "non-empty string; got ''"),
])
def test_field_errors_word_for_word(tmp_path: Path, edit: dict[str, Any], message: str) -> None:
    assert one_row_error(tmp_path, json.dumps(row("b", **edit), ensure_ascii=False)) == message


def test_a_row_missing_a_top_level_field_word_for_word(tmp_path: Path) -> None:
    for name, key in (("dialogue", "dialogue"), ("rubric", "rubric"), ("question_id", "id")):
        r = row("b")
        del r[name]
        keys = ", ".join(r)
        assert one_row_error(tmp_path, json.dumps(r, ensure_ascii=False)) == (
            f"<file>:2: missing field {name!r}; add it, or fix data.fields.{key} in the spec (keys here: {keys})")


def test_a_row_that_is_not_an_object_or_not_json_word_for_word(tmp_path: Path) -> None:
    assert one_row_error(tmp_path, "[1, 2]") == "<file>:2: row is a JSON list, not an object; each line must hold one " \
                                                "JSON object"
    for cut in ('{"question_id": "b",', '{"question_id": "b",  \t', '{"question_id": "b",\r'):
        assert one_row_error(tmp_path, cut) == (  # the column where the text ends, not 1 on the next line
            f"<file>:2: invalid JSON: Expecting property name enclosed in double quotes (column 21) ({READ_AS}); "
            "each line must be one complete JSON object (JSON Lines)")


def test_example_tags_error_word_for_word(tmp_path: Path) -> None:
    spec = with_data(HEART, fields=HEART.data.fields.model_copy(update={"example_tags": "tags"}))
    assert one_row_error(tmp_path, json.dumps(row("b", tags="theme:t")), spec) == (
        "<file>:2: tags: expected a list of strings; got 'theme:t' (data.fields.example_tags)")


def test_select_all_subsets_numeric_ids_file_order_and_limit_zero(tmp_path: Path) -> None:
    qs = parse_rows(HEART, write(tmp_path, [row(3), row("b", difficulty="hard"), row(1), row("d", difficulty="hard")]))
    assert select(qs, subset="all") == qs and select(qs, subset=None) == qs and select(qs, limit=0) == []
    assert select(qs, ids=[1, 3]) == [qs[0], qs[2]]  # ids given as numbers match text ids; file order, not ids order
    assert select(qs, subset="hard", ids=["d", "b", "3"][:2]) == [qs[1], qs[3]]
    assert select(qs, subset="hard", ids=["3"]) == []  # an id outside the subset: known, but not selected
    mixed = [qs[0].__class__(**{**qs[0].__dict__, "subset": ""}), qs[1]]
    with pytest.raises(ConfigError) as err:
        select(mixed, subset="normal")
    assert str(err.value) == "unknown subset 'normal'; allowed: hard, all"  # an empty subset is not offered


@pytest.mark.parametrize("label", ["同理心", ["温暖"], 3])
def test_a_label_outside_the_taxonomy_word_for_word(tmp_path: Path, label: Any) -> None:
    known = ", ".join([*HEART.label_to_ability(), *HEART.label_to_rule()])
    text = json.dumps(row("b", rubric=[{"dimension": label, "score": 1, "content": "x"}]), ensure_ascii=False)
    assert one_row_error(tmp_path, text) == (f"<file>:2: rubric[0]: label {label!r} is not in the taxonomy; known "
                                             f"labels: {known}; add it to an ability's or rule's data_labels")


def test_item_tags_error_word_for_word(tmp_path: Path) -> None:
    spec = with_data(HEART, fields=HEART.data.fields.model_copy(update={"item_tags": "tags"}))
    rubric = [{"dimension": "温暖", "score": 1, "content": "x", "tags": "axis:a"}]
    assert one_row_error(tmp_path, json.dumps(row("b", rubric=rubric), ensure_ascii=False), spec) == (
        "<file>:2: rubric[0]: tags: expected a list of strings; got 'axis:a' (data.fields.item_tags)")


def test_items_without_a_label_field_have_an_empty_label(tmp_path: Path) -> None:
    f = tmp_path / "qa.csv"
    f.write_text('id,question,reference,topics,checks\nq1,hi,,,"[{""check"": ""x"", ""points"": 1}]"\n')
    (q,) = parse_rows(with_data(QA, path=str(f)), f)
    assert [(c.label, c.ability, c.rule) for c in q.criteria] == [("", None, None)]


def test_file_level_errors_word_for_word(tmp_path: Path) -> None:
    f = tmp_path / "rows.jsonl"
    f.write_bytes(json.dumps(row("a")).encode() + b"\n" + "\ufeff".encode() + json.dumps(row("b")).encode() + b"\n")
    with pytest.raises(DataError) as err:
        parse_rows(HEART, f)  # a BOM is dropped from the first line only: mid-file it marks two files joined
    assert str(err.value).startswith(f"{f}:2: invalid JSON: Unexpected UTF-8 BOM")
    f.write_bytes(b"X" + json.dumps(row("a")).encode() + b"\n")
    with pytest.raises(DataError) as err:
        parse_rows(HEART, f)  # only the BOM is dropped, nothing else at the start
    assert str(err.value).startswith(f"{f}:1: invalid JSON: Expecting value (column 1)")
    f.write_bytes(json.dumps(row("a")).encode() + b"\n" + b'{"question_id": "\xff"}\n')
    with pytest.raises(DataError) as err:
        parse_rows(HEART, f)
    assert str(err.value) == f"{f}:2: not valid UTF-8 (invalid start byte at byte 17) ({READ_AS}); save the file as UTF-8"
    f.write_text("\n \n")
    with pytest.raises(DataError) as err:
        parse_rows(HEART, f)
    assert str(err.value) == f"{f}: no rows ({READ_AS}); the file is empty: point data.path at the benchmark's data file"


def test_json_file_errors_name_the_row(tmp_path: Path) -> None:
    spec = with_data(HEART, format="json")
    f = tmp_path / "rows.json"
    f.write_text(json.dumps([row("a"), row("b", dialogue=[])], ensure_ascii=False))
    with pytest.raises(DataError) as err:
        parse_rows(spec, f)
    assert str(err.value) == (f"{f}:2: dialogue: empty or not a list; every question needs at least one dialogue "
                              "turn")  # line = the row's 1-based position in the array
    f.write_text(json.dumps({"rows": []}))
    with pytest.raises(DataError) as err:
        parse_rows(spec, f)
    read_as = READ_AS.replace("jsonl", "json")  # the spec's line, its value changed by with_data
    assert str(err.value) == (f"{f}: the file holds a JSON dict, not an array of rows ({read_as}); data.format json "
                              "expects [ {...}, {...} ]; for one object a line use jsonl")
    f.write_text("[\n{}\n")
    with pytest.raises(DataError) as err:
        parse_rows(spec, f)
    assert str(err.value) == (f"{f}:3: invalid JSON: Expecting ',' delimiter (column 1) ({read_as}); data.format json "
                              "expects one JSON array of row objects")


@pytest.mark.parametrize("edit, message", [
    ({"question_id": ""}, "<file>:2: question_id: expected a non-empty string id; got ''"),
    ({"question_id": "a"}, "<file>:2: duplicate id 'a' (field 'question_id'); first seen at line 1; ids must be unique"),
])
def test_id_errors_word_for_word(tmp_path: Path, edit: dict[str, Any], message: str) -> None:
    assert one_row_error(tmp_path, json.dumps(row("b", **edit), ensure_ascii=False)) == message
