"""Rubric rewards, called exactly as TRL, verl and OpenRLHF call them, against the fake judge over HTTP.

Why against a console-script run: a reward is only worth training on if it is the number a normal run of the
same reply gives. So the expected numbers are the scores in samples.jsonl of `rubric-engine ... answers=FILE
stage=score`, judged by the same scripted judge (its verdicts depend only on the judge prompt it is sent),
never the reward's own arithmetic. The frameworks are not installed: each test calls the reward with the
keywords their trainers pass (TRL's GRPOTrainer._calculate_rewards, verl's naive and batch reward managers,
OpenRLHF's remote reward request), and TRL's async path runs the coroutine on a background loop as TRL does.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import threading
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import EXE, MINI, QuestionScript, Reply, clean_env, read_rows, run_cli
from fakeserver import FakeServer

ITEM_RE = re.compile(r"^(\d+)\. \[", re.MULTILINE)
RULE_RE = re.compile(r"^(\d+)\. \[(?:其他|Other)\]", re.MULTILINE)  # HeartBench's zeroing rule items
ROWS, BY_ID = read_rows(MINI)
IDS = [r["question_id"] for r in ROWS]


class Judge(QuestionScript):
    """Verdicts from a hash of the judge prompt (so of the reply): the same reply always gets the same verdict,
    different replies different ones. A reply containing FAIL-ME gets HTTP 500, GARBLE-ME an unparsable verdict.
    The `shadow` judge finds every item met."""

    judges = frozenset({"judge", "shadow"})

    def judge(self, model: str, text: str) -> Reply:
        n = max(int(x) for x in ITEM_RE.findall(text))
        if "FAIL-ME" in text:
            return Reply(status=500)
        if "ECHO-KEY" in text:  # a server that echoes the key it was sent
            return Reply(status=500, error="bad gateway for {authorization}")
        if "GARBLE-ME" in text:
            return Reply(text="I think it is mostly fine.")
        rules = {int(x) for x in RULE_RE.findall(text)}
        if model == "shadow":
            return self.verdict(n, lambda i: i not in rules)
        h = zlib.crc32(text.encode("utf-8"))
        return self.verdict(n, lambda i: i not in rules and (h >> (i % 29)) & 1 == 1)


def reply(qid: str, k: int) -> str:
    return f"I hear you ({qid}, {k}). " + "It sounds heavy; tell me more about it. " * (1 + k % 3)


@pytest.fixture(scope="module")
def judge_server() -> Iterator[FakeServer]:
    with FakeServer(Judge(ROWS)) as srv:
        yield srv


@pytest.fixture(scope="module", autouse=True)
def _key() -> Iterator[None]:
    old = os.environ.get("FAKE_KEY")
    os.environ["FAKE_KEY"] = "sk-test"
    yield
    if old is None:
        os.environ.pop("FAKE_KEY", None)
    else:
        os.environ["FAKE_KEY"] = old


def judge_args(url: str, model: str = "judge") -> list[str]:
    return ["judge=openai_compatible", f"judge.model=openai/{model}", f"judge.api_base={url}", f"judge.name={model}",
            "judge.api_key_env=FAKE_KEY"]


def console_scores(url: str, root: Path, k: int, model: str = "judge") -> dict[tuple[str, str], float]:
    """(question id, reply) -> the score samples.jsonl gives for replies `reply(q, k)`, by the console script
    with answers= and stage=score, judged by `model`."""
    answers = root / f"answers{k}.jsonl"
    answers.write_text("".join(json.dumps({"question_id": q, "response": reply(q, k)}) + "\n" for q in IDS),
                       encoding="utf-8")
    res = run_cli(["benchmark=heartbench", f"data.path={MINI}", "stage=score", f"answers={answers}",
                   f"hydra.run.dir={root / f'run{k}-{model}'}", "progress=none", *judge_args(url, model)], clean_env(root))
    assert res.returncode == 0, res.stderr
    out = {}
    for line in (root / f"run{k}-{model}" / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if "id" in rec:
            assert rec["judge_error"] is None and rec["score"] is not None
            out[(rec["id"], reply(rec["id"], k))] = rec["score"]
    assert len(out) == len(IDS)
    return out


@pytest.fixture(scope="module")
def run_scores(judge_server: FakeServer, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], float]:
    """The console script's scores of replies k=0 and k=1 under the judge."""
    root = tmp_path_factory.mktemp("run")
    return {**console_scores(judge_server.url, root, 0), **console_scores(judge_server.url, root, 1)}


def make_reward(url: str, tmp: Path, *extra: str, **options: Any) -> Any:
    from rubric_engine import RubricReward

    return RubricReward(benchmark="heartbench", overrides=[f"data.path={MINI}", f"cache.dir={tmp / 'cache'}",
                                                           *judge_args(url), *extra], **options)


def judge_requests(srv: FakeServer, model: str = "judge") -> int:
    return sum(1 for body in srv.requests if body["model"] == model)


# ------------------------------------------------------------------------------------------------ TRL

def test_trl_sync_rewards_equal_the_runs_scores(judge_server: FakeServer, run_scores: dict, tmp_path: Path) -> None:
    rollouts = [(q, reply(q, k)) for q in IDS for k in (0, 1)]
    with make_reward(judge_server.url, tmp_path) as reward:
        # as GRPOTrainer._calculate_rewards calls a sync reward function: every dataset column as a list
        rewards = reward(prompts=[[{"role": "user", "content": "..."}]] * len(rollouts),
                         completions=[[{"role": "assistant", "content": text}] for _, text in rollouts],
                         completion_ids=[[1, 2, 3]] * len(rollouts), trainer_state=object(),
                         question_id=[q for q, _ in rollouts], dialogue=[BY_ID[q]["dialogue"] for q, _ in rollouts])
        assert reward.__name__ == "rubric_heartbench"
    assert rewards == [min(1.0, max(0.0, run_scores[r])) for r in rollouts]
    assert len(set(rewards)) > 3  # the replies are told apart: not one constant


def test_trl_async_on_a_background_loop(judge_server: FakeServer, run_scores: dict, tmp_path: Path) -> None:
    rollouts = [(q, reply(q, 1)) for q in IDS[:6]]
    loop = asyncio.new_event_loop()  # TRL's async_reward_loop: a loop on its own thread
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with make_reward(judge_server.url, tmp_path) as reward:
            func = reward.async_reward
            assert asyncio.iscoroutinefunction(func) and func.__name__ == "rubric_heartbench"
            got = asyncio.run_coroutine_threadsafe(
                func(prompts=["p"] * 6, completions=[t for _, t in rollouts], completion_ids=[[1]] * 6,
                     trainer_state=None, question_id=[q for q, _ in rollouts]), loop).result(timeout=120)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
    assert got == [run_scores[r] for r in rollouts]


def test_identical_completions_in_a_batch_are_judged_once(judge_server: FakeServer, tmp_path: Path) -> None:
    # a GRPO batch: 3 prompts x 4 generations, two of each group identical
    rollouts = [(q, reply(q, 7 + k % 3)) for q in IDS[:3] for k in range(4)]
    with make_reward(judge_server.url, tmp_path, "cache.enabled=false") as reward:
        before = judge_requests(judge_server)
        rewards = reward(prompts=["p"] * 12, completions=[t for _, t in rollouts], question_id=[q for q, _ in rollouts])
        assert judge_requests(judge_server) - before == 9  # 3 distinct replies per question
        counts = reward.last_counts
        assert (counts.rollouts, counts.judged, counts.copies, counts.calls, counts.cache_hits) == (12, 9, 3, 9, 0)
        assert counts.prompt_tokens == 9 * 100 and counts.completion_tokens == 9 * 50
        assert rewards[0] == rewards[3] and reward.last_logs["duplicate"][3] is True
    with make_reward(judge_server.url, tmp_path) as cached:  # through the durable cache: paid once, then hits
        cached(completions=[t for _, t in rollouts], question_id=[q for q, _ in rollouts])
        before = judge_requests(judge_server)
        again = cached(completions=[t for _, t in rollouts], question_id=[q for q, _ in rollouts])
        assert judge_requests(judge_server) == before and again == rewards
        assert (cached.last_counts.calls, cached.last_counts.cache_hits) == (0, 9)
        assert cached.totals.rollouts == 24 and cached.totals.calls == 9


def test_judge_failures_are_none_never_zero(judge_server: FakeServer, run_scores: dict, tmp_path: Path) -> None:
    texts = [reply(IDS[0], 0), "FAIL-ME please", "GARBLE-ME now", reply(IDS[3], 0), "ECHO-KEY"]
    ids = [IDS[0], IDS[1], IDS[2], IDS[3], IDS[4]]
    counts_file = tmp_path / "counts.jsonl"
    with make_reward(judge_server.url, tmp_path, "max_retries=0", counts_path=counts_file) as reward:
        rewards = reward(completions=texts, question_id=ids)
        assert rewards == [run_scores[(IDS[0], texts[0])], None, None, run_scores[(IDS[3], texts[3])], None]
        assert reward.last_counts.failures == 3
        errors = reward.last_logs["judge_error"]
        assert errors[0] is None and "500" in errors[1] and errors[2] and errors[3] is None
        assert "bad gateway" in errors[4] and "sk-test" not in errors[4]  # redacted as a run's record is
        # verl needs a float: the failure is failure_score, flagged
        batch = reward.compute_score_batch(data_sources=["rubric"] * 5, solution_strs=texts, ground_truths=ids,
                                           extra_infos=[{"index": i} for i in range(5)])
        assert [b["judge_failed"] for b in batch] == [0.0, 1.0, 1.0, 0.0, 1.0]
        assert [b["score"] for b in batch] == [rewards[0], 0.0, 0.0, rewards[3], 0.0]
    lines = [json.loads(x) for x in counts_file.read_text().splitlines()]
    assert [x["failures"] for x in lines] == [3, 3] and [x["rollouts"] for x in lines] == [5, 5]


def test_one_huge_completion_fails_only_itself(judge_server: FakeServer, run_scores: dict, tmp_path: Path) -> None:
    """TRL's call with one 3-million-character completion: that rollout is None with its reason, the others are
    the run's scores (the batch is not lost)."""
    texts = [reply(IDS[0], 0), "long reply. " * 250_000, reply(IDS[2], 0)]
    with make_reward(judge_server.url, tmp_path) as reward:
        rewards = reward(completions=texts, question_id=IDS[:3])
        assert rewards == [run_scores[(IDS[0], texts[0])], None, run_scores[(IDS[2], texts[2])]]
        assert "3000000 characters" in reward.last_logs["judge_error"][1] and reward.last_counts.failures == 1


def test_unknown_question_id_is_one_line_before_any_call(judge_server: FakeServer, tmp_path: Path) -> None:
    from rubric_engine.errors import ConfigError

    with make_reward(judge_server.url, tmp_path) as reward:
        before = len(judge_server.requests)
        with pytest.raises(ConfigError, match="'nope' is not in the benchmark's data"):
            reward(completions=["a", "b"], question_id=[IDS[0], "nope"])
        with pytest.raises(ConfigError, match="no dataset column 'question_id'.*columns given: qid"):
            reward(completions=["a"], qid=[IDS[0]], trainer_state=None)
        assert len(judge_server.requests) == before


# ------------------------------------------------------------------------------------------------ verl

def test_verl_compute_score_and_batch(judge_server: FakeServer, run_scores: dict, tmp_path: Path) -> None:
    rollouts = [(q, reply(q, 0)) for q in IDS[:4]]
    with make_reward(judge_server.url, tmp_path, id_column="question_id") as reward:
        compute_score = reward.compute_score  # what custom_reward_function.name points at
        one = compute_score(data_source="rubric", solution_str=rollouts[0][1], ground_truth=rollouts[0][0],
                            extra_info={"split": "train", "index": 0})
        assert one == {"score": run_scores[rollouts[0]], "judge_failed": 0.0, "unscored": 0.0}
        batch = reward.compute_score_batch(data_sources=["rubric"] * 4, solution_strs=[t for _, t in rollouts],
                                           ground_truths=[None] * 4,
                                           extra_infos=[{"question_id": q} for q, _ in rollouts])
    assert [b["score"] for b in batch] == [run_scores[r] for r in rollouts]


# ------------------------------------------------------------------------------------------------ shadow

def test_shadow_judge_reports_the_gap(judge_server: FakeServer, run_scores: dict, tmp_path: Path) -> None:
    (tmp_path / "console").mkdir()  # its own cache: the reward below must call the shadow judge itself
    shadow_scores = console_scores(judge_server.url, tmp_path / "console", 0, "shadow")
    rollouts = [(q, reply(q, 0)) for q in IDS]
    with make_reward(judge_server.url, tmp_path, shadow="openai_compatible",
                     shadow_overrides=judge_args(judge_server.url, "shadow")[1:], shadow_fraction=0.5) as reward:
        from rubric_engine.reward.scorer import shadow_picked

        before = judge_requests(judge_server, "shadow")
        rewards = reward(completions=[t for _, t in rollouts], question_id=[q for q, _ in rollouts])
        picked = [shadow_picked(q, t, 0.5) for q, t in rollouts]
        assert 0 < sum(picked) < len(rollouts)
        assert judge_requests(judge_server, "shadow") - before == sum(picked)
        shadow = reward.last_counts.shadow
        gaps = [shadow_scores[r] - run_scores[r] for r, p in zip(rollouts, picked) if p]
        assert shadow["judged"] == shadow["compared"] == sum(picked)
        assert shadow["gap_mean"] == pytest.approx(sum(gaps) / len(gaps))
        assert [s is not None for s in reward.last_logs["shadow_reward"]] == picked
    assert rewards == [run_scores[r] for r in rollouts]  # the shadow never changes the reward


# ------------------------------------------------------------------------------------------------ OpenRLHF

def test_serve_reward_end_to_end(judge_server: FakeServer, run_scores: dict, tmp_path: Path) -> None:
    cmd = [EXE, "serve-reward", "benchmark=heartbench", f"data.path={MINI}", f"cache.dir={tmp_path / 'cache'}",
           *judge_args(judge_server.url), "port=0", "max_retries=0"]
    proc = subprocess.Popen(cmd, env=clean_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(120, proc.kill)
    timer.start()
    try:
        url = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/get_reward"), proc.stderr.read()  # type: ignore
        rollouts = [(q, reply(q, 1)) for q in IDS[:5]] + [(IDS[0], reply(IDS[0], 1)), (IDS[5], "FAIL-ME")]
        prompts = [f"<user>{BY_ID[q]['dialogue'][-1]['content']}</user><assistant>" for q, _ in rollouts]
        body = {"query": [p + t for p, (_, t) in zip(prompts, rollouts)], "prompts": prompts,
                "labels": [q for q, _ in rollouts]}
        before = judge_requests(judge_server)
        got = post(url, body)
        assert judge_requests(judge_server) - before == 6  # the duplicate judged once
        want = [run_scores[r] for r in rollouts[:6]]
        assert got["rewards"] == got["scores"] == [*want, 0.0]
        assert got["extra_logs"]["judge_failed"] == [0.0] * 6 + [1.0]
        assert got["extra_logs"]["duplicate"][5] == 1.0
        assert json.loads(got["details"][0]["verdicts"])[0]["reasoning"] == "item 1"
        with pytest.raises(urllib.error.HTTPError) as bad:
            post(url, {"query": ["x"], "prompts": ["y"], "labels": [IDS[0]]})
        assert bad.value.code == 400 and "does not start with its prompt" in json.loads(bad.value.read())["error"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        err = proc.stderr.read()  # type: ignore[union-attr]
        assert "stopping (SIGTERM)" in err and "stopped: 1 batches, 7 rollouts" in err and "Traceback" not in err
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as res:  # noqa: S310 - 127.0.0.1 only
        return json.loads(res.read())


@pytest.mark.parametrize("args, code, words", [
    (["port=99999"], 2, "port=99999 is not a port"),
    (["concurrncy=4"], 2, "unknown key 'concurrncy'"),
    (["--port", "5"], 2, "is not key=value"),
    (["--help"], 0, "usage: rubric-engine serve-reward"),
    (["host=0.0.0.0"], 2, "token_env="),  # anyone on the network could spend the judge budget
    (["token_env=NO_SUCH_VARIABLE"], 2, "$NO_SUCH_VARIABLE is not set"),
    (["max_body_mb=0"], 2, "max_body_mb=0 is not valid"),
    (["max_requests=0"], 2, "max_requests=0 is not valid"),
])
def test_serve_reward_errors_are_one_line(args: list[str], code: int, words: str, tmp_path: Path) -> None:
    res = run_cli(["serve-reward", "benchmark=heartbench", f"data.path={MINI}", "judge=mock", *args],
                  clean_env(tmp_path), timeout=120)
    assert res.returncode == code, res.stderr
    assert words in (res.stdout if code == 0 else res.stderr) and "Traceback" not in res.stderr


def test_serve_reward_port_in_use(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = run_cli(["serve-reward", "benchmark=heartbench", f"data.path={MINI}", "judge=mock", f"port={port}"],
                      clean_env(tmp_path), timeout=120)
    assert res.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in res.stderr


def test_built_inside_a_hydra_app(judge_server: FakeServer, tmp_path: Path) -> None:
    """verl's trainer is a Hydra app: composing the reward's config must neither fail on Hydra's global state
    nor take it away from the app."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_module(config_module="rubric_engine.conf", version_base="1.3"):
        with make_reward(judge_server.url, tmp_path, "concurrency=3") as reward:
            assert reward.scorer.settings.concurrency == 3
        assert GlobalHydra.instance().is_initialized()
    assert not GlobalHydra.instance().is_initialized()


# ------------------------------------------------------------------------------------------------ a hostile caller

def raw_post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, str]]:
    """POST `body` with exactly these headers (Host included when given); (status, JSON answer, headers)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        conn.putrequest("POST", parts.path, skip_host="Host" in headers, skip_accept_encoding=True)
        for k, v in {"Content-Length": str(len(body)), **headers}.items():
            conn.putheader(k, v)
        conn.endheaders(body)
        res = conn.getresponse()
        data = res.read()
        return res.status, json.loads(data) if data else {}, {k.lower(): v for k, v in res.getheaders()}
    finally:
        conn.close()


@pytest.fixture()
def served(judge_server: FakeServer, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    """serve-reward on a free port (extra words: the test's indirect parameter); yields (url, process)."""
    extra = list(getattr(request, "param", []))
    env = {**clean_env(tmp_path), "REWARD_TOKEN": "t0ken-for-tests"}
    cmd = [EXE, "serve-reward", "benchmark=heartbench", f"data.path={MINI}", f"cache.dir={tmp_path / 'cache'}",
           *judge_args(judge_server.url), "port=0", "max_retries=0", *extra]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(180, proc.kill)
    timer.start()
    try:
        url = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read()  # type: ignore[union-attr]
        yield url, proc
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def openrlhf_body(rollouts: list[tuple[str, str]]) -> bytes:
    return json.dumps({"query": [t for _, t in rollouts], "prompts": [""] * len(rollouts),
                       "labels": [q for q, _ in rollouts]}).encode()


JSON = {"Content-Type": "application/json"}


def test_serve_reward_refuses_what_a_web_page_can_send(served: tuple[str, Any], judge_server: FakeServer) -> None:
    url, _ = served
    port = url.split(":")[2].split("/")[0]
    body = openrlhf_body([(IDS[0], reply(IDS[0], 3))])
    before = judge_requests(judge_server)
    # a form or fetch() without a preflight can send text/plain from any page: refused, no judge call
    status, got, _ = raw_post(url, body, {"Content-Type": "text/plain"})
    assert status == 415 and "application/json" in got["error"]
    status, got, _ = raw_post(url, body, {**JSON, "Origin": "https://evil.example"})
    assert status == 403 and "Origin" in got["error"]
    status, got, _ = raw_post(url, body, {**JSON, "Host": f"evil.example:{port}"})  # DNS rebinding
    assert status == 403 and "Host" in got["error"]
    assert judge_requests(judge_server) == before
    # nesting deeper than any rollout needs: one 400 line, never a dropped connection
    deep = b"[" * 200_000 + b"]" * 200_000
    status, got, _ = raw_post(url, deep, JSON)
    assert status == 400 and "nested" in got["error"]
    status, got, _ = raw_post(url, b'{"query": ' + b"[" * 50 + b"]" * 50 + b"}", JSON)
    assert status == 400 and "nested" in got["error"]
    # its own origin (a page served by this very server, if ever) is no foreign one
    status, got, _ = raw_post(url, body, {**JSON, "Origin": f"http://127.0.0.1:{port}"})
    assert status == 200 and got["extra_logs"]["judge_failed"] == [0.0]


def test_serve_reward_one_bad_rollout_fails_only_itself(served: tuple[str, Any], judge_server: FakeServer) -> None:
    url, _ = served
    good = (IDS[1], reply(IDS[1], 4))
    rollouts = [good, (IDS[2], "a lone surrogate \ud800 here"), (IDS[3], "long reply. " * 250_000)]  # 3 M chars
    status, got, _ = raw_post(url, openrlhf_body(rollouts), JSON)
    assert status == 200, got
    assert got["extra_logs"]["judge_failed"] == [0.0, 1.0, 1.0]
    errors = [d["judge_error"] for d in got["details"]]
    assert errors[0] is None and "surrogate" in errors[1] and "3000000 characters" in errors[2]
    assert got["rewards"][1:] == [0.0, 0.0] and got["counts"]["failures"] == 2


@pytest.mark.parametrize("served", [["max_requests=1", "max_body_mb=1", "read_timeout=600"]], indirect=True)
def test_serve_reward_caps_bodies_and_requests_and_never_waits_for_an_idle_client(served: tuple[str, Any]) -> None:
    import socket
    import time

    url, proc = served
    status, got, _ = raw_post(url, b"[" + b'"x",' * 300_000 + b'"x"]', JSON)  # 1.2 MB, over max_body_mb=1
    assert status == 413 and "max_body_mb" in got["error"]
    port = int(url.split(":")[2].split("/")[0])
    idle = socket.create_connection(("127.0.0.1", port))  # sends half its body, then nothing
    try:
        idle.sendall(f"POST /get_reward HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                     "Content-Length: 1000\r\n\r\n{\"query\": [".encode())
        time.sleep(1.0)
        status, got, headers = raw_post(url, openrlhf_body([(IDS[0], "hello")]), JSON)  # over max_requests=1
        assert status == 503 and int(headers["retry-after"]) >= 1 and "max_requests" in got["error"]
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert time.monotonic() - t0 < 30  # read_timeout=600: the stop did not wait for the idle client
    finally:
        idle.close()
    err = proc.stderr.read()
    assert "stopping (SIGTERM)" in err and "Traceback" not in err


@pytest.mark.parametrize("served", [["token_env=REWARD_TOKEN"]], indirect=True)
def test_serve_reward_bearer_token(served: tuple[str, Any], judge_server: FakeServer) -> None:
    url, _ = served
    body = openrlhf_body([(IDS[0], reply(IDS[0], 5))])
    before = judge_requests(judge_server)
    for auth in (None, "Bearer wrong", "t0ken-for-tests"):
        status, got, _ = raw_post(url, body, {**JSON, **({"Authorization": auth} if auth else {})})
        assert status == 401 and "token" in got["error"] and "t0ken-for-tests" not in json.dumps(got)
    assert judge_requests(judge_server) == before
    status, got, _ = raw_post(url, body, {**JSON, "Authorization": "Bearer t0ken-for-tests"})
    assert status == 200
