"""Pairwise comparison (judge.verdict.kind: pairwise) through the console script, keyless with the mock models,
and its bad inputs: one line each naming the key or the file.

The mini sample (tests/data/pairwise_mini.jsonl, six prompts in two categories) and its baseline answers are
written for this project: `pairwise_mini_baseline.jsonl` in the engine's answers format for
`baseline.answers=FILE`, and tests/data/pairwise_mini_spec/ (the shipped arena_hard spec with local answer
files in Arena-Hard's `{uid, model, messages}` layout, one per category).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.scoring.pairwise import game_scores, label_problem, label_value, question_value, read_label
from fakeserver import FakeServer, Reply
from test_cli import run_cli

from conftest import DATA
MINI = DATA / "pairwise_mini.jsonl"
MINI_BASE = DATA / "pairwise_mini_baseline.jsonl"
MINI_SPEC = DATA / "pairwise_mini_spec"
PATTERNS = [r"\[\[([AB<>=]+)\]\]", r"\[([AB<>=]+)\]"]
LABELS = ["A>>B", "A>B", "A=B", "B>A", "B>>A"]


def _arena_score(label: str, game: int, w: int = 3) -> list[float]:
    """Arena-Hard's label_to_score restated: game 2 (A = model) as given, game 1 (A = baseline) mapped 1 - s."""
    table = {"A>B": [1.0], "A>>B": [1.0] * w, "A=B": [0.5], "B>A": [0.0], "B>>A": [0.0] * w}
    scores = table[label]
    return scores if game == 2 else [1 - s for s in scores]


def read_run(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return (json.loads((out / "summary.json").read_text()),
            [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()])


def mini_run(out: Path, env: dict[str, str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The mini spec (per-category answer files) keyless with mock models, into `out`."""
    res = run_cli([f"benchmark={MINI_SPEC}", f"data.path={MINI}", "candidate=mock", "judge=mock", "progress=none",
                   f"hydra.run.dir={out}"], env)
    assert res.returncode == 0, res.stderr
    return read_run(out)


# -- labels and scores ------------------------------------------------------------------------------------

@pytest.mark.parametrize("label", LABELS)
def test_each_label_scores_as_arena_hard_in_both_orders(label: str) -> None:
    for game, order in ((1, "baseline_first"), (2, "candidate_first")):
        exploded = _arena_score(label, game)
        got = game_scores(label, order, 3)
        assert got.weight == len(exploded) and all(s == got.score for s in exploded)


def test_mirrored_spellings_mean_the_same() -> None:
    assert label_value("A<B") == label_value("B>A") and label_value("B<<A") == label_value("A>>B")
    assert label_value("B=A") == label_value("A=B") == (0.5, False)
    with pytest.raises(ValueError):
        label_value("A>A")


def test_question_value_is_the_mean_of_the_exploded_scores() -> None:
    score, weight = question_value([("baseline_first", "B>>A"), ("candidate_first", "A=B")], 3)
    exploded = _arena_score("B>>A", 1) + _arena_score("A=B", 2)
    assert weight == len(exploded) == 4 and score == pytest.approx(sum(exploded) / len(exploded))


def test_read_label_first_pattern_decides_and_ambiguity_is_refused() -> None:
    assert read_label("thinking ... My final verdict is [[B>A]]", PATTERNS, LABELS) == "B>A"
    assert read_label("verdict: [A=B]", PATTERNS, LABELS) == "A=B"  # the fallback pattern
    assert read_label("[[A>B]] and again [[A>B]]", PATTERNS, LABELS) == "A>B"
    with pytest.raises(ValueError, match="several different verdicts"):
        read_label("[[A>B]] no, [[B>A]]", PATTERNS, LABELS)
    with pytest.raises(ValueError, match="not one of the allowed"):
        read_label("[[A<B]]", PATTERNS, LABELS)  # a mirrored spelling the spec did not declare
    with pytest.raises(ValueError, match="no verdict found"):
        read_label("B is better", PATTERNS, LABELS)


def test_label_problems() -> None:
    assert label_problem(LABELS, PATTERNS, 3) is None
    assert label_problem(["A much better", "A=B"], PATTERNS, 3)[0] == "labels"  # type: ignore[index]
    assert label_problem(["A>B", "B>A"], [r"\[\[(\d+)\]\]"], 3)[0] == "labels"  # type: ignore[index]
    assert label_problem(LABELS, [r"\[\[[AB]\]\]"], 3)[0] == "pattern"  # type: ignore[index]
    # spec patterns run under RE2 (linear time): a look-ahead, which only a backtracking engine has, is refused
    problem = label_problem(LABELS, [r"\[\[([AB<>=]+)(?=\]\])"], 3)
    assert problem is not None and problem[0] == "pattern" and "RE2" in problem[1], problem


def test_a_hostile_label_pattern_reads_a_long_reply_in_linear_time() -> None:
    """(a+)+$ backtracks exponentially in Python's re on 'aaa...b'; under RE2 the read simply finds no label."""
    with pytest.raises(ValueError, match="no verdict found"):
        read_label("a" * 5000 + "b", [r"((a+)+$)"], ["A>B", "B>A"])


# -- runs -------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_mini_spec_runs_keyless_with_per_category_answer_files(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "run"
    summary, samples = mini_run(out, env)
    assert [s["baseline_response"].split()[0] for s in samples] == ["base-hard"] * 4 + ["base-creative"] * 2
    exploded: dict[str, list[float]] = {}
    for s in samples:  # the restatement: every game's exploded scores, pooled
        assert [g["order"] for g in s["games"]] == ["baseline_first", "candidate_first"]
        rows = _arena_score(s["games"][0]["label"], 1) + _arena_score(s["games"][1]["label"], 2)
        exploded.setdefault(s["subset"], []).extend(rows)
        assert s["weight"] == len(rows) and s["score"] == pytest.approx(sum(rows) / len(rows))
    every = [x for rows in exploded.values() for x in rows]
    assert summary["overall"] == pytest.approx(100 * sum(every) / len(every))
    for cat, rows in exploded.items():
        assert summary["subsets"][cat] == pytest.approx(100 * sum(rows) / len(rows))
    p = summary["pairwise"]
    assert p["baseline"]["answers"] == {"hard_prompt": "base-hard", "creative_writing": "base-creative"}
    assert sum(p["games"].values()) == 12 and summary["counts"]["scored"] == 6
    [paths] = summary["verdict_paths"].values()  # each game's label: how it was obtained (one judge)
    assert sum(paths.values()) == 12
    assert summary["interval"]["lo"] <= summary["overall"] <= summary["interval"]["hi"]
    page = (out / "report.html").read_text()
    # each question's games table (the drill-down's transcripts name the order of each judge call too)
    assert page.count("Baseline reply:") == 6 and len(re.findall(r">candidate_first</td>", page)) == 6


@pytest.mark.slow
def test_baseline_model_is_called_once_per_question_and_cached(tmp_path: Path, env: dict[str, str]) -> None:
    """An ad-hoc LiteLLM id as the baseline, on the fake server: one request per question, none on a re-run."""
    with FakeServer(lambda body: Reply(text="BASELINE says: " + str(body["messages"][-1]["content"])[:20])) as srv:
        args = ["benchmark=arena_hard", f"data.path={MINI}", "candidate=mock", "judge=mock", "baseline=openai/base-x",
                f"baseline.api_base={srv.url}", "baseline.api_key_env=FAKE_KEY", "progress=none",
                f"cache.dir={tmp_path / 'cache'}"]
        res = run_cli([*args, f"hydra.run.dir={tmp_path / 'a'}"], env)
        assert res.returncode == 0, res.stderr
        assert len(srv.requests) == 6 and all(r["model"] == "base-x" for r in srv.requests)
        summary, samples = read_run(tmp_path / "a")
        assert summary["calls"]["baseline"] == {"made": 6, "cache_hits": 0, "retries": 0}
        assert summary["pairwise"]["baseline"] == {"name": "openai/base-x", "model": "openai/base-x"}
        assert summary["tokens"]["baseline"] == {"prompt": 60, "completion": 30}
        assert all(s["baseline_response"].startswith("BASELINE says") and s["cache_hits"]["baseline"] == 0
                   for s in samples)
        again = run_cli([*args, f"hydra.run.dir={tmp_path / 'b'}"], env)  # a second run pays for nothing
        assert again.returncode == 0, again.stderr
        assert len(srv.requests) == 6
    summary2, samples2 = read_run(tmp_path / "b")
    assert summary2["calls"]["baseline"] == {"made": 0, "cache_hits": 6, "retries": 0}
    assert summary2["overall"] == summary["overall"] and all(s["cache_hits"]["baseline"] == 1 for s in samples2)


@pytest.mark.slow
def test_baseline_answers_file_on_the_command_line(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "run"
    res = run_cli(["benchmark=arena_hard", f"data.path={MINI}", "candidate=mock", "judge=mock",
                   f"baseline.answers={MINI_BASE}", "progress=none", f"hydra.run.dir={out}"], env)
    assert res.returncode == 0, res.stderr
    summary, samples = read_run(out)
    assert all(s["baseline_response"].startswith("A baseline reply written") for s in samples)
    assert summary["pairwise"]["baseline"]["name"] == "pairwise_mini_baseline"
    assert "baseline" not in summary["calls"]


# -- bad input --------------------------------------------------------------------------------------------

def _spec(tmp_path: Path, extra: str) -> Path:
    d = tmp_path / "spec"
    d.mkdir()
    (d / "benchmark.yaml").write_text(f"name: pw_bad\nextends: {MINI_SPEC}\n{extra}")
    return d


def _one_line(res: Any) -> str:
    assert res.returncode == 2, res.stderr  # a config / spec / data error (docs/cli.md: exit codes)
    lines = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: error:")]
    assert "Traceback (most recent" not in res.stderr and len(lines) == 1, res.stderr
    return lines[0]


@pytest.mark.slow
def test_no_baseline_anywhere(tmp_path: Path, env: dict[str, str]) -> None:
    spec = _spec(tmp_path, "baseline: null\n")
    line = _one_line(run_cli([f"benchmark={spec}", f"data.path={MINI}", "candidate=mock", "judge=mock",
                              f"hydra.run.dir={tmp_path / 'out'}"], env))
    assert "needs a baseline" in line and "baseline=ENTRY" in line and "baseline.answers=FILE" in line


@pytest.mark.slow
def test_baseline_answers_missing_questions(tmp_path: Path, env: dict[str, str]) -> None:
    short = tmp_path / "short.jsonl"
    short.write_text("".join(x + "\n" for x in MINI_BASE.read_text().splitlines()[1:-1]))
    line = _one_line(run_cli(["benchmark=arena_hard", f"data.path={MINI}", "candidate=mock", "judge=mock",
                              f"baseline.answers={short}", f"hydra.run.dir={tmp_path / 'out'}"], env))
    assert str(short) in line and "pw-h1" in line and "pw-c2" in line and "2 of 6" in line
    assert not (tmp_path / "out" / "samples.jsonl").exists()  # refused before any call


@pytest.mark.slow
def test_labels_the_pattern_cannot_produce(tmp_path: Path, env: dict[str, str]) -> None:
    spec = _spec(tmp_path, "judge:\n  verdict:\n    labels: ['A>B', 'A=B', 'A much better']\n")
    line = _one_line(run_cli(["validate", f"benchmark={spec}"], env))
    assert "judge.verdict.labels" in line and "A much better" in line


@pytest.mark.slow
def test_strong_weight_below_one(tmp_path: Path, env: dict[str, str]) -> None:
    spec = _spec(tmp_path, "judge:\n  verdict:\n    strong_weight: 0.5\n")
    line = _one_line(run_cli(["validate", f"benchmark={spec}"], env))
    assert "judge.verdict.strong_weight" in line and "0.5" in line


@pytest.mark.slow
def test_baseline_on_a_criteria_benchmark(tmp_path: Path, env: dict[str, str]) -> None:
    line = _one_line(run_cli(["benchmark=reference_qa", "candidate=mock", "judge=mock", "baseline=mock",
                              f"hydra.run.dir={tmp_path / 'out'}"], env))
    assert "not pairwise" in line


@pytest.mark.slow
def test_validate_and_dry_run_show_the_baseline_and_count_two_games(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli(["validate", "benchmark=arena_hard", f"data.path={MINI}"], env)
    assert res.returncode == 0, res.stderr
    assert "baseline answers per subset: hard_prompt: o3-mini-2025-01-31" in res.stdout.replace("\n", " ")
    scoring = res.stdout.replace("\n", " ").split("scoring: ", 1)[1]  # what the spec does, not a criteria formula
    assert scoring.startswith("pairwise labels A>>B, A>B, A=B, B>A, B>>A; a game scores the candidate 1 (win), "
                              "0.5 (tie) or 0 (loss), a strong label (A>>B, B>>A) counted 3x; both orders judged "
                              "(position swap)"), scoring
    assert "win rate against the baseline (ties as half), pooled over every counted game score" in scoring
    assert "log_normalised" not in res.stdout and "no positive points" not in res.stdout
    res = run_cli(["benchmark=arena_hard", f"data.path={MINI}", "candidate=mock", "baseline=mock", "dry_run=true",
                   f"hydra.run.dir={tmp_path / 'out'}"], env)
    assert res.returncode == 0, res.stderr
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip() for line in res.stdout.splitlines()
            if line.startswith("│") and line.split("│")[1].strip() in ("candidate", "judge", "baseline")}
    assert rows == {"candidate": "6", "judge": "12", "baseline": "6"}


@pytest.mark.slow
def test_another_baseline_into_the_same_directory_is_refused(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "run"
    first = ["benchmark=arena_hard", f"data.path={MINI}", "candidate=mock", "judge=mock", "progress=none",
             f"hydra.run.dir={out}"]
    assert run_cli([*first, f"baseline.answers={MINI_BASE}"], env).returncode == 0
    res = run_cli([*first, "baseline=mock"], env)
    assert res.returncode == 2 and "holds another run (differs in: baseline)" in res.stderr, res.stderr


@pytest.mark.slow
def test_killed_pairwise_run_resumes_without_asking_finished_questions_again(tmp_path: Path,
                                                                           env: dict[str, str]) -> None:
    """kill -9 mid-run, the same command again: the questions in the journal get no request (baseline or judge),
    and the scores equal an uninterrupted run's."""
    from conftest import EXE, kill_after_lines

    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"uid": f"k{i:02d}", "category": "hard_prompt", "subcategory": "s",
                                        "prompt": f"PROMPT[k{i:02d}]"}) + "\n" for i in range(12)))

    def reply(body: dict[str, Any]) -> Reply:
        text = json.dumps(body["messages"])
        if body["model"] == "base-x":
            return Reply(text="the baseline's reply", delay=0.15)
        return Reply(text=f"verdict [[{LABELS[len(text) % 5]}]]", delay=0.15)

    with FakeServer(reply) as srv:
        def args(out: Path) -> list[str]:
            return ["benchmark=arena_hard", f"data.path={data}", "candidate=mock", "baseline=openai/base-x",
                    f"baseline.api_base={srv.url}", "baseline.api_key_env=FAKE_KEY", "judge=openai_compatible",
                    "judge.model=openai/judge-x", f"judge.api_base={srv.url}", "judge.api_key_env=FAKE_KEY",
                    "concurrency=1", "progress=none", f"hydra.run.dir={out}"]
        ref = tmp_path / "ref"
        assert run_cli(args(ref), dict(env, RUBRIC_ENGINE_CACHE=str(tmp_path / "refcache"))).returncode == 0
        srv.reset()
        run = tmp_path / "run"
        done = {r["id"] for r in kill_after_lines([EXE, *args(run)], run / "samples.jsonl", 4, env)[1:]}
        assert 3 <= len(done) < 12, "the kill must land midway"
        srv.reset()
        res = run_cli(args(run), env)
        assert res.returncode == 0, res.stderr
        asked = {m for b in srv.requests for m in re.findall(r"PROMPT\[(k\d+)\]", json.dumps(b["messages"]))}
    assert not asked & done and asked <= {f"k{i:02d}" for i in range(12)}
    a, b = read_run(ref)[0], read_run(run)[0]
    assert (a["overall"], a["subsets"], a["counts"]) == (b["overall"], b["subsets"], b["counts"])


@pytest.mark.slow
def test_baseline_key_is_checked_before_any_call(tmp_path: Path, env: dict[str, str]) -> None:
    env = {k: v for k, v in env.items() if k != "OPENAI_API_KEY"}
    line = _one_line(run_cli(["benchmark=arena_hard", f"data.path={MINI}", "candidate=mock", "judge=mock",
                              "baseline=openai/gpt-4o", f"hydra.run.dir={tmp_path / 'out'}"], env))
    assert "OPENAI_API_KEY" in line and "openai/gpt-4o" in line
    assert line.startswith("rubric-engine: error: baseline ") and "baseline.api_key_env=<VAR>" in line, line  # role, override
    assert not (tmp_path / "out" / "samples.jsonl").exists()


@pytest.mark.slow
def test_generate_then_score_from_run(tmp_path: Path, env: dict[str, str]) -> None:
    """stage=generate needs no baseline; stage=score from_run= compares the stored answers with it."""
    gen, score = tmp_path / "gen", tmp_path / "score"
    res = run_cli(["benchmark=arena_hard", f"data.path={MINI}", "candidate=mock", "stage=generate", "progress=none",
                   f"hydra.run.dir={gen}"], env)
    assert res.returncode == 0, res.stderr
    res = run_cli(["benchmark=arena_hard", f"data.path={MINI}", "judge=mock", "stage=score", f"from_run={gen}",
                   f"baseline.answers={MINI_BASE}", "progress=none", f"hydra.run.dir={score}"], env)
    assert res.returncode == 0, res.stderr
    summary, samples = read_run(score)
    assert summary["counts"]["scored"] == 6 and all(s["response"].startswith("[mock]") for s in samples)


@pytest.mark.slow
def test_rescore_recomputes_scores_from_the_stored_labels(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "run"
    summary, samples = mini_run(out, env)
    lines = [dict(s, score=0.0, weight=1) for s in samples]  # scores that do not follow from the labels
    (out / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in lines))
    res = run_cli(["rescore", str(out), f"out={tmp_path / 're'}"], env)
    assert res.returncode == 0, res.stderr
    again = json.loads((tmp_path / "re" / "summary.json").read_text())
    assert again["overall"] == pytest.approx(summary["overall"]) and again["subsets"] == pytest.approx(summary["subsets"])


@pytest.mark.slow
def test_leaderboard_totals_count_the_called_baseline(tmp_path: Path, env: dict[str, str]) -> None:
    """Every role priced on the fake server (models LiteLLM has prices for): the leaderboard's cost and tokens
    hold the baseline's part, and the total is the sum over candidate, judge and baseline."""
    models = {"candidate": "openai/gpt-4o-mini", "judge": "openai/gpt-4.1-mini", "baseline": "openai/gpt-4o"}
    out = tmp_path / "run"
    with FakeServer(lambda body: Reply(text="verdict [[B>A]]" if body["model"] == "gpt-4.1-mini" else "a reply")) as srv:
        res = run_cli(["benchmark=arena_hard", f"data.path={MINI}", "candidate=openai_compatible",
                       "judge=openai_compatible", f"baseline={models['baseline']}",
                       *(f"{r}.{k}" for r, m in models.items() for k in
                         (f"model={m}", f"api_base={srv.url}", "api_key_env=FAKE_KEY")),
                       "progress=none", f"hydra.run.dir={out}"], env)
        assert res.returncode == 0, res.stderr
    summary, _ = read_run(out)
    cost = summary["cost"]
    assert all(isinstance(cost[r], float) and cost[r] > 0 for r in models), cost
    res = run_cli(["leaderboard", str(out), f"out={tmp_path / 'lb'}"], env)
    assert res.returncode == 0, res.stderr
    row = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())["rows"][0]
    assert row["cost"]["baseline"] == cost["baseline"]
    assert row["cost"]["total"] == pytest.approx(sum(cost[r] for r in models), rel=1e-12)
    assert row["tokens"]["baseline"] == summary["tokens"]["baseline"]
    assert row["tokens"]["total"] == {k: sum(summary["tokens"][r][k] for r in models) for k in ("prompt", "completion")}
    lb_csv = (tmp_path / "lb" / "leaderboard.csv").read_text()
    assert "cost_baseline" in lb_csv and "tokens_baseline_prompt" in lb_csv
    assert f"{row['cost']['total']:.4f}" in (tmp_path / "lb" / "leaderboard.md").read_text()
