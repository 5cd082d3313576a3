"""Candidate sampling (`candidate.samples=K`) through the console script against tests/fakeserver.py.

The scripted candidate answers the n-th request for a question with reply "REPLY[qid] S<n>", so the K
samples of a question differ; the scripted judge reads (qid, n) from the reply it grades and answers a
fixed function of (qid, n, check), optionally flipping each verdict with probability p. Every expected
number below is computed from that script alone, not from the engine's code.
"""

from __future__ import annotations

import csv
import json
import random
import re
import statistics
import threading
from pathlib import Path
from typing import Any

import pytest

import numpy as np

from fakeserver import FakeServer, Reply
from rubric_engine.stats.nested import Nested, multisets, paired_nested
from test_cli import run_cli

from conftest import REPO as ROOT
QA = ROOT / "data" / "reference_qa.csv"
ROWS = list(csv.DictReader(QA.open(encoding="utf-8")))
CHECKS = {r["id"]: json.loads(r["checks"]) for r in ROWS}
BY_TEXT = {r["question"]: r["id"] for r in ROWS}
REPLY = re.compile(r"REPLY\[(\w+)\] S(\d+) M(\w+)")


def met(q: str, n: int, i: int, model: str = "cand") -> bool:
    """The judge's verdict on check i of sample-reply n of question q by candidate `model` (no noise)."""
    return (sum(map(ord, q + model)) + 3 * n + 5 * i) % 3 != 0


class Script:
    """Candidate and judge on one server, told apart by model name."""

    def __init__(self, p: float = 0.0, fail: tuple[str, int] | None = None) -> None:
        self.p, self.fail = p, fail
        self.seen: dict[Any, int] = {}
        self.lock = threading.Lock()

    def verdict(self, model: str, qid: str, n: int, i: int, r: int) -> bool:
        """Grading r of check i: the scripted verdict, flipped with probability p."""
        return met(qid, n, i, model) != (random.Random(f"{model}|{qid}|{n}|{i}|{r}").random() < self.p)

    def arrival(self, key: Any) -> int:
        with self.lock:
            n = self.seen.get(key, 0)
            self.seen[key] = n + 1
        return n

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        if str(body["model"]).startswith("cand"):
            qid, model = BY_TEXT[str(body["messages"][-1]["content"]).strip()], str(body["model"])
            n = self.arrival((model, qid))
            if self.fail == (qid, n):
                return Reply(status=500)
            return Reply(text=f"REPLY[{qid}] S{n} M{model}")
        found = REPLY.search(text)
        assert found is not None, text
        qid, n, model = found.group(1), int(found.group(2)), found.group(3)
        r = self.arrival((model, qid, n))
        items = [{"n": i, "why": "r", "passed": self.verdict(model, qid, n, i, r)} for i in range(1, len(CHECKS[qid]) + 1)]
        return Reply(text=json.dumps({"checks": items}))


def models(url: str, cand: str = "cand") -> list[str]:
    return ["candidate=openai_compatible", f"candidate.model=openai/{cand}", f"candidate.api_base={url}",
            f"candidate.name={cand}", "candidate.api_key_env=FAKE_KEY", "candidate.params={temperature: 0.7}",
            "judge=openai_compatible", "judge.model=openai/judge", f"judge.api_base={url}",
            "judge.name=judge", "judge.api_key_env=FAKE_KEY"]


def qscore(q: str, n: int, hits: Any = None) -> float:
    """reference_qa by hand: points of passed checks over positive points, clipped to [0, 1]."""
    hits = hits or (lambda i: met(q, n, i))
    pos = sum(c["points"] for c in CHECKS[q] if c["points"] > 0)
    got = sum(c["points"] for i, c in enumerate(CHECKS[q], 1) if hits(i))
    return min(1.0, max(0.0, got / pos))


def run(tmp_path: Path, env: dict[str, str], srv: FakeServer, name: str, *args: str, cand: str = "cand") -> Any:
    return run_cli(["benchmark=reference_qa", "progress=plain", f"hydra.run.dir={tmp_path / name}",
                    *models(srv.url, cand), *args], env, cwd=tmp_path)


def load(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return (json.loads((out / "summary.json").read_text()),
            [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()])


def test_sampled_run_scores_the_mean_over_samples_and_reports_the_spread(tmp_path: Path, env: dict[str, str]) -> None:
    k = 3
    with FakeServer(Script()) as srv:
        res = run(tmp_path, env, srv, "run", f"candidate.samples={k}")
        assert res.returncode == 0, res.stderr
        cand = [b for b in srv.requests if b["model"] == "cand"]
        assert len(cand) == k * len(CHECKS) and len(srv.requests) == 2 * k * len(CHECKS)
        assert all(b.get("temperature") == 0.7 for b in cand)  # the entry's temperature, every sample
        summary, records = load(tmp_path / "run")
        # the same command again in another directory: every sample and grading from the cache, same pairing
        before = len(srv.requests)
        res2 = run(tmp_path, env, srv, "again", f"candidate.samples={k}")
        assert res2.returncode == 0, res2.stderr
        assert len(srv.requests) == before
        summary2, records2 = load(tmp_path / "again")
    assert summary2["overall"] == summary["overall"] and summary2["sampling"] == summary["sampling"]
    assert [[e["response"] for e in r["samples"]] for r in records2] == [[e["response"] for e in r["samples"]] for r in records]
    expected = 100 * statistics.fmean(statistics.fmean(qscore(q, n) for n in range(k)) for q in CHECKS)
    assert summary["overall"] == pytest.approx(expected, abs=1e-9)
    assert summary["sampling"]["samples"] == k and summary["interval"]["nested"]["levels"] == ["questions", "samples"]
    pairing: dict[str, list[int]] = {}
    for rec in records:
        assert len(rec["samples"]) == k and rec["response"] == rec["samples"][0]["response"]
        ns = [int(REPLY.search(e["response"]).group(2)) for e in rec["samples"]]  # type: ignore[union-attr]
        assert sorted(ns) == list(range(k))  # every reply kept, once
        pairing[rec["id"]] = ns
        for e, n in zip(rec["samples"], ns):
            assert [c["hit"] for c in e["criteria"]] == [met(rec["id"], n, i) for i in range(1, len(CHECKS[rec["id"]]) + 1)]
            assert e["score"] == pytest.approx(qscore(rec["id"], n), abs=1e-12)
        assert rec["score"] == pytest.approx(statistics.fmean(qscore(rec["id"], n) for n in range(k)), abs=1e-12)
    g = summary["sampling"]["groups"]["overall"]
    sd_q = statistics.fmean(100 * statistics.stdev([qscore(q, n) for n in range(k)]) for q in CHECKS)
    assert g["question_score_sd"] == pytest.approx(sd_q, abs=1e-9)
    per_sample = [100 * statistics.fmean(qscore(q, pairing[q][s]) for q in CHECKS) for s in range(k)]
    assert g["sample_scores"] == pytest.approx(per_sample, abs=1e-9)
    assert g["score_sd_across_samples"] == pytest.approx(statistics.stdev(per_sample), abs=1e-9)
    shown = " ".join(res.stdout.split())
    assert f"samples={k} replies per question" in shown and "interval resamples questions, then samples" in shown
    # rescore reproduces the sampled summary exactly (interval and sampling block included)
    res = run_cli(["rescore", str(tmp_path / "run"), f"out={tmp_path / 'rs'}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    again, _ = load(tmp_path / "rs")
    again.pop("rescore")
    assert again == summary
    # the leaderboard's row interval is the run's own hierarchical interval
    res = run_cli(["leaderboard", str(tmp_path / "run"), f"out={tmp_path / 'lb'}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (row,) = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())["rows"]
    assert (row["ci_lo"], row["ci_hi"]) == pytest.approx((summary["interval"]["lo"], summary["interval"]["hi"]), abs=1e-9)


def test_a_failed_sample_makes_the_question_an_error_and_resumes(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Script(fail=("q03", 1))) as srv:
        res = run(tmp_path, env, srv, "run", "candidate.samples=3", "max_retries=0")
        assert res.returncode == 0, res.stderr
        summary, records = load(tmp_path / "run")
        (bad,) = [r for r in records if r["id"] == "q03"]
        assert bad["score"] is None and bad["candidate_error"].startswith("sample ") and " of 3: " in bad["candidate_error"]
        assert summary["counts"]["candidate_errors"] == 1 and summary["counts"]["scored"] == len(CHECKS) - 1
        before = len(srv.requests)
        # the same command into the same directory: its journal holds every question, an error included (final
        # there, as for a single grading), so nothing is asked
        res = run(tmp_path, env, srv, "run", "candidate.samples=3", "max_retries=0")
        assert res.returncode == 0, res.stderr
        assert len(srv.requests) == before and load(tmp_path / "run")[0]["counts"] == summary["counts"]
        # into a new directory: the cache answers every other sample and grading; only the failed sample's
        # candidate call and its grading are made again
        res = run(tmp_path, env, srv, "again", "candidate.samples=3", "max_retries=0")
        assert res.returncode == 0, res.stderr
        assert len(srv.requests) - before == 2
        summary, _ = load(tmp_path / "again")
    assert summary["counts"]["scored"] == len(CHECKS) and summary["counts"]["candidate_errors"] == 0


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5"])
def test_bad_sample_count_is_one_line(tmp_path: Path, env: dict[str, str], value: str) -> None:
    res = run_cli(["benchmark=reference_qa", "candidate=mock", "judge=mock", f"candidate.samples={value}",
                   f"hydra.run.dir={tmp_path / 'x'}"], env, cwd=tmp_path)
    assert res.returncode == 2
    err = [line for line in res.stderr.splitlines() if line.startswith("rubric-engine: error")]
    assert len(err) == 1 and "candidate.samples" in err[0] and ">= 1" in err[0], res.stderr


def test_dry_run_multiplies_calls(tmp_path: Path, env: dict[str, str]) -> None:
    k, judges, repeats = 3, 2, 2
    jury = ",".join(f"{{name:j{i},model:openai/j{i},api_base:'http://127.0.0.1:9',api_key_env:FAKE_KEY}}"
                    for i in range(judges))
    res = run_cli(["benchmark=reference_qa", "candidate=openai_compatible", "candidate.model=openai/cand",
                   "candidate.api_base=http://127.0.0.1:9", "candidate.api_key_env=FAKE_KEY",
                   f"candidate.samples={k}", f"judge.repeats={repeats}", f"judge=[{jury}]", "dry_run=true",
                   f"hydra.run.dir={tmp_path / 'dry'}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = " ".join(res.stdout.split())
    total = len(CHECKS) * k * (1 + judges * repeats)
    assert f"candidate.samples={k}: {total} calls in all = {k} sample(s) x (1 candidate + {judges} judge(s) x " \
           f"{repeats} repeat(s))" in out, out


def test_answers_file_cannot_be_sampled(tmp_path: Path, env: dict[str, str]) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"id": q, "response": "x"}) + "\n" for q in CHECKS))
    res = run_cli(["benchmark=reference_qa", "stage=score", f"answers={answers}", "judge=mock", "candidate.samples=2",
                   f"hydra.run.dir={tmp_path / 'x'}"], env, cwd=tmp_path)
    assert res.returncode == 2 and "candidate.samples=2 needs the candidate called" in res.stderr, res.stderr


def rebuilt(script: Script, records: list[dict[str, Any]], model: str, k: int, r: int) -> Nested:
    """A run's hierarchical values from the script alone: which reply (n) each sample got is read from its
    text; the gradings are the script's verdicts, combined by majority (R odd: no tie). Which of the
    script's gradings (arrival order) became the engine's repeat g is found by matching the recorded votes
    against the script's verdicts (each must be one of them)."""
    sets = multisets(r)
    arr = np.full((len(records), k, len(sets), 1), np.nan)
    for qi, rec in enumerate(records):
        q = rec["id"]
        checks = range(1, len(CHECKS[q]) + 1)
        for s, e in enumerate(rec["samples"]):
            n = int(REPLY.search(e["response"]).group(2))  # type: ignore[union-attr]
            scripted = {a: tuple(script.verdict(model, q, n, i, a) for i in checks) for a in range(r)}
            arrival: list[int] = []
            for g in range(r):
                voted = tuple(c["votes"]["judge"][g] for c in e["criteria"])
                arrival.append(next(a for a in range(r) if scripted[a] == voted and a not in arrival))
            for j, ms in enumerate(sets):
                def hits(i: int) -> bool:
                    return sum(scripted[arrival[g]][i - 1] for g in ms) * 2 > len(ms)
                arr[qi, s, j, 0] = qscore(q, n, hits)
    return Nested([rec["id"] for rec in records], arr, r)


@pytest.mark.parametrize("p", [0.0, 0.25])
def test_leaderboard_pairs_sampled_and_regraded_runs(tmp_path: Path, env: dict[str, str], p: float) -> None:
    """Two candidates, 2 samples each graded 3 times by a judge flipping with probability p: the pair's
    interval and its judge-noise-only interval equal the bootstrap of values rebuilt from the script; with
    p = 0 re-grading moves nothing and nothing is marked."""
    k, r = 2, 3
    script = Script(p=p)
    with FakeServer(script) as srv:
        for cand in ("cand", "cand_b"):
            res = run(tmp_path, env, srv, cand, f"candidate.samples={k}", f"judge.repeats={r}", cand=cand)
            assert res.returncode == 0, res.stderr
    res = run_cli(["leaderboard", str(tmp_path / "cand"), str(tmp_path / "cand_b"), f"out={tmp_path / 'lb'}",
                   "bootstrap.samples=300"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lb = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())
    method = lb["bootstrap"]["method"]  # the rows' intervals are hierarchical, and the file says so
    assert "(candidate samples or repeated gradings) hierarchical" in method and "cand_b" in method, method
    (pair,) = lb["pairs"]
    runs = {cand: load(tmp_path / cand) for cand in ("cand", "cand_b")}
    for cand, (summary, _) in runs.items():
        assert summary["interval"]["nested"]["levels"] == ["questions", "samples", "repeats"]
    first = next(row["candidate"] for row in lb["rows"] if row["rank"] == 1)
    second = "cand_b" if first == "cand" else "cand"
    a, b = (rebuilt(script, runs[c][1], c, k, r) for c in (first, second))
    full = paired_nested(a, b, 300, 0, 0.05, scale=100.0, levels=("questions", "samples", "repeats"))
    only = paired_nested(a, b, 300, 0, 0.05, scale=100.0, levels=("repeats",))
    assert (pair["diff"], pair["lo"], pair["hi"]) == pytest.approx((full["diff"], full["lo"], full["hi"]), abs=1e-9)
    assert (pair["noise_lo"], pair["noise_hi"]) == pytest.approx((only["lo"], only["hi"]), abs=1e-9)
    assert pair["within_noise"] == (only["lo"] <= 0 <= only["hi"] and only["hi"] > only["lo"])
    if p == 0.0:
        assert pair["noise"] == 0.0 and not pair["within_noise"]
        assert "within judge noise" not in (tmp_path / "lb" / "leaderboard.md").read_text()
    else:
        assert pair["noise"] > 0


def test_rescore_without_failure_rules_keeps_the_leaderboard_interval(tmp_path: Path, env: dict[str, str]) -> None:
    """heartbench_en (failure-rule items) with the offline mock models: a sampled, re-graded run re-scored
    with failure_rules=off ranks with the interval its summary states (rule items left out when rebuilt)."""
    res = run_cli(["benchmark=heartbench_en", "candidate=mock", "judge=mock", "candidate.samples=2", "judge.repeats=3",
                   "progress=none", f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    summary, _ = load(tmp_path / "run")
    assert summary["interval"]["nested"]["failure_rules"] is True
    for opts, name in (([], "same"), (["failure_rules=off", "scoring.formula=linear"], "norules")):
        res = run_cli(["rescore", str(tmp_path / "run"), *opts, f"out={tmp_path / name}"], env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        again, _ = load(tmp_path / name)
        if name == "same":
            again.pop("rescore")
            assert again == summary
            continue
        assert again["interval"]["nested"]["failure_rules"] is False
        res = run_cli(["leaderboard", str(tmp_path / name), f"out={tmp_path / 'lb'}"], env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        (row,) = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())["rows"]
        assert (row["ci_lo"], row["ci_hi"]) == pytest.approx((again["interval"]["lo"], again["interval"]["hi"]), abs=1e-9)
