"""`rubric-engine filter` end to end through the console script against tests/fakeserver.py: per question a
strong and a weak reply; the judge's script makes planted criteria separate them (a reward met by the strong
reply only, a penalty hit by the weak only), one criterion reverse them, and gives every other criterion the same
verdict on both. The filter must keep exactly the planted separating criteria, cache and count every call,
count a failed judgment (never a pass) and never write over a file."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, QuestionScript, clean_env, run_cli
from fakeserver import FakeServer, Reply
from test_gates_cli import BY_ID, ROWS, _copy_spec, _entry

PAIRED = ("enq001", "enq002", "enq003")
SEP = {(q, i) for q in PAIRED for i in range(1, len(BY_ID[q]["rubric"]) + 1) if i % 3 == 1}
REV = {("enq002", 2)}
BROKEN = "enq004"  # the judge answers garbage on this question's weak reply
REPLY_RE = re.compile(r"REPLY\[(\w+)\|(\w+)\]")


def met(qid: str, i: int, which: str) -> bool:
    score = BY_ID[qid]["rubric"][i - 1]["score"]
    favoured = {"strong": (qid, i) in SEP, "weak": (qid, i) in REV}[which] if (qid, i) in SEP | REV else None
    if favoured is None:  # the same verdict on both replies: no separation
        return i % 2 == 0
    return favoured if score is not None and score > 0 else not favoured


class Script(QuestionScript):
    slow = ""  # a question whose judgments take 30 s (the interrupt test)

    def __call__(self, body: dict[str, Any]) -> Reply:
        qid, which = REPLY_RE.search(self.text(body)).groups()  # type: ignore[union-attr]
        if qid == BROKEN and which == "weak":
            return Reply(text="I cannot decide.", usage=(100, 5))
        reply = self.verdict(len(BY_ID[qid]["rubric"]), lambda i: met(qid, i, which))
        reply.delay = 30.0 if qid == self.slow else 0.0
        return reply


def _pairs(path: Path, qids: tuple[str, ...]) -> Path:
    path.write_text("".join(json.dumps({"question_id": q, "strong": f"REPLY[{q}|strong] I hear you.",
                                        "weak": f"REPLY[{q}|weak] Cheer up."}) + "\n" for q in qids), encoding="utf-8")
    return path


@pytest.fixture()
def setup(tmp_path: Path) -> Any:
    env = clean_env(tmp_path)
    env["RUBRIC_ENGINE_CONFIG_DIRS"] = str(tmp_path / "conf")
    spec = tmp_path / "heartbench_en"
    _copy_spec(spec)
    script = Script(ROWS)
    with FakeServer(script) as srv:
        (tmp_path / "conf" / "judge").mkdir(parents=True)
        (tmp_path / "conf" / "judge" / "judge.yaml").write_text(_entry("judge", srv.url), encoding="utf-8")
        yield tmp_path, env, spec, srv, script


def test_filter_keeps_exactly_the_criteria_that_separate_the_planted_replies(setup: Any) -> None:
    tmp, env, spec, *_ = setup
    args = ["filter", f"benchmark={spec}", f"pairs={_pairs(tmp / 'pairs.jsonl', PAIRED)}", "judge=judge"]
    res = run_cli(args, env)
    assert res.returncode == 0, res.stdout + res.stderr
    out = spec / "heartbench_en_sample.filtered.jsonl"
    report = json.loads((spec / (out.name + ".filter.json")).read_text(encoding="utf-8"))
    kept = {(r["qid"], r["index"]) for r in report["criteria"] if r["kept"]}
    assert kept == SEP
    why = {(r["qid"], r["index"]): r["why"] for r in report["criteria"]}
    assert "reverses 1 of 1" in why[("enq002", 2)] and why[("enq005", 1)].startswith("not measured")
    assert report["calls"] == 2 * len(PAIRED) and report["failed_replies"] == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["question_id"] for r in rows] == list(PAIRED)  # a question left with no criterion is left out
    for r in rows:
        want = [c for i, c in enumerate(BY_ID[r["question_id"]]["rubric"], 1) if (r["question_id"], i) in SEP]
        assert r["rubric"] == want
    before = out.read_bytes()
    res = run_cli(args, env)  # the file is there: refused, nothing overwritten
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and out.read_bytes() == before
    res = run_cli([*args, f"out={tmp / 'again.jsonl'}"], env)  # every call was cached: the re-run pays nothing
    again = json.loads((tmp / "again.jsonl.filter.json").read_text(encoding="utf-8"))
    assert res.returncode == 0 and again["calls"] == 0 and again["cache_hits"] == 2 * len(PAIRED)


def test_a_failed_judgment_is_counted_never_a_pass(setup: Any) -> None:
    tmp, env, spec, *_ = setup
    res = run_cli(["filter", f"benchmark={spec}", f"pairs={_pairs(tmp / 'pairs.jsonl', (*PAIRED, BROKEN))}",
                   "judge=judge", f"out={tmp / 'f.jsonl'}"], env)
    assert res.returncode == 1 and "not judged" in res.stdout, res.stdout + res.stderr
    report = json.loads((tmp / "f.jsonl.filter.json").read_text(encoding="utf-8"))
    assert report["failed_replies"] == 1
    broken = [r for r in report["criteria"] if r["qid"] == BROKEN]
    assert broken and all(not r["kept"] and r["why"].startswith("no verdict") for r in broken)
    assert {(r["qid"], r["index"]) for r in report["criteria"] if r["kept"]} == SEP


def test_a_pair_for_an_unknown_question_is_one_line(setup: Any) -> None:
    tmp, env, spec, *_ = setup
    res = run_cli(["filter", f"benchmark={spec}", f"pairs={_pairs(tmp / 'p.jsonl', ('nope',))}", "judge=judge",
                   f"out={tmp / 'f.jsonl'}"], env)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "'nope'" in res.stderr, res.stderr
    assert not (tmp / "f.jsonl").exists()


def test_by_question_keeps_a_whole_rubric_when_its_weighted_sum_separates(setup: Any) -> None:
    tmp, env, spec, *_ = setup
    pairs = _pairs(tmp / "pairs.jsonl", PAIRED[:2])
    swapped = {"question_id": "enq003", "strong": "REPLY[enq003|weak] Cheer up.", "weak": "REPLY[enq003|strong] I hear you."}
    with pairs.open("a", encoding="utf-8") as f:  # labelled the wrong way round: its rubric reverses the pair
        f.write(json.dumps(swapped) + "\n")
    res = run_cli(["filter", f"benchmark={spec}", f"pairs={pairs}", "judge=judge", f"out={tmp / 'q.jsonl'}",
                   "by=question"], env)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads((tmp / "q.jsonl.filter.json").read_text(encoding="utf-8"))

    def margin(qid: str) -> float:  # signed weighted sum of met items, strong minus weak
        items = BY_ID[qid]["rubric"]
        return sum((c["score"] or 0) * (met(qid, i, "strong") - met(qid, i, "weak")) for i, c in enumerate(items, 1))

    assert all(margin(q) > 0 for q in PAIRED)
    want = {(q, i) for q in PAIRED[:2] for i in range(1, len(BY_ID[q]["rubric"]) + 1)}
    assert {(r["qid"], r["index"]) for r in report["criteria"] if r["kept"]} == want
    # the judge's answers are the same as by=criterion's: a second run in the same cache would pay nothing
    assert report["calls"] == 2 * len(PAIRED)


def test_nothing_kept_writes_no_data_and_exits_1(setup: Any) -> None:
    tmp, env, spec, *_ = setup
    same = tmp / "same.jsonl"  # the strong reply is the weak one: nothing can separate them
    same.write_text(json.dumps({"question_id": "enq001", "strong": "REPLY[enq001|weak] a", "weak": "REPLY[enq001|weak] b"})
                    + "\n", encoding="utf-8")
    res = run_cli(["filter", f"benchmark={spec}", f"pairs={same}", "judge=judge", f"out={tmp / 'n.jsonl'}"], env)
    assert res.returncode == 1 and "no criterion separates" in res.stderr, res.stdout + res.stderr
    assert not (tmp / "n.jsonl").exists() and (tmp / "n.jsonl.filter.json").is_file()
    assert "enq005#1" not in res.stdout and "with no pair (not measured" in res.stdout


def test_interrupted_then_resumed_pays_only_for_the_rest(setup: Any) -> None:
    tmp, env, spec, srv, script = setup
    args = [EXE, "filter", f"benchmark={spec}", f"pairs={_pairs(tmp / 'pairs.jsonl', PAIRED)}", "judge=judge",
            f"out={tmp / 'i.jsonl'}"]
    script.slow = PAIRED[2]
    try:
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while len(srv.requests) < 2 * len(PAIRED) and time.monotonic() < deadline:  # every call asked
            time.sleep(0.05)
        time.sleep(1.0)  # the quick ones answered and cached
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        script.slow = ""
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    assert not (tmp / "i.jsonl").exists() and not (tmp / "i.jsonl.filter.json").exists()
    before = len(srv.requests)
    res = run_cli(args[1:], env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert len(srv.requests) - before == 2  # only the two judgments cut short are asked again


def test_missing_key_is_refused_before_any_call(setup: Any) -> None:
    tmp, env, spec, srv, _ = setup
    res = run_cli(["filter", f"benchmark={spec}", f"pairs={_pairs(tmp / 'pairs.jsonl', PAIRED)}", "judge=judge",
                   f"out={tmp / 'k.jsonl'}"], {k: v for k, v in env.items() if k != "FAKE_KEY"})
    assert res.returncode == 2 and "FAKE_KEY" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not srv.requests and not (tmp / "k.jsonl.filter.json").exists()


def test_a_spec_without_per_criterion_verdicts_is_refused(setup: Any) -> None:
    tmp, env, _, srv, _ = setup
    pairs = tmp / "p.jsonl"
    pairs.write_text(json.dumps({"id": "x", "strong": "a", "weak": "b"}) + "\n", encoding="utf-8")
    res = run_cli(["filter", "benchmark=arena_hard", f"pairs={pairs}", "judge=judge", f"out={tmp / 'a.jsonl'}"], env)
    assert res.returncode == 2 and "per-criterion verdicts" in res.stderr and not srv.requests, res.stderr
