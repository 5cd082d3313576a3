"""The runner's journal end to end: the console script against the fake server.

kill -9 then the same command with the cache gone re-asks only unfinished questions and ends with
the same bytes as an uninterrupted run; a journal cut mid-line is repaired in one line; another
run's journal is refused in one line.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from conftest import forge_crash, kill_after_lines
from fakeserver import FakeServer
from test_cli import DATA, EXE, REPLY_RE, Script, model_args, run_cli

ARGS = ["benchmark=heartbench", f"data.path={DATA}", "limit=12", "concurrency=2", "progress=plain"]
SCRIPT = Script()


def asked(requests: list[dict[str, Any]]) -> tuple[Counter, Counter]:
    """(candidate question ids, judge question ids) the server was asked for."""
    cand, judge = Counter(), Counter()
    for body in requests:
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        if body["model"] == "judge":
            judge[REPLY_RE.search(text).group(1)] += 1  # type: ignore[union-attr]
        else:
            cand[next(q for turns, q in SCRIPT.turns if all(t in text for t in turns))] += 1
    return cand, judge


def same_files(a: Path, b: Path) -> None:
    """Every file of two run dirs is the same bytes, summary.json apart from its timestamp, calls, run id,
    wall times and command."""
    for name in ("samples.jsonl", "answers.jsonl", "spec.resolved.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    for s in (sa, sb):
        for key in ("created", "calls", "run_id", "wall_seconds"):
            s.pop(key)
        s["provenance"].pop("command")  # names the run's own directory (hydra.run.dir=...)
    assert sa == sb


def test_kill9_then_same_command_without_cache_asks_only_unfinished(tmp_path: Path, env: dict[str, str]) -> None:
    run, ref = tmp_path / "run", tmp_path / "ref"
    with FakeServer(SCRIPT, latency=0.3) as srv:
        res = run_cli([*ARGS, f"hydra.run.dir={ref}", *model_args(srv.url)],
                      dict(env, RUBRIC_ENGINE_CACHE=str(tmp_path / "refcache")))
        assert res.returncode == 0, res.stderr
        srv.reset()
        cmd = [EXE, *ARGS, f"hydra.run.dir={run}", *model_args(srv.url)]
        done = {r["id"] for r in kill_after_lines(cmd, run / "samples.jsonl", 5, env)[1:]}
        assert 4 <= len(done) < 12, "the kill must land midway"
        shutil.rmtree(tmp_path / "cache")  # the call cache is gone: only the journal can spare the calls
        srv.reset()
        res = run_cli([*ARGS, f"hydra.run.dir={run}", *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        cand, judge = asked(srv.requests)
    todo = {json.loads(x)["id"] for x in (ref / "samples.jsonl").read_text().splitlines()} - done
    assert cand == Counter(todo) and judge == Counter(todo)  # each unfinished question asked once per role
    assert f"resuming: {len(done)} of 12 questions" in res.stderr
    same_files(run, ref)


def test_journal_cut_mid_line_is_repaired_and_its_question_rerun(tmp_path: Path, env: dict[str, str]) -> None:
    run, ref = tmp_path / "run", tmp_path / "ref"
    with FakeServer(SCRIPT) as srv:
        res = run_cli([*ARGS, f"hydra.run.dir={ref}", *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        lines = forge_crash(ref, run, whole=5)  # header (the manifest's identity, hashed), 5 records, the 6th cut
        shutil.rmtree(tmp_path / "cache")
        srv.reset()
        res = run_cli([*ARGS, f"hydra.run.dir={run}", *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        cand, judge = asked(srv.requests)
    rerun = {json.loads(x)["id"] for x in lines[5:]}
    assert cand == Counter(rerun) == judge
    said = [x for x in res.stderr.splitlines() if "incomplete record" in x]
    assert len(said) == 1 and "line 7" in said[0] and "runs again" in said[0]
    same_files(run, ref)


def test_another_runs_journal_or_samples_are_refused(tmp_path: Path, env: dict[str, str]) -> None:
    run = tmp_path / "run"
    with FakeServer(SCRIPT) as srv:
        res = run_cli([*ARGS, f"hydra.run.dir={run}", *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        before = (run / "samples.jsonl").read_bytes()
        srv.reset()
        # a finished run, asked again with another selection / another candidate name
        models = model_args(srv.url)
        for args in ([*ARGS[:2], "limit=5", *ARGS[3:], *models],
                     [*ARGS, *[("candidate.name=other" if a == "candidate.name=cand" else a) for a in models]]):
            res = run_cli([*args, f"hydra.run.dir={run}"], env)
            assert res.returncode == 2, res.stderr
            errors = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error:")]
            assert len(errors) == 1 and "another run" in errors[0], res.stderr
        # an interrupted run's journal (header line) of another fingerprint
        (run / "samples.jsonl").write_text(json.dumps({"journal": 1, "run": "0" * 64}) + "\n", encoding="utf-8")
        res = run_cli([*ARGS, f"hydra.run.dir={run}", *model_args(srv.url)], env)
        assert res.returncode == 2 and "belongs to another run" in res.stderr
        assert srv.requests == []  # refused before any call
    assert (run / "samples.jsonl").read_text().startswith('{"journal": 1, "run": "000')
    assert before  # the finished run's file was left as it was until we replaced it by hand


GEN_ARGS = [*ARGS[:3], "concurrency=2", "progress=plain", "stage=generate"]
GEN_JOURNAL = "answers.journal.jsonl"


def test_generate_kill9_then_same_command_without_cache_asks_only_unfinished(tmp_path: Path,
                                                                             env: dict[str, str]) -> None:
    run, ref = tmp_path / "run", tmp_path / "ref"
    with FakeServer(SCRIPT, latency=1.0) as srv:
        res = run_cli([*GEN_ARGS, f"hydra.run.dir={ref}", *model_args(srv.url)],
                      dict(env, RUBRIC_ENGINE_CACHE=str(tmp_path / "refcache")))
        assert res.returncode == 0, res.stderr
        srv.reset()
        cmd = [EXE, *GEN_ARGS, f"hydra.run.dir={run}", *model_args(srv.url)]
        done = {r["id"] for r in kill_after_lines(cmd, run / GEN_JOURNAL, 5, env)[1:]}
        assert 4 <= len(done) < 12, "the kill must land midway"
        assert not (run / "answers.jsonl").exists()
        shutil.rmtree(tmp_path / "cache")  # the call cache is gone: only the journal can spare the calls
        srv.reset()
        res = run_cli([*GEN_ARGS, f"hydra.run.dir={run}", *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        cand, judge = asked(srv.requests)
    every = {json.loads(x)["question_id"] for x in (ref / "answers.jsonl").read_text().splitlines()}
    assert cand == Counter(every - done) and not judge  # each unfinished question asked once, no judge
    assert f"resuming: {len(done)} of 12 questions already in {GEN_JOURNAL}" in res.stderr
    assert (run / "answers.jsonl").read_bytes() == (ref / "answers.jsonl").read_bytes()
    for d in (run, ref):  # a generate run's output is answers.jsonl: its journal is gone, no samples.jsonl
        assert not (d / GEN_JOURNAL).exists() and not (d / "samples.jsonl").exists()
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (run, ref))
    assert sa["counts"] == sb["counts"] and sa["tokens"] == sb["tokens"]


def test_changed_data_or_sampling_params_is_another_run(tmp_path: Path, env: dict[str, str]) -> None:
    run, data = tmp_path / "run", tmp_path / "rows.jsonl"
    shutil.copy(DATA, data)
    original = data.read_bytes()
    rows = original.decode("utf-8").splitlines(keepends=True)
    last = json.loads(rows[-1])
    last["dialogue"][0]["content"] += "!"
    changed = ("".join(rows[:-1]) + json.dumps(last, ensure_ascii=False) + "\n").encode("utf-8")
    args = [*ARGS, f"data.path={data}", f"hydra.run.dir={run}"]
    with FakeServer(SCRIPT) as srv:
        res = run_cli([*args, *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["data_sha256"] and manifest["params"] == {"candidate": {}, "judge": [{}]}
        for key, content, extra in (("data_sha256", changed, []),
                                    ("params", original, ["candidate.params.temperature=0.7"])):
            data.write_bytes(content)
            srv.reset()
            res = run_cli([*args, *model_args(srv.url), *extra], env)
            assert res.returncode == 2, res.stderr
            errors = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error:")]
            assert len(errors) == 1 and "another run" in errors[0] and f"differs in: {key}" in errors[0], res.stderr
            assert srv.requests == []  # refused before any call
        res = run_cli([*args, *model_args(srv.url)], env)  # the same data and params: the same run (finished)
        assert res.returncode == 0 and srv.requests == [], res.stderr


def test_run_report_is_skipped_past_its_bound_in_one_line(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from rubric_engine.report.run_page import REPORT_MAX_QUESTIONS, write_run_report

    (tmp_path / "samples.jsonl").write_text('{"id": "q1"}\n', encoding="utf-8")  # never read: the bound comes first
    buf = io.StringIO()
    assert write_run_report(tmp_path, Console(file=buf, width=300), questions=REPORT_MAX_QUESTIONS + 1) is None
    lines = buf.getvalue().splitlines()
    assert len(lines) == 1 and "report.html not written" in lines[0] and f"rubric-engine leaderboard {tmp_path}" in lines[0]
    assert not (tmp_path / "report.html").exists()
