"""Baseline answers for pairwise judging (dataset/baseline.py): the rules docs/authoring.md and docs/cli.md state.

In-process, so the mutation tool sees them: one file or one per data group (`by`), the row's answer a string
or the last `answer_role` message of a list (its text at the dotted path `message_content`, a plain string met
on the way taken as it is), a blank answer counted missing, and every refusal: no file for a group, a file not
found, a row without the id field, a second answer for one id, a row without the response field, and missing
answers (one line naming the file, how many of how many, the first five ids, "and N more"). The last test is
the console-script proof that a baseline answer holding a key is stored redacted, as every reply is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dataset.baseline import command_line_answers, load_baseline_answers
from rubric_engine.datatypes import QuestionRef
from rubric_engine.errors import DataError
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import AnswerFile, BaselineAnswers

from conftest import DATA
MINI_SPEC = DATA / "pairwise_mini_spec"


@pytest.fixture(scope="module")
def spec() -> Any:
    return load_spec(MINI_SPEC)


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _refs(*ids: str, subset: str = "") -> list[QuestionRef]:
    return [QuestionRef(id=i, subset=subset) for i in ids]


def _one_file(path: Path, **keys: Any) -> BaselineAnswers:
    return BaselineAnswers(files={"all": AnswerFile(path=str(path))}, **keys)


def test_the_spec_s_per_category_files_answer_each_question_from_its_own_group(spec: Any) -> None:
    refs = _refs("pw-h1", "pw-h4", subset="hard_prompt") + _refs("pw-c2", subset="creative_writing")
    got = load_baseline_answers(spec, refs, spec.baseline.answers)
    assert got == {"pw-h1": "base-hard answers pw-h1 (written for this project's tests).",
                   "pw-h4": "base-hard answers pw-h4 (written for this project's tests).",
                   "pw-c2": "base-creative answers pw-c2 (written for this project's tests)."}


def test_a_group_without_a_file_is_refused_naming_the_group_and_the_question(spec: Any) -> None:
    with pytest.raises(DataError) as e:
        load_baseline_answers(spec, _refs("q9", subset="poetry"), spec.baseline.answers)
    assert str(e.value) == (f"{spec.name}: baseline.answers.files has no file for subset 'poetry' (question q9); add "
                            "a file for 'poetry' under baseline.answers.files, or leave those questions out with subset=")


def test_the_command_line_file_is_one_file_keyed_by_the_data_s_id_field(spec: Any, tmp_path: Path) -> None:
    declared = command_line_answers(spec, str(_write(tmp_path / "b.jsonl", [{"uid": "a", "response": "r-a"}])))
    assert declared.id == "uid" and declared.by is None and list(declared.files) == ["all"]
    assert declared.response == "response"
    # without `by`, every question (whatever its subset) reads the one file
    assert load_baseline_answers(spec, _refs("a", subset="anything"), declared, command_line=True) == {"a": "r-a"}


def test_a_command_line_path_may_start_with_a_tilde(spec: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    _write(tmp_path / "b.jsonl", [{"uid": "a", "response": "r-a"}])
    declared = command_line_answers(spec, "~/b.jsonl")
    assert load_baseline_answers(spec, _refs("a"), declared, command_line=True) == {"a": "r-a"}


def test_a_spec_s_relative_path_is_read_beside_the_spec_not_the_working_directory(spec: Any, tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "baseline_hard.jsonl", [{"uid": "pw-h1", "response": "the working directory's copy"}])
    got = load_baseline_answers(spec, _refs("pw-h1", subset="hard_prompt"), spec.baseline.answers)
    assert got["pw-h1"].startswith("base-hard answers pw-h1")


def test_other_rows_are_skipped_and_only_the_wanted_ids_returned(spec: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "b.jsonl", [{"id": "x", "response": "rx"}, {"id": 7, "response": "r7"},
                                         {"id": "y", "response": "ry"}, {"id": "x2"}])  # x2 has no response: unread
    assert load_baseline_answers(spec, _refs("7", "y"), _one_file(path), command_line=True) == {"7": "r7", "y": "ry"}


@pytest.mark.parametrize(("response", "expected"), [
    ("plain text", "plain text"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "first"},
      {"role": "user", "content": "more"}, {"role": "assistant", "content": "last"}], "last"),
    ([{"role": "assistant", "content": {"answer": "nested"}}, {"role": "user", "content": "after"}], "nested"),
    ([{"role": "assistant", "content": "a plain string met on the way"}], "a plain string met on the way"),
])
def test_the_answer_is_a_string_or_the_last_assistant_message(spec: Any, tmp_path: Path, response: Any,
                                                              expected: str) -> None:
    path = _write(tmp_path / "b.jsonl", [{"id": "q", "messages": response}])
    declared = _one_file(path, response="messages", message_content="content.answer")
    assert load_baseline_answers(spec, _refs("q"), declared, command_line=True) == {"q": expected}


def test_declared_role_and_content_fields_are_the_ones_read(spec: Any, tmp_path: Path) -> None:
    msgs = [{"from": "gpt", "value": {"text": "the model's"}}, {"from": "human", "value": {"text": "the user's"}},
            {"role": "assistant", "value": {"text": "not this"}}]
    path = _write(tmp_path / "b.jsonl", [{"qid": "q", "conv": msgs}])
    declared = _one_file(path, id="qid", response="conv", message_role="from", message_content="value.text",
                         answer_role="gpt")
    assert load_baseline_answers(spec, _refs("q"), declared, command_line=True) == {"q": "the model's"}


@pytest.mark.parametrize("response", [
    "", "   \n", [], [{"role": "user", "content": "only the user spoke"}],
    [{"role": "assistant", "content": {"other": "x"}}], [{"role": "assistant", "content": 42}],
    [{"role": "assistant", "content": ["not", "text"]}], ["not a message"], 42, None,
    [{"role": "assistant", "content": {"answer": 5}}], [{"role": "assistant", "content": {"answer": ["x"]}}],
])
def test_a_blank_or_unreadable_answer_counts_as_missing(spec: Any, tmp_path: Path, response: Any) -> None:
    path = _write(tmp_path / "b.jsonl", [{"id": "q", "messages": response}])
    declared = _one_file(path, response="messages", message_content="content.answer")
    with pytest.raises(DataError, match=r"no baseline answer for 1 of 1 question\(s\): q"):
        load_baseline_answers(spec, _refs("q"), declared, command_line=True)


def test_missing_answers_name_the_file_the_count_and_the_first_five_ids(spec: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "b.jsonl", [{"id": "q0", "response": "r"}])
    with pytest.raises(DataError) as e:
        load_baseline_answers(spec, _refs(*[f"q{i}" for i in range(8)]), _one_file(path), command_line=True)
    fix = "; add those answers to the file, or leave the questions out (ids=, subset=, limit=); nothing was called yet"
    assert str(e.value) == f"{path}: no baseline answer for 7 of 8 question(s): q1, q2, q3, q4, q5 and 2 more{fix}"
    for n, named in ((7, "q1, q2, q3, q4, q5 and 1 more"),
                     (6, "q1, q2, q3, q4, q5")):  # six missing: five named and one more; five: all named
        with pytest.raises(DataError) as e:
            load_baseline_answers(spec, _refs(*[f"q{i}" for i in range(n)]), _one_file(path), command_line=True)
        assert str(e.value) == f"{path}: no baseline answer for {n - 1} of {n} question(s): {named}{fix}"


def test_a_file_not_found_is_refused(spec: Any, tmp_path: Path) -> None:
    with pytest.raises(DataError) as e:
        load_baseline_answers(spec, _refs("q"), _one_file(tmp_path / "nope.jsonl"), command_line=True)
    assert str(e.value) == (f"{tmp_path / 'nope.jsonl'}: baseline answers file not found; check the path given for "
                            "baseline.answers")


@pytest.mark.parametrize("row", [{"uid": "q", "response": "r"}, ["q", "r"]])
def test_a_row_without_the_id_field_is_refused_with_its_line(spec: Any, tmp_path: Path, row: Any) -> None:
    path = _write(tmp_path / "b.jsonl", [{"id": "q", "response": "r"}, row])
    with pytest.raises(DataError) as e:
        load_baseline_answers(spec, _refs("q"), _one_file(path), command_line=True)
    assert str(e.value) == f"{path}:2: row has no 'id' field; set baseline.answers.id to the field holding the question id"


def test_a_second_answer_for_one_question_is_refused_with_its_line(spec: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "b.jsonl", [{"id": "q", "response": "r1"}, {"id": "z", "response": "rz"},
                                         {"id": "q", "response": "r2"}])
    with pytest.raises(DataError) as e:
        load_baseline_answers(spec, _refs("q"), _one_file(path), command_line=True)
    assert str(e.value) == f"{path}:3: a second answer for question 'q'; keep one row per id"


def test_a_wanted_row_without_the_response_field_is_refused(spec: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "b.jsonl", [{"id": "q", "reply": "r"}])
    with pytest.raises(DataError) as e:
        load_baseline_answers(spec, _refs("q"), _one_file(path), command_line=True)
    assert str(e.value) == (f"{path}:1: row 'q' has no 'response' field; set baseline.answers.response to the field "
                            "holding the answer")


def test_an_answers_file_from_a_url_is_downloaded_once_into_the_cache_pinned_by_its_sha256(
        spec: Any, tmp_path: Path, static_server: Any) -> None:
    import hashlib

    base, www, seen = static_server
    body = json.dumps({"id": "q", "response": "from the web"}) + "\n"
    (www / "answers.jsonl").write_text(body, encoding="utf-8")
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    pinned = BaselineAnswers(files={"all": AnswerFile(url=f"{base}/answers.jsonl", sha256=digest)})
    warnings: list[str] = []
    got = load_baseline_answers(spec, _refs("q"), pinned, cache_dir=tmp_path / "cache", warnings=warnings)
    assert got == {"q": "from the web"} and (tmp_path / "cache" / digest / "answers.jsonl").is_file()
    assert warnings == [] and len(seen) == 1
    load_baseline_answers(spec, _refs("q"), pinned, cache_dir=tmp_path / "cache")
    assert len(seen) == 1  # the second load reads the cached copy
    unpinned = BaselineAnswers(files={"all": AnswerFile(url=f"{base}/answers.jsonl")})
    load_baseline_answers(spec, _refs("q"), unpinned, cache_dir=tmp_path / "cache2", warnings=warnings)
    assert len(warnings) == 1 and digest in warnings[0]  # trusted on first use: the digest it recorded is said


@pytest.mark.slow
def test_a_baseline_answer_holding_a_key_is_stored_redacted(tmp_path: Path) -> None:
    """The asymmetric fake: only the baseline's reply holds the key; samples.jsonl and every file keep ***."""
    from conftest import clean_env, run_cli

    secret = "sk-BaselineLeak0123456789"
    data = DATA / "pairwise_mini.jsonl"
    ids = [json.loads(x)["uid"] for x in data.read_text("utf-8").splitlines() if x.strip()]
    answers = _write(tmp_path / "b.jsonl", [{"uid": i, "response": f"my key is {secret} ok"} for i in ids])
    out = tmp_path / "run"
    res = run_cli(["benchmark=arena_hard", f"data.path={data}", "candidate=mock", "judge=mock",
                   f"baseline.answers={answers}", "progress=none", f"hydra.run.dir={out}"], clean_env(tmp_path))
    assert res.returncode == 0, res.stderr
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text("utf-8").splitlines()]
    assert len(samples) == len(ids)
    assert all(s["baseline_response"] == "my key is sk-*** ok" for s in samples)
    leaked = [p.name for p in out.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaked == [] and secret not in res.stdout + res.stderr
