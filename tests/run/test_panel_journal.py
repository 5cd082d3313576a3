"""Panel runs (a jury with repeats, candidate samples) resume from their journal, cache or no cache.

The console script against tests/fakeserver.py: a run is killed with SIGKILL once its journal holds a few
questions, the call cache is deleted, and the same command finishes it. No journalled question reaches
the server again (each unfinished one exactly once per call), and every file, the summary's noise, jury,
sampling and hierarchical interval sections included, is what an uninterrupted run writes.

The scripted models answer by arrival: the n-th request for (model, question) gets the n-th variant,
so repeats and samples differ (verdicts flip, replies vary). With concurrency=1 each client sends its
requests one at a time in the order the engine started them (repeat r before r+1, sample s before s+1),
so the n-th arrival is the n-th repeat / sample in every run, and a fresh script per run numbers them anew.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from conftest import EXE, MINI, QuestionScript, forge_crash, kill_after_lines, model_args, read_rows, run_cli
from fakeserver import FakeServer, Reply
from test_run_journal import same_files

ROWS, BY_ID = read_rows(MINI)
REPLY = re.compile(r"REPLY\[(\w{6})\] variant (\d+)")
ARGS = ["benchmark=heartbench", f"data.path={MINI}", "limit=12", "concurrency=1", "progress=plain"]


class Arrivals(QuestionScript):
    """Candidate replies and verdicts as a function of (model, question, arrival number)."""

    judges = frozenset({"ja", "jb", "judge"})

    def __init__(self) -> None:
        super().__init__(ROWS)
        self.seen: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()

    def arrival(self, model: str, qid: str) -> int:
        with self.lock:
            n = self.seen[(model, qid)]
            self.seen[(model, qid)] += 1
        return n

    def candidate(self, model: str, qid: str) -> Reply:
        return Reply(text=f"REPLY[{qid}] variant {self.arrival(model, qid) % 3} 我在这里，愿意听你说。", usage=(40, 20))

    def judge(self, model: str, text: str) -> Reply:
        qid, variant = REPLY.search(text).groups()  # type: ignore[union-attr]
        n = self.arrival(model, qid)
        return self.verdict(len(BY_ID[qid]["rubric"]), lambda i: _bit(model, qid, i, variant, n))


def _bit(*parts: Any) -> bool:
    """A fixed pseudo-random verdict per (model, question, item, reply variant, arrival): 40% met."""
    return int(hashlib.sha256(repr(parts).encode()).hexdigest(), 16) % 5 < 2


def asked(requests: list[dict[str, Any]]) -> tuple[Counter, Counter]:
    """(candidate question ids, judge question ids) in the requests the server received."""
    cand, judge = Counter(), Counter()
    script = Arrivals()
    for body in requests:
        text = script.text(body)
        if body["model"] in script.judges:
            judge[REPLY.search(text).group(1)] += 1  # type: ignore[union-attr]
        else:
            cand[script.question(text)] += 1
    return cand, judge


def killed_and_resumed(tmp_path: Path, env: dict[str, str], extra: list[str], per_question: tuple[int, int]) -> None:
    """Reference run, then the same command killed after 4 journalled questions, cache deleted, run again."""
    run, ref = tmp_path / "run", tmp_path / "ref"
    with FakeServer(Arrivals(), latency=0.05) as srv:
        jury = [f"judge=[{','.join(_juror(srv.url, j) for j in ('ja', 'jb'))}]"] if "jury" in extra else []
        models = model_args(srv.url)[:5] if jury else model_args(srv.url)  # candidate.* only, with a jury
        args = [*ARGS, *models, *jury, *(a for a in extra if a != "jury")]
        res = run_cli([*args, f"hydra.run.dir={ref}"], dict(env, RUBRIC_ENGINE_CACHE=str(tmp_path / "refcache")),
                      cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        cand_ref, judge_ref = asked(srv.requests)
        assert all(cand_ref[q] == per_question[0] and judge_ref[q] == per_question[1] for q in cand_ref)
        srv.handler, _ = Arrivals(), srv.reset()
        lines = kill_after_lines([EXE, *args, f"hydra.run.dir={run}"], run / "samples.jsonl", 5, env, cwd=tmp_path)
        assert "journal" in lines[0], "the kill must land before the run finished"
        done = {r["id"] for r in lines[1:]}
        assert 4 <= len(done) < 12, "the kill must land midway"
        shutil.rmtree(tmp_path / "cache")  # the call cache is gone: only the journal can spare the calls
        srv.handler, _ = Arrivals(), srv.reset()
        res = run_cli([*args, f"hydra.run.dir={run}"], env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        cand, judge = asked(srv.requests)
    todo = set(cand_ref) - done
    assert not (set(cand) | set(judge)) & done  # no journalled question reached the server again
    assert cand == Counter({q: per_question[0] for q in todo}) and judge == Counter({q: per_question[1] for q in todo})
    assert f"resuming: {len(done)} of 12 questions" in res.stderr
    same_files(run, ref)


def _juror(url: str, name: str) -> str:
    return f"{{name:{name},model:openai/{name},api_base:'{url}',api_key_env:FAKE_KEY}}"


def test_jury_with_repeats_resumes_from_its_journal_without_cache(tmp_path: Path, env: dict[str, str]) -> None:
    killed_and_resumed(tmp_path, env, ["jury", "judge.repeats=2"], (1, 4))
    summary = (tmp_path / "ref" / "summary.json").read_text()
    assert '"noise"' in summary and '"jury"' in summary and '"nested"' in summary


def test_candidate_samples_resume_from_their_journal_without_cache(tmp_path: Path, env: dict[str, str]) -> None:
    killed_and_resumed(tmp_path, env, ["candidate.samples=3"], (3, 3))
    summary = (tmp_path / "ref" / "summary.json").read_text()
    assert '"sampling"' in summary and '"nested"' in summary


def test_panel_journal_cut_mid_line_is_repaired_and_another_runs_refused(tmp_path: Path, env: dict[str, str]) -> None:
    """What a crash leaves (header, whole records, the next one cut mid-line) in a jury-with-repeats run: one
    line said, only the cut question and those after it asked, the same files; another run's header: exit 2."""
    run, ref = tmp_path / "run", tmp_path / "ref"
    with FakeServer(Arrivals()) as srv:
        jury = [f"judge=[{','.join(_juror(srv.url, j) for j in ('ja', 'jb'))}]", "judge.repeats=2"]
        args = [*ARGS, *model_args(srv.url)[:5], *jury]
        res = run_cli([*args, f"hydra.run.dir={ref}"], env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        lines = forge_crash(ref, run, whole=5)
        shutil.rmtree(tmp_path / "cache")
        srv.handler, _ = Arrivals(), srv.reset()
        res = run_cli([*args, f"hydra.run.dir={run}"], env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        cand, judge = asked(srv.requests)
        said = [x for x in res.stderr.splitlines() if "incomplete record" in x]
        assert len(said) == 1 and "line 7" in said[0], res.stderr
        rerun = [json.loads(x)["id"] for x in lines[5:]]
        assert cand == Counter(rerun) and judge == Counter({q: 4 for q in rerun})
        same_files(run, ref)
        (run / "samples.jsonl").write_text(json.dumps({"journal": 1, "run": "0" * 64}) + "\n", encoding="utf-8")
        srv.reset()
        res = run_cli([*args, f"hydra.run.dir={run}"], env, cwd=tmp_path)
        assert res.returncode == 2 and "belongs to another run" in res.stderr and srv.requests == []
