"""A sharded run's transcripts: each shard's segment appended to the run's transcripts/calls.jsonl by the head.

What is checked (run/shards.merge_transcripts), on segments written by the run's own transcripts writer: the
merged file reads exactly as one writer's file of the same calls in the same order (numbers, `after` chains of a
conversation, re-asks, retries, texts stored once across segments); a run's earlier calls keep their numbers and
the next writer continues after the merged ones; a merge repeated after a crash between the file's replace and
the segments' removal adds nothing; a killed shard's cut last line is left out; a lone surrogate survives byte for
byte. End to end over a Ray cluster: tests/cluster/test_shards.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rubric_engine.errors import DataError
from rubric_engine.models.events import CallEvent
from rubric_engine.run.shards import SHARDS_DIR, ShardJob, merge_transcripts, transcript_segment
from rubric_engine.run.transcripts import TranscriptWriter
from rubric_engine.store.transcripts import Transcripts, calls_path

LONG = "You are a careful grader of counselling replies; read the whole dialogue before you answer. " * 2
SHARED = "A reply both shards' judges quote at length, so its text is stored once in the merged file. " * 2


def _conversation(qid: str, call: int) -> list[CallEvent]:
    """Three turns of one question's conversation (each request repeats the turns before it), a retried attempt,
    a refused verdict and its re-ask, and a judge call quoting SHARED."""
    events, messages = [], [{"role": "system", "content": LONG}]
    for turn in range(3):
        messages = [*messages, {"role": "user", "content": f"{qid} turn {turn}: " + "how do I sleep better? " * 4}]
        events.append(CallEvent("reply", call + turn, "candidate", "cand", "openai/cand", {"question": qid, "turn": turn},
                                messages, text=f"{qid} answer {turn} " + "rest and routine. " * 5, attempts=1, time=1.0))
        messages = [*messages, {"role": "assistant", "content": events[-1].text}]
    judge = [{"role": "user", "content": SHARED + qid}]
    events += [CallEvent("retry", call + 3, "judge", "judge", "openai/judge", {"question": qid}, None, error="500",
                         status=500, attempts=1, wait=0.5, time=1.0),
               CallEvent("rejected", call + 3, "judge", "judge", "openai/judge", {"question": qid}, judge, chain=7,
                         text="not json", parse_error="no verdict", attempts=2, time=1.0),
               CallEvent("reply", call + 4, "judge", "judge", "openai/judge", {"question": qid}, judge, reask=1, chain=7,
                         text='{"met": true}', attempts=1, time=1.0)]
    return events


def _write(path: Path, events: list[CallEvent], run_dir: Path | None = None) -> None:
    writer = TranscriptWriter(run_dir or path.parent, path=None if run_dir else path)
    for e in events:
        writer.observe(e)
    writer.close()


def _job(index: int, count: int, token: str) -> ShardJob:
    return ShardJob(None, index, count, "fp", ("", ""), token)  # type: ignore[arg-type]  # only its name is used


def _read(run: Path) -> dict[str | None, list]:
    t = Transcripts(run)
    return {q: t.calls(q) for q in t.questions()}


def _segments(run: Path, token: str = "ab12cd34") -> list[list[CallEvent]]:
    shards = [_conversation("q1", 1) + _conversation("q3", 10), _conversation("q2", 1)]
    for k, events in enumerate(shards):
        _write(transcript_segment(run / SHARDS_DIR, _job(k, 2, token)), events)
    return shards


def test_the_merged_file_reads_as_one_writers_file_of_the_same_calls(tmp_path: Path) -> None:
    run, ref = tmp_path / "run", tmp_path / "ref"
    shards = _segments(run)
    _write(calls_path(ref), [e for events in shards for e in events], run_dir=ref)  # one process, the same order
    assert merge_transcripts(run) == 2
    assert _read(run) == _read(ref)  # numbers, chains, re-asks, retries and texts alike
    calls = _read(run)
    assert [c.number for c in calls["q2"]] == [11, 12, 13, 14, 15]  # after shard 1's 10 calls
    assert calls["q2"][2].earlier is calls["q2"][1] and calls["q2"][4].reask_of == 14
    assert [r.status for r in calls["q2"][3].retries] == [500]
    lines = [json.loads(x) for x in calls_path(run).read_text().splitlines()]
    assert {x["shard"] for x in lines if "call" in x} == {"1-of-2-ab12cd34", "2-of-2-ab12cd34"}
    assert sum(1 for x in lines if "h" in x) == sum(1 for x in calls_path(ref).read_text().splitlines()
                                                     if x.startswith('{"h"'))  # SHARED and LONG once each
    assert not (run / SHARDS_DIR / "transcripts").exists()


def test_a_runs_earlier_calls_keep_their_numbers_and_the_next_writer_follows(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _write(calls_path(run), _conversation("q0", 1), run_dir=run)  # an earlier, one-process part of the run
    _segments(run)
    merge_transcripts(run)
    _write(calls_path(run), _conversation("q9", 1), run_dir=run)  # a resumed run's writer
    numbers = {q: [c.number for c in calls] for q, calls in _read(run).items()}
    assert numbers["q0"] == [1, 2, 3, 4, 5] and numbers["q1"][0] == 6 and numbers["q2"][-1] == 20
    assert numbers["q9"] == [21, 22, 23, 24, 25]


def test_a_merge_repeated_after_a_crash_before_the_segments_went_adds_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _segments(run)
    kept = tmp_path / "kept"
    shutil.copytree(run / SHARDS_DIR, kept)
    merge_transcripts(run)
    once = calls_path(run).read_bytes()
    shutil.copytree(kept, run / SHARDS_DIR, dirs_exist_ok=True)  # as a crash after the replace leaves them
    assert merge_transcripts(run) == 0
    assert calls_path(run).read_bytes() == once and not (run / SHARDS_DIR / "transcripts").exists()
    _segments(run, token="ffff0000")  # a later command's shards: a new token, appended
    assert merge_transcripts(run) == 2 and len(_read(run)) == 3


def test_a_killed_shards_cut_line_is_left_out_and_a_lone_surrogate_kept(tmp_path: Path) -> None:
    run = tmp_path / "run"
    seg = transcript_segment(run / SHARDS_DIR, _job(0, 1, "00000001"))
    odd = "a reply with a lone surrogate \ud800 in it, long enough to be stored as a text of its own line"
    _write(seg, [CallEvent("reply", 1, "candidate", "cand", "openai/cand", {"question": "q1"},
                           [{"role": "user", "content": "hi"}], text=odd, attempts=1, time=1.0)])
    with seg.open("ab") as fh:
        fh.write(b'{"call":2,"kind":"reply","q":"q1","ro')  # the shard was killed mid-line
    merge_transcripts(run)
    [call] = _read(run)["q1"]
    assert call.reply == odd
    assert '\ud800'.encode("utf-8", "surrogatepass") in calls_path(run).read_bytes()


def test_a_damaged_segment_is_one_error_naming_it_and_nothing_is_merged(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _segments(run)
    seg = sorted((run / SHARDS_DIR / "transcripts").iterdir())[1]
    with seg.open("ab") as fh:
        fh.write(b'{"call": "x\n')  # a whole line that is no call (a damaged disk)
    with pytest.raises(DataError, match=rf"{seg}: a line that is not a call .*move it away"):
        merge_transcripts(run)
    assert not calls_path(run).exists() and seg.exists()  # nothing written, nothing removed
