"""The batch journal's file format (models/batchjournal.py): what a crash can leave and how it is read back.

The crash paths themselves run end to end in tests/models/test_batch.py; here, the one case a process kill cannot
place reliably: a line cut in the middle of its write.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_engine.errors import DataError
from rubric_engine.models.batchjournal import BATCH_JOURNAL, BatchJournal


def test_steps_are_read_back_per_seq_and_an_ended_seq_has_its_lines(tmp_path: Path) -> None:
    j = BatchJournal(tmp_path)
    j.append("submit", "s1", ids=["a", "b"])
    j.append("file", "s1", file_id="file-1")
    j.append("batch", "s1", batch_id="batch-1")
    ok = {"custom_id": "a", "response": {"status_code": 200, "body": {"choices": []}}}
    bad = {"custom_id": "b", "response": {"status_code": 500, "body": {"error": {"message": "x"}}}}
    j.save_lines("s1", (json.dumps(ok) + "\n" + json.dumps(bad) + "\n").encode())
    j.append("end", "s1", status="completed")
    j.append("submit", "s2", ids=["c"])
    j.close()
    again = BatchJournal(tmp_path).seqs
    assert (again["s1"].file_id, again["s1"].batch_id, again["s1"].status) == ("file-1", "batch-1", "completed")
    assert again["s1"].lines == {"a": ok, "b": bad}
    assert again["s2"].ids == ["c"] and not again["s2"].submitted  # never uploaded: its ids go out again


def test_a_line_cut_by_a_crash_is_dropped_and_the_file_repaired(tmp_path: Path) -> None:
    j = BatchJournal(tmp_path)
    j.append("submit", "s1", ids=["a"])
    j.append("file", "s1", file_id="file-1")
    j.close()
    path = tmp_path / BATCH_JOURNAL
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"event":"batch","seq":"s1","bat')
    seqs = BatchJournal(tmp_path).seqs
    assert seqs["s1"].file_id == "file-1" and seqs["s1"].batch_id is None  # looked up by its file on resume
    assert path.read_bytes() == whole


def test_a_damaged_line_before_the_end_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / BATCH_JOURNAL).write_bytes(b'not json\n{"event":"submit","seq":"s","ids":[]}\n')
    with pytest.raises(DataError, match="batch journal is damaged"):
        BatchJournal(tmp_path)
