"""A rubric reward judged by a pool of Ray actors (cluster/rewardpool.py), against the fake judge over HTTP.

Why against a console-script run and a single in-process reward: a pooled reward is only right if each rollout
gets the number a normal run of the same reply gives, and the in-process reward's, in the batch's order. The
judge is tests/rewardjudge.py's (the reply says which items are met), so every expected number comes from
`rubric-engine ... answers=FILE stage=score`, never from the pool's arithmetic. Ray runs on this machine with
2 CPUs (the actors ask for none), started once for the module and shut down after it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import EXE, MINI, clean_env, read_rows, run_cli
from fakeserver import FakeServer
from rewardjudge import judge_reply
from test_reward import _key, judge_args as reward_judge_args  # noqa: F401  (_key: FAKE_KEY for the module, autouse)
from rubric_engine.errors import ConfigError, FatalModelError

pytestmark = pytest.mark.slow
NEEDS_RAY = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the ray extra is not installed")

ROWS, _ = read_rows(MINI)
IDS = [r["question_id"] for r in ROWS]


def reply(qid: str, k: int) -> str:
    """Reply k to question qid: items met by a pattern of (qid, k), so the rewards differ."""
    met = ",".join(str(i) for i in range(1, 6) if (len(qid) + k + i) % 3)
    return f"MET={met} reply {k} to {qid}: that sounds heavy; tell me more."


def judge_args(url: str) -> list[str]:
    return [*reward_judge_args(url), "max_retries=0"]


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    ray = pytest.importorskip("ray")

    from rubric_engine.cluster.connect import NAMESPACE

    ray.init(address="local", num_cpus=2, object_store_memory=100 * 2**20, include_dashboard=False, namespace=NAMESPACE,
             log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def judge_server() -> Iterator[FakeServer]:
    with FakeServer(judge_reply, track_senders=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def run_scores(judge_server: FakeServer, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], float]:
    """(question id, reply) -> the score samples.jsonl gives, by the console script, for replies k = 0 and 1."""
    root = tmp_path_factory.mktemp("run")
    out = {}
    for k in (0, 1):
        answers = root / f"answers{k}.jsonl"
        answers.write_text("".join(json.dumps({"question_id": q, "response": reply(q, k)}) + "\n" for q in IDS),
                           encoding="utf-8")
        res = run_cli(["benchmark=heartbench", f"data.path={MINI}", "stage=score", f"answers={answers}",
                       f"hydra.run.dir={root / f'run{k}'}", "progress=none", *judge_args(judge_server.url)],
                      clean_env(root))
        assert res.returncode == 0, res.stderr
        for line in (root / f"run{k}" / "samples.jsonl").read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if "id" in rec:
                out[(rec["id"], reply(rec["id"], k))] = rec["score"]
    assert len(out) == 2 * len(IDS) and None not in out.values()
    return out


def make_reward(url: str, tmp: Path, *extra: str, **options: Any) -> Any:
    from rubric_engine import RubricReward

    return RubricReward(benchmark="heartbench", overrides=[f"data.path={MINI}", f"cache.dir={tmp / 'cache'}",
                                                           *judge_args(url), *extra], **options)


def test_pooled_rewards_equal_one_reward_and_the_runs_scores(ray_local: Any, judge_server: FakeServer,
                                                             run_scores: dict, tmp_path: Path) -> None:
    rollouts = [(q, reply(q, k)) for q in IDS for k in (0, 1)]
    qids, texts = [q for q, _ in rollouts], [t for _, t in rollouts]
    with make_reward(judge_server.url, tmp_path / "one", pool=1) as one:  # pool=1 without ray=: this process
        assert type(one.scorer).__name__ == "RewardScorer"
        single = one(completions=texts, question_id=qids)
        assert all(judge_server.from_here[-24:])
    first = len(judge_server.requests)
    with make_reward(judge_server.url, tmp_path / "pool", pool=2) as pooled:
        assert type(pooled.scorer).__name__ == "RewardPool" and pooled.scorer.size == 2
        got = pooled(completions=texts, question_id=qids)
        counts = pooled.last_counts
        verl = pooled.compute_score_batch(data_sources=["r"] * len(texts), solution_strs=texts, ground_truths=qids)
    assert got == single == [run_scores[r] for r in rollouts]
    assert len(set(got)) > 3  # the replies are told apart
    assert [v["score"] for v in verl] == got  # verl's batch form through the pool too (cache hits now)
    assert (counts.rollouts, counts.judged, counts.copies, counts.calls, counts.failures) == (24, 24, 0, 24, 0)
    assert counts.prompt_tokens == 24 * 100 and counts.completion_tokens == 24 * 50
    # judged by the actors, not by this process, and each distinct rollout asked once
    assert len(judge_server.requests) - first == 24 and not any(judge_server.from_here[first:first + 24])


def test_identical_completions_reach_the_server_once_across_the_pool(ray_local: Any, judge_server: FakeServer,
                                                                     tmp_path: Path) -> None:
    # a GRPO batch: 6 prompts x 4 generations, identical ones in each group
    rollouts = [(q, reply(q, 5 + k % 2)) for q in IDS[:6] for k in range(4)]
    qids, texts = [q for q, _ in rollouts], [t for _, t in rollouts]
    with make_reward(judge_server.url, tmp_path, "cache.enabled=false") as one:
        single = one(completions=texts, question_id=qids)
        single_logs = one.last_logs
    with make_reward(judge_server.url, tmp_path, "cache.enabled=false", pool=3) as pooled:
        before = len(judge_server.requests)
        got = pooled(completions=texts, question_id=qids)
        assert len(judge_server.requests) - before == 12  # 2 distinct replies per question, each asked once
        c = pooled.last_counts
        assert (c.rollouts, c.judged, c.copies, c.calls, c.cache_hits) == (24, 12, 12, 12, 0)
        assert pooled.last_logs["duplicate"] == single_logs["duplicate"]
        assert got == single
        # a refused key stops training as in one process: the judge's own error, one line, not Ray's
        with pytest.raises(FatalModelError) as refused:
            pooled(completions=["DENY-ME"], question_id=[IDS[0]])
        assert "\n" not in str(refused.value) and "401" in str(refused.value)


def _killed_mid_batch(ray: Any, url: str, tmp: Path, server: FakeServer, kill: list[int]) -> tuple[list, Any, int]:
    """A pool of 2 (one call at a time each) judging 24 distinct rollouts; the actors in `kill` killed once the
    judge has seen 2 requests. Returns (rewards, counts, requests the server saw)."""
    rollouts = [(q, reply(q, k)) for q in IDS for k in (0, 1)]
    with make_reward(url, tmp, "concurrency=1", pool=2) as pooled:
        got: list[Any] = []
        worker = threading.Thread(target=lambda: got.append(
            pooled(completions=[t for _, t in rollouts], question_id=[q for q, _ in rollouts])))
        worker.start()
        end = time.monotonic() + 120
        while len(server.requests) < 2 and time.monotonic() < end:
            time.sleep(0.02)
        for i in kill:
            ray.kill(pooled.scorer._actors[i])
        worker.join(180)
        assert got, "the batch did not come back"
        return [got[0], pooled.last_counts, len(server.requests), rollouts]  # type: ignore[return-value]


def test_an_actor_killed_mid_batch_is_rejudged_elsewhere_never_zero(ray_local: Any, run_scores: dict,
                                                                     tmp_path: Path) -> None:
    with FakeServer(judge_reply, latency=0.2) as slow:
        rewards, counts, requests, rollouts = _killed_mid_batch(ray_local, slow.url, tmp_path, slow, [0])
    assert rewards == [run_scores[r] for r in rollouts]  # every rollout scored, by the survivor
    assert counts.failures == 0 and counts.rollouts == 24
    # what the lost actor had paid for is in the shared cache: at most its one call in flight is asked again
    assert 24 <= requests <= 25


def test_every_actor_killed_gives_none_counted_never_zero(ray_local: Any, tmp_path: Path) -> None:
    with FakeServer(judge_reply, latency=0.2) as slow:
        rewards, counts, _, _ = _killed_mid_batch(ray_local, slow.url, tmp_path, slow, [0, 1])
    assert rewards == [None] * 24 and counts.failures == 24


def test_a_pool_that_cannot_start_says_so_in_one_line(ray_local: Any, judge_server: FakeServer,
                                                      tmp_path: Path) -> None:
    from rubric_engine.cli.reward import settings_from_overrides
    from rubric_engine.cluster.rewardpool import RewardPool

    settings = settings_from_overrides(["benchmark=heartbench", f"data.path={MINI}", *judge_args(judge_server.url)])
    with pytest.raises(ConfigError) as caught:
        RewardPool(settings, size=2, start_timeout=0.001)
    assert "\n" not in str(caught.value) and "reward actors did not start within" in str(caught.value)
    # a key this process has but the actors' environment lacks (exported after Ray started): said in one line
    os.environ["LATE_KEY"] = "sk-late"
    try:
        with pytest.raises(ConfigError) as caught:
            make_reward(judge_server.url, tmp_path, "judge.api_key_env=LATE_KEY", pool=2)
    finally:
        del os.environ["LATE_KEY"]
    text = str(caught.value)
    assert "\n" not in text and text.startswith("pool=2: 2 of 2 reward actors could not start:") and "LATE_KEY" in text
    for bad in (0, -1, True, 2.5, "4"):
        with pytest.raises(ConfigError, match="is not valid; give the number of reward actors"):
            make_reward(judge_server.url, tmp_path, pool=bad)


@NEEDS_RAY
def test_serve_reward_pool_answers_through_the_console_script(judge_server: FakeServer, run_scores: dict,
                                                              tmp_path: Path) -> None:
    cmd = [EXE, "serve-reward", "benchmark=heartbench", f"data.path={MINI}", f"cache.dir={tmp_path / 'cache'}",
           *judge_args(judge_server.url), "port=0", "pool=2"]
    proc = subprocess.Popen(cmd, env=clean_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(300, proc.kill)
    timer.start()
    try:
        url = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/get_reward"), proc.stderr.read()  # type: ignore
        rollouts = [(q, reply(q, 1)) for q in IDS] + [(IDS[0], reply(IDS[0], 1))]
        body = {"query": [t for _, t in rollouts], "prompts": [""] * len(rollouts), "labels": [q for q, _ in rollouts]}
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=240) as res:  # noqa: S310 - 127.0.0.1 only
            got = json.loads(res.read())
        assert got["rewards"] == [run_scores[r] for r in rollouts]
        assert got["extra_logs"]["duplicate"][-1] == 1.0 and got["counts"]["judged"] == len(IDS)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
        err = proc.stderr.read()  # type: ignore[union-attr]
        assert "stopped: 1 batches, 13 rollouts" in err and "Traceback" not in err, err
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()


_NO_RAY = """
import sys
sys.modules['ray'] = None  # what a machine without the extra sees
from rubric_engine import RubricReward
from rubric_engine.errors import ConfigError
with RubricReward(benchmark='heartbench', judge='mock', overrides=['data.path=%s'], pool=1) as reward:
    print(type(reward.scorer).__name__, reward(completions=['hello'], question_id=['%s']) != [None])
try:
    RubricReward(benchmark='heartbench', judge='mock', overrides=['data.path=%s'], pool=2)
except ConfigError as exc:
    print(exc)
"""


def test_without_ray_pool_1_judges_here_and_pool_2_names_the_extra(tmp_path: Path) -> None:
    script = _NO_RAY % (MINI, IDS[0], MINI)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=clean_env(tmp_path),
                         cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "RewardScorer True" and len(lines) == 2, res.stdout
    assert lines[1].startswith("pool= needs Ray, which is not installed here") and "rubric-engine[ray]" in lines[1]


_LEFT_OPEN = """
from rubric_engine import RubricReward
reward = RubricReward(benchmark='heartbench', judge='mock', overrides=['data.path=%s'], pool=2)
print(reward(completions=['hello'], question_id=['%s']) != [None])
"""  # no close(): Ray's own exit handler may stop it before the reward's finalizer runs


@NEEDS_RAY
def test_a_pool_left_open_at_exit_ends_quietly(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-c", _LEFT_OPEN % (MINI, IDS[0])], capture_output=True, text=True,
                         env=clean_env(tmp_path), cwd=tmp_path, timeout=300)
    assert res.returncode == 0 and res.stdout == "True\n", res.stderr
    assert "Traceback" not in res.stderr and "Error" not in res.stderr, res.stderr
