"""Scripted conversations end to end: the console script, LiteLLM and the fake server.

Each row's user turns are sent in order, every request carrying the candidate's earlier replies; a candidate
failure at turn k names the turn and keeps the transcript; a kill -9 mid-conversation and the same command
resume with no answered request sent twice; bad turn data is one line naming the file, row and key.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from conftest import EXE, REPO, model_args, run_cli, sigkill
from fakeserver import FakeServer, Reply

SPEC = REPO / "tests" / "data" / "scripted_mini"
ROWS = [json.loads(x) for x in (SPEC / "scripted_mini.jsonl").read_text().splitlines()]
SYSTEM = (SPEC / "system.j2").read_text()  # rendered as written, its last newline kept


def reply_to(body: dict[str, Any]) -> str:
    """The scripted candidate reply: which user turn it answers and that turn's text."""
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return f"A{len(users)}<{users[-1]}>"


class Script:
    """The candidate answers each turn by naming it; the judge meets item i when i is odd."""

    def __init__(self, empty_at: tuple[str, int] | None = None) -> None:
        self.empty_at = empty_at

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = "\n".join(m["content"] for m in body["messages"])
        if body["model"] == "judge":
            n = int(text.split("Checks (", 1)[1].split(")", 1)[0])
            return Reply(text=json.dumps({"criteria": [{"id": i, "reasoning": "r", "met": i % 2 == 1}
                                                       for i in range(1, n + 1)]}), usage=(100, 20))
        if self.empty_at is not None:
            row = next(r for r in ROWS if r["turns"][0] == body["messages"][1]["content"])
            users = sum(m["role"] == "user" for m in body["messages"])
            if (row["id"], users) == self.empty_at:
                return Reply(text="")
        return Reply(text=reply_to(body), usage=(30, 10))


def args(run: Path, url: str, *more: str) -> list[str]:
    return [f"benchmark={SPEC}", f"hydra.run.dir={run}", "progress=plain", *model_args(url), *more]


def records(run: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines())}


def test_each_turn_carries_the_earlier_replies_and_the_transcript_is_recorded(tmp_path: Path,
                                                                              env: dict[str, str]) -> None:
    with FakeServer(Script()) as srv:
        res = run_cli(args(tmp_path / "run", srv.url), env)
        assert res.returncode == 0, res.stderr
        bodies = list(srv.requests)
    cand = [b for b in bodies if b["model"] == "cand"]
    assert len(cand) == sum(len(r["turns"]) for r in ROWS)  # one call per user turn, none more
    assert sum(b["model"] == "judge" for b in bodies) == len(ROWS)  # the whole session judged once
    recs = records(tmp_path / "run")
    for row in ROWS:
        want: list[dict[str, str]] = []
        for k, user in enumerate(row["turns"], 1):
            request = [{"role": "system", "content": SYSTEM}, *want, {"role": "user", "content": user}]
            assert sum(b["messages"] == request for b in cand) == 1, (row["id"], k)  # the turn-k request, once
            want += [{"role": "user", "content": user}, {"role": "assistant", "content": f"A{k}<{user}>"}]
        rec = recs[row["id"]]
        assert rec["transcript"] == want
        assert rec["response"] == want[-1]["content"]
        n = len(row["turns"])
        assert rec["tokens"]["candidate"] == {"prompt": 30 * n, "completion": 10 * n}
        assert rec["score"] == sum(1 for i in range(1, len(row["checks"]) + 1) if i % 2) / len(row["checks"])
        assert "ended" not in rec and "user" not in rec["tokens"]
    judged = next(b for b in bodies if b["model"] == "judge" and "yolk" in b["messages"][0]["content"])
    assert "[assistant] A2<And for a hard one?>" in judged["messages"][0]["content"]  # the judge sees the session


def test_a_failure_at_turn_k_names_the_turn_and_keeps_the_transcript(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Script(empty_at=("s02", 2))) as srv:
        res = run_cli(args(tmp_path / "run", srv.url), env)
        assert res.returncode == 0, res.stderr
        asked_s02 = [b for b in srv.requests if b["model"] == "cand" and "one day" in json.dumps(b)]
    rec = records(tmp_path / "run")["s02"]
    assert rec["candidate_error"] == "turn 2: the candidate returned an empty reply (finish_reason: stop)"
    turns = ROWS[1]["turns"]
    assert rec["transcript"] == [{"role": "user", "content": turns[0]},
                                 {"role": "assistant", "content": f"A1<{turns[0]}>"},
                                 {"role": "user", "content": turns[1]}]
    assert rec["score"] is None and rec["criteria"][0]["hit"] is None  # never judged
    assert len(asked_s02) == 2  # turn 3 was never asked
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"]["candidate_errors"] == 1 and summary["counts"]["scored"] == len(ROWS) - 1


def kill_after_requests(cmd: list[str], env: dict[str, str], srv: FakeServer, model: str, n: int) -> list[str]:
    """Start `cmd`, SIGKILL it once the server has seen `n` requests for `model`; every request so far as JSON."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while sum(b["model"] == model for b in srv.requests) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    sigkill(proc)
    return [json.dumps(b, sort_keys=True) for b in srv.requests]


def test_kill9_mid_conversation_then_same_command_repeats_no_answered_request(tmp_path: Path,
                                                                             env: dict[str, str]) -> None:
    run = tmp_path / "run"
    with FakeServer(Script(), latency=0.3) as srv:
        first = kill_after_requests([EXE, *args(run, srv.url, "concurrency=2")], env, srv, "cand", 5)
        firsts = {row["id"]: sum(b["model"] == "cand" and b["messages"][1]["content"] == row["turns"][0]
                                 for b in map(json.loads, first)) for row in ROWS}
        # some conversation was cut between its turns: started, not all its turns asked
        assert any(0 < firsts[r["id"]] < len(r["turns"]) for r in ROWS), firsts
        srv.reset()
        res = run_cli(args(run, srv.url, "concurrency=2"), env)
        assert res.returncode == 0, res.stderr
        second = [json.dumps(b, sort_keys=True) for b in srv.requests]
    repeated = Counter(second) & Counter(first)
    assert sum(repeated.values()) <= 4, repeated  # only calls in flight at the kill (<= concurrency per role)
    total = sum(len(r["turns"]) for r in ROWS) + len(ROWS)
    assert len(first) + len(second) - sum(repeated.values()) == total  # every call paid once
    assert len(records(run)) == len(ROWS)


def _spec_copy(tmp_path: Path, edit: Any = None, rows: list[dict[str, Any]] | None = None) -> Path:
    spec = tmp_path / "spec"
    shutil.copytree(SPEC, spec)
    if edit is not None:
        text = (spec / "benchmark.yaml").read_text()
        (spec / "benchmark.yaml").write_text(edit(text))
    if rows is not None:
        (spec / "scripted_mini.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return spec


def _one_line(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    return res.stderr


def test_scripted_without_turns_field_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    spec = _spec_copy(tmp_path, lambda t: t.replace("    turns: turns\n", ""))
    err = _one_line(run_cli([f"benchmark={spec}", "candidate=mock", "judge=mock"], env))
    assert "data.fields.turns" in err and "scripted" in err and not (tmp_path / "outputs").exists()


def test_a_row_whose_turns_are_not_a_list_of_strings_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    for bad, says in (("just one string", "expected a non-empty list of strings"), ([], "non-empty list"),
                      (["ok", 3], "list of strings"), (["ok", "  "], "turns[1]: an empty user turn")):
        rows = [dict(ROWS[0]), dict(ROWS[1], turns=bad)]
        spec = _spec_copy(tmp_path / str(len(str(bad))) / "x", rows=rows)
        err = _one_line(run_cli([f"benchmark={spec}", "candidate=mock", "judge=mock"], env))
        assert "scripted_mini.jsonl:2: turns" in err and says in err, err


def test_dry_run_counts_every_turn(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli([f"benchmark={SPEC}", "candidate=mock", "judge=mock", "dry_run=true"], env, cwd=tmp_path)  # no debris here
    assert res.returncode == 0, res.stderr
    row = next(line for line in res.stdout.splitlines() if "│ candidate" in line)
    cells = [c.strip() for c in row.split("│")]
    assert cells[3] == str(sum(len(r["turns"]) for r in ROWS)), row  # one call per user turn
    assert "every turn is counted as its first request" in res.stdout


def test_a_conversation_judged_again_from_its_run_sees_the_whole_session(tmp_path: Path, env: dict[str, str]) -> None:
    """answers.jsonl keeps each row's transcript, so stage=score from_run= grades the same session, no candidate call."""
    with FakeServer(Script()) as srv:
        first = run_cli(args(tmp_path / "run", srv.url, "stage=generate"), env)
        assert first.returncode == 0, first.stderr
        srv.reset()
        again = run_cli(args(tmp_path / "score", srv.url, "stage=score", f"from_run={tmp_path / 'run'}"), env)
        assert again.returncode == 0, again.stderr
        assert {b["model"] for b in srv.requests} == {"judge"}
        judged = next(b for b in srv.requests if "yolk" in b["messages"][0]["content"])
    assert "[assistant] A2<And for a hard one?>" in judged["messages"][0]["content"]
    answers = [json.loads(x) for x in (tmp_path / "run" / "answers.jsonl").read_text().splitlines()]
    assert records(tmp_path / "score")["s01"]["transcript"] == answers[0]["transcript"]
    assert len(answers[0]["transcript"]) == 4
