"""The Ray-free parts of a sharded run (run/shards.py): how questions are dealt out, the merge of journal segments,
and the keys' one-line refusals. Quick: no cluster (tests/cluster/test_shards.py runs one)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import kill_after_lines, model_args
from fakeserver import FakeServer
from test_cli import EXE, run_cli
from test_run_journal import ARGS, SCRIPT, asked, same_files

from rubric_engine.errors import ConfigError
from rubric_engine.run.journal import JournalWriter
from rubric_engine.run.shards import merge_segments, segment_path, shard_of

FP = "f" * 64


def test_questions_are_dealt_by_the_rank_of_their_ids_sha256() -> None:
    ids = [f"q{i:03d}" for i in range(100)]
    dealt = shard_of(ids, 3)
    ranked = sorted(ids, key=lambda q: hashlib.sha256(q.encode()).hexdigest())  # the same order, computed apart
    assert [dealt[q] for q in ranked] == [i % 3 for i in range(100)]
    assert sorted(list(dealt.values()).count(k) for k in range(3)) == [33, 33, 34]  # one apart at most
    assert shard_of(list(reversed(ids)), 3) == dealt  # the order questions come in does not matter
    assert set(shard_of(ids, 1).values()) == {0}


def _journal(path: Path, ids: list[str], cut: bool = False) -> None:
    with JournalWriter(path, FP, header={"questions": 5}) as w:
        for qid in ids:
            w.append({"id": qid, "score": 1})
    if cut:
        with path.open("ab") as fh:
            fh.write(b'{"id": "q9", "sco')  # a shard killed mid-write


def test_merge_keeps_each_question_once_and_cuts_a_killed_shards_last_line(tmp_path: Path) -> None:
    journal = tmp_path / "samples.jsonl"
    _journal(journal, ["q1"])
    segment_path(tmp_path, 0, 2).parent.mkdir()
    _journal(segment_path(tmp_path, 0, 2), ["q2", "q1"])  # q1: journalled twice (a merge interrupted before)
    _journal(segment_path(tmp_path, 1, 3), ["q3"], cut=True)  # another count's segment: the same run's
    assert merge_segments(journal, FP, {"questions": 5}) == 2
    lines = [json.loads(x) for x in journal.read_text().splitlines()]
    assert lines[0] == {"journal": 1, "run": FP, "questions": 5}
    assert [x["id"] for x in lines[1:]] == ["q1", "q2", "q3"]
    assert not (tmp_path / "shards").exists()
    assert merge_segments(journal, FP, {"questions": 5}) == 0  # nothing left to merge: the journal untouched
    assert [json.loads(x)["id"] for x in journal.read_text().splitlines()[1:]] == ["q1", "q2", "q3"]


def test_merge_refuses_another_runs_segment(tmp_path: Path) -> None:
    segment_path(tmp_path, 0, 1).parent.mkdir()
    with JournalWriter(segment_path(tmp_path, 0, 1), "0" * 64) as w:
        w.append({"id": "q1"})
    with pytest.raises(ConfigError, match="belongs to another run"):
        merge_segments(tmp_path / "samples.jsonl", FP, {})


@pytest.mark.parametrize("args, says", [
    (["shards=2"], "shards=2 splits a run over a Ray cluster: give ray=ADDRESS too"),
    (["shards=0", "ray=local"], "shards=0 is not valid; give a whole number >= 1"),
    (["ray=127.0.0.1:1"], "ray=127.0.0.1:1: "),
])
def test_the_keys_refuse_in_one_line(tmp_path: Path, env: dict[str, str], args: list[str], says: str) -> None:
    res = run_cli(["benchmark=heartbench", "candidate=mock", "limit=2", f"hydra.run.dir={tmp_path / 'run'}", *args], env)
    assert res.returncode == 2, res.stderr
    errors = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error:")]
    assert len(errors) == 1 and says in errors[0], res.stderr
    assert not (tmp_path / "run").exists()  # refused before the run directory was claimed


def test_segments_left_by_a_sharded_run_resume_without_ray(tmp_path: Path, env: dict[str, str]) -> None:
    """A killed run's journal moved to where a shard would have written it: the same command without `ray=` merges
    it before reading anything and asks only the questions it does not hold (cache gone), ending with the files
    of an uninterrupted run."""
    run, ref = tmp_path / "run", tmp_path / "ref"
    with FakeServer(SCRIPT, latency=0.3) as srv:
        res = run_cli([*ARGS, f"hydra.run.dir={ref}", *model_args(srv.url)],
                      dict(env, RUBRIC_ENGINE_CACHE=str(tmp_path / "refcache")))
        assert res.returncode == 0, res.stderr
        cmd = [EXE, *ARGS, f"hydra.run.dir={run}", *model_args(srv.url)]
        done = {r["id"] for r in kill_after_lines(cmd, run / "samples.jsonl", 5, env)[1:]}
        assert 4 <= len(done) < 12, "the kill must land midway"
        segment_path(run, 1, 3).parent.mkdir()
        (run / "samples.jsonl").rename(segment_path(run, 1, 3))
        shutil.rmtree(tmp_path / "cache")
        srv.reset()
        res = run_cli([*ARGS, f"hydra.run.dir={run}", *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        cand, judge = asked(srv.requests)
    rest = {json.loads(x)["id"] for x in (ref / "samples.jsonl").read_text().splitlines()} - done
    assert set(cand) == rest == set(judge) and max(cand.values()) == 1
    assert f"resuming: {len(done)} of 12 questions" in res.stderr
    assert not (run / "shards").exists()
    same_files(run, ref)


def test_without_ray_installed_ray_is_one_line_naming_the_extra(tmp_path: Path, env: dict[str, str]) -> None:
    """A `ray` package that cannot be imported (what a machine without the extra sees) on the console script's path:
    ray= fails in one line naming what to install, and the same command without it runs as before."""
    blocked = tmp_path / "noray" / "ray"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    env = dict(env, PYTHONPATH=str(blocked.parent))
    args = ["benchmark=heartbench", "candidate=mock", "judge=mock", "limit=2", "progress=none"]
    res = run_cli([*args, f"hydra.run.dir={tmp_path / 'sharded'}", "ray=local"], env)
    assert res.returncode == 2, res.stderr
    errors = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error:")]
    assert len(errors) == 1 and "ray= needs Ray" in errors[0] and "rubric-engine[ray]" in errors[0], res.stderr
    res = run_cli([*args, f"hydra.run.dir={tmp_path / 'here'}"], env)
    assert res.returncode == 0, res.stderr


def test_ray_local_runs_quietly_and_keeps_its_transcripts(tmp_path: Path, env: dict[str, str]) -> None:
    """`ray=local` starts a private Ray instance for the run: its stderr holds the run's lines, not Ray's warning
    about its own token-authentication default (token authentication stays on, as Ray's default has it), and the
    sharded run's calls are in its transcripts."""
    run = tmp_path / "run"
    args = ["benchmark=heartbench", "candidate=mock", "judge=mock", "limit=2", "progress=none", "ray=local"]
    res = run_cli([*args, f"hydra.run.dir={run}"], {k: v for k, v in env.items() if k != "RAY_AUTH_MODE"})
    assert res.returncode == 0, res.stderr
    assert "sharded: 2 questions to run over 1 shard(s)" in res.stderr
    assert not [x for x in res.stderr.splitlines() if "WARNING" in x or "Token authentication" in x], res.stderr
    assert {c["q"] for c in map(json.loads, (run / "transcripts" / "calls.jsonl").read_text().splitlines())
            if "call" in c} == {json.loads(x)["id"] for x in (run / "samples.jsonl").read_text().splitlines()}
