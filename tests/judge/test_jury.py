"""Repeated judging and juries through the console script against tests/fakeserver.py.

Scripted judges answer as a fixed function of (judge, question, check, arrival number), so every
expected number here is computed by hand from the script, independently of the engine's code:
the n-th request for a question gets the n-th repeat's verdicts whatever order the repeats arrive in.
"""

from __future__ import annotations

import csv
import json
import random
import re
import statistics
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from fakeserver import FakeServer, Reply
from test_cli import run_cli

from conftest import REPO as ROOT
QA = ROOT / "data" / "reference_qa.csv"
QA_ROWS = list(csv.DictReader(QA.open(encoding="utf-8")))
QA_CHECKS = {r["id"]: json.loads(r["checks"]) for r in QA_ROWS}
EN = ROOT / "data" / "heartbench_en_sample.jsonl"
EN_ROWS = [json.loads(x) for x in EN.read_text(encoding="utf-8").splitlines() if x.strip()]
EN_ITEMS = {r["question_id"]: len(r["rubric"]) for r in EN_ROWS}
REPLY = re.compile(r"REPLY\[(\w+)\]")

Verdict = Callable[[str, str, int, int], bool]  # (judge, question id, check 1.., repeat arrival 0..) -> met


class Judges:
    """Answers for any number of judges (told apart by model name) in a spec's list shape."""

    def __init__(self, verdict: Verdict, n_items: dict[str, int], key: str, id_: str, why: str, met: str) -> None:
        self.verdict, self.n_items, self.names = verdict, n_items, (key, id_, why, met)
        self.seen: dict[tuple[str, str], int] = {}
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        qid, judge = REPLY.search(text).group(1), str(body["model"])  # type: ignore[union-attr]
        with self.lock:
            arrival = self.seen.get((judge, qid), 0)
            self.seen[(judge, qid)] = arrival + 1
        key, id_, why, met = self.names
        items = [{id_: i, why: "r", met: self.verdict(judge, qid, i, arrival)} for i in range(1, self.n_items[qid] + 1)]
        return Reply(text=json.dumps({key: items}))


def answers(tmp_path: Path, ids: list[str], id_field: str) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({id_field: q, "response": f"REPLY[{q}]"}) + "\n" for q in ids))
    return path


def juror(url: str, name: str) -> str:
    return f"{{name:{name},model:openai/{name},api_base:'{url}',api_key_env:FAKE_KEY}}"


def qa_run(tmp_path: Path, env: dict[str, str], verdict: Verdict, args: list[str], jury: list[str] | None = None,
           name: str = "run", solo: str = "solo") -> tuple[Any, dict[str, Any], list[dict[str, Any]], FakeServer]:
    with FakeServer(Judges(verdict, {q: len(c) for q, c in QA_CHECKS.items()}, "checks", "n", "why", "passed")) as srv:
        judges = ([f"judge=[{','.join(juror(srv.url, j) for j in jury)}]"] if jury else
                  ["judge=openai_compatible", f"judge.model=openai/{solo}", "judge.name=solo", f"judge.api_base={srv.url}",
                   "judge.api_key_env=FAKE_KEY"])
        out = tmp_path / name
        res = run_cli(["benchmark=reference_qa", "stage=score", f"answers={answers(tmp_path, list(QA_CHECKS), 'id')}",
                       "progress=plain", f"hydra.run.dir={out}", *judges, *args], env)
    if res.returncode != 0:
        return res, {}, [], srv
    summary = json.loads((out / "summary.json").read_text())
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    return res, summary, samples, srv


def qa_score(hits: Callable[[str, int], bool]) -> float:
    """reference_qa by hand: points of passed checks / positive points, clipped to [0, 1]; mean x 100."""
    scores = []
    for q, checks in QA_CHECKS.items():
        pos = sum(c["points"] for c in checks if c["points"] > 0)
        got = sum(c["points"] for i, c in enumerate(checks, 1) if hits(q, i))
        scores.append(min(1.0, max(0.0, got / pos)))
    return 100 * sum(scores) / len(scores)


def base(judge: str, q: str, i: int) -> bool:
    return (sum(map(ord, judge + q)) + 5 * i) % 3 == 0


def test_jury_majority_and_each_judges_own_scores(tmp_path: Path, env: dict[str, str]) -> None:
    names = ["ja", "jb", "jc"]
    res, summary, samples, srv = qa_run(tmp_path, env, lambda j, q, i, r: base(j, q, i), [], names)
    assert res.returncode == 0, res.stderr
    assert len(srv.requests) == 3 * len(QA_CHECKS)  # each judge once per reply

    def majority(q: str, i: int) -> bool:
        return sum(base(j, q, i) for j in names) >= 2

    assert summary["overall"] == pytest.approx(qa_score(majority), abs=1e-9)
    for j in names:
        assert summary["jury"]["judges"][j]["overall"] == pytest.approx(qa_score(lambda q, i: base(j, q, i)), abs=1e-9)
    assert summary["judge"]["name"] == "ja+jb+jc" and summary["jury"]["rule"] == "majority"
    first = samples[0]["criteria"][0]
    q = samples[0]["id"]
    assert first["votes"] == {j: [base(j, q, 1)] for j in names} and first["hit"] == majority(q, 1)
    alpha = summary["jury"]["alpha"]["overall"]["krippendorff_alpha"]
    assert alpha is not None and -1.0 <= alpha <= 1.0
    shown = " ".join((res.stdout + res.stderr).split())
    assert "jury (majority, ties not met)" in shown and f"ja {summary['jury']['judges']['ja']['overall']:.2f}" in shown
    # jury.rule=any: met when one judge says met
    res, summary, _, _ = qa_run(tmp_path, env, lambda j, q, i, r: base(j, q, i), ["jury.rule=any"], names, "any")
    assert res.returncode == 0, res.stderr
    assert summary["overall"] == pytest.approx(qa_score(lambda q, i: any(base(j, q, i) for j in names)), abs=1e-9)


def split(j: str, q: str, i: int, r: int) -> bool:
    """Two judges who disagree on every check: every vote is a tie."""
    return (j == "ja") == (i % 2 == 1)


@pytest.mark.parametrize("tie,expect", [(None, False), ("met", True)])
def test_tie_rule_for_an_even_jury(tmp_path: Path, env: dict[str, str], tie: str | None, expect: bool) -> None:
    args = [f"judge.tie={tie}"] if tie else []
    res, summary, _, _ = qa_run(tmp_path, env, split, args, ["ja", "jb"])
    assert res.returncode == 0, res.stderr
    assert summary["overall"] == pytest.approx(qa_score(lambda q, i: expect), abs=1e-9)
    assert summary["jury"]["tie"] == (tie or "not_met")


def test_tie_rule_for_an_even_number_of_repeats(tmp_path: Path, env: dict[str, str]) -> None:
    # one judge, K=2; the second grading says the opposite of the first on every check
    flip: Verdict = lambda j, q, i, r: base("x", q, i) != (r == 1)  # noqa: E731
    res, summary, samples, srv = qa_run(tmp_path, env, flip, ["judge.repeats=2", "judge.tie=met"])
    assert res.returncode == 0, res.stderr
    assert len(srv.requests) == 2 * len(QA_CHECKS)
    assert summary["overall"] == pytest.approx(qa_score(lambda q, i: True))  # a tie counts as met (penalties too)
    assert summary["noise"]["groups"]["overall"]["flip_rate"]["rate"] == 1.0
    assert all(len(c["votes"]["solo"]) == 2 for s in samples for c in s["criteria"])
    assert "judge noise over 2 gradings: 100.0% of verdicts flip" in " ".join((res.stdout + res.stderr).split())


def en_run(tmp_path: Path, env: dict[str, str], p: float, k: int, runs: int = 1):
    """K gradings of the English sample by a judge flipping each verdict with probability p; `runs` times
    the same command (same server, so the same cache keys)."""
    def verdict(j: str, q: str, i: int, r: int) -> bool:
        return base(j, q, i) != (random.Random(f"{q}|{i}|{r}").random() < p)

    summaries, requests = [], []
    with FakeServer(Judges(verdict, EN_ITEMS, "criteria", "id", "reasoning", "met")) as srv:
        for n in range(runs):
            out = tmp_path / f"en{n}"
            res = run_cli(["benchmark=heartbench_en", f"data.path={EN}", "stage=score",
                           f"answers={answers(tmp_path, list(EN_ITEMS), 'question_id')}", "progress=none",
                           f"hydra.run.dir={out}", "judge=openai_compatible", "judge.model=openai/solo",
                           "judge.name=solo", f"judge.api_base={srv.url}", "judge.api_key_env=FAKE_KEY",
                           f"judge.repeats={k}"], env)
            assert res.returncode == 0, res.stderr
            requests.append(len(srv.requests))
            summaries.append(json.loads((out / "summary.json").read_text()))
    flips = sum(len({verdict("solo", q, i, r) for r in range(k)}) > 1 for q, n in EN_ITEMS.items() for i in range(1, n + 1))
    return summaries, flips, requests


def test_flip_rate_matches_its_expectation(tmp_path: Path, env: dict[str, str]) -> None:
    p, k = 0.15, 3
    (summary, again), flips, (n, n2) = en_run(tmp_path, env, p, k, runs=2)
    assert n == k * len(EN_ITEMS)  # each repeat its own call
    fr = summary["noise"]["groups"]["overall"]["flip_rate"]
    units = sum(EN_ITEMS.values())
    assert fr["units"] == units and fr["rate"] == pytest.approx(flips / units)  # counted exactly
    expected = 1 - p ** k - (1 - p) ** k  # disagreement probability of K independent gradings
    assert fr["ci"][0] <= expected <= fr["ci"][1], (fr, expected)
    assert summary["noise"]["groups"]["overall"]["score_sd_across_repeats"] > 0
    assert n2 == n and again["noise"] == summary["noise"]  # the same command again: every repeat from the cache


def test_no_flips_no_noise(tmp_path: Path, env: dict[str, str]) -> None:
    (summary,), flips, _ = en_run(tmp_path, env, 0.0, 2)
    g = summary["noise"]["groups"]
    assert flips == 0 and g["overall"]["flip_rate"]["rate"] == 0.0
    assert g["overall"]["score_sd_across_repeats"] == 0.0 and g["overall"]["question_score_sd"] == 0.0
    assert all(v["flip_rate"]["rate"] in (0.0, None) for v in g.values())


def test_per_criterion_granularity_repeats(tmp_path: Path, env: dict[str, str]) -> None:
    """healthbench-style per-criterion judging: repeats x criteria calls, majority per criterion."""
    row = {"prompt": [{"role": "user", "content": "REPLY[h1] knee"}], "prompt_id": "h1", "example_tags": ["theme:x"],
           "rubrics": [{"criterion": f"CRIT#{i} point", "points": w, "tags": ["axis:a"]} for i, w in enumerate([3, 2, 5], 1)]}
    data = tmp_path / "hb.jsonl"
    data.write_text(json.dumps(row) + "\n")
    seen: dict[int, int] = {}

    def handler(body: dict[str, Any]) -> Reply:
        i = int(re.search(r"CRIT#(\d+)", json.dumps(body["messages"])).group(1))  # type: ignore[union-attr]
        r = seen.get(i, 0)
        seen[i] = r + 1
        return Reply(text=json.dumps({"explanation": "e", "criteria_met": [True, True, False][r] if i == 1 else i == 3}))

    with FakeServer(handler) as srv:
        out = tmp_path / "hb"
        res = run_cli(["benchmark=healthbench", f"data.path={data}", "stage=score",
                       f"answers={answers(tmp_path, ['h1'], 'prompt_id')}", "progress=none", f"hydra.run.dir={out}",
                       "judge=openai_compatible", "judge.model=openai/solo", "judge.name=solo",
                       f"judge.api_base={srv.url}", "judge.api_key_env=FAKE_KEY", "judge.repeats=3"], env)
        assert res.returncode == 0, res.stderr
        assert len(srv.requests) == 9
    s = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()][0]
    assert [c["hit"] for c in s["criteria"]] == [True, False, True]
    assert s["criteria"][0]["votes"]["solo"] == [True, True, False] or sorted(s["criteria"][0]["votes"]["solo"]) == [False, True, True]
    assert s["score"] == pytest.approx(8 / 10)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["noise"]["groups"]["overall"]["flip_rate"]["rate"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("args,message", [
    (["judge=[gpt-4.1]"], "a jury of one judge (gpt-4.1)"),
    (["judge.repeats=0"], "judge.repeats=0: must be a whole number >= 1"),
    (["jury.rule=most"], "jury.rule='most' is not a rule"),
])
def test_bad_input_is_one_line(tmp_path: Path, env: dict[str, str], args: list[str], message: str) -> None:
    res = run_cli(["benchmark=reference_qa", "stage=score", f"answers={answers(tmp_path, list(QA_CHECKS), 'id')}",
                   "progress=none", f"hydra.run.dir={tmp_path / 'bad'}", *args], env,
                  cwd=tmp_path)  # away from a checkout's ./benchmarks, which would print which spec was used first
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert message in lines[0] and len(lines) == 1, res.stderr


def test_dry_run_shows_the_multiplied_call_count(tmp_path: Path, env: dict[str, str]) -> None:
    url = "http://127.0.0.1:9"
    res = run_cli(["benchmark=reference_qa", "stage=score", f"answers={answers(tmp_path, list(QA_CHECKS), 'id')}",
                   "dry_run=true", f"hydra.run.dir={tmp_path / 'dry'}", "judge.repeats=3",
                   f"judge=[{juror(url, 'ja')},{juror(url, 'jb')},{juror(url, 'jc')}]"], env)
    assert res.returncode == 0, res.stderr
    out = " ".join((res.stdout + res.stderr).split())
    assert f"judge calls: {3 * 3 * len(QA_CHECKS)} in all (3 judge(s) x 3 repeat(s)" in out, out


@pytest.mark.parametrize("p", [0.0, 0.3])
def test_leaderboard_marks_gaps_within_judge_noise(tmp_path: Path, env: dict[str, str], p: float) -> None:
    """Two runs judged 3 times each (judges told apart by model name, so their scores differ); the gap is
    marked "within judge noise" exactly when the judge-noise-only interval of the difference (questions
    held, gradings resampled) includes 0; with p = 0 never (tests/stats/test_nested.py checks that interval
    against a hand-written resample)."""
    def verdict(j: str, q: str, i: int, r: int) -> bool:
        return base(j, q, i) != (random.Random(f"{j}|{q}|{i}|{r}").random() < p)

    runs = []
    for name in ("ja", "jb"):
        res, summary, _, _ = qa_run(tmp_path, env, verdict, ["judge.repeats=3"], name=name, solo=name)
        assert res.returncode == 0, res.stderr
        runs.append(summary)
    res = run_cli(["leaderboard", str(tmp_path / "ja"), str(tmp_path / "jb"), f"out={tmp_path / 'lb'}",
                   "bootstrap.samples=50"], env)
    assert res.returncode == 0, res.stderr
    lb = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())
    (pair,) = lb["pairs"]
    assert pair["diff"] == pytest.approx(abs(runs[0]["overall"] - runs[1]["overall"]), abs=1e-9) and pair["diff"] > 0
    assert pair["noise_lo"] <= pair["noise_hi"]
    assert pair["within_noise"] == (pair["noise_lo"] <= 0 <= pair["noise_hi"] and pair["noise_hi"] > pair["noise_lo"])
    if p == 0.0:  # no flip: re-grading cannot move the difference at all
        assert pair["noise"] == 0.0 and pair["noise_lo"] == pair["noise_hi"] == pytest.approx(pair["diff"])
        assert not pair["within_noise"]
    else:
        assert pair["within_noise"], pair  # the planted noise (p=0.3) is larger than this gap
    shown = {"console": " ".join(res.stdout.split()) + " ".join(res.stderr.split()),
             "md": (tmp_path / "lb" / "leaderboard.md").read_text(), "csv": (tmp_path / "lb" / "leaderboard.csv").read_text(),
             "html": (tmp_path / "lb" / "report.html").read_text()}
    for where, text in shown.items():
        assert ("within judge noise" in text) == pair["within_noise"], where
