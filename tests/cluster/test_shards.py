"""One run split into shards over a real multi-node Ray cluster in this box, through the console script.

What is checked (issue #40, "one run, many nodes"): a sharded run's samples.jsonl, answers.jsonl and summary.json
are a one-process run's (timestamps, run id, calls and wall times apart), and so are the calls its transcripts
hold; a worker node removed mid-run and the
same command finishing, the fake server asked again only what the lost node had in flight; the head killed and
the same command resuming without asking a journalled question again. The cluster is Ray's own
`cluster_utils.Cluster`: a head with no CPU (no shard runs there) and worker nodes of one CPU each, every node a
real raylet with its own worker processes; the command line joins it as any cluster, by address.
"""

from __future__ import annotations

import json
import os
import shutil
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import sigkill
from fakeserver import FakeServer
from test_cli import EXE, run_cli
from test_run_journal import ARGS, DATA, SCRIPT, asked, same_files
from conftest import model_args

from rubric_engine.run.shards import shard_of
from rubric_engine.store.transcripts import Transcripts, calls_path

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

_MB = 100 * 1024 * 1024
NODES = 3
ONE = [a for a in ARGS if not a.startswith("concurrency=")] + ["concurrency=1"]  # per shard: 1 call per role


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head without CPUs and NODES worker nodes of one CPU each; the nodes' workers hold the fake key (a node's
    environment is its own: keys are never shipped with a shard)."""
    from ray.cluster_utils import Cluster

    old = os.environ.get("FAKE_KEY")
    os.environ["FAKE_KEY"] = "sk-test"
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": _MB,
                                                      "include_dashboard": False})
    try:
        c.workers = [c.add_node(num_cpus=1, object_store_memory=_MB) for _ in range(NODES)]
        c.wait_for_nodes()
        yield c
    finally:
        c.shutdown()
        if old is None:
            os.environ.pop("FAKE_KEY", None)
        else:
            os.environ["FAKE_KEY"] = old


def _reference(tmp_path: Path, env: dict[str, str], srv: FakeServer, latency: float) -> Path:
    """The same run in one process (the server without latency meanwhile, a cache of its own); then the server
    answers after `latency` seconds and has forgotten the reference's requests."""
    ref = tmp_path / "ref"
    srv.latency = 0.0
    res = run_cli([*ONE, f"hydra.run.dir={ref}", *model_args(srv.url)],
                  dict(env, RUBRIC_ENGINE_CACHE=str(tmp_path / "refcache")))
    assert res.returncode == 0, res.stderr
    srv.reset()
    srv.latency = latency
    return ref


def _ids(ref: Path) -> list[str]:
    return [json.loads(x)["id"] for x in (ref / "samples.jsonl").read_text().splitlines()]


def test_a_sharded_run_writes_a_one_process_runs_files(tmp_path: Path, env: dict[str, str], cluster: Any) -> None:
    run = tmp_path / "run"
    with FakeServer(SCRIPT) as srv:
        ref = _reference(tmp_path, env, srv, 0.2)
        res = run_cli([*ONE, f"hydra.run.dir={run}", *model_args(srv.url), f"ray={cluster.address}"], env)
        assert res.returncode == 0, res.stderr
        cand, judge = asked(srv.requests)
    every = Counter(_ids(ref))
    assert cand == every and judge == every  # each prompt asked once, by whichever shard held its question
    assert f"over {NODES} shard(s)" in res.stderr  # shards=null: one per alive node with CPUs (the head has none)
    assert not re.search(r"\sINFO\s", res.stderr), res.stderr  # Ray's own start-up chatter stays out of the run's stderr
    same_files(run, ref)
    assert not (run / "shards").exists()  # the segments were merged into the run's files and removed
    assert _calls(run) == _calls(ref)  # every call in the transcripts, as the one-process run recorded it
    shards = {json.loads(x).get("shard") for x in calls_path(run).read_text().splitlines() if x.startswith('{"call"')}
    assert len(shards) == NODES and None not in shards  # each call marked with the segment it came from


def test_evaluate_with_a_ray_spread_writes_the_same_files(tmp_path: Path, env: dict[str, str], cluster: Any) -> None:
    """The Python API's `spread=RaySpread(address)` is the command line's `ray=`: the same shards, the same files."""
    run = tmp_path / "run"
    script = (
        "import json, sys\n"
        "from rubric_engine import evaluate\n"
        "from rubric_engine.cluster.shards import RaySpread\n"
        "def entry(name):\n"
        "    return {'model': 'openai/' + name, 'api_base': sys.argv[1], 'api_key_env': 'FAKE_KEY', 'name': name}\n"
        "r = evaluate('heartbench', entry('cand'), entry('judge'), data_path=sys.argv[2], limit=12, concurrency=1,\n"
        "             run_dir=sys.argv[3], spread=RaySpread(sys.argv[4]), progress=True)\n"
        "print(json.dumps({'overall': r.overall, 'scored': r.counts.scored}))\n")
    with FakeServer(SCRIPT) as srv:
        ref = _reference(tmp_path, env, srv, 0.2)
        res = subprocess.run([sys.executable, "-c", script, srv.url, str(DATA), str(run), cluster.address], env=env,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        cand, judge = asked(srv.requests)
    every = Counter(_ids(ref))
    assert cand == every and judge == every
    assert f"over {NODES} shard(s)" in res.stderr
    assert json.loads(res.stdout.splitlines()[-1])["scored"] == 12
    same_files(run, ref)
    assert _calls(run) == _calls(ref)


def _calls(run: Path) -> dict[str | None, list[tuple[Any, ...]]]:
    """Per question, its calls as sent and answered (role, kind, every message, reply), in the order made."""
    t = Transcripts(run)
    return {q: [(c.role, c.kind, c.messages, c.reply) for c in t.calls(q)] for q in t.questions()}


def _wait(what: Any, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not what() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert what(), "the run ended (or stalled) before the moment the test waits for"


def _quiet(srv: FakeServer, seconds: float = 1.5) -> None:
    """Until the server has seen no request for `seconds` (a killed head's shards are gone)."""
    while True:
        n = len(srv.requests)
        time.sleep(seconds)
        if len(srv.requests) == n and srv.in_flight == 0:
            return


def test_a_node_lost_mid_run_then_its_shard_runs_again_elsewhere(tmp_path: Path, env: dict[str, str],
                                                                cluster: Any) -> None:
    run = tmp_path / "run"
    with FakeServer(SCRIPT) as srv:
        ref = _reference(tmp_path, env, srv, 0.6)
        cmd = [EXE, *ONE, f"hydra.run.dir={run}", *model_args(srv.url), f"ray={cluster.address}"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait(lambda: len(srv.requests) >= 5, proc)  # every shard has started asking
            removed = time.monotonic()  # the fake server's clock: it runs in this process
            cluster.remove_node(cluster.workers[0])
            out, err = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                sigkill(proc)
            cluster.workers[0] = cluster.add_node(num_cpus=1, object_store_memory=_MB)  # for the tests after
        assert proc.returncode == 0, err
        seen = [(body["model"], _qid(body)) for body in srv.requests]
        first: dict[tuple[str, str], float] = {}
        for key, at in zip(seen, srv.request_times, strict=True):
            first.setdefault(key, at)
    lost = [x for x in err.splitlines() if "was lost" in x]
    assert len(lost) == 1 and "running it again" in lost[0], err
    k, n = (int(x) for x in lost[0].split("shard ", 1)[1].split(":", 1)[0].split("-of-"))
    twice = {key: c for key, c in Counter(seen).items() if c > 1}
    # asked again: only what the lost node had in flight (concurrency=1: one call per role), never a call whose
    # answer was journalled or in the shared cache; and only its own shard's questions
    assert sum(c - 1 for c in twice.values()) <= 2, twice
    # and each was first asked when the node went: answered by then (0.6 s after it arrived), it was not in flight
    assert all(first[key] > removed - 0.6 - 0.2 for key in twice), (twice, {k: removed - first[k] for k in twice})
    mine = shard_of(_ids(ref), n)
    assert all(mine[qid] == k - 1 for _, qid in twice), twice
    cand, judge = asked(srv.requests)
    assert set(cand) == set(_ids(ref)) == set(judge)
    # the lost shard's questions answered but not yet journalled come from the shared cache: their records say so
    # (cache_hits), the only difference from the one-process run's; nothing else differs, byte for byte
    ran, one = ((d / "samples.jsonl").read_text().splitlines() for d in (run, ref))
    differ = [json.loads(a)["id"] for a, b in zip(ran, one, strict=True) if a != b]
    assert all(_no_hits(a) == _no_hits(b) for a, b in zip(ran, one))
    assert all(mine[qid] == k - 1 for qid in differ), differ
    (run / "samples.jsonl").write_text((ref / "samples.jsonl").read_text())  # checked above; the rest below
    same_files(run, ref)


def _no_hits(line: str) -> dict[str, Any]:
    return {k: v for k, v in json.loads(line).items() if k != "cache_hits"}


def _qid(body: dict[str, Any]) -> str:
    cand, judge = asked([body])
    return next(iter(cand or judge))


def test_the_head_killed_then_the_same_command_resumes(tmp_path: Path, env: dict[str, str], cluster: Any) -> None:
    run = tmp_path / "run"
    segments = run / "shards"

    def journalled() -> set[str]:
        return {json.loads(x)["id"] for seg in segments.glob("*.jsonl") for x in seg.read_text().splitlines()
                if x.endswith("}") and '"journal"' not in x[:12]}

    with FakeServer(SCRIPT) as srv:
        ref = _reference(tmp_path, env, srv, 0.6)
        cmd = [EXE, *ONE, f"hydra.run.dir={run}", *model_args(srv.url), f"ray={cluster.address}", "shards=2"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait(lambda: segments.is_dir() and len(journalled()) >= 3, proc)
        finally:
            sigkill(proc)
        _quiet(srv)  # the dead head's shards are ended by Ray
        done = journalled()
        assert 3 <= len(done) < 12, "the kill must land midway"
        shutil.rmtree(tmp_path / "cache")  # the call cache is gone: only the segments can spare the calls
        srv.reset()
        res = run_cli([*ONE, f"hydra.run.dir={run}", *model_args(srv.url), f"ray={cluster.address}"], env)
        assert res.returncode == 0, res.stderr
        cand, judge = asked(srv.requests)
    rest = Counter(set(_ids(ref)) - done)
    assert cand == rest and judge == rest  # journalled by a shard: never asked again; the rest once each
    assert f"resuming: {len(done)} of 12 questions" in res.stderr  # shards=3 now: another split, the same run
    same_files(run, ref)
    calls = _calls(run)  # the killed shards' calls too: their segments were appended by the resume
    assert all(calls.get(qid) and calls[qid][-1][:2] == ("judge", "reply") for qid in _ids(ref)), calls.keys()


def test_a_node_without_the_key_fails_the_run_in_one_line(tmp_path: Path, env: dict[str, str], cluster: Any) -> None:
    """Keys are never shipped with a shard: a key only the head's environment holds fails the run in one line
    naming the variable (the shard's own error, exit 2), no call made."""
    with FakeServer(SCRIPT) as srv:
        args = [a.replace("=FAKE_KEY", "=HEAD_ONLY_KEY") if a.startswith("candidate.") else a
                for a in model_args(srv.url)]
        res = run_cli([*ONE, f"hydra.run.dir={tmp_path / 'run'}", *args, f"ray={cluster.address}"],
                      dict(env, HEAD_ONLY_KEY="sk-test"))
        assert srv.requests == []
    assert res.returncode == 2, res.stderr
    errors = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error:")]
    assert len(errors) == 1 and "export HEAD_ONLY_KEY=" in errors[0], res.stderr
