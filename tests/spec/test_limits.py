"""Size limits that fail early and per question, through the console script and the fake server.

A reply over the reply cap is that question's candidate (or simulated user) error, journaled, and the run goes
on; a judge template that fails on one later row is that row's judge error naming the template; a row whose
texts cannot fit in a judge prompt is refused by `validate` and by the run before any call; a row with more
scripted turns than the bound is refused the same way.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from conftest import REPO, model_args, run_cli
from fakeserver import FakeServer, Reply

SPEC = REPO / "tests" / "data" / "scripted_mini"
ROWS = [json.loads(x) for x in (SPEC / "scripted_mini.jsonl").read_text().splitlines()]
HUGE = 2_500_000  # characters: over the reply cap (docs/trust-model.md, bounds)


def judged(body: dict[str, Any]) -> Reply:
    text = "\n".join(m["content"] for m in body["messages"])
    n = int(text.split("Checks (", 1)[1].split(")", 1)[0])
    return Reply(text=json.dumps({"criteria": [{"id": i, "reasoning": "r", "met": True} for i in range(1, n + 1)]}))


def args(spec: Path, run: Path, url: str, *more: str) -> list[str]:
    return [f"benchmark={spec}", f"hydra.run.dir={run}", "progress=plain", *model_args(url), *more]


def records(run: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines())}


def copy_spec(tmp_path: Path, rows: list[dict[str, Any]] | None = None, judge: str | None = None) -> Path:
    spec = tmp_path / "spec"
    shutil.copytree(SPEC, spec)
    if rows is not None:
        (spec / "scripted_mini.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if judge is not None:
        (spec / "judge.j2").write_text(judge)
    return spec


def test_a_reply_over_the_cap_is_that_questions_candidate_error_and_the_run_goes_on(tmp_path: Path,
                                                                                   env: dict[str, str]) -> None:
    huge_for = ROWS[1]["turns"][0]

    def script(body: dict[str, Any]) -> Reply:
        if body["model"] == "judge":
            return judged(body)
        return Reply(text="x" * HUGE if body["messages"][-1]["content"] == huge_for else "fine")

    with FakeServer(script) as srv:
        res = run_cli(args(SPEC, tmp_path / "run", srv.url), env)
        assert res.returncode == 0, res.stderr
        asked = len(srv.requests)
        again = run_cli(args(SPEC, tmp_path / "run", srv.url), env)  # the same command: nothing left to pay for
        assert again.returncode == 0, again.stderr
        assert len(srv.requests) == asked
    recs = records(tmp_path / "run")
    assert set(recs) == {r["id"] for r in ROWS}  # every question journaled
    bad = recs[ROWS[1]["id"]]
    assert bad["candidate_error"].startswith("turn 1: ") and "2500000 characters" in bad["candidate_error"]
    assert "limit" in bad["candidate_error"] and bad["score"] is None
    assert all(r["score"] is not None for q, r in recs.items() if q != ROWS[1]["id"])
    assert len(json.dumps(bad)) < 100_000  # the over-long reply itself is not kept


def test_a_judge_template_failing_on_a_later_row_is_that_rows_judge_error(tmp_path: Path,
                                                                          env: dict[str, str]) -> None:
    late = ROWS[4]["id"]  # past the rows rendered before the run (the first three)
    spec = copy_spec(tmp_path, judge=(SPEC / "judge.j2").read_text().replace(
        "Checks (", "{% if question.id == '" + late + "' %}{{ 1 // 0 }}{% endif %}Checks ("))

    def script(body: dict[str, Any]) -> Reply:
        return judged(body) if body["model"] == "judge" else Reply(text="fine")

    with FakeServer(script) as srv:
        res = run_cli(args(spec, tmp_path / "run", srv.url), env)
        assert res.returncode == 0, res.stderr
    recs = records(tmp_path / "run")
    assert set(recs) == {r["id"] for r in ROWS}
    err = recs[late]["judge_error"]
    assert err and "judge.j2" in err and "judge.template" in err and "ZeroDivisionError" in err
    assert recs[late]["score"] is None
    assert all(r["score"] is not None for q, r in recs.items() if q != late)


def test_a_row_too_long_for_any_judge_prompt_is_refused_before_any_call(tmp_path: Path, env: dict[str, str]) -> None:
    rows = [dict(r) for r in ROWS]
    rows[3] = {**rows[3], "turns": [rows[3]["turns"][0], "y" * 3_000_000]}  # a 3 MB turn
    spec = copy_spec(tmp_path, rows)
    with FakeServer(judged) as srv:
        val = run_cli(["validate", f"benchmark={spec}"], env)
        run = run_cli(args(spec, tmp_path / "run", srv.url), env)
        assert srv.requests == []  # nothing paid
    for res in (val, run):
        assert res.returncode == 2, res.stderr
        lines = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error")]
        assert len(lines) == 1, res.stderr
        assert rows[3]["id"] in lines[0] and "2000000" in lines[0].replace(",", ""), lines[0]


def test_a_row_with_more_turns_than_the_bound_is_refused_by_validate(tmp_path: Path, env: dict[str, str]) -> None:
    rows = [dict(r) for r in ROWS]
    rows[2] = {**rows[2], "turns": ["t"] * 10_001}
    spec = copy_spec(tmp_path, rows)
    res = run_cli(["validate", f"benchmark={spec}"], env)
    assert res.returncode == 2, res.stderr
    lines = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error")]
    assert len(lines) == 1 and "10001" in lines[0] and "10000" in lines[0].replace(",", ""), res.stderr


def test_a_long_conversation_is_stored_and_reported_in_space_linear_in_its_turns(tmp_path: Path,
                                                                                 env: dict[str, str]) -> None:
    """300 scripted turns: every request the server saw is in the transcripts as sent, yet calls.jsonl holds each
    turn once (not once per later turn), and report.html embeds a bounded share of the question with a note."""
    turns = [f"Message {i}: please tell me one more thing about the topic we are on." for i in range(300)]
    spec = copy_spec(tmp_path, [{"id": "long", "topic": "t", "turns": turns, "checks": [{"text": "Answers.",
                                                                                      "points": 1}]}])

    def script(body: dict[str, Any]) -> Reply:
        if body["model"] == "judge":
            return judged(body)
        k = sum(m["role"] == "user" for m in body["messages"])
        return Reply(text=f"Reply {k}: that is a fair point, and here is a short answer to it.")

    run = tmp_path / "run"
    with FakeServer(script) as srv:
        res = run_cli(args(spec, run, srv.url), env)
        assert res.returncode == 0, res.stderr
        bodies = [b["messages"] for b in srv.requests if b["model"] == "cand"]
    assert len(bodies) == 300
    sent = sum(len(json.dumps(b)) for b in bodies)  # what the chat protocol itself sends: quadratic in the turns
    stored = (run / "transcripts" / "calls.jsonl").stat().st_size
    assert stored < 300 * 1_000 < sent / 10, (stored, sent)  # each turn's text written once
    shown = run_cli(["show", str(run), "long"], env)
    assert shown.returncode == 0, shown.stderr
    last = bodies[-1]
    assert all(m["content"] in shown.stdout for m in last)  # the last request, every message resolved
    assert shown.stdout.count(turns[0]) >= 300  # each call's messages in full: turn 1 is in every request
    report = (run / "report.html").read_text()
    assert len(report) < 400_000, len(report)
    assert "more call(s) not embedded" in report and "more turn(s) not embedded" in report
    assert report.count('class="call-part"') < 1_000  # within the question's share, not one per message per call


def test_one_unreadable_run_directory_is_left_out_of_the_leaderboard_with_one_line(tmp_path: Path,
                                                                                 env: dict[str, str]) -> None:
    def script(body: dict[str, Any]) -> Reply:
        return judged(body) if body["model"] == "judge" else Reply(text="fine")

    with FakeServer(script) as srv:
        for name in ("a", "b"):
            res = run_cli(args(SPEC, tmp_path / "runs" / name, srv.url, "limit=2", f"candidate.name=cand_{name}"), env)
            assert res.returncode == 0, res.stderr
    (tmp_path / "runs" / "b" / "samples.jsonl").write_text('{"id": "s01", "score": "nonsense"\n')  # damaged
    res = run_cli(["leaderboard", str(tmp_path / "runs"), f"out={tmp_path / 'lb'}", "bootstrap.samples=20"], env)
    assert res.returncode == 0, res.stderr
    named = [x for x in res.stderr.splitlines() if str(tmp_path / "runs" / "b") in x]
    assert len(named) == 1 and "left out" in named[0], res.stderr
    ranked = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())
    assert "cand_a" in json.dumps(ranked) and "cand_b" not in json.dumps(ranked)


def test_a_template_that_loops_for_ever_is_one_line_from_validate(tmp_path: Path, env: dict[str, str]) -> None:
    spec = copy_spec(tmp_path, judge=(SPEC / "judge.j2").read_text() + (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}\n"))
    res = run_cli(["validate", f"benchmark={spec}"], env, timeout=120)
    assert res.returncode == 2, res.stderr
    lines = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error")]
    assert len(lines) == 1 and "judge.j2" in lines[0] and "5 s" in lines[0], res.stderr
