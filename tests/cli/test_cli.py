"""End-to-end: the installed `rubric-engine` console script against the local fake server.

The server plays both candidate and judge; the judge's verdicts are a fixed function of
(question, item), so the expected scores are computed here independently from those verdicts.
"""

from __future__ import annotations

import html
import json
import math
import re
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, MINI, QuestionScript, model_args, read_rows, run_cli, sigkill
from fakeserver import FakeServer, Reply

DATA = MINI  # the project's own 12 HeartBench-shaped questions: these tests run on a bare clone
ROWS, BY_ID = read_rows(DATA)
__all__ = ["DATA", "EXE", "ROWS", "BY_ID", "REPLY_RE", "Script", "hit", "model_args", "run_cli"]
REPLY_RE = re.compile(r"REPLY\[(\w{6})\]")


def hit(qid: str, index: int) -> bool:
    """The scripted judge's verdict for item `index` (1-based) of question `qid`."""
    return (sum(map(ord, qid)) + 3 * index) % 5 < 2


class Script(QuestionScript):
    """Fake server behaviour: candidate replies name their question; the judge answers per item."""

    def __init__(self) -> None:
        super().__init__(ROWS)

    def judge(self, model: str, text: str) -> Reply:
        qid = REPLY_RE.search(text).group(1)  # type: ignore[union-attr]
        return self.verdict(len(BY_ID[qid]["rubric"]), lambda i: hit(qid, i))

    def candidate(self, model: str, qid: str) -> Reply:
        return Reply(text=f"REPLY[{qid}] 我在这里，愿意听你说。", usage=(40, 20))


def expected(ids: list[str]) -> dict[str, Any]:
    """Eq. 1 of the paper, written out plainly from the scripted verdicts."""
    per_ability: dict[str, list[float]] = defaultdict(list)
    for qid in ids:
        rubric = BY_ID[qid]["rubric"]
        fired = any(it["dimension"] == "其他" and hit(qid, i) for i, it in enumerate(rubric, 1))
        groups: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for i, it in enumerate(rubric, 1):
            if it["dimension"] != "其他":
                groups[it["dimension"]].append((i, it["score"]))
        for label, items in groups.items():
            raw = sum(w for i, w in items if hit(qid, i))
            lo = sum(w for _, w in items if w < 0)
            hi = sum(w for _, w in items if w > 0)
            s = 0.0 if fired or hi - lo <= 0 else math.log(raw - lo + 1) / math.log(hi - lo + 1)
            per_ability[label].append(s)
    ability_means = [sum(v) / len(v) for v in per_ability.values()]
    return {"overall": 100 * sum(ability_means) / len(ability_means), "n_abilities": len(ability_means)}


IDS = [r["question_id"] for r in ROWS[:10]]


def test_full_run_matches_independent_scores(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Script()) as srv:
        run_dir = tmp_path / "run"
        res = run_cli(["benchmark=heartbench", f"data.path={DATA}", "limit=10", "progress=plain",
                       f"hydra.run.dir={run_dir}", *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        assert len(srv.requests) == 20  # 10 candidate + 10 judge calls, no retries, no re-asks
    summary = json.loads((run_dir / "summary.json").read_text())
    exp = expected(IDS)
    assert summary["overall"] == pytest.approx(exp["overall"], abs=1e-9)
    assert summary["counts"] == {"questions": 10, "scored": 10, "judge_errors": 0, "candidate_errors": 0,
                                 "catastrophic": summary["counts"]["catastrophic"], "truncated": 0}
    assert summary["counts"]["catastrophic"] == sum(
        any(it["dimension"] == "其他" and hit(q, i) for i, it in enumerate(BY_ID[q]["rubric"], 1)) for q in IDS)
    assert sum(v is not None for v in summary["abilities"].values()) == exp["n_abilities"]
    assert summary["tokens"]["candidate"] == {"prompt": 400, "completion": 200}
    assert summary["tokens"]["judge"] == {"prompt": 1000, "completion": 500}
    assert summary["candidate"]["name"] == "cand" and summary["judge"]["name"] == "judge"
    samples = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert [s["id"] for s in samples] == IDS
    answers = [json.loads(x) for x in (run_dir / "answers.jsonl").read_text().splitlines()]
    assert answers[0]["question_id"] == IDS[0] and answers[0]["response"].startswith(f"REPLY[{IDS[0]}]")
    assert "rubric" in answers[0]  # the benchmark's own row, plus `response`
    assert "sk-test" not in "".join(p.read_text(errors="ignore") for p in run_dir.rglob("*") if p.is_file())
    assert "outputs:" in res.stderr or "outputs:" in res.stdout
    # every run gets report.html: the dialogue and the reply of each question, from this run's files
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert html.escape(answers[0]["response"], quote=True) in report
    assert html.escape(BY_ID[IDS[0]]["dialogue"][-1]["content"], quote=True) in report


def test_score_only_from_answers_file_and_from_run(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Script()) as srv:
        first = tmp_path / "gen"
        res = run_cli(["benchmark=heartbench", f"data.path={DATA}", "limit=6", "stage=generate", "progress=none",
                       f"hydra.run.dir={first}", *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        assert not (first / "samples.jsonl").exists()
        assert all(b["model"] == "cand" for b in srv.requests) and len(srv.requests) == 6
        srv.reset()
        scored = tmp_path / "scored"
        res = run_cli(["benchmark=heartbench", f"data.path={DATA}", "stage=score", f"answers={first / 'answers.jsonl'}",
                       "progress=none", f"hydra.run.dir={scored}", *model_args(srv.url)[5:]], env)
        assert res.returncode == 0, res.stderr
        assert [b["model"] for b in srv.requests] == ["judge"] * 6
        again = tmp_path / "again"
        res = run_cli(["benchmark=heartbench", f"data.path={DATA}", "stage=score", f"from_run={first}",
                       "progress=none", f"hydra.run.dir={again}", *model_args(srv.url)[5:]], env)
        assert res.returncode == 0, res.stderr
        assert len(srv.requests) == 6  # all judge calls came from the cache
    s1, s2 = (json.loads((d / "summary.json").read_text()) for d in (scored, again))
    assert s1["overall"] == pytest.approx(expected(IDS[:6])["overall"]) == s2["overall"]
    assert s1["counts"]["scored"] == 6


def test_sigkill_midway_then_resume_repays_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    ids = [r["question_id"] for r in ROWS[:12]]
    args = ["benchmark=heartbench", f"data.path={DATA}", "limit=12", "concurrency=2", "progress=plain"]
    with FakeServer(Script(), latency=0.25) as srv:
        ref_env = dict(env, RUBRIC_ENGINE_CACHE=str(tmp_path / "refcache"))
        ref = run_cli([*args, f"hydra.run.dir={tmp_path / 'ref'}", *model_args(srv.url)], ref_env)
        assert ref.returncode == 0, ref.stderr
        srv.reset()
        proc = subprocess.Popen([EXE, *args, f"hydra.run.dir={tmp_path / 'killed'}", *model_args(srv.url)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while sum(b["model"] == "judge" for b in srv.requests) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        sigkill(proc)
        first_run = [json.dumps(b, sort_keys=True) for b in srv.requests]
        assert 6 <= len(first_run) < 24, "the kill must land midway"
        srv.reset()
        res = run_cli([*args, f"hydra.run.dir={tmp_path / 'resumed'}", *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        second_run = [json.dumps(b, sort_keys=True) for b in srv.requests]
    repeated = Counter(second_run) & Counter(first_run)
    # Only calls still in flight at the kill (at most `concurrency` per role) may be sent again.
    assert sum(repeated.values()) <= 4, repeated
    assert len(first_run) + len(second_run) - sum(repeated.values()) == 24
    ref_s, res_s = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("ref", "resumed"))
    for key in ("overall", "abilities", "dimensions", "subsets", "scenarios", "counts", "tokens"):
        assert res_s[key] == ref_s[key], key
    assert res_s["overall"] == pytest.approx(expected(ids)["overall"])


@pytest.mark.parametrize("args, code, message", [
    (["benchmark=heartbench", "candidate=gpt-4o", "limit=1"], 2, "export OPENAI_API_KEY"),
    (["benchmark=no_such_bench", "candidate=gpt-4o"], 2, "no_such_bench"),
    (["benchmark=heartbench", "candidate=no_such_model"], 2, "unknown candidate entry 'no_such_model'"),
    (["benchmark=heartbench", "stage=score", "answers=/nonexistent/answers.jsonl"], 2, "/nonexistent/answers.jsonl"),
    (["benchmark=heartbench", "stage=banana", "candidate=gpt-4o"], 2, "stage='banana'"),
    (["benchmark=heartbench", "subset=medium", "candidate=gpt-4o"], 2, "medium"),
    (["benchmark=heartbench", "limit=="], 2, "override 'limit=='"),
])
def test_user_errors_give_one_line_and_exit_code(tmp_path: Path, env: dict[str, str], args: list[str],
                                                 code: int, message: str) -> None:
    res = run_cli([*args, f"data.path={DATA}", f"hydra.run.dir={tmp_path / 'run'}"], env, timeout=120)
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    assert message in res.stderr
    assert "Traceback" not in res.stderr


def test_debug_switch_shows_traceback(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli(["benchmark=no_such_bench", "debug=true", f"hydra.run.dir={tmp_path / 'run'}"], env, timeout=120)
    assert res.returncode == 2 and "Traceback" in res.stderr


def test_validate_prints_taxonomy_counts(env: dict[str, str], heartbench_file: Path) -> None:
    res = run_cli(["validate", "benchmark=heartbench", f"data.path={heartbench_file}"], dict(env, COLUMNS="200"),
                  timeout=120)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "296 questions" in out and "2818 ability items" in out and "296 failure-rule items" in out
    assert re.search(r"Verbal Expression.*言语表达.*565", out)
    assert re.search(r"个人成长.*Personal Growth.*121", out)


def test_works_from_any_directory_and_lists_packaged_configs(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli(["--info", "searchpath"], env, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "pkg://rubric_engine.conf" in res.stdout
    res = run_cli(["--help"], env, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "rubric-engine" in res.stdout and "candidate: " in res.stdout and "gpt-4o" in res.stdout


def test_cache_info_and_clear(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Script()) as srv:
        res = run_cli(["benchmark=heartbench", f"data.path={DATA}", "limit=2", "progress=none",
                       f"hydra.run.dir={tmp_path / 'r'}", *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
    info = run_cli(["cache", "info"], env, timeout=60)
    assert info.returncode == 0 and "4 completed calls" in info.stdout, info.stdout + info.stderr
    cleared = run_cli(["cache", "clear"], env, timeout=60)
    assert cleared.returncode == 0 and "removed 4 entries" in cleared.stdout, cleared.stderr
    after = run_cli(["cache", "info"], env, timeout=60)
    assert after.returncode == 0 and "0 completed calls" in after.stdout, after.stderr


def test_dry_run_counts_calls_and_calls_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Script()) as srv:
        res = run_cli(["benchmark=heartbench", f"data.path={DATA}", "limit=2", "progress=none",
                       f"hydra.run.dir={tmp_path / 'warm'}", *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        srv.reset()
        res = run_cli(["benchmark=heartbench", f"data.path={DATA}", "limit=5", "dry_run=true",
                       f"hydra.run.dir={tmp_path / 'dry'}", *model_args(srv.url)], dict(env, COLUMNS="200"))
        assert res.returncode == 0, res.stderr
        assert srv.requests == []  # nothing was sent
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in res.stdout.splitlines() if line.startswith("│")}
    assert rows["candidate"][:3] == ["openai/cand", "5", "2"]  # 5 calls, 2 already cached
    assert rows["judge"][:3] == ["openai/judge", "5", "2"]  # the verdicts on the 2 cached replies are cached too
    # prompt tokens are LiteLLM's own count of the exact candidate messages
    import os
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm
    from rubric_engine.dataset.load import load_dataset, select
    from rubric_engine.judge.prompts import candidate_messages
    from rubric_engine.spec.load import load_spec
    spec = load_spec("heartbench")
    qs = select(load_dataset(spec, DATA).questions, limit=5)
    counted = sum(litellm.token_counter(model="openai/cand", messages=candidate_messages(spec, q)) for q in qs)
    assert rows["candidate"][3] == f"~{counted:,}"
    assert rows["candidate"][-1] == "unknown price"
