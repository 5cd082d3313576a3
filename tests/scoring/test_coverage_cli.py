"""Coverage ("at least k of the criteria met") and a veto group through the console script against the fake
server: a spec of the tests' own (tests/data/coverage_mini), summary, console and leaderboard numbers equal to
a hand computation, a judge answer that cannot be read counted and never scored, and `rescore` with another k
giving the new numbers without a call."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from conftest import REPO, run_cli
from fakeserver import FakeServer, Reply

MINI = REPO / "tests" / "data" / "coverage_mini"


def judge(text: str) -> Reply:
    """An item is met when its text ends in 'yes'; question 4's judge answer is never readable."""
    if "Prompt number 4" in text:
        return Reply(text="I would rather not say.")
    items = re.findall(r"^(\d+)\. \(-?\d+(?:\.\d+)? points\) (.*)$", text, re.M)
    return Reply(text=json.dumps({"criteria": [{"id": int(i), "reasoning": "r", "met": t.strip().endswith("yes")}
                                               for i, t in items]}))


def script(body: dict[str, Any]) -> Reply:
    text = "\n".join(str(m["content"]) for m in body["messages"])
    return judge(text) if body["model"] == "judge" else Reply(text="Keep a regular bedtime.")


def args(url: str, run: Path) -> list[str]:
    return [f"benchmark={MINI}", "progress=none", f"hydra.run.dir={run}",
            "candidate=openai_compatible", "candidate.model=openai/cand", f"candidate.api_base={url}",
            "candidate.name=cand", "candidate.api_key_env=FAKE_KEY",
            "judge=openai_compatible", "judge.model=openai/judge", f"judge.api_base={url}",
            "judge.name=judge", "judge.api_key_env=FAKE_KEY"]


def records(run: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, (run / "samples.jsonl").read_text(encoding="utf-8").splitlines())}


def test_coverage_at_k_with_a_veto_by_hand_then_rescored_with_another_k(tmp_path: Path, env: dict[str, str]) -> None:
    # met positives per question: q1 3 of 5, q2 1 of 4, q3 4 of 4 but its unsafe item is hit, q4 unread, q5 2 of 2
    with FakeServer(script) as srv:
        res = run_cli(args(srv.url, tmp_path / "run"), env)
        assert res.returncode == 0, res.stderr
        calls = len(srv.requests)
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        # k=3: q1 1, q2 0, q3 0 (vetoed), q5 0 (k above its 2 criteria); q4 a judge error, left out
        assert summary["overall"] == 100 * 1 / 4
        assert summary["counts"]["scored"] == 4 and summary["counts"]["judge_errors"] == 1
        assert summary["counts"]["catastrophic"] == 1 and summary["vetoes"] == {"unsafe": 1}
        assert summary["aggregation"]["question"] == "coverage" and summary["aggregation"]["coverage"] == {
            "k": 3, "tag": None}
        recs = records(tmp_path / "run")
        assert {q: r["score"] for q, r in recs.items() if q != "q4"} == {"q1": 1.0, "q2": 0.0, "q3": 0.0, "q5": 0.0}
        assert recs["q3"]["failed_rules"] == ["unsafe"] and recs["q4"]["judge_error"] and recs["q4"]["score"] is None
        assert "vetoed by Unsafe advice" in res.stdout and re.search(r"vetoed by Unsafe advice\W+1\b", res.stdout)
        assert "q3 · score 0.00 · catastrophic · vetoed by Unsafe advice" in (tmp_path / "run" / "report.html").read_text(
            encoding="utf-8")

        res = run_cli(["rescore", str(tmp_path / "run"), "aggregation.coverage.k=2", f"out={tmp_path / 'k2'}"], env)
        assert res.returncode == 0, res.stderr
        again = json.loads((tmp_path / "k2" / "summary.json").read_text())
        assert again["overall"] == 100 * 2 / 4  # q1 and q5 reach 2; q3 stays vetoed
        assert again["vetoes"] == {"unsafe": 1} and again["aggregation"]["coverage"] == {"k": 2, "tag": None}
        assert again["rescore"]["coverage_k"] == 2 and again["spec_hash"] != summary["spec_hash"]
        res = run_cli(["rescore", str(tmp_path / "run"), "aggregation.coverage.k=0.5", f"out={tmp_path / 'half'}"], env)
        assert res.returncode == 0, res.stderr
        # half, rounded up: q1 3 of 5 (met 3), q2 2 of 4 (met 1), q5 1 of 2 (met 2)
        assert json.loads((tmp_path / "half" / "summary.json").read_text())["overall"] == 100 * 2 / 4
        assert len(srv.requests) == calls  # rescoring called nothing

        res = run_cli(["leaderboard", str(tmp_path / "run"), f"out={tmp_path / 'lb'}"], env)
        assert res.returncode == 0, res.stderr
        row = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())["rows"][0]
        assert row["overall"] == 25.0 and row["counts"]["catastrophic"] == 1 and row["vetoes"] == {"unsafe": 1}
        md = (tmp_path / "lb" / "leaderboard.md").read_text(encoding="utf-8")
        assert "vetoed: Unsafe advice" in md


def test_a_bad_k_on_rescore_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli(["rescore", str(tmp_path), "aggregation.coverage.k=1.5"], env)
    assert res.returncode != 0 and "aggregation.coverage.k=1.5 is not valid" in res.stderr
    assert "Traceback" not in res.stderr


def test_killed_midway_the_same_command_resumes_to_the_same_vetoes(tmp_path: Path, env: dict[str, str]) -> None:
    import subprocess
    import time
    from collections import Counter

    from conftest import EXE, sigkill

    run = tmp_path / "run"
    with FakeServer(script, latency=0.2) as srv:
        proc = subprocess.Popen([EXE, *args(srv.url, run), "concurrency=1"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while sum(b["model"] == "judge" for b in srv.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        sigkill(proc)
        first = Counter(json.dumps(b, sort_keys=True) for b in srv.requests)
        srv.reset()
        res = run_cli([*args(srv.url, run), "concurrency=1"], env)
        assert res.returncode == 0, res.stderr
        second = Counter(json.dumps(b, sort_keys=True) for b in srv.requests)
    assert sum((first & second).values()) <= 2  # only the calls in flight at the kill (one per role) again
    summary = json.loads((run / "summary.json").read_text())
    assert summary["overall"] == 25.0 and summary["vetoes"] == {"unsafe": 1}
    assert summary["counts"]["scored"] == 4 and summary["counts"]["judge_errors"] == 1
