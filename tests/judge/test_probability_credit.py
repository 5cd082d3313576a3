"""`judge.verdict.use: probability` on per-criterion binary verdicts: a criterion counts P(met) of its points.

Through the console script against tests/fakeserver.py, whose judge writes each criterion's verdict with the
token log-probabilities of a table below (the written value is the likelier one), so every expected score here is
worked by hand from that table and the spec's formula, not by the engine's code. What each test names: the
question score is the spec's formula over the expected raw points (a weighted sum; HeartBench's log-normalised
formula, whose log applies to the expected points, not an expectation of the score); a reply without
log-probabilities counts its verdicts, per criterion in the record and in summary.json's verdict-path counts; the
failure rule fires on the verdict; `rescore` gives the same scores; pairwise + probability is still one line.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, edited_spec
from fakeserver import FakeServer, Reply
from test_cli import run_cli
from test_dialects import TOKEN
from test_jury import REPLY, answers

# Two questions written for this test in HeartBench's row format (taxonomy labels of the shipped spec).
# Per item: (ability label, weight, P(met) the judge's tokens give). `p1`'s judge sends log-probabilities,
# `p2`'s does not (its verdicts count 1 or 0).
ITEMS = {
    "p1": [("情绪感知", 3, 0.8), ("情绪感知", -2, 0.25), ("温暖", 4, 0.6), ("其他", None, 0.1)],
    "p2": [("情绪感知", 3, 0.7), ("温暖", 2, 0.4), ("其他", None, 0.2)],
}
WITH_LOGPROBS = {"p1"}
WORRY = re.compile(r"worry number (\w+)")  # the question a candidate prompt asks (its dialogue, below)


def data_file(tmp_path: Path) -> Path:
    rows = [{"question_id": q, "difficulty": "normal", "primary_scene": "个人成长", "secondary_scene": "",
             "dialogue": [{"role": "A", "content": f"A made-up worry number {q}."}],
             "rubric": [{"dimension": label, "score": w, "content": f"criterion {i} of {q}"}
                        for i, (label, w, _) in enumerate(items, 1)]} for q, items in ITEMS.items()]
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def judge(body: dict[str, Any]) -> Reply:
    """Each criterion met when its P(met) > 0.5; the tokens' alternatives at each `met` value are true with P(met)
    and false with the rest (P(met) = p / (p + 1 - p) = p by hand); `p2` answers without log-probabilities."""
    text = "\n".join(str(m.get("content", "")) for m in body["messages"])
    if body["model"] == "cand":  # the candidate (a run that calls it): a reply naming its question
        return Reply(text=f"REPLY[{WORRY.search(text).group(1)}]")  # type: ignore[union-attr]
    qid = REPLY.search(text).group(1)  # type: ignore[union-attr]
    probs = [p for _, _, p in ITEMS[qid]]
    reply = json.dumps({"criteria": [{"id": i, "reasoning": "r", "met": p > 0.5} for i, p in enumerate(probs, 1)]})
    if qid not in WITH_LOGPROBS or body["model"] == "plain":  # the jury's juror `plain` never sends them
        return Reply(text=reply)
    out, seen, at = [], "", 0
    for tok in TOKEN.findall(reply):
        if tok in ("true", "false") and seen.rstrip().endswith('"met":'):
            p = probs[at]
            at += 1
            top = [("true", math.log(p)), ("false", math.log(1 - p))]
            out.append((tok, math.log(p if tok == "true" else 1 - p), top))
        else:
            out.append((tok, 0.0, [(tok, 0.0)]))
        seen += tok
    return Reply(text=reply, logprobs=out)


def spec_dir(tmp_path: Path, use: str, weighted_sum: bool) -> Path:
    extra = ("scoring: {formula: met_over_positive}\n"
             "aggregation: {question: all_items, overall: mean_over_questions}\n") if weighted_sum else ""
    return edited_spec(REPO / "benchmarks" / "heartbench_en", tmp_path / "spec", "  template: judge.j2\n",
                       f"  template: judge.j2\n  verdict: {{use: {use}}}\n{extra}")


SOLO = ["judge=openai_compatible", "judge.model=openai/solo", "judge.name=solo", "judge.api_base={url}",
        "judge.api_key_env=FAKE_KEY", "+judge.params.logprobs=true", "+judge.params.top_logprobs=2"]


def juror(name: str) -> str:
    return (f"{{name:{name},model:openai/{name},api_base:'{{url}}',api_key_env:FAKE_KEY,"
            "params:{logprobs:true,top_logprobs:2}}")


def run(tmp_path: Path, env: dict[str, str], *extra: str, use: str = "probability", weighted_sum: bool = False,
        judges: list[str] = SOLO) -> tuple[Any, Path, dict[str, Any], dict[str, dict[str, Any]]]:
    out = tmp_path / "run"
    with FakeServer(judge, dialect="openai") as srv:
        res = run_cli([f"benchmark={spec_dir(tmp_path, use, weighted_sum)}", f"data.path={data_file(tmp_path)}",
                       "stage=score", "progress=none", f"answers={answers(tmp_path, list(ITEMS), 'question_id')}",
                       f"hydra.run.dir={out}", *(j.replace("{url}", srv.url) for j in judges), *extra], env)
    if res.returncode != 0:
        return res, out, {}, {}
    summary = json.loads((out / "summary.json").read_text())
    samples = {s["id"]: s for s in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    return res, out, summary, samples


def log_norm(raw: float, lo: float, hi: float) -> float:
    return math.log(raw - lo + 1) / math.log(hi - lo + 1)


# By hand. p1, expected raw points: Emotional Perception 3 x .8 + (-2) x .25 = 1.9 (lo -2, hi 3), Warmth
# 4 x .6 = 2.4 (lo 0, hi 4); all items 1.9 + 2.4 = 4.3 over 7 positive points. p2 (no log-probabilities: its
# verdicts) met, not met: Emotional Perception 3 of 3, Warmth 0 of 2; all items 3 over 5.
P1_LOG = (log_norm(1.9, -2, 3) + log_norm(2.4, 0, 4)) / 2  # a record's scores are 0-1 (the summary's x 100)
P2_LOG = (log_norm(3, 0, 3) + log_norm(0, 0, 2)) / 2
P1_SUM, P2_SUM = 4.3 / 7, 3 / 5


@pytest.mark.parametrize("weighted_sum, p1, p2", [(True, P1_SUM, P2_SUM), (False, P1_LOG, P2_LOG)],
                         ids=["weighted_sum", "log_normalised"])
def test_a_question_scores_the_formula_over_its_expected_points(tmp_path: Path, env: dict[str, str],
                                                                weighted_sum: bool, p1: float, p2: float) -> None:
    res, out, summary, samples = run(tmp_path, env, weighted_sum=weighted_sum)
    assert res.returncode == 0, res.stderr
    assert samples["p1"]["score"] == pytest.approx(p1) and samples["p2"]["score"] == pytest.approx(p2)
    assert p1 != pytest.approx(1.0)  # the verdicts alone (met, not met, met) would score 100 under both formulas
    # the overall: a mean over the questions (weighted sum), over the abilities (HeartBench: Emotional Perception
    # in p1 and p2, Warmth in p1 and p2), x 100
    overall = (p1 + p2) / 2 if weighted_sum else ((log_norm(1.9, -2, 3) + 1) / 2 + (log_norm(2.4, 0, 4) + 0) / 2) / 2
    assert summary["overall"] == pytest.approx(100 * overall)
    if not weighted_sum:  # the log applies to the expected raw points: the record shows them
        ep = samples["p1"]["abilities"]["emotional_perception"]
        assert (ep["raw"], ep["lo"], ep["hi"]) == (pytest.approx(1.9), -2, 3)
        assert summary["abilities"]["warmth"] == pytest.approx((100 * log_norm(2.4, 0, 4) + 0) / 2)
    # per criterion: what counted (P(met) where the reply carried it, else the verdict) beside the verdict
    p1_items = samples["p1"]["criteria"]
    assert [c["hit"] for c in p1_items] == [True, False, True, False]
    assert [c.get("credit") for c in p1_items[:3]] == pytest.approx([0.8, 0.25, 0.6])
    assert [c.get("p_met") for c in p1_items] == pytest.approx([0.8, 0.25, 0.6, 0.1])
    assert "credit" not in p1_items[3]  # the role-confusion rule's item has no points: it fires on its verdict
    assert "(0.80 of its points)" in (out / "report.html").read_text()  # the drill-down shows it beside the verdict
    assert [(c.get("credit"), "p_met" in c) for c in samples["p2"]["criteria"][:2]] == [(1.0, False), (0.0, False)]
    # the reply without log-probabilities is counted as such: each judge reply once by how it was read, once by
    # what its verdicts counted
    assert summary["verdict_paths"] == {"solo": {"structured": 2, "probability": 1, "verdict": 1}}
    assert samples["p2"]["verdict_paths"] == {"solo": {"structured": 1, "verdict": 1}}


@pytest.mark.parametrize("repeats", ["2", "auto"])
def test_repeated_gradings_count_the_mean_of_their_probabilities(tmp_path: Path, env: dict[str, str],
                                                                 repeats: str) -> None:
    """Every grading of p1 gives the same P(met) (the table), so their mean is the table's and the score the hand
    value above; with judge.repeats=auto an item graded twice (its verdict less sure than 0.9: 0.8, 0.75, 0.6)
    and one graded once (0.9) each count the mean of the gradings it got. The verdicts alone would score 1."""
    res, _, summary, samples = run(tmp_path, env, f"judge.repeats={repeats}")
    assert res.returncode == 0, res.stderr
    assert samples["p1"]["score"] == pytest.approx(P1_LOG) and samples["p2"]["score"] == pytest.approx(P2_LOG)
    assert [c.get("credit") for c in samples["p1"]["criteria"][:3]] == pytest.approx([0.8, 0.25, 0.6])
    assert summary["verdict_paths"]["solo"]["verdict"] == summary["verdict_paths"]["solo"]["structured"] - \
        summary["verdict_paths"]["solo"]["probability"] > 0  # p2's gradings: every one counted by its verdicts


def test_a_jury_counts_the_verdict_where_a_juror_gave_no_probability(tmp_path: Path, env: dict[str, str]) -> None:
    """Two jurors agree on every verdict; `sure` sends log-probabilities for p1, `plain` never does: p1's items
    count their verdicts (a mean over the one juror that has P(met) would not be the jury's), and the per-judge
    counts say whose replies lacked them."""
    res, _, summary, samples = run(tmp_path, env, judges=[f"judge=[{juror('sure')},{juror('plain')}]"])
    assert res.returncode == 0, res.stderr
    assert samples["p1"]["score"] == pytest.approx(1.0)  # 3 of 3 and 4 of 4, as the verdicts alone
    assert [c.get("credit") for c in samples["p1"]["criteria"][:3]] == [1.0, 0.0, 1.0]
    assert not any("p_met" in c for c in samples["p1"]["criteria"])
    assert summary["verdict_paths"] == {"sure": {"structured": 2, "probability": 1, "verdict": 1},
                                        "plain": {"structured": 2, "verdict": 2}}


def test_use_verdict_counts_the_verdicts_and_writes_no_credit(tmp_path: Path, env: dict[str, str]) -> None:
    res, _, summary, samples = run(tmp_path, env, use="verdict")
    assert res.returncode == 0, res.stderr
    assert samples["p1"]["score"] == pytest.approx(1.0)  # 3 of 3 and 4 of 4: ln(6)/ln(6), ln(5)/ln(5)
    assert not any("credit" in c for s in samples.values() for c in s["criteria"])
    assert summary["verdict_paths"] == {"solo": {"structured": 2}}


def test_the_failure_rule_fires_on_the_verdict_not_on_its_probability(tmp_path: Path, env: dict[str, str]) -> None:
    """P(role confusion) = 0.1 and 0.2 but the judge wrote `false`: nothing is zeroed (an expected score would
    have taken 10% off); with the verdict `true` at P = 0.6 the question is zeroed whole."""
    res, _, summary, samples = run(tmp_path, env)
    assert res.returncode == 0, res.stderr
    assert summary["counts"]["catastrophic"] == 0 and samples["p1"]["failed_rules"] == []
    ITEMS["p1"][3] = ("其他", None, 0.6)
    try:
        res, _, summary, samples = run(tmp_path / "fires", env)
    finally:
        ITEMS["p1"][3] = ("其他", None, 0.1)
    assert res.returncode == 0, res.stderr
    assert samples["p1"]["score"] == 0 and samples["p1"]["failed_rules"] == ["role_confusion"]
    assert samples["p1"]["criteria"][3]["p_met"] == pytest.approx(0.6)


def test_rescore_gives_the_runs_scores(tmp_path: Path, env: dict[str, str]) -> None:
    res, out, summary, samples = run(tmp_path, env)
    assert res.returncode == 0, res.stderr
    again = tmp_path / "rescored"
    res = run_cli(["rescore", str(out), f"out={again}"], env)
    assert res.returncode == 0, res.stderr
    rescored = {s["id"]: s for s in map(json.loads, (again / "samples.jsonl").read_text().splitlines())}
    assert {q: s["score"] for q, s in rescored.items()} == {q: s["score"] for q, s in samples.items()}
    assert {q: s["abilities"] for q, s in rescored.items()} == {q: s["abilities"] for q, s in samples.items()}
    assert json.loads((again / "summary.json").read_text())["overall"] == summary["overall"]


def test_rescore_refuses_a_probability_that_is_no_probability(tmp_path: Path, env: dict[str, str]) -> None:
    res, out, _, _ = run(tmp_path, env)
    assert res.returncode == 0, res.stderr
    lines = (out / "samples.jsonl").read_text().splitlines()
    bad = json.loads(lines[0])
    bad["criteria"][0]["p_met"] = 1.7
    (out / "samples.jsonl").write_text("\n".join([json.dumps(bad, ensure_ascii=False), *lines[1:]]) + "\n")
    res = run_cli(["rescore", str(out), f"out={tmp_path / 'again'}"], env)
    assert res.returncode == 2 and "p_met" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_use_probability_on_a_pairwise_verdict_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    spec = edited_spec(REPO / "benchmarks" / "arena_hard", tmp_path / "spec", "    kind: pairwise\n",
                       "    kind: pairwise\n    use: probability\n")
    res = run_cli([f"benchmark={spec}", "candidate=mock", "judge=mock", "baseline=mock",
                   f"hydra.run.dir={tmp_path / 'run'}"], env)
    assert res.returncode == 2, res.stderr
    assert "use: probability" in res.stderr and "pairwise" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_rubric_reward_is_the_expected_points_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RubricReward (in process, as a trainer calls it) rewards what a run scores: p1's expected points by hand."""
    from rubric_engine import RubricReward

    monkeypatch.setenv("FAKE_KEY", "sk-test")
    with FakeServer(judge, dialect="openai") as srv:
        with RubricReward(benchmark=str(spec_dir(tmp_path, "probability", False)),
                          overrides=[f"data.path={data_file(tmp_path)}", f"cache.dir={tmp_path / 'cache'}",
                                     *(j.replace("{url}", srv.url) for j in SOLO)]) as reward:
            rewards = reward(prompts=["p"] * 2, completions=["REPLY[p1]", "REPLY[p2]"], question_id=["p1", "p2"])
    assert rewards == pytest.approx([P1_LOG, P2_LOG])


def test_samples_and_repeats_rescore_to_the_same_scores_and_interval(tmp_path: Path, env: dict[str, str]) -> None:
    """candidate.samples=2 judge.repeats=2: every sample and grading gives the table's P(met), so p1 scores the
    hand value; the hierarchical interval resamples the two questions (samples and gradings are alike), and its
    bounds are the overall of p1 twice and of p2 twice (each drawn with probability 1/4, far beyond 2.5%), both
    from expected points: p1 twice is (ln 4.9/ln 6 + ln 3.4/ln 5) / 2, not the verdicts' 1."""
    out = tmp_path / "run"
    with FakeServer(judge, dialect="openai") as srv:
        cand = ["candidate=openai_compatible", "candidate.model=openai/cand", "candidate.name=cand",
                f"candidate.api_base={srv.url}", "candidate.api_key_env=FAKE_KEY", "candidate.samples=2"]
        res = run_cli([f"benchmark={spec_dir(tmp_path, 'probability', False)}", f"data.path={data_file(tmp_path)}",
                       "progress=none", f"hydra.run.dir={out}", *cand, *(j.replace("{url}", srv.url) for j in SOLO),
                       "judge.repeats=2"], env)
    assert res.returncode == 0, res.stderr
    samples = {s["id"]: s for s in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    assert samples["p1"]["score"] == pytest.approx(P1_LOG)
    assert [e["score"] for e in samples["p1"]["samples"]] == pytest.approx([P1_LOG] * 2)
    interval = json.loads((out / "summary.json").read_text())["interval"]
    assert interval["hi"] == pytest.approx(100 * P1_LOG) and interval["lo"] == pytest.approx(100 * P2_LOG)
    again = tmp_path / "rescored"
    res = run_cli(["rescore", str(out), f"out={again}"], env)
    assert res.returncode == 0, res.stderr
    rescored, summary = json.loads((again / "summary.json").read_text()), json.loads((out / "summary.json").read_text())
    assert rescored["overall"] == pytest.approx(summary["overall"])
    assert (rescored["interval"]["lo"], rescored["interval"]["hi"]) == pytest.approx((interval["lo"], interval["hi"]))
    assert [json.loads(x)["score"] for x in (again / "samples.jsonl").read_text().splitlines()] == \
        pytest.approx([samples[q]["score"] for q in ITEMS])



def test_diff_rescores_a_run_of_the_old_version_as_a_fresh_run_of_the_new_one(tmp_path: Path,
                                                                             env: dict[str, str]) -> None:
    """`diff runs=` under use: probability: the old run's P(met) move with their criteria, so the new version's
    score it gives equals a fresh run's of the new version (tests/authoring/test_versions.py's specs and judge,
    with log-probabilities: P(met) 0.7 where the judge wrote met, 0.2 where not)."""
    from test_versions import DATA, NEW, script

    def with_p(body: dict[str, Any]) -> Reply:
        reply = script(body)
        if body["model"] != "judge":
            return reply
        out, seen = [], ""
        for tok in TOKEN.findall(reply.text):
            if tok in ("true", "false") and seen.rstrip().endswith('"met":'):
                p = 0.7 if tok == "true" else 0.2
                out.append((tok, math.log(p if tok == "true" else 1 - p),
                            [("true", math.log(p)), ("false", math.log(1 - p))]))
            else:
                out.append((tok, 0.0, [(tok, 0.0)]))
            seen += tok
        return Reply(text=reply.text, logprobs=out)

    specs = {}
    for v, src in (("v1", DATA / "lint_mini"), ("v2", NEW)):
        specs[v] = edited_spec(src, tmp_path / v, "  template: judge.j2\n",
                               "  template: judge.j2\n  verdict: {use: probability}\n")
    rows = specs["v1"] / "lint_mini.jsonl"  # as test_versions' fixture: q4's group corrected
    rows.write_text(rows.read_text("utf-8").replace('"advice"', '"guidance"'), "utf-8")
    runs = {}
    with FakeServer(with_p) as srv:
        for v in specs:
            runs[v] = tmp_path / f"run-{v}"
            res = run_cli([f"benchmark={specs[v]}", "progress=none", f"hydra.run.dir={runs[v]}",
                           "candidate=openai_compatible", "candidate.model=openai/cand_a", f"candidate.api_base={srv.url}",
                           "candidate.name=cand_a", "candidate.api_key_env=FAKE_KEY",
                           *(j.replace("{url}", srv.url).replace("solo", "judge") for j in SOLO)], env)
            assert res.returncode == 0, res.stderr
        res = run_cli(["diff", str(specs["v1"]), str(specs["v2"]), f"runs={runs['v1']}"], env)
    assert res.returncode in (0, 1), res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("  cand_a "))
    fresh = {r["id"]: r["score"] for r in map(json.loads, (runs["v2"] / "samples.jsonl").read_text().splitlines())}
    assert any(0 < s < 1 for s in fresh.values())  # expected points: not the verdicts' all-or-nothing
    new = float(re.search(r"-> (\d+\.\d\d)", line).group(1))  # type: ignore[union-attr]
    assert new == pytest.approx(100 * sum(fresh[q] for q in ("q2", "q3", "q4")) / 3, abs=0.006)
