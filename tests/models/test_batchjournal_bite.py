"""The batch journal's states and refusals (models/batchjournal.py; docs/operations.md, batch mode), in-process.

The four steps of a seq and what each means on resume (only `submit`: never reached the provider, sent again;
`file`: submitted, looked up before anything is created; `batch`; `end` with its saved lines), what a crash can
leave (a cut last line dropped and the file repaired, a damaged line before it refused with its line number),
which of two lines for one request id is kept (an answer wins over an error line, in either order), and the
refusal of a run without batch=true into a directory whose batches may still be running. The kill -9 paths
run end to end through the console script in tests/models/test_batch.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.models.batchjournal import BATCH_DIR, BATCH_JOURNAL, BatchJournal, check_no_batches_in_flight

OK_A = {"custom_id": "a", "response": {"status_code": 200, "body": {"choices": []}}}
ERR_A = {"custom_id": "a", "response": {"status_code": 500, "body": {}}, "error": None}
FAILED_A = {"custom_id": "a", "error": {"code": "server_error", "message": "x"}}


def _lines(*rows: Any) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows)


def _journal(tmp_path: Path, text: bytes) -> BatchJournal:
    (tmp_path / BATCH_JOURNAL).write_bytes(text)
    return BatchJournal(tmp_path)


def test_each_line_is_one_compact_json_object_with_its_event_and_seq(tmp_path: Path) -> None:
    j = BatchJournal(tmp_path)
    j.append("submit", "s1", ids=["a", "b"])
    j.append("file", "s1", file_id="f")
    j.close()
    j.close()  # closing twice is harmless
    assert (tmp_path / BATCH_JOURNAL).read_bytes() == (b'{"event":"submit","seq":"s1","ids":["a","b"]}\n'
                                                       b'{"event":"file","seq":"s1","file_id":"f"}\n')
    j.append("batch", "s1", batch_id="b")  # appending after close opens the file again, at its end
    j.close()
    assert (tmp_path / BATCH_JOURNAL).read_bytes().endswith(b'{"event":"batch","seq":"s1","batch_id":"b"}\n')
    assert BatchJournal(tmp_path).seqs["s1"].batch_id == "b"


def test_the_in_memory_state_follows_each_step_and_keeps_what_a_step_does_not_name(tmp_path: Path) -> None:
    j = BatchJournal(tmp_path)
    j.append("submit", "s1", ids=["a"])
    s = j.seqs["s1"]
    assert (s.ids, s.file_id, s.batch_id, s.status, s.submitted) == (["a"], None, None, None, False)
    j.append("file", "s1", file_id="f1")
    assert (s.file_id, s.batch_id, s.status, s.submitted) == ("f1", None, None, True)
    j.append("batch", "s1", batch_id="b1")
    assert (s.file_id, s.batch_id, s.status) == ("f1", "b1", None)
    j.append("end", "s1", status="completed")
    assert (s.file_id, s.batch_id, s.status) == ("f1", "b1", "completed")
    j.append("batch", "s1", batch_id="b2")
    assert (s.seq, s.file_id, s.batch_id, s.status) == ("s1", "f1", "b2", "completed")
    j.append("submit", "s2")  # no ids given: none
    assert j.seqs["s2"].ids == [] and j.seqs["s2"].seq == "s2"
    j.close()


def test_after_close_the_next_step_opens_the_journal_again(tmp_path: Path) -> None:
    j = BatchJournal(tmp_path)
    j.append("submit", "s1", ids=["a"])
    j.close()
    (tmp_path / BATCH_JOURNAL).rename(tmp_path / "moved.jsonl")
    j.append("submit", "s2", ids=["b"])  # written to the path, not to the handle of the moved file
    j.close()
    assert (tmp_path / BATCH_JOURNAL).read_bytes() == b'{"event":"submit","seq":"s2","ids":["b"]}\n'
    assert (tmp_path / "moved.jsonl").read_bytes() == b'{"event":"submit","seq":"s1","ids":["a"]}\n'


def test_the_lines_of_several_batches_are_saved_side_by_side(tmp_path: Path) -> None:
    j = BatchJournal(tmp_path)
    for seq in ("1", "2"):
        j.append("submit", seq, ids=["a"])
        j.save_lines(seq, _lines(OK_A))
    assert sorted(p.name for p in (tmp_path / BATCH_DIR).iterdir()) == ["1.jsonl", "2.jsonl"]
    assert j.seqs["2"].lines == {"a": OK_A}
    j.close()


def test_reading_back_each_state(tmp_path: Path) -> None:
    j = _journal(tmp_path, _lines(
        {"event": "submit", "seq": "1", "ids": [1, "x"]},            # never uploaded
        {"event": "submit", "seq": "2", "ids": ["y"]}, {"event": "file", "seq": "2", "file_id": 22},
        {"event": "submit", "seq": 3, "ids": ["z"]}, {"event": "file", "seq": 3, "file_id": "f3"},
        {"event": "batch", "seq": 3, "batch_id": 33},
        {"event": "end", "seq": 3, "status": "expired"},
        {"event": "batch", "seq": "9", "batch_id": "never submitted"},  # a step of an unknown seq: ignored
        {"event": "submit", "seq": "4"},                               # no ids
        {"event": "poll", "seq": "4", "status": "x"},                  # a step this version does not know: ignored
    ))
    assert list(j.seqs) == ["1", "2", "3", "4"] and [s.seq for s in j.seqs.values()] == ["1", "2", "3", "4"]
    one, two, three, four = (j.seqs[k] for k in ("1", "2", "3", "4"))
    assert one.ids == ["1", "x"] and not one.submitted and one.file_id is None
    assert two.file_id == "22" and two.submitted and two.batch_id is None and two.status is None
    assert (three.file_id, three.batch_id, three.status, three.lines) == ("f3", "33", "expired", {})
    assert four.ids == [] and not four.submitted and four.status is None


def test_an_ended_seq_reads_its_saved_lines(tmp_path: Path) -> None:
    j = BatchJournal(tmp_path)
    j.append("submit", "s", ids=["a", "b"])
    ok_b = {"custom_id": "b", "response": {"status_code": 200}}
    j.save_lines("s", _lines(OK_A, ok_b))
    assert j.seqs["s"].lines == {"a": OK_A, "b": ok_b}
    assert sorted(p.name for p in (tmp_path / BATCH_DIR).iterdir()) == ["s.jsonl"]  # no .part left behind
    j.append("end", "s", status="completed")
    j.close()
    assert BatchJournal(tmp_path).seqs["s"].lines == {"a": OK_A, "b": ok_b}


@pytest.mark.parametrize(("rows", "kept"), [
    ((ERR_A, OK_A), OK_A),            # the answer wins over an error line, whichever comes first
    ((OK_A, ERR_A), OK_A),
    ((FAILED_A, OK_A), OK_A),
    ((OK_A, FAILED_A), OK_A),
    ((ERR_A, FAILED_A), ERR_A),       # two error lines: the first is kept
    (({"custom_id": "a", "response": {"status_code": 200}, "error": {"code": "x"}}, FAILED_A),
     {"custom_id": "a", "response": {"status_code": 200}, "error": {"code": "x"}}),  # 200 with an error: no answer
    (({"custom_id": "a", "response": "200"}, OK_A), OK_A),
    ((ERR_A, {"custom_id": "a", "response": {"status_code": 200}, "error": {"code": "x"}}), ERR_A),
])
def test_of_two_lines_for_one_id_the_answer_is_kept(tmp_path: Path, rows: tuple[Any, ...], kept: Any) -> None:
    (tmp_path / BATCH_DIR).mkdir()
    (tmp_path / BATCH_DIR / "s.jsonl").write_bytes(_lines(*rows))
    assert BatchJournal(tmp_path).read_lines("s") == {"a": kept}


def test_lines_that_are_not_a_request_s_are_skipped(tmp_path: Path) -> None:
    (tmp_path / BATCH_DIR).mkdir()
    (tmp_path / BATCH_DIR / "s.jsonl").write_bytes(_lines(b"not json", [1, 2], {"custom_id": 5}, {"no": "id"}, OK_A))
    j = BatchJournal(tmp_path)
    assert j.read_lines("s") == {"a": OK_A}
    assert j.read_lines("missing") == {}


def test_a_line_cut_by_a_crash_is_dropped_and_a_whole_file_left_untouched(tmp_path: Path) -> None:
    whole = _lines({"event": "submit", "seq": "s", "ids": ["a"]})
    _journal(tmp_path, whole)
    assert (tmp_path / BATCH_JOURNAL).read_bytes() == whole
    j = _journal(tmp_path, whole + b'{"event":"file","seq":"s","file_id":"f1"}')  # valid JSON, but no newline
    assert not j.seqs["s"].submitted  # the cut line is not believed: the file may not have reached the provider
    assert (tmp_path / BATCH_JOURNAL).read_bytes() == whole


@pytest.mark.parametrize("bad", [b"not json", b'{"event": "submit"}', b'{"seq": "s"}', b"[1, 2]", b"\"text\"",
                                 b'{"event": "submit", "seq": "s", "ids": 5}', b'{"event": "end", "seq": "s"}',
                                 b'{"event": "file", "seq": "s"}'])
def test_a_damaged_line_is_refused_with_its_line_number(tmp_path: Path, bad: bytes) -> None:
    with pytest.raises(DataError) as e:
        _journal(tmp_path, _lines({"event": "submit", "seq": "s", "ids": ["a"]}, bad, {"event": "end", "seq": "s"}))
    assert e.value.line == 2 and str(e.value).startswith(f"{tmp_path / BATCH_JOURNAL}:2: unreadable line (")
    assert str(e.value).endswith("); the batch journal is damaged; move the run directory away to start afresh "
                                 "(batches it names may still be running at the provider)")


def test_a_damaged_line_quotes_at_most_60_characters_of_the_reason(tmp_path: Path) -> None:
    with pytest.raises(DataError) as e:
        _journal(tmp_path, b"{bad\n")
    reason = "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    assert f"unreadable line ({reason[:60]});" in str(e.value) and e.value.line == 1


def test_no_journal_no_refusal(tmp_path: Path) -> None:
    check_no_batches_in_flight(tmp_path)
    assert not (tmp_path / BATCH_JOURNAL).exists()


def test_batches_never_uploaded_or_ended_do_not_stop_a_synchronous_run(tmp_path: Path) -> None:
    _journal(tmp_path, _lines({"event": "submit", "seq": "1", "ids": ["a"]},
                              {"event": "submit", "seq": "2", "ids": ["b"]}, {"event": "file", "seq": "2", "file_id": "f"},
                              {"event": "batch", "seq": "2", "batch_id": "b2"}, {"event": "end", "seq": "2", "status": "failed"}))
    check_no_batches_in_flight(tmp_path)


def test_batches_in_flight_stop_a_synchronous_run_naming_them(tmp_path: Path) -> None:
    rows: list[Any] = []
    for n in range(1, 6):
        rows += [{"event": "submit", "seq": str(n), "ids": [str(n)]}, {"event": "file", "seq": str(n), "file_id": f"f{n}"}]
        if n != 2:  # seq 2's batch was never created: it is named by its file
            rows.append({"event": "batch", "seq": str(n), "batch_id": f"b{n}"})
    _journal(tmp_path, _lines(*rows, {"event": "end", "seq": "5", "status": "completed"}))
    with pytest.raises(ConfigError) as e:
        check_no_batches_in_flight(tmp_path)
    text = str(e.value)
    assert f"{tmp_path} has 4 provider batch(es) in flight from a batch=true run (b1, f2, b3);" in text
    assert "b4" not in text and "resume it with batch=true, or move batches.jsonl away" in text
    assert "(the batches are still billed)" in text


@pytest.mark.slow
def test_a_synchronous_run_into_a_directory_with_batches_in_flight_is_refused(tmp_path: Path) -> None:
    """The console-script proof: exit 2, one line naming the batch, and no request sent again (nothing written)."""
    from conftest import clean_env, run_cli

    out = tmp_path / "run"
    out.mkdir()
    _journal(out, _lines({"event": "submit", "seq": "1", "ids": ["k1"]}, {"event": "file", "seq": "1", "file_id": "f1"},
                         {"event": "batch", "seq": "1", "batch_id": "batch_live"})).close()
    res = run_cli(["benchmark=heartbench_en", "candidate=mock", "judge=mock", "limit=1", "progress=none",
                   f"hydra.run.dir={out}"], clean_env(tmp_path))
    assert res.returncode == 2, res.stderr
    lines = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error:")]
    assert len(lines) == 1 and "1 provider batch(es) in flight from a batch=true run (batch_live)" in lines[0]
    assert "Traceback" not in res.stderr and not (out / "samples.jsonl").exists()
