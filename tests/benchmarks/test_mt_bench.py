"""MT-Bench through the real path, and its numbers against an independent restatement of FastChat's
show_result.py (single mode).

The fake server plays the candidate (each reply names its question and turn) and the judge (a random verdict
per question and turn: a `[[k]]` rating, a hedge with two ratings that is re-asked before a valid one, or
garbage every time, which fails after the re-asks: FastChat's -1). The restatement reads only what the server
sent: FastChat drops the -1 rows, then takes the mean per model over turn-1 rows, turn-2 rows and all rows.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, clean_env, model_args
from fakeserver import FakeServer, Reply

from conftest import REPO
MINI = REPO / "tests" / "data" / "mt_bench_mini.jsonl"
CATEGORIES = ["writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"]
ANSWER = re.compile(r"ANSWER (\d+) T(\d)")


def fastchat_single(judgments: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """show_result.py single mode, restated: drop score -1; per model, mean over turn 1, turn 2, all rows."""
    kept = [j for j in judgments if j["score"] != -1]
    out: dict[str, dict[str, float]] = {}
    for model in sorted({j["model"] for j in kept}):
        mine = [j for j in kept if j["model"] == model]
        for name, rows in (("first", [j for j in mine if j["turn"] == 1]), ("second", [j for j in mine if j["turn"] == 2]),
                           ("average", mine)):
            out.setdefault(model, {})[name] = sum(j["score"] for j in rows) / len(rows)
    return out


class MTServer:
    """Candidate: `ANSWER <id> T<k>`; judge: a seeded random verdict per (question, turn), recorded as sent."""

    def __init__(self, rows: list[dict[str, Any]], seed: int) -> None:
        self.rows, self.rng = rows, random.Random(seed)
        self.plan: dict[tuple[int, int], tuple[str, float]] = {}
        self.judge_prompts: dict[tuple[int, int], str] = {}

    def _kind(self, key: tuple[int, int]) -> tuple[str, float]:
        if key not in self.plan:
            r = self.rng.random()
            kind = "garbage" if r < 0.15 else "hedge" if r < 0.3 else "valid"
            self.plan[key] = (kind, self.rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 6.5]))
        return self.plan[key]

    def __call__(self, body: dict[str, Any]) -> Reply:
        msgs = body["messages"]
        if body["model"] != "judge":
            users = [m["content"] for m in msgs if m["role"] == "user"]
            qid = next(r["question_id"] for r in self.rows if users[-1] in r["turns"])
            return Reply(text=f"ANSWER {qid} T{len(users)}: here is my reply.")
        prompt = next(m["content"] for m in msgs if m["role"] == "user")
        pairs = [(int(a), int(b)) for a, b in ANSWER.findall(prompt)]
        qid, turn = pairs[-1][0], max(b for _, b in pairs)
        self.judge_prompts[(qid, turn)] = prompt
        kind, value = self._kind((qid, turn))
        reasked = len(msgs) > 2 and msgs[-2]["role"] == "assistant"
        if kind == "garbage":
            return Reply(text="The reply is fine, I think.")
        if kind == "hedge" and not reasked:
            return Reply(text=f"Somewhere between [[{value}]] and [[{value + 1 if value < 10 else value - 1}]].")
        return Reply(text=f"Explanation: the reply is judged. Rating: [[{value:g}]]")

    def judgments(self, model: str) -> list[dict[str, Any]]:
        return [{"model": model, "turn": t, "score": -1 if kind == "garbage" else v}
                for (q, t), (kind, v) in sorted(self.plan.items())]


def _rows(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        cat = rng.choice(CATEGORIES)
        row: dict[str, Any] = {"question_id": 1000 + i, "category": cat,
                               "turns": [f"Question {1000 + i}, first part ({cat})?", f"Question {1000 + i}, follow-up?"]}
        if cat in ("math", "reasoning", "coding"):
            row["reference"] = [f"REF {1000 + i} one", f"REF {1000 + i} two"]
        rows.append(row)
    return rows


def _run(tmp: Path, srv: FakeServer, data: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, "benchmark=mt_bench", f"data.path={data}", *model_args(srv.url, *extra),
                           f"hydra.run.dir={out}", "progress=plain"], env=clean_env(tmp), capture_output=True,
                          text=True, timeout=600, cwd=tmp)


@pytest.mark.parametrize("seed", [1, 2])
def test_turn_and_overall_means_equal_fastchat_show_result(tmp_path: Path, seed: int) -> None:
    rows = _rows(24, seed)
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    expected: dict[str, dict[str, float]] = {}
    for model in ("cand_a", "cand_b"):
        script = MTServer(rows, seed * 10 + len(model) + ord(model[-1]))
        with FakeServer(script) as srv:
            proc = _run(tmp_path, srv, data, tmp_path / model, model)
        assert proc.returncode == 0, proc.stderr[-2000:]
        ref = fastchat_single(script.judgments(model))[model]
        expected[model] = ref
        summary = json.loads((tmp_path / model / "summary.json").read_text())
        assert summary["turns"]["1"]["mean"] == pytest.approx(ref["first"], abs=1e-12)
        assert summary["turns"]["2"]["mean"] == pytest.approx(ref["second"], abs=1e-12)
        assert summary["overall"] == pytest.approx(ref["average"], abs=1e-12)
        failed = sum(1 for k, _ in script.plan.values() if k == "garbage")
        assert summary["counts"]["turn_errors"] == failed > 0
        assert summary["turns"]["1"]["errors"] + summary["turns"]["2"]["errors"] == failed
        # per category: the pooled mean over the category's valid judgments
        cat = {r["question_id"]: r["category"] for r in rows}
        for c, got in summary["scenarios"].items():
            vals = [v for (q, _), (k, v) in script.plan.items() if cat[q] == c and k != "garbage"]
            assert got == (pytest.approx(sum(vals) / len(vals)) if vals else None)
            assert summary["group_intervals"]["scenarios"][c]["lo"] <= got <= summary["group_intervals"]["scenarios"][c]["hi"]
        # turn 2's prompt shows the whole conversation; turn 1's stops at reply 1; math gets its references
        q = rows[0]["question_id"]
        assert f"ANSWER {q} T1" in script.judge_prompts[(q, 2)] and rows[0]["turns"][1] in script.judge_prompts[(q, 2)]
        assert f"ANSWER {q} T2" not in script.judge_prompts[(q, 1)]
        for r in rows:
            guided = f"REF {r['question_id']} one" in script.judge_prompts[(r["question_id"], 1)]
            assert guided == ("reference" in r)
    assert expected["cand_a"] != expected["cand_b"]
    lb = subprocess.run([EXE, "leaderboard", str(tmp_path / "cand_a"), str(tmp_path / "cand_b"), f"out={tmp_path / 'lb'}"],
                        env=clean_env(tmp_path), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert lb.returncode == 0, lb.stderr[-2000:]
    board = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())
    assert {r["label"]: r["overall"] for r in board["rows"]} == pytest.approx(
        {m: e["average"] for m, e in expected.items()})
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert "Turns" in md and "turn 1" in md and "Categories" in md
    page = (tmp_path / "lb" / "report.html").read_text()  # the heatmap heads the groups as the tables do
    assert "Categories" in page and "Scenarios" not in page
    assert "Scenarios" not in lb.stdout and "Scenarios" not in md
    res = subprocess.run([EXE, "rescore", str(tmp_path / "cand_a")], env=clean_env(tmp_path), capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    old = json.loads((tmp_path / "cand_a" / "summary.json").read_text())
    new = json.loads(next((tmp_path / "cand_a").glob("rescore-*/summary.json")).read_text())
    assert all(new[k] == old[k] for k in ("overall", "turns", "scenarios", "interval", "group_intervals", "counts"))


def test_mt_bench_runs_keyless_on_the_mini_sample(tmp_path: Path) -> None:
    proc = subprocess.run([EXE, "benchmark=mt_bench", f"data.path={MINI}", "candidate=mock", "judge=mock",
                           f"hydra.run.dir={tmp_path / 'r'}"], env=clean_env(tmp_path), capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert set(summary["turns"]) == {"1", "2"} and summary["counts"]["scored"] == 6
    assert summary["scale"] == {"min": 1.0, "max": 10.0, "scope": "each_turn"}
    samples = [json.loads(x) for x in (tmp_path / "r" / "samples.jsonl").read_text().splitlines()]
    assert all([t["turn"] for t in s["turns"]] == [1, 2] and s["weight"] == 2 for s in samples)
    assert "Turns (scale 1-10)" in proc.stdout and "Categories (scale 1-10)" in proc.stdout
    # the run's report.html: turn 1, turn 2 and the overall, each mean with its interval (summary.json `turns`)
    page = (tmp_path / "r" / "report.html").read_text()
    section = page.split("<h2>Turns</h2>", 1)[1].split("<h2>", 1)[0]
    for head in ("turn 1", "turn 2", "overall"):
        assert f">{head}<" in section, section
    for t in summary["turns"].values():
        assert f"{t['mean']:.2f} [{t['lo']:.2f}, {t['hi']:.2f}]" in section, section
    assert f"{summary['overall']:.2f} [" in section


def test_references_file_is_the_declared_source(tmp_path: Path) -> None:
    from rubric_engine.dataset.load import load_dataset
    from rubric_engine.spec.load import load_spec

    bench = tmp_path / "mtb"
    bench.mkdir()
    for f in (REPO / "benchmarks" / "mt_bench").iterdir():
        (bench / f.name).write_text(f.read_text())
    (bench / "q.jsonl").write_text(MINI.read_text())
    (bench / "refs.jsonl").write_text((REPO / "tests" / "data" / "mt_bench_mini_refs.jsonl").read_text())
    text = (bench / "benchmark.yaml").read_text()
    text = re.sub(r"  url: https://raw[^\n]*question.jsonl\n  sha256: [0-9a-f]+\n", "  path: q.jsonl\n", text)
    text = re.sub(r"    url: https://raw[^\n]*gpt-4.jsonl\n    sha256: [0-9a-f]+\n", "    path: refs.jsonl\n", text)
    (bench / "benchmark.yaml").write_text(text)
    ds = load_dataset(load_spec(bench), lazy=True)
    by_id = {q.id: q for q in ds.questions}
    assert by_id["902"].references == ("File reference: 80 km/h.", "File reference: 2 h 30 min.")  # the file wins
    assert by_id["905"].references == ("No, it does not follow.", "Bloops {a}, razzies {a, b}, lazzies {b}: no bloop is a lazzie.")
    assert by_id["901"].references == () and by_id["901"].reference == ""


def _chosen_turn_spec(tmp: Path, scope: str) -> Path:
    """The shipped mt_bench spec with `judge.scope` replaced by `scope` (YAML lines)."""
    bench = tmp / "chosen"
    bench.mkdir(exist_ok=True)
    for f in (REPO / "benchmarks" / "mt_bench").iterdir():
        (bench / f.name).write_text(f.read_text())
    text = (bench / "benchmark.yaml").read_text()
    assert "  scope: each_turn" in text
    (bench / "benchmark.yaml").write_text(text.replace("  scope: each_turn", scope))
    return bench


def test_a_chosen_turn_is_the_only_one_judged(tmp_path: Path) -> None:
    """judge.scope: turn, judge.turn: 2 on the fake server: one judge call per question, for turn 2 (the prompt
    showing the conversation through reply 2); the scores, turn table and validate line are turn 2's."""
    rows = _rows(6, 5)
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bench = _chosen_turn_spec(tmp_path, "  scope: turn\n  turn: 2")
    script = MTServer(rows, 3)
    with FakeServer(script) as srv:
        proc = subprocess.run([EXE, f"benchmark={bench}", f"data.path={data}", *model_args(srv.url, "cand"),
                               f"hydra.run.dir={tmp_path / 'r'}", "progress=plain"], env=clean_env(tmp_path),
                              capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set(script.judge_prompts) == {(r["question_id"], 2) for r in rows}
    q = rows[0]["question_id"]
    assert f"ANSWER {q} T1" in script.judge_prompts[(q, 2)]
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    valid = [v for (_, t), (k, v) in script.plan.items() if k != "garbage"]
    assert set(summary["turns"]) == {"2"} and summary["overall"] == pytest.approx(sum(valid) / len(valid), abs=1e-12)
    assert summary["scale"]["scope"] == "turn"
    samples = [json.loads(x) for x in (tmp_path / "r" / "samples.jsonl").read_text().splitlines()]
    assert all([t["turn"] for t in s["turns"]] == [2] for s in samples)
    val = subprocess.run([EXE, "validate", f"benchmark={bench}", f"data.path={data}"], env=clean_env(tmp_path),
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert val.returncode == 0 and "one judgment of candidate turn 2 (judge.scope turn)" in val.stdout, val.stdout


@pytest.mark.parametrize("scope, needle", [
    ("  scope: turn\n  turn: 3", "judge.turn is 3 but this row has 2 user turn(s)"),
    ("  scope: turn", "judge.turn: judge.scope: turn needs the candidate turn to grade"),
    ("  scope: each_turn\n  turn: 2", "judge.turn applies only to judge.scope: turn"),
])
def test_a_chosen_turn_beyond_the_rows_or_undeclared_is_one_line(tmp_path: Path, scope: str, needle: str) -> None:
    bench = _chosen_turn_spec(tmp_path, scope)
    proc = subprocess.run([EXE, "validate", f"benchmark={bench}", f"data.path={MINI}"], env=clean_env(tmp_path),
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rubric-engine: error:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert needle in lines[0], lines[0]
    assert ("mt_bench_mini.jsonl:1" if "row" in needle else "benchmark.yaml") in lines[0], lines[0]
