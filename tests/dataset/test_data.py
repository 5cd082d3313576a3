"""Data loading: the real HeartBench file (skipped when absent), the download cache, validation messages,
quirks and selection (on the project's mini file)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from rubric_engine.dataset.load import Dataset, Question, load_dataset, select, sha256_file
from rubric_engine.errors import ConfigError, DataError
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import BenchmarkSpec

from conftest import REPO as ROOT
SHA = "ef14a94d29668342a4a40039c21e3cb42bba528c31181d8d61fdf6caf420af6e"
README_COUNTS = {  # the table in ../shared/heartbench/README.md
    "言语表达": 565, "好奇心": 367, "温暖": 305, "第一人称使用": 295, "自主性": 37, "幽默": 36,
    "自我认知": 29, "情绪应对": 390, "情绪理解": 309, "情绪感知": 284, "情绪反应": 32, "主动性": 79,
    "关系构建": 25, "动机": 42, "道德": 23,
}


@pytest.fixture(scope="module")
def spec() -> BenchmarkSpec:
    return load_spec(ROOT / "benchmarks" / "heartbench")


@pytest.fixture(scope="module")
def ds(spec: BenchmarkSpec, heartbench_file: Path) -> Dataset:
    return load_dataset(spec, heartbench_file)


def with_data(spec: BenchmarkSpec, **changes: Any) -> BenchmarkSpec:
    return spec.model_copy(update={"data": spec.data.model_copy(update=changes)})


# ------------------------------------------------------------------------------------------- the real data

def test_counts(ds: Dataset, spec: BenchmarkSpec, heartbench_file: Path) -> None:
    assert len(ds.questions) == 296 and ds.sha256 == SHA and ds.source == str(heartbench_file)
    crits = [c for q in ds.questions for c in q.criteria]
    assert len(crits) == 3114
    assert sum(c.ability is not None for c in crits) == 2818
    rules = [c for c in crits if c.rule is not None]
    assert len(rules) == 296 and {c.rule for c in rules} == {"role_confusion"}
    assert Counter(c.weight for c in rules) == {None: 295, -4: 1}
    assert all((c.ability is None) != (c.rule is None) for c in crits)
    assert Counter(q.subset for q in ds.questions) == {"normal": 212, "hard": 84}
    labels = {a: lab for lab, a in spec.label_to_ability().items()}
    assert {labels[k]: v for k, v in Counter(c.ability for c in crits if c.ability).items()} == README_COUNTS
    assert Counter(q.scenario for q in ds.questions) == {
        "个人成长": 121, "职场心理": 52, "人际与社会化发展": 51, "家庭关系": 37, "亲密关系": 30, "": 5}


def test_question_shape(ds: Dataset) -> None:
    q = ds.questions[0]
    assert q.id == "03UFRn" and q.dialogue[0].role == "A" and q.dialogue[-1].role == "A"
    assert [c.index for c in q.criteria] == list(range(1, len(q.criteria) + 1))
    assert q.criteria[0].label == "好奇心" and q.criteria[0].weight == 3 and isinstance(q.criteria[0].weight, int)
    assert q.criteria[-1].rule == "role_confusion" and q.criteria[-1].weight is None
    assert q.extra == {}
    assert all(3 <= sum(c.ability is not None for c in q.criteria) <= 22 for q in ds.questions)


def test_quirks_are_counted_warnings(ds: Dataset) -> None:
    text = "\n".join(ds.warnings)
    assert "5 question(s) have an empty 'primary_scene'" in text
    assert "302 (question, ability) pair(s) have only negative-weight items" in text
    assert "1 question(s) have no failure-rule item" in text and "XzV0Im" in text
    assert "1 failure-rule item(s) carry a weight" in text
    assert "sha256" not in text  # the pinned file: no hash warning


def test_hard_and_normal_files_are_the_subsets(spec: BenchmarkSpec, ds: Dataset, heartbench_file: Path) -> None:
    if not (heartbench_file.parent / "question_hard.jsonl").is_file():
        pytest.skip("question_hard.jsonl is not beside the real HeartBench file")
    hard = load_dataset(spec, heartbench_file.parent / "question_hard.jsonl")
    assert [q.id for q in hard.questions] == [q.id for q in select(ds.questions, subset="hard")]
    assert any("differs from the spec's pinned" in w and hard.sha256 in w and SHA in w for w in hard.warnings)
    assert any("modified it on purpose" in w for w in hard.warnings)
    # the per-subset files carry no difficulty column: a counted warning, not an error
    assert any("no row has the field 'difficulty'" in w and "84 questions" in w for w in hard.warnings)
    assert {q.subset for q in hard.questions} == {""}


def test_optional_field_missing_in_some_rows_is_an_error(spec: BenchmarkSpec, tmp_path: Path, mini_file: Path) -> None:
    rows = first_rows(mini_file)
    del rows[2]["primary_scene"]
    f = tmp_path / "rows.jsonl"
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_dataset(spec, f)
    assert str(info.value).startswith(f"{f}:3: missing field 'primary_scene' (other rows have it)")
    assert "data.fields.scenario" in str(info.value)


def test_spec_data_path_relative_to_spec_dir(spec: BenchmarkSpec, tmp_path: Path, heartbench_file: Path) -> None:
    d = tmp_path / "b"
    d.mkdir()
    (d / "rows.jsonl").write_bytes(heartbench_file.read_bytes())
    (d / "benchmark.yaml").write_text("extends: heartbench\nname: b\ndata: {path: rows.jsonl}\n")
    local = load_spec(d, search_path=[ROOT / "benchmarks"])
    assert local.data_path() == d / "rows.jsonl"
    got = load_dataset(local)
    assert got.source == str(d / "rows.jsonl") and got.sha256 == SHA and len(got.questions) == 296


# ------------------------------------------------------------------------------------------------ download

def test_download_once_and_verify(spec: BenchmarkSpec, static_server: tuple[str, Path, list[str]], tmp_path: Path,
                                  mini_file: Path) -> None:
    base, www, seen = static_server
    (www / "question_all.jsonl").write_bytes(mini_file.read_bytes())
    SHA = sha256_file(mini_file)  # noqa: N806 - the pinned hash of the file served
    remote = with_data(spec, url=f"{base}/question_all.jsonl", sha256=SHA)
    cache = tmp_path / "cache"
    got = load_dataset(remote, cache_dir=cache)
    target = cache / SHA / "question_all.jsonl"
    assert target.is_file() and sha256_file(target) == SHA
    assert got.source == remote.data.url and got.sha256 == SHA and len(got.questions) == 12
    assert len(seen) == 1
    again = load_dataset(remote, cache_dir=cache)  # served from the cache: no second request
    assert len(seen) == 1 and len(again.questions) == 12
    assert sorted(p.name for p in target.parent.iterdir()) == ["question_all.jsonl"]  # no temp file left


def test_download_bad_sha256(spec: BenchmarkSpec, static_server: tuple[str, Path, list[str]], tmp_path: Path,
                            mini_file: Path) -> None:
    base, www, _ = static_server
    (www / "question_all.jsonl").write_bytes(mini_file.read_bytes()[:-10])
    url = f"{base}/question_all.jsonl"
    actual = sha256_file(www / "question_all.jsonl")
    cache = tmp_path / "cache"
    with pytest.raises(DataError) as info:
        load_dataset(with_data(spec, url=url), cache_dir=cache)
    msg = str(info.value)
    assert msg.startswith(url) and f"has sha256 {actual}" in msg and f"expects {SHA}" in msg
    assert "deleted" in msg and "data.path=" in msg
    assert list((cache / SHA).iterdir()) == []  # the bad file is gone


def test_download_failure(spec: BenchmarkSpec, static_server: tuple[str, Path, list[str]], tmp_path: Path) -> None:
    base, _, _ = static_server
    with pytest.raises(DataError) as info:
        load_dataset(with_data(spec, url=f"{base}/missing.jsonl"), cache_dir=tmp_path / "c")
    assert "download failed" in str(info.value) and "data.path=" in str(info.value)


def test_no_source(spec: BenchmarkSpec) -> None:
    with pytest.raises(DataError, match="neither data.url nor data.path"):
        load_dataset(with_data(spec, url=None, path=None))


def test_missing_local_file(spec: BenchmarkSpec, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="data file not found"):
        load_dataset(spec, tmp_path / "nope.jsonl")


# ------------------------------------------------------------------------------------------ bad rows

def first_rows(path: Path, n: int = 3) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(next(fh)) for _ in range(n)]


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(row: dict[str, Any]) -> None:
        obj = row
        for p in path[:-1]:
            obj = obj[p]
        obj[path[-1]] = value
    return edit


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda row: row.pop(key)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_drop("rubric"), ["missing field 'rubric'", "data.fields.rubric"]),
        (_set(["rubric"], []), ["rubric: empty or not a list"]),
        (_set(["dialogue"], []), ["dialogue: empty or not a list"]),
        (_set(["rubric", 1, "score"], "3"), ["rubric[1]: score: non-numeric weight '3'", "null is allowed only"]),
        (_set(["rubric", 1, "score"], None), ["rubric[1]: score: non-numeric weight None", "failure-rule items"]),
        (_set(["rubric", 2, "dimension"], "同理心"),
         ["rubric[2]: label '同理心' is not in the taxonomy", "known labels: 言语表达, 好奇心", "其他"]),
        (_set(["dialogue", 1, "role"], "C"), ["dialogue[1]: unknown role 'C'", "allowed roles (data.roles): A, B"]),
        (_set(["dialogue", 0, "role"], ["A"]), ["dialogue[0]: unknown role ['A']"]),
        (_set(["rubric", 0, "dimension"], None), ["rubric[0]: label None is not in the taxonomy"]),
        (_set(["rubric", 0, "score"], True), ["rubric[0]: score: non-numeric weight True"]),
        (_set(["dialogue", 0], "hi"), ["dialogue[0]: turn is not an object"]),
        (_set(["question_id"], ""), ["question_id: expected a non-empty string id"]),
        (_set(["difficulty"], "easy"),
         ["difficulty: unknown subset value 'easy'", "allowed (data.subsets): normal, hard"]),
        (_set(["rubric", 0, "content"], ""), ["rubric[0]: content: expected a non-empty string"]),
        (_set(["question_id"], "mq01aa"), ["duplicate id 'mq01aa' (field 'question_id'); first seen at line 1"]),
    ],
)
def test_bad_row_messages(spec: BenchmarkSpec, tmp_path: Path, edit: Callable[[dict[str, Any]], None],
                          expected: list[str], mini_file: Path) -> None:
    rows = first_rows(mini_file)
    edit(rows[1])
    f = tmp_path / "bad.jsonl"
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_dataset(spec, f)
    msg = str(info.value)
    assert msg.startswith(f"{f}:2: "), msg
    for part in expected:
        assert part in msg, msg


def test_invalid_json_line(spec: BenchmarkSpec, tmp_path: Path, mini_file: Path) -> None:
    rows = [json.dumps(r, ensure_ascii=False) for r in first_rows(mini_file)]
    f = tmp_path / "bad.jsonl"
    f.write_text(rows[0] + "\n\n" + rows[1][:-5] + "\n" + rows[2] + "\n", encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_dataset(spec, f)
    assert str(info.value).startswith(f"{f}:3: invalid JSON") and "JSON Lines" in str(info.value)


def test_not_utf8_and_not_an_object(spec: BenchmarkSpec, tmp_path: Path, mini_file: Path) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_bytes(mini_file.read_bytes().split(b"\n")[0] + b"\n\xff\xfe\n")
    with pytest.raises(DataError, match=r"bad.jsonl:2: not valid UTF-8.*save the file as UTF-8"):
        load_dataset(spec, f)
    f.write_text("[1, 2]\n")
    with pytest.raises(DataError, match=r"bad.jsonl:1: row is a JSON list, not an object"):
        load_dataset(spec, f)


def test_extra_fields_kept(spec: BenchmarkSpec, tmp_path: Path, mini_file: Path) -> None:
    rows = first_rows(mini_file, 1)
    rows[0]["source"] = "x"
    f = tmp_path / "rows.jsonl"
    f.write_text(json.dumps(rows[0], ensure_ascii=False) + "\n", encoding="utf-8")
    assert load_dataset(spec, f).questions[0].extra == {"source": "x"}


# ------------------------------------------------------------------------------------------------ select

def test_select(questions: list[Question]) -> None:
    qs = questions
    hard = select(qs, subset="hard")
    assert len(hard) == 4 and all(q.subset == "hard" for q in hard)
    assert select(qs, subset="all") == qs and select(qs) == qs
    assert select(qs, subset="hard", limit=3) == hard[:3]
    picked = [qs[10].id, qs[2].id]
    assert [q.id for q in select(qs, ids=picked)] == [qs[2].id, qs[10].id]  # file order kept
    assert select(qs, ids=picked, limit=1) == [qs[2]]
    assert select(qs, limit=0) == []
    with pytest.raises(ConfigError, match=r"unknown subset 'easy'; allowed: hard, normal, all"):
        select(qs, subset="easy")
    with pytest.raises(ConfigError, match="unknown question id\\(s\\): nope, NOPE2"):
        select(qs, ids=["nope", qs[0].id, "NOPE2"])
    with pytest.raises(ConfigError, match="limit must be a non-negative integer"):
        select(qs, limit=-1)


def test_question_type_is_frozen(questions: list[Question]) -> None:
    q: Question = questions[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.id = "x"  # type: ignore[misc]
