"""Transcripts: every call a run makes is in the run directory, and `show` / `prompts` / report.html tell it.

End to end through the console script, LiteLLM and the fake server (which records what it received): the exact
judge prompt the server got is found in the run's transcripts and in `show`'s output; a 500 retried, a verdict
refused and re-asked, cache hits on a re-run, a kill -9 and a resume are all recorded as such; the key never
appears; a HealthBench-shaped per-criterion run's transcripts stay within 2x its samples.jsonl. The rows are
written here in HealthBench's row shape (no HealthBench text).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from conftest import EXE, complete_lines, kill_after_lines, model_args, run_cli
from fakeserver import FakeServer, Reply
from rubric_engine.store.transcripts import Transcripts

WORDS = ("the", "pain", "doctor", "rest", "water", "fever", "days", "sleep", "check", "dose", "swelling", "ice",
         "call", "if", "worse", "child", "weight", "medicine", "hours", "symptoms", "morning", "evening")
SECRET = "trk9f2c7a1e5b3d8"  # no key-shaped prefix: only the registered-secret redaction can catch it


def _prose(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        out.append(rng.choice(WORDS))
        size += len(out[-1]) + 1
    return " ".join(out).capitalize() + "."


def hb_rows(n: int, criteria: int, seed: int = 5) -> list[dict[str, Any]]:
    """HealthBench-shaped rows of realistic size: 1-3 turns of a few hundred characters, `criteria` criteria."""
    rng = random.Random(seed)
    rows = []
    for k in range(n):
        prompt = [{"role": "user", "content": f"case {k}: " + _prose(rng, 400)}]
        if k % 2:
            prompt += [{"role": "assistant", "content": _prose(rng, 600)},
                       {"role": "user", "content": f"case {k} again: " + _prose(rng, 300)}]
        rubrics = [{"criterion": f"CRIT[{k}#{i}] " + _prose(rng, 150), "points": rng.choice([-5, 2, 3, 5, 8]),
                    "tags": ["level:example", rng.choice(["axis:accuracy", "axis:completeness"])]}
                   for i in range(1, criteria + 1)]
        rubrics[0]["points"] = 5
        rows.append({"prompt": prompt, "completion": None, "rubrics": rubrics, "example_tags": ["theme:hedging"],
                     "prompt_id": f"hb-{k}"})
    return rows


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


class Script:
    """Candidate: a ~1,500-character reply naming its case; judge: a verdict with a ~200-character explanation.
    `faults`: the first candidate request answers 500 (its error echoing the key), the first judge request
    answers something that is not a verdict (echoing the key too)."""

    def __init__(self, faults: bool = False) -> None:
        self.faults, self.lock, self.seen = faults, threading.Lock(), {"cand": 0, "judge": 0}

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        with self.lock:
            self.seen[body["model"]] += 1
            first = self.seen[body["model"]] == 1
        rng = random.Random(text)
        if body["model"] == "judge":
            if self.faults and first:
                return Reply(text="I think it is fine, really. {authorization}")
            crit = text.split("CRIT[")[-1].split("]")[0]
            return Reply(text=json.dumps({"explanation": f"criterion {crit}: " + _prose(rng, 200),
                                          "criteria_met": rng.random() < 0.5}), usage=(900, 80))
        if self.faults and first:
            return Reply(status=500, error="upstream failed for {authorization}")
        case = text.split("case ")[1].split(":")[0].split(" ")[0]
        return Reply(text=f"REPLY[{case}] " + _prose(rng, 1500), usage=(300, 400))


def _run(run: Path, data: Path, url: str, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return run_cli(["benchmark=healthbench", f"data.path={data}", "progress=none", f"hydra.run.dir={run}",
                    *model_args(url), *extra], env)


def _all_calls(run: Path) -> list[Any]:
    index = Transcripts(run)
    return [c for q in index.questions() for c in index.calls(q)]


def test_the_judge_prompts_the_server_received_are_in_the_run_and_in_show(tmp_path: Path, env: dict[str, str]) -> None:
    rows = hb_rows(n=6, criteria=10)
    data = write_rows(tmp_path / "hb.jsonl", rows)
    run = tmp_path / "run"
    with FakeServer(Script()) as srv:
        res = _run(run, data, srv.url, env)
        assert res.returncode == 0, res.stderr
        bodies = list(srv.requests)
    calls = _all_calls(run)
    judge_bodies = [b for b in bodies if b["model"] == "judge"]
    assert len(judge_bodies) == 60 and len(calls) == len(bodies) == 66
    recorded = {json.dumps([{"role": r, "content": t} for r, t in c.messages]) for c in calls}
    for body in bodies:  # every request, byte for byte: the rendered messages as sent
        assert json.dumps([{"role": m["role"], "content": m["content"]} for m in body["messages"]]) in recorded
    judged = [c for c in calls if c.role == "judge"]
    assert sorted((c.question, c.context["criterion"]) for c in judged) == \
        sorted((f"hb-{k}", i) for k in range(6) for i in range(1, 11))
    assert all(c.kind == "reply" and c.model == "judge" and c.model_id == "openai/judge" and c.latency is not None
               and (c.prompt_tokens, c.completion_tokens) == (900, 80) and c.reply and c.attempts == 1 for c in judged)
    # the judge prompt of criterion 7 of hb-3, exactly as the server received it, printed by `show`
    target = next(b for b in judge_bodies if "CRIT[3#7]" in b["messages"][-1]["content"])
    shown = run_cli(["show", str(run), "hb-3"], dict(env, COLUMNS="40"))  # printed as it is, never wrapped
    assert shown.returncode == 0, shown.stderr
    assert target["messages"][-1]["content"] in shown.stdout
    assert shown.stdout.count("======== call ") == 11 and "criterion 7" in shown.stdout
    # stored once, referenced: within 2x samples.jsonl for this HealthBench-shaped per-criterion run
    size, samples = (run / "transcripts" / "calls.jsonl").stat().st_size, (run / "samples.jsonl").stat().st_size
    assert size <= 2 * samples, (size, samples)
    # the report's drill-down shows each question's calls, escaped
    page = (run / "report.html").read_text(encoding="utf-8")
    assert page.count('<details class="call call-reply">') == 66 and "CRIT[3#7]" in page
    # `prompts` renders the same candidate messages without calling anything
    out = run_cli(["prompts", "benchmark=healthbench", f"data.path={data}", "question=hb-3"], env)
    assert out.returncode == 0, out.stderr
    cand = next(b for b in bodies if b["model"] == "cand" and "case 3" in b["messages"][0]["content"])
    assert all(m["content"] in out.stdout for m in cand["messages"])
    assert out.stdout.count("=== judge prompt (criterion ") == 10 and "<<<CANDIDATE REPLY" in out.stdout


def test_retries_reasks_cache_hits_recorded_and_no_key(tmp_path: Path, env: dict[str, str]) -> None:
    env = {**env, "FAKE_KEY": SECRET}
    data = write_rows(tmp_path / "hb.jsonl", hb_rows(n=2, criteria=3))
    run, again = tmp_path / "run", tmp_path / "again"
    with FakeServer(Script(faults=True)) as srv:
        res = _run(run, data, srv.url, env, "concurrency=1")
        assert res.returncode == 0, res.stderr
        sent = len(srv.requests)
        rerun = _run(again, data, srv.url, env, "concurrency=1")
        assert rerun.returncode == 0, rerun.stderr
        assert len(srv.requests) == sent  # everything from the cache
    calls = _all_calls(run)
    retried = [c for c in calls if c.retries]
    assert len(retried) == 1 and retried[0].role == "candidate" and retried[0].kind == "reply"
    assert retried[0].retries[0].status == 500 and retried[0].retries[0].wait is not None and retried[0].attempts == 2
    refused = [c for c in calls if c.kind == "rejected"]
    assert len(refused) == 1 and refused[0].parse_error and refused[0].reply.startswith("I think it is fine")
    reask = next(c for c in calls if c.reask == 1)
    assert reask.reask_of == refused[0].number and reask.kind == "reply"
    assert reask.messages[:len(refused[0].messages)] == refused[0].messages
    assert reask.messages[-2] == ("assistant", refused[0].reply)
    shown = run_cli(["show", str(run), refused[0].question], env).stdout
    assert f"re-ask 1 of call {refused[0].number}" in shown and "parse error" in shown
    assert "HTTP 500" in run_cli(["show", str(run), retried[0].question], env).stdout
    cached = _all_calls(again)
    assert cached and all(c.kind == "cache_hit" and c.cached and c.latency is None for c in cached)
    assert len(cached) == len([c for c in calls if c.kind != "rejected"])
    for path in [*run.rglob("*"), *again.rglob("*")]:  # the echoed key is redacted everywhere, transcripts included
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert b"***" in (run / "transcripts" / "calls.jsonl").read_bytes()


def test_kill_9_then_resume_keeps_the_transcripts_readable(tmp_path: Path, env: dict[str, str]) -> None:
    data = write_rows(tmp_path / "hb.jsonl", hb_rows(n=24, criteria=2))
    run = tmp_path / "run"
    script = Script()
    with FakeServer(lambda body: Reply(**{**script(body).__dict__, "delay": 0.08})) as srv:
        cmd = [EXE, "benchmark=healthbench", f"data.path={data}", "progress=none", f"hydra.run.dir={run}",
               "concurrency=1", *model_args(srv.url)]
        left = kill_after_lines(cmd, run / "samples.jsonl", 4, env)
        assert 4 <= len(left) < 25  # killed midway
        calls_file = run / "transcripts" / "calls.jsonl"
        before = [json.loads(x) for x in calls_file.read_bytes().splitlines(keepends=True) if x.endswith(b"\n")]
        done = {r["id"] for r in left[1:]}
        index = Transcripts(run)
        assert all(len([c for c in index.calls(q) if c.role == "judge"]) == 2 for q in done)  # before the journal
        with calls_file.open("ab") as fh:
            fh.write(b'{"call":9999,"kind":"rep')  # what a kill mid-write leaves
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
    raw = calls_file.read_bytes()
    assert raw.endswith(b"\n") and b'"call":9999' not in raw
    lines = [json.loads(x) for x in raw.splitlines()]  # every line whole
    assert lines[:len(before)] == before  # appended, nothing rewritten
    numbers = [r["call"] for r in lines if "call" in r and r.get("kind") != "retry"]
    assert len(numbers) == len(set(numbers))
    index = Transcripts(run)
    assert {f"hb-{k}" for k in range(24)} <= set(index.questions())
    assert all(any(c.role == "judge" for c in index.calls(f"hb-{k}")) for k in range(24))
    assert run_cli(["show", str(run), "hb-23"], env).returncode == 0


def test_prompts_calls_nothing_and_imports_no_litellm(tmp_path: Path, env: dict[str, str]) -> None:
    code = ("import sys\nfrom rubric_engine.cli.main import main\n"
            "sys.argv = ['rubric-engine', 'prompts', 'heartbench_en', 'question=enq002']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print('LITELLM' if any(m.split('.')[0] == 'litellm' for m in sys.modules) else 'CLEAN', file=sys.stderr)\n")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip().endswith("CLEAN")
    assert "=== judge prompt (all criteria in one call) ===" in res.stdout and "<<<CANDIDATE REPLY" in res.stdout
    bad = run_cli(["prompts", "heartbench_en", "question=nope"], env, cwd=tmp_path)
    assert bad.returncode == 2 and "no question 'nope'" in bad.stderr
    missing = run_cli(["show", str(tmp_path), "q1"], env, cwd=tmp_path)
    assert missing.returncode == 2 and "not a run directory" in missing.stderr
    assert not complete_lines(tmp_path / "nothing.jsonl")


def test_every_text_reads_back_as_written_redacted(tmp_path: Path, monkeypatch: Any) -> None:
    """The format's round trip, on texts built to hit each way of storing one: inline, whole, a known text inside
    a later one (several times), a base's head and tail with a new middle, CJK, content parts, a key."""
    from rubric_engine.models.events import CallEvent
    from rubric_engine.report.calls_view import calls_html
    from rubric_engine.run.transcripts import TranscriptWriter

    monkeypatch.setenv("TRANSCRIPT_TEST_API_KEY", SECRET)
    rng = random.Random(3)
    reply = "回答：" + _prose(rng, 700)
    turns = [_prose(rng, 300), "短い " + _prose(rng, 200)]
    sent: list[tuple[str, list[dict[str, Any]], str]] = []
    writer = TranscriptWriter(tmp_path)
    writer.observe(CallEvent("reply", 50, "candidate", "c", "openai/c", {"question": "q1"},
                             [{"role": "user", "content": turns[0]}, {"role": "user", "content": turns[1]}],
                             text=reply))
    for i in range(1, 9):
        body = f"Conversation:\n{turns[0]}\n{turns[1]}\nReply:\n{reply}\nReply again: {reply}\n"
        messages = [{"role": "system", "content": "Grade it." if i % 2 else _prose(rng, 90)},
                    {"role": "user", "content": body + f"Criterion {i}: " + _prose(rng, 20 * i) + f" key {SECRET}"}]
        if i == 8:
            messages.append({"role": "user", "content": [{"type": "text", "text": "parts"}]})
        answer = json.dumps({"explanation": _prose(rng, 50 * i), "criteria_met": True})
        writer.observe(CallEvent("reply", i, "judge", "j", "openai/j", {"question": "q1", "criterion": i},
                                 messages, text=answer, attempts=1))
        sent.append(("q1", messages, answer))
    writer.observe(CallEvent("reply", 99, "candidate", "c", "openai/c", {"question": "q2"},
                             [{"role": "user", "content": turns[0]}], text=reply))
    writer.close()
    calls = Transcripts(tmp_path).calls("q1")
    assert [c.number for c in calls] == list(range(1, 10)) and calls[0].reply == reply
    for c, (_, messages, answer) in zip(calls[1:], sent):
        want = [(m["role"], m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]))
                for m in messages]
        assert c.messages == [(r, t.replace(SECRET, "***")) for r, t in want]
        assert c.reply == answer and c.context == {"criterion": c.number - 1}
    assert Transcripts(tmp_path).calls("q2")[0].reply == reply
    hostile = Transcripts(tmp_path).calls("q2")[0]
    hostile.reply = "</pre></details><script>alert(1)</script>"
    assert "<script>" not in calls_html([hostile]) and "&lt;script&gt;" in calls_html([hostile])
    raw = (tmp_path / "transcripts" / "calls.jsonl").read_bytes()
    assert SECRET.encode() not in raw and raw.count(reply[:40].encode()) == 1  # the reply stored once


def test_show_never_sends_a_reply_s_control_characters_to_the_terminal(tmp_path: Path, env: dict[str, str]) -> None:
    """A reply is untrusted: escape sequences in it (clear the screen, set the title, write the clipboard) are
    printed as visible escapes by `show`, never passed to the terminal."""
    hostile = "fine\x1b[2J\x1b]52;c;ZXZpbA==\x07 reply\u202e"
    data = write_rows(tmp_path / "hb.jsonl", hb_rows(n=1, criteria=1))
    run = tmp_path / "run"

    def script(body: dict[str, Any]) -> Reply:
        if body["model"] == "judge":
            return Reply(text=json.dumps({"explanation": "ok", "criteria_met": True}), usage=(10, 5))
        return Reply(text=hostile, usage=(10, 5))

    with FakeServer(script) as srv:
        res = _run(run, data, srv.url, env)
        assert res.returncode == 0, res.stderr
    out = run_cli(["show", str(run), "hb-0"], env)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout and "\u202e" not in out.stdout
    assert "fine\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07 reply\\u202e" in out.stdout
