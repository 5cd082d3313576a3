"""HealthBench as a spec: its numbers equal a plain restatement of the published grading, end to end too.

The sample below is handmade for this project in HealthBench's row shape (prompt messages, rubrics with
criterion / points / tags, example_tags, prompt_id); no HealthBench text is copied. The restatement
(`restated`) is written out here from the published description of simple-evals' healthbench_eval.py:
calculate_score = sum(points of met criteria) / sum(positive points) (None without positive points);
each example contributes its score to "overall" and to each of its example tags, and its per-tag score
(over the criteria carrying that tag, when defined) to each rubric tag; every metric is the mean of its
values clipped to [0, 1].
"""

from __future__ import annotations

import json
import random
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.dataset.load import parse_rows
from rubric_engine.scoring.aggregate import aggregate, breakdowns, scored_question
from rubric_engine.scoring.question import score_question
from rubric_engine.spec.load import load_spec
from rubric_engine.stats.bootstrap import bootstrap_stats

from conftest import REPO
from conftest import EXE  # the console script of the environment under test, never another on PATH
AXES = ["axis:accuracy", "axis:completeness", "axis:communication_quality", "axis:context_awareness",
        "axis:instruction_following"]
THEMES = ["theme:emergency_referrals", "theme:hedging", "theme:global_health", "theme:context_seeking"]
TOPICS = ["a sprained ankle", "a child's fever", "sleep trouble", "a new blood-pressure pill", "seasonal allergies",
          "a burn from a pan", "back pain after lifting", "a missed vaccine dose"]


def make_rows(seed: int = 7, n: int = 14) -> list[dict[str, Any]]:
    """Rows in HealthBench's shape, written for this test: 1-3 turns, 2-8 criteria, points -10..10."""
    rng = random.Random(seed)
    rows = []
    for k in range(n):
        topic = rng.choice(TOPICS)
        prompt = [{"role": "user", "content": f"I have a question about {topic}. What should I do? (case {k})"}]
        if k % 3 == 0:
            prompt = [{"role": "system", "content": "You are a careful health assistant."}] + prompt
        if k % 4 == 1:
            prompt += [{"role": "assistant", "content": "Can you tell me how long this has been going on?"},
                       {"role": "user", "content": f"About {k + 1} days, case {k}."}]
        rubrics = []
        for i in range(rng.randint(2, 8)):
            points = rng.choice([-10, -8, -5, -3, -2, -1, 1, 2, 3, 5, 7, 9, 10])
            tags = ["level:example", rng.choice(AXES)]
            rubrics.append({"criterion": f"CRIT[{k}#{i + 1}] The reply covers point {i + 1} about {topic}.",
                            "points": points, "tags": tags})
        if not any(r["points"] > 0 for r in rubrics):
            rubrics[0]["points"] = 4
        themes = rng.sample(THEMES, rng.randint(1, 2))
        rows.append({"prompt": prompt, "completion": None, "rubrics": rubrics,
                     "example_tags": themes + [f"physician_agreed_category:cat{k % 2}"],
                     "ideal_completions_data": None, "prompt_id": f"p{k:03d}-{seed}"})
    return rows


# --------------------------------------------------------------------------- the restatement (plain code)

def calculate_score(items: list[dict[str, Any]], met: list[bool]) -> float | None:
    possible = sum(it["points"] for it in items if it["points"] > 0)
    if possible == 0:
        return None
    return sum(it["points"] for it, m in zip(items, met) if m) / possible


def restated(rows: list[dict[str, Any]], verdicts: dict[str, list[bool]]) -> dict[str, float]:
    values: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        met = verdicts[row["prompt_id"]]
        overall = calculate_score(row["rubrics"], met)
        assert overall is not None
        values["overall_score"].append(overall)
        for tag in row["example_tags"]:
            values[tag].append(overall)
        by_tag: dict[str, list[tuple[dict[str, Any], bool]]] = defaultdict(list)
        for item, m in zip(row["rubrics"], met):
            for tag in item["tags"]:
                by_tag[tag].append((item, m))
        for tag, pairs in by_tag.items():
            s = calculate_score([p[0] for p in pairs], [p[1] for p in pairs])
            if s is not None:
                values[tag].append(s)
    return {name: min(1.0, max(0.0, sum(v) / len(v))) for name, v in values.items()}


# --------------------------------------------------------------------------------------- the engine

def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hb_spec():
    return load_spec(REPO / "benchmarks" / "healthbench")


def engine_scores(spec, questions, verdicts: dict[str, list[bool]]) -> dict[str, Any]:
    how = spec.aggregation_rule()
    scored = []
    for q in questions:
        qs = score_question(q.criteria, verdicts[q.id], spec.formula(), spec.scoring.params, spec.failure_rules, how)
        scored.append(scored_question(q, qs))
    summary = aggregate(scored, spec.dimensions_map(), scale=spec.scoring.scale, how=how)
    summary["breakdowns"] = breakdowns(scored, spec.declared_breakdowns(), spec.dimensions_map(), how)
    return summary


@pytest.mark.parametrize("seed", range(8))
def test_scores_equal_the_published_grading(tmp_path: Path, hb_spec, seed: int) -> None:
    rows = make_rows(seed=seed)
    questions = parse_rows(hb_spec, write_jsonl(tmp_path / "hb.jsonl", rows))
    rng = random.Random(100 + seed)
    p = rng.choice([0.2, 0.5, 0.8])  # low p drives some examples below zero: the clip must act only at the end
    verdicts = {r["prompt_id"]: [rng.random() < p for _ in r["rubrics"]] for r in rows}
    want = restated(rows, verdicts)
    got = engine_scores(hb_spec, questions, verdicts)
    assert got["overall"] == pytest.approx(100 * want["overall_score"], abs=1e-9)
    axes, themes = got["breakdowns"]["axes"], got["breakdowns"]["themes"]
    assert set(axes) == {t for t in want if t.startswith("axis:")}
    assert set(themes) == {t for t in want if t.startswith("theme:")}
    for tag, value in {**axes, **themes}.items():
        assert value == pytest.approx(100 * want[tag], abs=1e-9), tag


def test_clipping_happens_only_at_the_end(tmp_path: Path, hb_spec) -> None:
    """Two examples below zero: a per-example clip would give a higher overall than the published mean."""
    rows = [{"prompt": [{"role": "user", "content": f"q{k}"}], "prompt_id": f"x{k}", "example_tags": [],
             "rubrics": [{"criterion": "good", "points": 5, "tags": []}, {"criterion": "bad", "points": -9, "tags": []}]}
            for k in range(3)]
    questions = parse_rows(hb_spec, write_jsonl(tmp_path / "x.jsonl", rows))
    verdicts = {"x0": [True, False], "x1": [False, True], "x2": [True, True]}  # 1.0, -1.8, -0.8
    got = engine_scores(hb_spec, questions, verdicts)
    assert got["overall"] == pytest.approx(0.0)  # mean(1, -1.8, -0.8) = -0.53 -> clipped to 0
    verdicts["x0"] = [True, False]
    verdicts["x2"] = [True, False]  # 1, -1.8, 1 -> mean 0.0667
    assert engine_scores(hb_spec, questions, verdicts)["overall"] == pytest.approx(100 * 0.2 / 3)


def test_bootstrap_std_of_the_clipped_mean(tmp_path: Path, hb_spec) -> None:
    rows = make_rows(seed=3, n=30)
    questions = parse_rows(hb_spec, write_jsonl(tmp_path / "hb.jsonl", rows))
    rng = random.Random(5)
    how = hb_spec.aggregation_rule()
    scored = [scored_question(q, score_question(q.criteria, [rng.random() < 0.5 for _ in q.criteria],
                                                hb_spec.formula(), {}, [], how)) for q in questions]
    stats = bootstrap_stats(scored, {}, n=400, seed=1, how=how)
    values = [s.score for s in scored]
    # textbook check of the resampling: same draws, plain code
    draw_rng = random.Random(1)
    means = []
    for _ in range(400):
        draw = draw_rng.choices(range(len(values)), k=len(values))
        means.append(100 * min(1.0, max(0.0, sum(values[i] for i in draw) / len(draw))))
    mu = sum(means) / len(means)
    assert stats["std"] == pytest.approx((sum((m - mu) ** 2 for m in means) / len(means)) ** 0.5, rel=1e-9)
    assert stats["lo"] <= stats["point"] <= stats["hi"]


# ------------------------------------------------------------------------ end to end, per-criterion judge

def judge_met(pid: str, i: int) -> bool:
    return (sum(map(ord, pid)) + 7 * i) % 3 == 0


class Script:
    """Candidate replies name their prompt id; the judge answers one criterion per request."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.by_case = {r["prompt"][-1]["content"].split("case ")[-1].rstrip(".)"): r["prompt_id"] for r in rows}

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        if body["model"] == "judge":
            import re
            k, i = re.search(r"CRIT\[(\d+)#(\d+)\]", text).groups()  # type: ignore[union-attr]
            pid = re.search(r"REPLY\[([\w-]+)\]", text).group(1)  # type: ignore[union-attr]
            return Reply(text=json.dumps({"explanation": f"criterion {i}", "criteria_met": judge_met(pid, int(i))}))
        case = body["messages"][-1]["content"].split("case ")[-1].rstrip(".)")
        return Reply(text=f"REPLY[{self.by_case[case]}] Please see a clinician if it gets worse.")


def model_args(url: str) -> list[str]:
    return ["candidate=openai_compatible", "candidate.model=openai/cand", f"candidate.api_base={url}",
            "candidate.name=cand", "candidate.api_key_env=FAKE_KEY",
            "judge=openai_compatible", "judge.model=openai/judge", f"judge.api_base={url}",
            "judge.name=judge", "judge.api_key_env=FAKE_KEY"]


def test_console_run_per_criterion(tmp_path: Path, env: dict[str, str]) -> None:
    rows = make_rows(seed=11, n=8)
    data = write_jsonl(tmp_path / "hb.jsonl", rows)
    n_criteria = sum(len(r["rubrics"]) for r in rows)
    with FakeServer(Script(rows)) as srv:
        res = subprocess.run([EXE, "benchmark=healthbench", f"data.path={data}", "progress=none",
                              f"hydra.run.dir={tmp_path / 'run'}", *model_args(srv.url)],
                             env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        judge_calls = [b for b in srv.requests if b["model"] == "judge"]
        assert len(judge_calls) == n_criteria  # one request per criterion, no re-asks
        assert len(srv.requests) == n_criteria + len(rows)
        assert all(b["messages"][0]["role"] == "system" for b in srv.requests
                   if b["model"] == "cand" and "careful" in json.dumps(b["messages"]))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    verdicts = {r["prompt_id"]: [judge_met(r["prompt_id"], i) for i in range(1, len(r["rubrics"]) + 1)] for r in rows}
    want = restated(rows, verdicts)
    assert summary["overall"] == pytest.approx(100 * want["overall_score"], abs=1e-9)
    for tag, value in {**summary["breakdowns"]["axes"], **summary["breakdowns"]["themes"]}.items():
        assert value == pytest.approx(100 * want[tag], abs=1e-9), tag
    assert summary["data_trust"] == "local" and len(summary["data_sha256"]) == 64
    assert summary["interval"]["lo"] <= summary["overall"] <= summary["interval"]["hi"]
    sample = json.loads((tmp_path / "run" / "samples.jsonl").read_text().splitlines()[0])
    assert sample["tags"] == rows[0]["example_tags"]
    assert sample["criteria"][0]["reasoning"] == "criterion 1" and "tags" in sample["criteria"][0]
    assert "Catastr" not in res.stdout + res.stderr and "catastrophic" not in res.stdout + res.stderr
    # reports follow the spec's breakdowns: a radar over the 5 axes, no subset chart, no catastrophic column
    lb = subprocess.run([EXE, "leaderboard", str(tmp_path / "run"), f"out={tmp_path / 'lb'}", "bootstrap.samples=50"],
                        env=env, capture_output=True, text=True, timeout=300)
    assert lb.returncode == 0, lb.stderr
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert "## Axes" in md and "## Themes" in md and "Catastr." not in md and "Dimensions" not in md
    assert "differs" not in md  # the leaderboard's recomputation from samples.jsonl agrees with summary.json
    assert (tmp_path / "lb" / "radar.png").is_file() and not (tmp_path / "lb" / "subsets.png").exists()
    html = (tmp_path / "lb" / "report.html").read_text()
    assert "Catastrophic" not in html and "<h2>Subsets</h2>" not in html and "<h2>Axes</h2>" in html


@pytest.mark.parametrize("name, file", [("healthbench", "2025-05-07-06-14-12_oss_eval.jsonl"),
                                        ("healthbench_hard", "hard_2025-05-08-21-00-10.jsonl"),
                                        ("healthbench_consensus", "consensus_2025-05-09-20-00-46.jsonl")])
def test_shipped_variants_pin_openai_files_by_url(name: str, file: str) -> None:
    spec = load_spec(REPO / "benchmarks" / name)
    assert spec.data.url == f"https://openaipublic.blob.core.windows.net/simple-evals/healthbench/{file}"
    assert spec.data.sha256 is None  # nothing published to pin: trusted on first use
    assert spec.judge.verdict.granularity == "per_criterion" and spec.aggregation.clip == "group"
    assert [b.id for b in spec.report.breakdowns] == ["axes", "themes"]
