"""Scores on a scale (judge.verdict.kind: score) through the real path: the console script, LiteLLM speaking
HTTP to the fake server, the run directory, rescore and the leaderboard.

The spec is tests/data/likert_mini (1-5 helpfulness, one reply per question). The fake judge answers per
question a scripted sequence: a valid rating, a rating out of range then a valid one (re-asked), or garbage
every time (a judge error, recorded and counted); the expected numbers are computed here from what the
server sent.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, clean_env, edited_spec, model_args
from fakeserver import FakeServer, Reply

from conftest import REPO
LIKERT = REPO / "tests" / "data" / "likert_mini"
ROWS = [json.loads(x) for x in (LIKERT / "likert_mini.jsonl").read_text().splitlines()]
SCRIPT: dict[str, list[Any]] = {"l1": [4], "l2": [7, 2], "l3": [5], "l4": ["x", 9, 0], "l5": [1], "l6": [3.5]}


class Judge:
    """Candidate: a fixed reply; judge: the question's next scripted rating (a number or garbage)."""

    def __init__(self, pattern: bool = False) -> None:
        self.seen: dict[str, int] = {}
        self.pattern = pattern

    def __call__(self, body: dict[str, Any]) -> Reply:
        if body["model"] != "judge":
            return Reply(text="A short helpful reply.")
        text = body["messages"][0]["content"]
        qid = next(r["id"] for r in ROWS if r["prompt"] in text)
        n = self.seen[qid] = self.seen.get(qid, 0) + 1
        value = SCRIPT[qid][min(n, len(SCRIPT[qid])) - 1]
        if self.pattern:
            return Reply(text=f"Fine reply. Rating: [[{value}]]" if value != "x" else "I would say good.")
        return Reply(text=json.dumps({"why": "ok", "rating": value}) if value != "x" else "no rating here")


def final(qid: str) -> Any:
    """The question's accepted rating, or "x" when its last reply is still unusable (garbage or off the scale)."""
    v = SCRIPT[qid][-1]
    return v if v != "x" and 1 <= v <= 5 else "x"


def run(tmp: Path, srv: FakeServer, bench: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, f"benchmark={bench}", *model_args(srv.url), f"hydra.run.dir={tmp / 'run'}",
                           "progress=plain", *extra], env=clean_env(tmp), capture_output=True, text=True,
                          timeout=300, cwd=tmp)


def expected() -> tuple[float, dict[str, float]]:
    valid = {q: final(q) for q in SCRIPT if final(q) != "x"}
    cats: dict[str, list[float]] = {}
    for r in ROWS:
        if r["id"] in valid:
            cats.setdefault(r["category"], []).append(valid[r["id"]])
    return sum(valid.values()) / len(valid), {c: sum(v) / len(v) for c, v in cats.items()}


def check_run(tmp: Path, srv: FakeServer) -> dict[str, Any]:
    out = tmp / "run"
    summary = json.loads((out / "summary.json").read_text())
    samples = {json.loads(x)["id"]: json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()}
    overall, cats = expected()
    assert summary["overall"] == pytest.approx(overall)  # the number itself: no clipping, scale 1
    assert summary["scenarios"] == pytest.approx(cats)
    assert summary["counts"]["scored"] == 5 and summary["counts"]["judge_errors"] == 1
    assert summary["scale"] == {"min": 1.0, "max": 5.0, "scope": "conversation"}
    iv = summary["interval"]
    assert iv["lo"] <= overall <= iv["hi"] and iv["hi"] > 1  # on the scale, not 0-1
    assert set(summary["group_intervals"]["scenarios"]) == set(cats)
    assert samples["l2"]["score"] == 2 and samples["l2"]["turns"][0]["score"] == 2  # re-asked after 7, then 2
    assert samples["l4"]["score"] is None and samples["l4"]["judge_error"].endswith(
        "invalid score after 3 replies: the score 0 is outside the scale 1 to 5")  # re-asked, then recorded
    assert len(samples["l4"]["judge_raw"]) == 3  # every refused reply kept for audit
    assert samples["l6"]["score"] == 3.5
    return summary


def test_likert_end_to_end_with_reasks_rescore_and_leaderboard(tmp_path: Path) -> None:
    judge = Judge()
    with FakeServer(judge) as srv:
        proc = run(tmp_path, srv, LIKERT)
        assert proc.returncode == 0, proc.stderr[-2000:]
        summary = check_run(tmp_path, srv)
        reasks = [b for b in srv.requests if b["model"] == "judge" and len(b["messages"]) > 1]
        assert any("outside the scale 1 to 5" in b["messages"][-1]["content"] for b in reasks)
        fmt = next(b for b in srv.requests if b["model"] == "judge")["response_format"]["json_schema"]["schema"]
        assert fmt["properties"] == {"why": {"type": "string"}, "rating": {"type": "number"}}
        assert "Scenarios (scale 1-5)" in proc.stdout and "1 judge error(s)" in proc.stdout
        n = len(srv.requests)
        again = run(tmp_path, srv, LIKERT)  # the same command: every finished call is a cache hit
        assert again.returncode == 0 and len(srv.requests) - n <= 3  # only the failed question asks again
    res = subprocess.run([EXE, "rescore", str(tmp_path / "run")], env=clean_env(tmp_path), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    new = json.loads(next((tmp_path / "run").glob("rescore-*/summary.json")).read_text())
    for key in ("overall", "scenarios", "turns", "group_intervals", "interval", "counts"):
        assert new[key] == summary[key], key
    lb = subprocess.run([EXE, "leaderboard", str(tmp_path / "run")], env=clean_env(tmp_path), capture_output=True,
                        text=True, timeout=300)
    assert lb.returncode == 0, lb.stderr
    board = json.loads((tmp_path / "run" / "leaderboard.json").read_text())
    assert board["rows"][0]["overall"] == pytest.approx(summary["overall"])
    assert "Scenarios" in lb.stdout  # the tables and the heatmap name the group alike


def test_pattern_verdict_for_judges_without_structured_output(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(LIKERT, bench)
    spec = (bench / "benchmark.yaml").read_text()
    (bench / "benchmark.yaml").write_text(spec.replace("field: rating, reasoning: why",
                                                       r"pattern: '\[\[(\d+\.?\d*)\]\]'"))
    with FakeServer(Judge(pattern=True)) as srv:
        proc = run(tmp_path, srv, bench)
        assert proc.returncode == 0, proc.stderr[-2000:]
        check_run(tmp_path, srv)
        assert all("response_format" not in b for b in srv.requests if b["model"] == "judge")


def test_likert_runs_keyless_with_mock(tmp_path: Path) -> None:
    proc = subprocess.run([EXE, f"benchmark={LIKERT}", "candidate=mock", "judge=mock", f"hydra.run.dir={tmp_path / 'r'}"],
                          env=clean_env(tmp_path), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    samples = [json.loads(x) for x in (tmp_path / "r" / "samples.jsonl").read_text().splitlines()]
    assert all(1 <= s["score"] <= 5 and s["turns"][0]["error"] is None for s in samples)


def test_parse_rules() -> None:
    from rubric_engine.judge.scores import ScoreShape
    from rubric_engine.judge.verdicts import VerdictError

    pat = ScoreShape(1, 10, pattern=r"\[\[(\d+\.?\d*)\]\]")
    assert pat.parse("good. [[8]]").score == 8 and pat.parse("[[8]] ... again [[8]]").score == 8
    for text, why in (("no rating", "no rating"), ("[[3]] or [[4]]", "2 different ratings"),
                      ("[[11]]", "outside the scale"), ("[[0]]", "outside the scale")):
        with pytest.raises(VerdictError, match=why):
            pat.parse(text)
    # patterns tried in order (FastChat's [[k]], then [k]): the first that matches decides, a later one is
    # read only when it finds nothing, and its own rules (one number, on the scale) still hold
    two = ScoreShape(1, 10, pattern=(r"\[\[(\d+\.?\d*)\]\]", r"\[(\d+\.?\d*)\]"))
    assert two.parse("Rating: [7]").score == 7 and two.parse("[[8]] though [7] was close").score == 8
    for text, why in (("no rating", r"no rating in the required format \(pattern .+ or .+\)"),
                      ("[3] or [4]", "2 different ratings"), ("[[11]] or [7]", "outside the scale")):
        with pytest.raises(VerdictError, match=why):
            two.parse(text)
    js = ScoreShape(1, 5, field="rating", reasoning="why")
    assert js.parse('{"why": "x", "rating": 4}').score == 4
    for text, why in (('{"why": "x", "rating": "4"}', "must be a number"), ('{"why": "x", "rating": true}',
                      "must be a number"), ('{"why": "x"}', '"rating" number'), ('{"why": "x", "rating": 6}',
                      "outside the scale"), ('{"why": "x", "rating": NaN}', "outside the scale")):
        with pytest.raises(VerdictError, match=why):
            js.parse(text)


def _bad_spec(tmp: Path, old: str, new: str) -> Path:
    return edited_spec(LIKERT, tmp / "bad", old, new)


@pytest.mark.parametrize("old,new,needle", [
    ("min: 1, max: 5", "min: 5, max: 5", "judge.verdict.min: min must be below max"),
    ("field: rating, reasoning: why", "pattern: '[[('", "judge.verdict.pattern: the pattern does not compile"),
    ("field: rating, reasoning: why", r"pattern: '\[\[\d+\]\]'", "judge.verdict.pattern: the pattern has no group"),
    # a list is tried in order: every pattern in it must compile and capture, and an empty list reads nothing
    ("field: rating, reasoning: why", r"pattern: ['\[\[(\d+)\]\]', '\[\d+\]']", "judge.verdict.pattern: the pattern has no group"),
    ("field: rating, reasoning: why", "pattern: []", "judge.verdict.pattern: the pattern list is empty"),
    # a look-ahead needs a backtracking engine: a stranger's pattern is run by RE2 (linear time), which refuses it
    ("field: rating, reasoning: why", r"pattern: '\[\[(\d+)(?=\]\])'", "judge.verdict.pattern: the pattern does not compile: RE2 cannot compile"),
    ("kind: score,", "kind: score, min: 1,", "judge.verdict.min"),
    ("  template: judge.j2", "  template: judge.j2\n  scope: each_turn",
     "judge.scope: each_turn judging needs a conversation of several candidate turns"),
])
def test_bad_score_specs_are_one_line(tmp_path: Path, old: str, new: str, needle: str) -> None:
    bench = _bad_spec(tmp_path, old, new)
    proc = subprocess.run([EXE, "validate", f"benchmark={bench}"], env=clean_env(tmp_path), capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rubric-engine: error:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert needle in lines[0] and "benchmark.yaml" in lines[0], lines[0]


def test_validate_says_what_a_score_spec_does(tmp_path: Path) -> None:
    """validate's scoring line names the range, the field read and the scope, never the criteria formula."""
    proc = subprocess.run([EXE, "validate", f"benchmark={LIKERT}"], env=clean_env(tmp_path), capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.replace("\n", " ").split("scoring: ")[1:])
    assert line.startswith("the judge's score from 1 to 5 (JSON field rating), one judgment of the whole "
                           "conversation (judge.scope conversation)"), line
    assert "log_normalised" not in proc.stdout and "no positive points" not in proc.stdout


def test_repeats_are_combined_by_the_mean_and_kept(tmp_path: Path) -> None:
    calls: dict[str, int] = {}

    def handler(body: dict[str, Any]) -> Reply:
        if body["model"] != "judge":
            return Reply(text="A short helpful reply.")
        qid = next(r["id"] for r in ROWS if r["prompt"] in body["messages"][0]["content"])
        calls[qid] = calls.get(qid, 0) + 1
        return Reply(text=json.dumps({"why": "ok", "rating": 2 if calls[qid] == 1 else 5}))

    with FakeServer(handler) as srv:
        proc = run(tmp_path, srv, LIKERT, "repeats=2")
        assert proc.returncode == 0, proc.stderr[-2000:]
    samples = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert all(s["score"] == 3.5 and sorted(v for r in s["score_votes"]["judge"] for v in r) == [2, 5]
               for s in samples)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["overall"] == 3.5


def test_scopes_choose_what_each_judgment_sees() -> None:
    from rubric_engine.datatypes import Question
    from rubric_engine.judge.scores import turn_units
    from rubric_engine.spec.load import load_spec

    spec = load_spec(REPO / "benchmarks" / "mt_bench")
    q = Question(id="1", dialogue=(), criteria=(), references=("r1", "r2"), turns=("u1", "u2"))
    talk = [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "u2"}, {"role": "assistant", "content": "a2"}]
    each = turn_units(spec, q, "a2", talk)
    assert [(k, reply, len(shown), extra["reference"]) for k, reply, shown, extra in each] == \
        [(1, "a1", 2, "r1"), (2, "a2", 4, "r2")]
    last = turn_units(spec.model_copy(update={"judge": spec.judge.model_copy(update={"scope": "last_turn"})}), q, "a2", talk)
    assert [(k, reply, len(shown), extra["reference"]) for k, reply, shown, extra in last] == [(2, "a2", 4, "r2")]
    whole = turn_units(spec.model_copy(update={"judge": spec.judge.model_copy(update={"scope": "conversation"})}), q,
                       "a2", talk)
    assert [(k, reply, len(shown)) for k, reply, shown, _ in whole] == [(2, "a2", 4)] and "reference" not in whole[0][3]
