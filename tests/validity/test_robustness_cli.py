"""`rubric-engine robustness` end to end: a run of the console script on the project's mini HeartBench data
against tests/fakeserver.py, whose judge is scripted to be position-biased (the last of several listed
criteria is never met, whatever it says); the robustness command, against the same server, must detect it
(check=order), report agreement and a kappa equal to scikit-learn's on the same verdicts (check=granularity),
make no request when run again or in a dry run, and refuse what it cannot do with one line and exit 2; with
criteria reworded by a scripted paraphraser (check=paraphrase), report exactly the flips the judge script
implies and count a criterion the paraphraser could not reword."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sklearn.metrics import cohen_kappa_score

from conftest import EXE, MINI, QuestionScript, clean_env, model_args, read_rows, run_cli
from fakeserver import FakeServer, Reply

ROWS, BY_ID = read_rows(MINI)
REPLY_RE = re.compile(r"REPLY\[(\w{6})\]")
ITEM_RE = re.compile(r"^(\d+)\. \[[^\]]*\]\[[^\]]*\] (.*)$", re.M)


def truth(qid: str, item: int) -> bool:
    """What the judge thinks of item `item` (1-based, data order) of `qid`, wherever it is shown."""
    return (sum(map(ord, qid)) + 3 * item) % 5 < 4


def item_of(qid: str, text: str) -> int:
    texts = [c["content"] for c in BY_ID[qid]["rubric"]]
    assert texts.count(text) == 1, (qid, text)
    return texts.index(text) + 1


class Biased(QuestionScript):
    """A judge that never meets the last of several listed criteria (one criterion alone: its truth)."""

    def __init__(self) -> None:
        super().__init__(ROWS)
        self.lock = threading.Lock()
        self.judged: list[tuple[str, list[int]]] = []  # (question, data items in shown order) per judge request
        self.broken = False  # True: every judge reply is unusable
        self.delay = 0.0  # seconds before each judge reply

    def judge(self, model: str, text: str) -> Reply:
        qid = REPLY_RE.search(text).group(1)  # type: ignore[union-attr]
        shown = [(int(i), item_of(qid, t.strip())) for i, t in ITEM_RE.findall(text)]
        assert [i for i, _ in shown] == list(range(1, len(shown) + 1))
        with self.lock:
            self.judged.append((qid, [it for _, it in shown]))
        n = len(shown)
        if self.broken:
            return Reply(text="I would rather not say.", delay=self.delay)
        reply = self.verdict(n, lambda i: truth(qid, shown[i - 1][1]) and not (n > 1 and i == n))
        reply.delay = self.delay
        return reply

    def candidate(self, model: str, qid: str) -> Reply:
        return Reply(text=f"REPLY[{qid}] 我在这里，愿意听你说。", usage=(40, 20))


def original(qid: str, item: int) -> bool:
    """The run's verdict: every criterion in data order, so the data's last one is never met."""
    return truth(qid, item) and item != len(BY_ID[qid]["rubric"])


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("robust")
    env = clean_env(tmp)
    script = Biased()
    with FakeServer(script) as srv:
        run = tmp / "run"
        res = run_cli(["benchmark=heartbench", f"data.path={MINI}", "progress=none", f"hydra.run.dir={run}",
                       *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        srv.reset()
        script.judged.clear()
        yield run, env, srv, script


def robustness(made: Any, *args: str) -> Any:
    run, env, _, _ = made
    return run_cli(["robustness", str(run), *args], env)


def test_order_detects_a_position_biased_judge_and_a_rerun_pays_nothing(made: Any) -> None:
    run, env, srv, script = made
    dry = robustness(made, "check=order", "n=10", "seed=3", "dry_run=true")
    assert dry.returncode == 0, dry.stderr
    assert "10 replies, 10 judge calls (0 cached)" in dry.stdout and not srv.requests
    res = robustness(made, "check=order", "n=10", "seed=3")
    assert res.returncode == 0, res.stderr
    assert len(srv.requests) == 10  # one call per reply, no re-ask
    report = json.loads((run / "robustness" / "order.json").read_text())
    assert (run / "robustness" / "order.md").is_file()
    # the verdicts, recomputed here from what the server was shown
    expect = {}
    for qid, order in script.judged:
        assert order != sorted(order)  # every question really was permuted
        for pos, item in enumerate(order, 1):
            expect[(qid, item)] = (truth(qid, item) and pos != len(order), pos)
    got = {(v["id"], v["index"]): (v["new"], v["position"]) for v in report["verdicts"]}
    assert got == expect
    assert all(v["original"] == original(v["id"], v["index"]) for v in report["verdicts"])
    flips = sum(v["new"] != v["original"] for v in report["verdicts"])
    assert report["comparison"]["flip_rate"] == pytest.approx(flips / len(expect)) and flips > 0
    pos = {p["position"]: p for p in report["positions"]}
    assert pos["last"]["hit_rate"] == 0 and pos["last"]["n"] == 10
    assert pos["1"]["ci"][0] > pos["last"]["ci"][1]  # the intervals do not overlap
    assert "position-biased" in res.stdout
    again = robustness(made, "check=order", "n=10", "seed=3")
    assert again.returncode == 0, again.stderr
    assert len(srv.requests) == 10  # a re-run is served from the cache
    assert json.loads((run / "robustness" / "order.json").read_text())["verdicts"] == report["verdicts"]
    dry = robustness(made, "check=order", "n=10", "seed=3", "dry_run=true")
    assert "(10 cached)" in dry.stdout and len(srv.requests) == 10


def test_granularity_kappa_equals_sklearn(made: Any) -> None:
    run, env, srv, script = made
    srv.reset()
    res = robustness(made, "check=granularity", "n=6", "seed=1", "n_boot=200")
    assert res.returncode == 0, res.stderr
    report = json.loads((run / "robustness" / "granularity.json").read_text())
    qids = {v["id"] for v in report["verdicts"]}
    assert len(qids) == 6 and len(srv.requests) == sum(len(BY_ID[q]["rubric"]) for q in qids)
    new = [v["new"] for v in report["verdicts"]]
    old = [v["original"] for v in report["verdicts"]]
    assert new == [truth(v["id"], v["index"]) for v in report["verdicts"]]  # alone, every verdict is the truth
    assert old == [original(v["id"], v["index"]) for v in report["verdicts"]]
    cmp = report["comparison"]
    assert cmp["cohen_kappa"] == pytest.approx(cohen_kappa_score(new, old), abs=1e-12)
    assert cmp["agreement"] == pytest.approx(sum(a == b for a, b in zip(new, old)) / len(new))
    assert cmp["kappa_ci"] is not None and cmp["kappa_ci"][0] <= cmp["cohen_kappa"] <= cmp["kappa_ci"][1]
    assert "kappa" in (run / "robustness" / "granularity.md").read_text()


@pytest.mark.parametrize("args, message", [
    (["check=paraphrase", "paraphraser=nosuchentry"], "paraphraser=nosuchentry: not a conf/judge/"),
    (["check=sideways"], "check='sideways' is not a check"),
    ([], "add check=order, check=granularity or check=paraphrase"),
    (["check=order", "n=0"], "n must be at least 1"),
])
def test_refusals_are_one_line_exit_2(made: Any, args: list[str], message: str) -> None:
    _, _, srv, _ = made
    before = len(srv.requests)
    res = robustness(made, *args)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) <= 2 and len(srv.requests) == before


def test_nothing_compared_exits_1_with_the_failures_counted(made: Any) -> None:
    run, env, srv, script = made
    before = len(srv.requests)
    script.broken = True
    try:
        res = robustness(made, "check=order", "n=2", "seed=77", "out=" + str(run / "broken"))
    finally:
        script.broken = False
    assert res.returncode == 1 and "2 re-judgment(s) failed" in res.stderr and "Traceback" not in res.stderr
    assert len(srv.requests) - before == 2 * 3  # each reply asked once and re-asked twice, then counted
    report = json.loads((run / "broken" / "order.json").read_text())
    assert len(report["errors"]) == 2 and report["comparison"]["n"] == 0 and report["verdicts"] == []


def test_interrupted_then_resumed_pays_only_for_the_rest(made: Any) -> None:
    run, env, srv, script = made
    args = [EXE, "robustness", str(run), "check=granularity", "n=12", "seed=5", "out=" + str(run / "killed")]
    start = len(srv.requests)
    script.delay = 1.0
    try:
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while len(srv.requests) - start < 20 and time.monotonic() < deadline:  # the first batch answered
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        script.delay = 0.0
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err and not (run / "killed" / "granularity.json").exists()
    first = len(srv.requests) - start
    total = sum(len(r["rubric"]) for r in ROWS)
    assert 0 < first < total
    res = robustness(made, "check=granularity", "n=12", "seed=5", "out=" + str(run / "killed"))
    assert res.returncode == 0, res.stderr
    again = len(srv.requests) - start - first
    assert 0 < again < total  # the calls answered before the signal came from the cache
    assert json.loads((run / "killed" / "granularity.json").read_text())["comparison"]["n"] == total


def test_missing_key_is_refused_before_any_call(made: Any) -> None:
    run, env, srv, _ = made
    before = len(srv.requests)
    res = run_cli(["robustness", str(run), "check=order", "seed=9"], {k: v for k, v in env.items() if k != "FAKE_KEY"})
    assert res.returncode == 2 and "FAKE_KEY" in res.stderr and len(srv.requests) == before


def test_not_a_run_directory(tmp_path: Path) -> None:
    res = run_cli(["robustness", str(tmp_path), "check=order"], clean_env(tmp_path))
    assert res.returncode == 2 and "Traceback" not in res.stderr


PREFIX = "换言之："
STUCK = BY_ID["mq03cc"]["rubric"][0]["content"]  # the paraphraser cannot reword this one


class Rewording(Biased):
    """The biased judge, reading reworded criteria (PREFIX + the text) and flipping its verdict on the second
    criterion of every question when reworded; `para` rewords by prefixing, but repeats STUCK word for word."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        if body["model"] == "para":
            text = self.text(body)
            crit = re.search(r"<criterion-\w+>\n(.*)\n</criterion-", text, re.S).group(1)  # type: ignore[union-attr]
            return Reply(text=crit if crit == STUCK else PREFIX + crit, usage=(20, 10))
        return super().__call__(body)

    def judge(self, model: str, text: str) -> Reply:
        qid = REPLY_RE.search(text).group(1)  # type: ignore[union-attr]
        shown = [t.strip() for _, t in ITEM_RE.findall(text)]
        items = [item_of(qid, t.removeprefix(PREFIX)) for t in shown]
        n = len(items)
        return self.verdict(n, lambda i: (truth(qid, items[i - 1]) != (items[i - 1] == 2 and shown[i - 1].startswith(PREFIX)))
                            and not (n > 1 and i == n))


def test_paraphrase_flip_rate_failed_rewording_counted_and_cached(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    entries = tmp_path / "conf" / "judge"
    entries.mkdir(parents=True)
    with FakeServer(Rewording()) as srv:
        (entries / "para.yaml").write_text(f"name: para\nmodel: openai/para\napi_base: {srv.url}\napi_key_env: FAKE_KEY\n")
        run = tmp_path / "run"
        res = run_cli(["benchmark=heartbench", f"data.path={MINI}", "progress=none", f"hydra.run.dir={run}",
                       *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        srv.reset()
        args = ["robustness", str(run), "check=paraphrase", "n=12", "paraphraser=para"]
        res = run_cli(args, env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        texts = {c["content"] for r in ROWS for c in r["rubric"]}
        para = [b for b in srv.requests if b["model"] == "para"]
        judged = [b for b in srv.requests if b["model"] == "judge"]
        assert len(para) == len(texts) + 2  # one request per distinct criterion, two re-asks for STUCK
        assert len(judged) == 11  # mq03cc's reply is not judged: one of its criteria could not be reworded
        report = json.loads((run / "robustness" / "paraphrase.json").read_text())
        assert [e["id"] for e in report["errors"]] == ["mq03cc"] and "word for word" in report["errors"][0]["error"]
        flips = [(v["id"], v["index"]) for v in report["verdicts"] if v["new"] != v["original"]]
        assert sorted(flips) == sorted((r["question_id"], 2) for r in ROWS if r["question_id"] != "mq03cc")
        assert report["comparison"]["flip_rate"] == pytest.approx(11 / sum(len(r["rubric"]) for r in ROWS
                                                                            if r["question_id"] != "mq03cc"))
        assert "## Reworded criteria whose verdict changed" in (run / "robustness" / "paraphrase.md").read_text()
        before = len(srv.requests)
        again = run_cli(args, env, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        # the paraphrases and the verdicts come from the cache; only the failed paraphrase is asked again
        assert [b["model"] for b in srv.requests[before:]] == ["para"] * 3
        before = len(srv.requests)
        dry = run_cli([*args, "dry_run=true"], env, cwd=tmp_path)
        assert dry.returncode == 0 and len(srv.requests) == before
        assert f"12 replies, {len(texts) + 12} paraphraser and judge calls" in dry.stdout
        assert f"{len(texts) - 1 + 11} cached" in dry.stdout  # all but STUCK's paraphrase, and the 11 judge calls
