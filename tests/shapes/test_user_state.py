"""A simulated user with a hidden state (`user_state:`) end to end: the console script, LiteLLM and the fake
server playing candidate and user.

Each user line ends with a JSON state; the candidate is sent the line alone; a bad state is asked for once more
and a second bad one is the question's user error (one line, counted, never scored); a stop rule the state meets
ends the session before max_turns; the question's score is the final state's field and the trajectory is in the
record and report.html; kill -9 mid-conversation and the same command repays nothing; the shipped spec runs
keyless with mocks.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, REPO, model_args, run_cli
from fakeserver import FakeServer, Reply
from test_dialogue_scripted import kill_after_requests

SPEC = REPO / "tests" / "data" / "state_mini"
ROWS = {r["id"]: r for r in map(json.loads, (SPEC / "state_mini.jsonl").read_text().splitlines())}
REASK = "Your reply's state was not valid"
# the emotion each user line reports, per question; s1 reaches 0 at its third line (a stop rule)
EMOTIONS = {"s1": [40, 20, 0, 50], "s2": [55, 60, 65, 70], "s3": [50, 45, 40, 35]}


def state(qid: str, k: int) -> dict[str, Any]:
    e = EMOTIONS[qid][k - 1]
    return {"emotion": e, "change": e - (EMOTIONS[qid][k - 2] if k > 1 else 50), "reason": f"{qid} felt {k}"}


class Script:
    """s1 ends by its stop rule at line 3; s2's first line has a bad state, good when asked again (cut at max
    turns); s3's second line is bad twice (its user error). `good`: every state valid (the kill test)."""

    def __init__(self, good: bool = False) -> None:
        self.good = good

    def __call__(self, body: dict[str, Any]) -> Reply:
        msgs = body["messages"]
        if body["model"] == "sim":
            qid = next(q for q, r in ROWS.items() if r["persona"] in msgs[0]["content"])
            reasked = REASK in str(msgs[-1]["content"])
            k = sum(m["role"] == "user" and REASK not in m["content"] for m in msgs) + 1
            line = f"{qid} line {k}"
            if not self.good and qid == "s2" and k == 1 and not reasked:
                return Reply(text=f"{line}\n{{emotion: high}}", usage=(20, 5))
            if not self.good and qid == "s3" and k == 2:
                return Reply(text=f"{line}\n" + json.dumps({**state(qid, k), "emotion": 140}), usage=(20, 5))
            fenced = qid == "s1"
            block = json.dumps(state(qid, k))
            return Reply(text=f"{line}\n```json\n{block}\n```" if fenced else f"{line} {block}", usage=(20, 5))
        users = [m["content"] for m in msgs if m["role"] == "user"]
        return Reply(text=f"C{len(users)} to <{users[-1]}>", usage=(30, 10))


def args(run: Path, url: str, *more: str) -> list[str]:
    return [f"benchmark={SPEC}", f"hydra.run.dir={run}", "progress=plain", *model_args(url)[:5],
            "user=openai_compatible", "user.model=openai/sim", f"user.api_base={url}", "user.name=sim",
            "user.api_key_env=FAKE_KEY", *more]


def records(run: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines())}


def test_states_are_read_reasked_stopped_and_scored_and_never_shown_to_the_candidate(tmp_path: Path,
                                                                                      env: dict[str, str]) -> None:
    with FakeServer(Script()) as srv:
        res = run_cli(args(tmp_path / "run", srv.url), env)
        sent = list(srv.requests)
    assert res.returncode == 0, res.stderr
    recs = records(tmp_path / "run")
    # s1: its third state meets `emotion <= 0`: the session ends there, before max_turns (4), unanswered
    assert recs["s1"]["ended"] == "state"
    assert [t["role"] for t in recs["s1"]["transcript"]] == ["user", "assistant"] * 2 + ["user"]
    assert recs["s1"]["transcript"][0] == {"role": "user", "content": "s1 line 1", "state": state("s1", 1)}
    assert recs["s1"]["states"] == [{"turn": k, **state("s1", k)} for k in (1, 2, 3)]
    assert recs["s1"]["score"] == 0 and recs["s1"]["judge_error"] is None and recs["s1"]["user_error"] is None
    # s2: its first state was not JSON, asked once more (the bad reply and why shown), then fine; cut at 4 turns
    asked = [b for b in sent if b["model"] == "sim" and REASK in str(b["messages"][-1]["content"])]
    reask = {b["messages"][-2]["content"].split(" line")[0]: b for b in asked}
    assert sorted(b["messages"][-2]["content"].split(" line")[0] for b in asked) == ["s2", "s3"]  # once each
    assert "{emotion: high}" in reask["s2"]["messages"][-2]["content"]
    assert "not valid JSON" in reask["s2"]["messages"][-1]["content"]
    assert recs["s2"]["ended"] == "max_turns" and recs["s2"]["score"] == 70
    assert [s["emotion"] for s in recs["s2"]["states"]] == [55, 60, 65, 70]
    assert recs["s2"]["tokens"]["user"] == {"prompt": 20 * 5, "completion": 5 * 5}  # the rejected reply is paid
    # s3: its second line's emotion is out of range twice: the question's user error, one line, never scored
    assert recs["s3"]["score"] is None and "states" not in recs["s3"]
    assert recs["s3"]["user_error"] == ("simulated user, turn 2: the simulated user's state is not valid: the "
                                        "state's emotion is 140, outside 0.0..100.0")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"]["user_errors"] == 1 and summary["counts"]["scored"] == 2
    assert summary["overall"] == (0 + 70) / 2  # the scored questions' final emotions
    # the candidate never sees a state: not its fields, not its JSON
    cand = [json.dumps(b["messages"]) for b in sent if b["model"] == "cand"]
    assert len(cand) == 2 + 4 + 1 and not any("emotion" in c or "felt" in c or "```" in c for c in cand)
    assert "hidden state:" in (tmp_path / "run" / "report.html").read_text()
    # the simulator sees its own earlier lines with their states (so it can say how its emotion changed)
    s1_last = [b for b in sent if b["model"] == "sim" and "night shifts" in b["messages"][0]["content"]][-1]
    assert s1_last["messages"][1] == {"role": "assistant", "content": "s1 line 1\n" + json.dumps(state("s1", 1))}


def test_kill9_mid_conversation_then_same_command_repeats_no_answered_request(tmp_path: Path,
                                                                             env: dict[str, str]) -> None:
    run = tmp_path / "run"
    with FakeServer(Script(good=True), latency=0.3) as srv:
        first = kill_after_requests([EXE, *args(run, srv.url, "concurrency=1")], env, srv, "cand", 3)
        srv.reset()
        res = run_cli(args(run, srv.url, "concurrency=1"), env)
        assert res.returncode == 0, res.stderr
        second = [json.dumps(b, sort_keys=True) for b in srv.requests]
    repeated = Counter(second) & Counter(first)
    assert sum(repeated.values()) <= 2, repeated  # only calls in flight at the kill (<= 1 per role)
    # s1: 3 user lines, 2 replies; s2, s3: 4 and 4, cut at max_turns
    assert len(first) + len(second) - sum(repeated.values()) == (3 + 2) + (4 + 4) * 2
    assert [records(run)[q]["score"] for q in ("s1", "s2", "s3")] == [0, 70, 35]


@pytest.mark.parametrize(("old", "new", "key", "words"), [
    ('stop_when: ["emotion <= 0", "emotion >= 100"]', 'stop_when: ["import os"]', "user_state.stop_when",
     "field op number"),
    ("field: emotion", "field: reason", "user_state", "not a number field"),
    ("mode: simulated", "mode: scripted", "user_state", "needs a simulated user")])
def test_a_bad_user_state_block_is_one_line(tmp_path: Path, env: dict[str, str], old: str, new: str, key: str,
                                            words: str) -> None:
    spec = tmp_path / "spec"
    spec.mkdir()
    for f in SPEC.iterdir():
        (spec / f.name).write_text(f.read_text())
    text = (spec / "benchmark.yaml").read_text()
    assert old in text
    (spec / "benchmark.yaml").write_text(text.replace(old, new))
    res = run_cli(["validate", f"benchmark={spec}"], env)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    lines = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error:")]
    assert len(lines) == 1 and f" {key}" in lines[0] and words in lines[0], res.stderr


def test_shipped_spec_tries_out_keyless_and_its_states_score_again_without_a_call(tmp_path: Path,
                                                                                   env: dict[str, str]) -> None:
    """counselling_sage with candidate=mock user=mock: every question scored by its final emotion (the mock moves
    it by a step per persona: some sessions end by the stop rule); `rescore` and `stage=score from_run=` give the
    same scores from the stored states, with no model."""
    run = tmp_path / "run"
    res = run_cli(["benchmark=counselling_sage", "candidate=mock", "user=mock", "progress=none",
                   f"hydra.run.dir={run}"], env)
    assert res.returncode == 0, res.stderr
    recs = records(run)
    assert len(recs) == 3 and all(r["score"] == r["states"][-1]["emotion"] for r in recs.values())
    assert "state" in {r["ended"] for r in recs.values()}
    again = run_cli(["benchmark=counselling_sage", "stage=score", f"from_run={run}", "progress=none",
                     f"hydra.run.dir={tmp_path / 'scored'}"], env)
    assert again.returncode == 0, again.stderr
    assert {q: r["score"] for q, r in records(tmp_path / "scored").items()} == {q: r["score"] for q, r in recs.items()}
    out = tmp_path / "rescored"
    rescored = run_cli(["rescore", str(run), f"out={out}"], env)
    assert rescored.returncode == 0, rescored.stderr
    assert {q: r["score"] for q, r in records(out).items()} == {q: r["score"] for q, r in recs.items()}
