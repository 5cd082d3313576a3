"""The run journal (rubric_engine.run.journal): append, batch fsync, resume reading, crash repair, refusal."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.run.journal import JournalWriter, read_journal, run_fingerprint

FP = run_fingerprint({"spec": "abc", "data": "123", "candidate": {"model": "openai/x"}, "limit": 5})


def _write(path: Path, ids: list[str], **kw: int) -> None:
    with JournalWriter(path, FP, header={"questions": len(ids)}, **kw) as j:
        for qid in ids:
            j.append({"id": qid, "score": 0.5, "text": "回复 with\nnewline"})


def test_round_trip_streams_records(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    _write(path, ["a", "b", "c"])
    seen: list[dict] = []
    state = read_journal(path, FP, seen.append)
    assert state.done == {"a", "b", "c"} and state.repaired is None
    assert [r["id"] for r in seen] == ["a", "b", "c"] and seen[0]["text"] == "回复 with\nnewline"
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[0])["run"] == FP


def test_missing_journal_is_empty(tmp_path: Path) -> None:
    assert read_journal(tmp_path / "none.jsonl", FP).done == set()


def test_truncated_last_line_is_cut_and_said_once(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    _write(path, ["a", "b", "c"])
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # a crash in the middle of writing c's record
    state = read_journal(path, FP)
    assert state.done == {"a", "b"}
    assert state.repaired and "line 4" in state.repaired and "\n" not in state.repaired
    assert path.read_bytes().endswith(b"\n")
    again = read_journal(path, FP)
    assert again.done == {"a", "b"} and again.repaired is None
    with JournalWriter(path, FP) as j:  # the resumed run appends c again after the repaired end
        j.append({"id": "c", "score": 1.0})
    assert read_journal(path, FP).done == {"a", "b", "c"}
    assert sum(1 for _ in path.open(encoding="utf-8")) == 4  # one header, no second header


def test_journal_of_another_run_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    _write(path, ["a"])
    other = run_fingerprint({"spec": "abc", "data": "123", "candidate": {"model": "openai/y"}, "limit": 5})
    with pytest.raises(ConfigError, match="belongs to another run") as err:
        read_journal(path, other)
    assert "\n" not in str(err.value)


def test_damage_before_the_end_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    _write(path, ["a", "b", "c"])
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = '{"id": "b", "sco\n'
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_journal(path, FP)
    assert f"{path}:3:" in str(err.value)
    assert path.read_text(encoding="utf-8") == "".join(lines)  # nothing cut


def test_fingerprint_is_order_free_and_sensitive() -> None:
    assert run_fingerprint({"a": 1, "b": [1, 2]}) == run_fingerprint({"b": [1, 2], "a": 1})
    assert run_fingerprint({"a": 1, "b": [1, 2]}) != run_fingerprint({"a": 1, "b": [2, 1]})


def test_kill_9_loses_at_most_the_unsynced_batch(tmp_path: Path) -> None:
    """A real process appends 10 records with batch=4, then is killed with SIGKILL: the 8 synced
    records survive and the journal reads (repaired if the kill left half a line)."""
    path = tmp_path / "samples.jsonl"
    script = textwrap.dedent(f"""
        import sys, time
        from rubric_engine.run.journal import JournalWriter
        j = JournalWriter({str(path)!r}, {FP!r}, batch=4, interval=3600)
        for i in range(10):
            j.append({{"id": f"q{{i}}", "pad": "x" * 3000}})
        print("written", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    state = read_journal(path, FP)
    assert {f"q{i}" for i in range(8)} <= state.done <= {f"q{i}" for i in range(10)}


def test_a_record_this_version_cannot_read_names_its_journal_line(tmp_path: Path) -> None:
    """Resume decodes each journal record (record/codec.py): one it cannot read is refused naming the file and
    its line, as a damaged line is, so the user can look at it."""
    from rubric_engine.run.stream import resume

    path = tmp_path / "samples.jsonl"
    with JournalWriter(path, FP, header={"questions": 3}) as j:
        j.append({"id": "a", "score": 0.5})
        j.append({"id": "b", "score": 0.5, "transcript": "not turns"})
    with pytest.raises(DataError) as err:
        resume(path, FP, lambda rec: None)
    assert str(err.value).startswith(f"{path}:3: question 'b': not a record this version reads")
