"""Simulated users end to end: the console script, LiteLLM and the fake server playing candidate, user and judge.

The simulator sees the conversation with the roles swapped; a stop signal ends a session, a simulator that
never stops is cut at max_turns (recorded and counted), an empty simulator reply is the question's user_error;
the `user` role has its own entry, key check, tokens, cost and cache hits; kill -9 mid-conversation and the
same command repay nothing; bad conversation settings are one line; the shipped counselling_dynamic specs run
keyless with `user=mock` and show the transcript in report.html.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, REPO, edited_spec, model_args, run_cli
from fakeserver import FakeServer, Reply
from test_dialogue_scripted import kill_after_requests

SPEC = REPO / "tests" / "data" / "simulated_mini"
ROWS = {r["id"]: r for r in map(json.loads, (SPEC / "simulated_mini.jsonl").read_text().splitlines())}
SYSTEM = (SPEC / "system.j2").read_text()


def user_args(url: str) -> list[str]:
    return ["user=openai_compatible", "user.model=openai/sim", f"user.api_base={url}", "user.name=sim",
            "user.api_key_env=FAKE_KEY"]


class Script:
    """p1's user stops at its 2nd line, p2's never stops (cut at 3), p3's says nothing at its 2nd line."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        msgs = body["messages"]
        if body["model"] == "judge":
            n = int(msgs[0]["content"].split("Checks (", 1)[1].split(")", 1)[0])
            return Reply(text=json.dumps({"criteria": [{"id": i, "reasoning": "r", "met": True}
                                                       for i in range(1, n + 1)]}), usage=(100, 20))
        if body["model"] == "sim":
            qid = next(q for q, r in ROWS.items() if r["persona"] in msgs[0]["content"])
            k = sum(m["role"] == "assistant" for m in msgs) + 1  # its own lines are the assistant's
            if qid == "p1" and k == 2:
                return Reply(text="Thanks, bye. [END]", usage=(20, 5))
            if qid == "p3" and k == 2:
                return Reply(text="  ")
            return Reply(text=f"{qid} says {k}", usage=(20, 5))
        users = [m["content"] for m in msgs if m["role"] == "user"]
        return Reply(text=f"C{len(users)} to <{users[-1]}>", usage=(30, 10))


def args(run: Path, url: str, *more: str) -> list[str]:
    return [f"benchmark={SPEC}", f"hydra.run.dir={run}", "progress=plain", *model_args(url), *user_args(url), *more]


def records(run: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines())}


def test_sessions_stop_are_cut_or_fail_and_every_view_is_right(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Script()) as srv:
        res = run_cli(args(tmp_path / "run", srv.url), env)
        assert res.returncode == 0, res.stderr
        bodies = list(srv.requests)
        srv.reset()  # the same command again: every answered call is a cache hit
        again = run_cli(args(tmp_path / "again", srv.url), env)
        assert again.returncode == 0, again.stderr
        asked_again = list(srv.requests)
    recs = records(tmp_path / "run")
    # p1: u1 a1, then the user stops (its last words kept, not answered)
    assert recs["p1"]["transcript"] == [{"role": "user", "content": "p1 says 1"},
                                        {"role": "assistant", "content": "C1 to <p1 says 1>"},
                                        {"role": "user", "content": "Thanks, bye."}]
    assert recs["p1"]["ended"] == "stop" and recs["p1"]["response"] == "C1 to <p1 says 1>"
    # p2: cut at max_turns = 3 user turns, each answered
    assert [t["role"] for t in recs["p2"]["transcript"]] == ["user", "assistant"] * 3
    assert recs["p2"]["ended"] == "max_turns" and recs["p2"]["response"] == "C3 to <p2 says 3>"
    # p3: an empty simulator reply is a recorded per-question error, never judged
    assert recs["p3"]["user_error"] == "simulated user, turn 2: the simulated user returned an empty reply"
    assert recs["p3"]["score"] is None and recs["p3"]["candidate_error"] is None
    assert recs["p3"]["transcript"] == [{"role": "user", "content": "p3 says 1"},
                                        {"role": "assistant", "content": "C1 to <p3 says 1>"}]
    # the simulator's view of p2 at its 3rd turn: persona, opening, then roles swapped
    persona = f"PERSONA {ROWS['p2']['persona']}. You are the user. Write [END] when you are done (at most 3 turns).\n"
    third = next(b for b in bodies if b["model"] == "sim" and b["messages"][0]["content"] == persona
                 and len(b["messages"]) == 6)
    assert third["messages"][1:] == [{"role": "user", "content": "Start the conversation as Ben.\n"},
                                     {"role": "assistant", "content": "p2 says 1"},
                                     {"role": "user", "content": "C1 to <p2 says 1>"},
                                     {"role": "assistant", "content": "p2 says 2"},
                                     {"role": "user", "content": "C2 to <p2 says 2>"}]
    # the candidate's view carries its earlier replies
    assert any(b["messages"] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "p2 says 1"},
                                 {"role": "assistant", "content": "C1 to <p2 says 1>"},
                                 {"role": "user", "content": "p2 says 2"}] for b in bodies if b["model"] == "cand")
    calls = Counter(b["model"] for b in bodies)
    assert calls == {"sim": 2 + 3 + 2, "cand": 1 + 3 + 1, "judge": 2}
    # the user role's own tokens, cost and cache hits, per record and in the summary
    assert recs["p2"]["tokens"]["user"] == {"prompt": 60, "completion": 15}
    assert recs["p2"]["cache_hits"]["user"] == 0 and "user" in recs["p2"]["cost"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    # six lines at (20, 5) and the empty one at the server's default (10, 5): a refused reply was paid for too
    assert summary["tokens"]["user"] == {"prompt": 20 * 6 + 10, "completion": 5 * 7}
    assert summary["counts"]["user_errors"] == 1 and summary["counts"]["cut_at_max_turns"] == 1
    assert summary["counts"]["scored"] == 2 and summary["user"]["name"] == "sim"
    assert summary["calls"]["user"] == {"made": 7, "cache_hits": 0, "retries": 0}
    assert re.search(r"conversations cut at max_turns\s*│[\s│]*1", res.stdout), res.stdout
    # again: only the refused (never cached) empty reply is asked for a second time
    assert [(b["model"], len(b["messages"])) for b in asked_again] == [("sim", 4)]
    assert records(tmp_path / "again")["p2"]["transcript"] == recs["p2"]["transcript"]
    assert records(tmp_path / "again")["p2"]["cache_hits"] == {"candidate": 3, "judge": 1, "user": 3}


def test_kill9_mid_conversation_then_same_command_repeats_no_answered_request(tmp_path: Path,
                                                                             env: dict[str, str]) -> None:
    run = tmp_path / "run"
    with FakeServer(Script(), latency=0.3) as srv:
        first = kill_after_requests([EXE, *args(run, srv.url, "concurrency=1")], env, srv, "cand", 3)
        assert sum(b["model"] == "judge" for b in map(json.loads, first)) < 2, "the kill must land midway"
        srv.reset()
        res = run_cli(args(run, srv.url, "concurrency=1"), env)
        assert res.returncode == 0, res.stderr
        second = [json.dumps(b, sort_keys=True) for b in srv.requests]
    repeated = Counter(second) & Counter(first)
    assert sum(repeated.values()) <= 3, repeated  # only calls in flight at the kill (<= 1 per role)
    assert len(first) + len(second) - sum(repeated.values()) == 7 + 5 + 2  # every call paid once
    assert records(run)["p2"]["ended"] == "max_turns"


def test_user_entry_key_is_checked_before_any_call(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Script()) as srv:
        res = run_cli([f"benchmark={SPEC}", *model_args(srv.url), "user=gpt-4o", f"hydra.run.dir={tmp_path / 'r'}"],
                      env)
        assert srv.requests == []
    assert res.returncode == 2 and "OPENAI_API_KEY" in res.stderr and "Traceback" not in res.stderr
    lines = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error:")]
    assert len(lines) == 1, res.stderr  # one line naming the role and the override that points it elsewhere
    line = lines[0]
    assert line.startswith("rubric-engine: error: user gpt-4o (openai/gpt-4o") and "needs an API key" in line, line
    assert "user.api_key_env=<VAR>" in line, line
    assert not (tmp_path / "r").exists()


def _spec(tmp_path: Path, old: str, new: str) -> Path:
    return edited_spec(SPEC, tmp_path / "spec", old, new)


@pytest.mark.parametrize("old, new, extra, says", [
    ("", "", [], "user=ENTRY"),  # no simulator model declared, none given
    ("  simulator:\n    system: persona.j2\n    template: open.j2\n", "", ["user=mock"], "conversation.simulator"),
    ("max_turns: 3", "max_turns: 0", ["user=mock"], "conversation.max_turns"),
    ("system: persona.j2", "system: empty.j2", ["user=mock"], "empty.j2"),
    ("system: persona.j2", "system: ../outside.j2", ["user=mock"], "leads outside the spec's directory"),
    ("  template: judge.j2", "  template: judge.j2\n  scope: turn\n  turn: 4\n  verdict: {kind: score, "
     "min: 1, max: 10}", ["user=mock"], "judge.turn: a simulated session has at most 3 candidate turns"),
], ids=["no-simulator-model", "no-simulator", "max-turns-0", "empty-persona", "persona-outside", "turn-beyond"])
def test_bad_conversation_settings_are_one_line(tmp_path: Path, env: dict[str, str], old: str, new: str,
                                                extra: list[str], says: str) -> None:
    spec = _spec(tmp_path, old, new)
    (spec / "empty.j2").write_text("{% if false %}x{% endif %}\n")
    (tmp_path / "outside.j2").write_text("a file beside the spec, not inside it\n")
    res = run_cli([f"benchmark={spec}", "candidate=mock", "judge=mock", *extra, f"hydra.run.dir={tmp_path / 'r'}"],
                  env)
    assert res.returncode == 2, res.stderr
    assert says in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) <= 3, res.stderr  # the line and the debug hint (and a spec note)
    assert not (tmp_path / "r" / "samples.jsonl").exists()


@pytest.mark.parametrize("bench", ["counselling_dynamic", "counselling_dynamic_zh"])
def test_shipped_dynamic_benchmarks_run_keyless_with_the_transcript_in_the_report(tmp_path: Path,
                                                                                  env: dict[str, str],
                                                                                  bench: str) -> None:
    res = run_cli([f"benchmark={bench}", "candidate=mock", "judge=mock", "user=mock",
                   f"hydra.run.dir={tmp_path / 'r'}"], env)
    assert res.returncode == 0, res.stderr
    recs = records(tmp_path / "r")
    assert len(recs) == 12 and all(r["ended"] == "stop" for r in recs.values())
    assert all(len(r["transcript"]) == 7 for r in recs.values())  # the mock user stops after its 3rd turn
    page = (tmp_path / "r" / "report.html").read_text()
    assert "Conversation (7 turns; the simulated user ended it)" in page and "Simulated user, turn 3" in page
    assert "user" in res.stdout  # the user column of the run statistics


def test_a_user_endpoint_moved_on_the_command_line_gets_no_key(tmp_path: Path, env: dict[str, str]) -> None:
    """user=gpt-4o carries $OPENAI_API_KEY to OpenAI only: moved by user.api_base=, it is sent no key."""
    with FakeServer(Script()) as srv:
        res = run_cli([f"benchmark={SPEC}", f"hydra.run.dir={tmp_path / 'r'}", *model_args(srv.url), "user=gpt-4o",
                       "user.model=openai/sim", f"user.api_base={srv.url}"], dict(env, OPENAI_API_KEY="sk-not-for-you"))
        assert res.returncode == 0, res.stderr
        sent = [(b["model"], h) for b, h in zip(srv.requests, srv.auth_headers)]
    assert {h for m, h in sent if m == "sim"} == {"Bearer no-key"}
    assert all("sk-not-for-you" not in str(h) for _, h in sent)


def test_candidate_samples_keep_each_session_and_the_user_tokens(tmp_path: Path, env: dict[str, str]) -> None:
    base = ["benchmark=counselling_dynamic", "candidate=mock", "judge=mock", "user=mock", "limit=2"]
    one = run_cli([*base, f"hydra.run.dir={tmp_path / 'one'}"], env)
    two = run_cli([*base, "candidate.samples=2", f"hydra.run.dir={tmp_path / 'two'}"], env)
    assert one.returncode == 0 and two.returncode == 0, two.stderr
    s1, s2 = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("one", "two"))
    assert s2["tokens"]["user"] == {k: 2 * v for k, v in s1["tokens"]["user"].items()}  # both samples' sessions
    rec = records(tmp_path / "two")["cd01"]
    assert [len(s["transcript"]) for s in rec["samples"]] == [7, 7] and rec["samples"][1]["ended"] == "stop"
    res = run_cli(["leaderboard", str(tmp_path / "one"), f"out={tmp_path / 'lb'}"], env)
    assert res.returncode == 0, res.stderr
    row = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())["rows"][0]
    # the simulated user's tokens and cost count in the leaderboard's totals
    assert row["tokens"]["user"] == s1["tokens"]["user"] and "user" in s1["cost"]
    assert row["tokens"]["total"] == {k: sum(t[k] for t in s1["tokens"].values()) for k in ("prompt", "completion")}
    assert row["cost"] == {**s1["cost"], "total": sum(s1["cost"].values())}


def test_a_run_whose_simulated_user_always_fails_exits_1_saying_so(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(lambda body: Reply(text="") if body["model"] == "sim" else Script()(body)) as srv:
        res = run_cli(args(tmp_path / "run", srv.url), env)
    assert res.returncode == 1, res.stderr
    assert "nothing was scored: 0 of 3 questions (0 candidate errors, 0 judge errors, 3 simulated-user errors)" \
        in res.stderr
    assert all(r["user_error"] == "simulated user, turn 1: the simulated user returned an empty reply"
               for r in records(tmp_path / "run").values())


def test_a_chosen_turn_the_session_never_reached_is_a_counted_judge_error(tmp_path: Path, env: dict[str, str]) -> None:
    """judge.scope: turn, judge.turn: 3 on a simulated session: p2 (cut at 3 turns) gets one judge call for its
    third reply; p1 (stopped after one reply) is a judge error naming the turn, with no judge call."""
    spec = tmp_path / "spec"
    shutil.copytree(SPEC, spec)
    text = (spec / "benchmark.yaml").read_text().replace("  scale: 100\n", "")
    assert "  template: judge.j2" in text
    (spec / "benchmark.yaml").write_text(text.replace("  template: judge.j2", "  template: judge.j2\n  scope: turn\n"
                                                      "  turn: 3\n  verdict: {kind: score, min: 1, max: 10, "
                                                      "pattern: '\\[\\[(\\d+)\\]\\]'}"))
    judged: list[str] = []

    def reply(body: dict[str, Any]) -> Reply:
        if body["model"] == "judge":
            judged.append(json.dumps(body["messages"]))
            return Reply(text="Rating: [[7]]")
        return Script()(body)

    with FakeServer(reply) as srv:
        res = run_cli([f"benchmark={spec}", f"hydra.run.dir={tmp_path / 'run'}", "progress=none",
                       *model_args(srv.url), *user_args(srv.url)], env)
    assert res.returncode == 0, res.stderr
    recs = records(tmp_path / "run")
    assert len(judged) == 1 and "C3 to <p2 says 3>" in judged[0]
    assert recs["p2"]["score"] == 7 and [t["turn"] for t in recs["p2"]["turns"]] == [3]
    assert recs["p1"]["judge_error"] == "judge.turn 3: the conversation has only 1 candidate turn(s)"
    assert recs["p1"]["score"] is None and recs["p3"]["user_error"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"]["judge_errors"] == 1 and summary["overall"] == 7
