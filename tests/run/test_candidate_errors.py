"""`candidate_errors: exclude | zero`: what a question whose candidate call failed for good counts for.

Through the console script against the fake server: the candidate's provider refuses three of the mini
file's twelve questions with a content-filter 400 (a per-question failure, never retried: models/failures.py);
the judge's verdicts follow a fixed pattern. The scores under both policies are recomputed here from the
data rows and the verdict pattern with HeartBench's published formula (not from the engine's records),
then the leaderboard of the two runs is checked for the policy and the not-like-for-like mark.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer, Reply

from conftest import EXE, MINI, REPO, QuestionScript, clean_env, model_args, read_rows

REFUSED = {"mq01aa", "mq03cc", "mq07gg"}  # the candidate's provider filters these prompts
FILTERED = "This response was filtered by the content management policy"
RULE_LABEL = "其他"  # HeartBench's role-confusion items (a hit zeroes the question)


def met(i: int) -> bool:
    """The judge's verdict on item i of every question (rule items are never met, below)."""
    return i % 3 != 0


class Script(QuestionScript):
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        super().__init__(rows)
        self.rows = {r["question_id"]: r for r in rows}

    def candidate(self, model: str, qid: str) -> Reply:
        if qid in REFUSED:
            return Reply(status=400, error=FILTERED)
        return Reply(text=f"I hear you ({qid}). " * (1 + len(qid) % 3), usage=(50, 20))

    def judge(self, model: str, text: str) -> Reply:
        rubric = self.rows[self.question(text)]["rubric"]
        return self.verdict(len(rubric), lambda i: met(i) and rubric[i - 1]["dimension"] != RULE_LABEL)


def ability_of() -> dict[str, str]:
    """HeartBench's data label -> ability id, read from the shipped spec file as plain YAML."""
    import yaml

    spec = yaml.safe_load((REPO / "benchmarks" / "heartbench" / "benchmark.yaml").read_text(encoding="utf-8"))
    return {lab: a["id"] for d in spec["taxonomy"]["dimensions"] for a in d["abilities"] for lab in a["data_labels"]}


def expected(rows: list[dict[str, Any]], policy: str) -> tuple[float, dict[str, float], int]:
    """(overall, ability means, questions scored) by the paper's formula: per ability ln(raw - min + 1) /
    ln(max - min + 1) over the met items' weights, question score = mean over its abilities, overall = macro
    mean over abilities x 100. A refused question: left out, or 0 on each of its abilities."""
    labels = ability_of()
    per_ability: dict[str, list[float]] = {}
    scored = 0
    for row in rows:
        groups: dict[str, list[float]] = {}
        for i, item in enumerate(row["rubric"], 1):
            if item["dimension"] == RULE_LABEL:
                continue
            raw_lo_hi = groups.setdefault(labels[item["dimension"]], [0.0, 0.0, 0.0])
            w = float(item["score"])
            raw_lo_hi[0] += w if met(i) else 0.0
            raw_lo_hi[1 if w < 0 else 2] += w
        if row["question_id"] in REFUSED:
            if policy == "exclude":
                continue
            values = {a: 0.0 for a in groups}
        else:
            values = {a: min(1.0, max(0.0, math.log(raw - lo + 1) / math.log(hi - lo + 1)))
                      for a, (raw, lo, hi) in groups.items()}
        scored += 1
        for a, v in values.items():
            per_ability.setdefault(a, []).append(v)
    means = {a: sum(v) / len(v) for a, v in per_ability.items()}
    return 100 * sum(means.values()) / len(means), means, scored


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("candidate_errors")
    rows, _ = read_rows(MINI)
    env = clean_env(root)
    out: dict[str, Any] = {"root": root, "rows": rows, "env": env}
    with FakeServer(Script(rows)) as srv:
        for policy in ("exclude", "zero"):
            extra = [] if policy == "exclude" else ["candidate_errors=zero"]  # exclude: the spec's default
            proc = subprocess.run([EXE, "benchmark=heartbench", f"data.path={MINI}", *model_args(srv.url),
                                   "max_retries=0", "concurrency=2", f"hydra.run.dir={root / policy}", *extra],
                                  env=env, capture_output=True, text=True, timeout=300, cwd=root)
            out[policy] = proc
        out["requests"] = list(srv.requests)
    return out


def _summary(runs: dict[str, Any], policy: str) -> dict[str, Any]:
    proc = runs[policy]
    assert proc.returncode == 0, proc.stderr
    return json.loads((runs["root"] / policy / "summary.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("policy", ["exclude", "zero"])
def test_scores_equal_an_independent_computation(runs: dict[str, Any], policy: str) -> None:
    s = _summary(runs, policy)
    overall, abilities, scored = expected(runs["rows"], policy)
    assert s["overall"] == pytest.approx(overall, abs=1e-9)
    assert s["abilities"] == pytest.approx({a: 100 * v for a, v in abilities.items()}, abs=1e-9)
    assert s["aggregation"]["candidate_errors"] == policy
    c = s["counts"]
    assert c["questions"] == 12 and c["candidate_errors"] == len(REFUSED) and c["judge_errors"] == 0
    assert c["scored"] == scored == (9 if policy == "exclude" else 12)
    if policy == "zero":
        assert c["candidate_errors_zeroed"] == len(REFUSED)
    else:
        assert "candidate_errors_zeroed" not in c


def test_refusals_are_per_question_and_never_retried(runs: dict[str, Any]) -> None:
    cand = [b for b in runs["requests"] if b["model"] != "judge"]
    judged = [b for b in runs["requests"] if b["model"] == "judge"]
    # the 9 answers are cache hits in the second run; the 3 refusals are asked once per run (never cached)
    assert len(cand) == 12 + len(REFUSED) and len(judged) == 9


def test_zeroed_records_say_why_and_keep_the_error(runs: dict[str, Any]) -> None:
    recs = {r["id"]: r for r in map(json.loads, (runs["root"] / "zero" / "samples.jsonl").read_text("utf-8").splitlines())}
    for qid in REFUSED:
        r = recs[qid]
        assert "400" in r["candidate_error"] and "filtered" in r["candidate_error"] and r["response"] is None
        assert r["score"] == 0.0 and r["zeroed"] == "candidate_error" and r["judge_error"] is None
        assert set(r["abilities"]) and all(v["score"] == 0.0 for v in r["abilities"].values())
    assert not any("zeroed" in r for q, r in recs.items() if q not in REFUSED)
    excl = {r["id"]: r for r in map(json.loads, (runs["root"] / "exclude" / "samples.jsonl").read_text("utf-8").splitlines())}
    assert all(excl[q]["score"] is None and "zeroed" not in excl[q] for q in REFUSED)


def test_console_says_the_policy_and_the_count(runs: dict[str, Any]) -> None:
    zero = " ".join(runs["zero"].stdout.split())
    assert "3 question(s) whose candidate call failed are scored 0 (candidate_errors: zero)" in zero
    assert "scored 0 (3)" in zero
    excl = " ".join(runs["exclude"].stdout.split())
    assert "3 candidate error(s) and 0 judge error(s) are excluded from every score" in excl
    assert "left out" in excl and "scored 0" not in excl


def test_leaderboard_shows_the_policy_and_marks_unlike_rows(runs: dict[str, Any]) -> None:
    root = runs["root"]
    proc = subprocess.run([EXE, "leaderboard", str(root / "exclude"), str(root / "zero"), f"out={root / 'lb'}",
                           "allow_mixed_specs=true", "bootstrap.samples=50"],
                          env=runs["env"], capture_output=True, text=True, timeout=300, cwd=root)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((root / "lb" / "leaderboard.json").read_text(encoding="utf-8"))
    rows = {Path(r["run_dir"]).name: r for r in data["rows"]}
    assert rows["exclude"]["candidate_errors"] == "exclude" and rows["zero"]["candidate_errors"] == "zero"
    # the exclude run left out 3 questions the zero run scored; the zero run left out none
    assert rows["exclude"]["not_like_for_like"] is True and rows["zero"]["not_like_for_like"] is False
    md = (root / "lb" / "leaderboard.md").read_text(encoding="utf-8")
    line = {Path(r["run_dir"]).name: next(ln for ln in md.splitlines() if ln.startswith(f"| {r['rank']} |"))
            for r in data["rows"]} if rows["exclude"]["rank"] != rows["zero"]["rank"] else None
    assert line is not None
    assert "9/12 *" in line["exclude"] and "0/3 (c=0)" in line["zero"] and "*" not in line["zero"]
    assert any("not like for like" in w and "3 question(s)" in w for w in data["warnings"])
    assert any("3 candidate errors are scored 0" in w for w in data["warnings"])


def test_a_spec_declares_the_policy_and_a_bad_value_is_one_line(runs: dict[str, Any], tmp_path: Path) -> None:
    bench = tmp_path / "benches" / "zeroed"
    bench.mkdir(parents=True)
    (bench / "benchmark.yaml").write_text("extends: heartbench\nname: zeroed\naggregation:\n  candidate_errors: zero\n",
                                          encoding="utf-8")
    env = clean_env(tmp_path)
    with FakeServer(Script(runs["rows"])) as srv:
        base = [EXE, f"benchmark={bench}", f"data.path={MINI}", *model_args(srv.url), "max_retries=0", "limit=3"]
        proc = subprocess.run([*base, f"hydra.run.dir={tmp_path / 'run'}"], env=env, capture_output=True, text=True,
                              timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        s = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
        assert s["aggregation"]["candidate_errors"] == "zero" and s["counts"]["candidate_errors_zeroed"] == 2  # mq01aa, mq03cc
        bad = subprocess.run([*base, "candidate_errors=maybe", f"hydra.run.dir={tmp_path / 'bad'}"], env=env,
                             capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert bad.returncode == 2
        errors = [ln for ln in bad.stderr.splitlines() if ln.startswith("rubric-engine: error:")]
        assert len(errors) == 1 and "candidate_errors=maybe" in errors[0] and "exclude or zero" in errors[0]
        assert "Traceback" not in bad.stderr


def test_zero_in_a_panel_run(runs: dict[str, Any], tmp_path: Path) -> None:
    """Candidate samples and judge repeats: a zeroed question is 0 in every sample and grading, so the
    sections computed from the votes (sampling, noise, hierarchical interval) take it as the overall does."""
    env = clean_env(tmp_path)
    with FakeServer(Script(runs["rows"])) as srv:
        proc = subprocess.run([EXE, "benchmark=heartbench", f"data.path={MINI}", *model_args(srv.url), "max_retries=0",
                               "limit=4", "candidate.samples=2", "judge.repeats=2", "candidate_errors=zero",
                               f"hydra.run.dir={tmp_path / 'run'}"], env=env, capture_output=True, text=True,
                              timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    s = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
    overall, _, scored = expected(runs["rows"][:4], "zero")  # the verdicts never vary: every sample agrees
    assert s["overall"] == pytest.approx(overall, abs=1e-9) and scored == 4
    assert s["counts"]["candidate_errors_zeroed"] == 2 and s["counts"]["scored"] == 4
    assert s["sampling"]["groups"]["overall"]["sample_scores"] == pytest.approx([overall, overall], abs=1e-9)
    assert s["interval"]["lo"] <= overall <= s["interval"]["hi"]
