"""`rubric-engine diff`: every change planted between tests/data/lint_mini (version 1, its one out-of-taxonomy
group corrected) and tests/data/lint_mini_v2 is listed, and the scores it rescores from runs of version 1 equal
those of fresh runs of version 2 over the same questions, through the console script against the fake server.
A changelog that skips a version, or a run of another version, is one line, exit 2."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import DATA, run_cli
from fakeserver import FakeServer, Reply
from rubric_engine.authoring.versions import successors

NEW = DATA / "lint_mini_v2"
PLANTED = {
    "q1 criterion 2: added: 'Offers one practical next step, such as another lesson'",
    "q1 criterion 2: removed: 'Acknowledges the failure and suggests booking another lesson'",
    "q1 criterion 3: reworded: \"Responds appropriately to the user's mood\" -> \"Responds to the user's mood by naming it\"",
    "q2 criterion 2: removed: 'Asks what the argument was about.'",
    "q2 criterion 3 -> criterion 2: reweighted: 9 -> 4",
    "q3 criterion 1: regrouped: listening -> guidance",
    "q3 criterion 3: reweighted: 1 -> 2",
    "q5: question added: 2 criteria",
}
# the judge fails a criterion by its first word, per candidate: the same verdict whatever the wording after it
FAILS = {"cand_a": {"suggests"}, "cand_b": {"suggests", "offers", "reflects", "responds"}}


def script(body: dict[str, Any]) -> Reply:
    text = "\n".join(str(m["content"]) for m in body["messages"])
    if body["model"] != "judge":
        return Reply(text=f"MODEL[{body['model']}] I hear you.")
    who = re.search(r"MODEL\[(\w+)\]", text).group(1)  # type: ignore[union-attr]
    items = re.findall(r"^(\d+)\. \(-?\d+(?:\.\d+)? points\) (.*)$", text, re.M)
    return Reply(text=json.dumps({"criteria": [{"id": int(i), "reasoning": "r", "met": t.split()[0].lower()
                                                not in FAILS[who]} for i, t in items]}))


def _run(url: str, spec: Path, cand: str, run: Path, env: dict[str, str]) -> Path:
    res = run_cli([f"benchmark={spec}", "progress=none", f"hydra.run.dir={run}",
                   "candidate=openai_compatible", f"candidate.model=openai/{cand}", f"candidate.api_base={url}",
                   f"candidate.name={cand}", "candidate.api_key_env=FAKE_KEY",
                   "judge=openai_compatible", "judge.model=openai/judge", f"judge.api_base={url}",
                   "judge.name=judge", "judge.api_key_env=FAKE_KEY"], env)
    assert res.returncode == 0, res.stderr
    return run


def _scores(run: Path) -> dict[str, float]:
    return {r["id"]: r["score"] for r in map(json.loads, (run / "samples.jsonl").read_text("utf-8").splitlines())}


@pytest.fixture
def old(tmp_path: Path) -> Path:
    """Version 1 with q4's group corrected (lint's planted 'advice' is no taxonomy group: it would not load)."""
    spec = tmp_path / "v1"
    shutil.copytree(DATA / "lint_mini", spec)
    rows = spec / "lint_mini.jsonl"
    rows.write_text(rows.read_text("utf-8").replace('"advice"', '"guidance"'), "utf-8")
    return spec


def test_diff_lists_every_planted_change_and_rescored_scores_equal_fresh_runs(tmp_path: Path, old: Path,
                                                                              env: dict[str, str]) -> None:
    with FakeServer(script) as srv:
        runs = {(c, v): _run(srv.url, spec, c, tmp_path / f"{c}-{v}", env)
                for c in FAILS for v, spec in (("v1", old), ("v2", NEW))}
        calls = len(srv.requests)
        res = run_cli(["diff", str(old), str(NEW), f"runs=[{runs['cand_a', 'v1']},{runs['cand_b', 'v1']}]",
                       f"out={tmp_path / 'diff.txt'}"], env)
        assert len(srv.requests) == calls  # rescored from the stored verdicts: no call
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    assert {x for x in lines if not x.startswith((" ", "scores under", "diff:"))} == PLANTED
    assert (tmp_path / "diff.txt").read_text("utf-8").splitlines() == lines[:-1]
    for cand in FAILS:
        line = next(x for x in lines if x.startswith(f"  {cand} "))
        assert line.endswith("over 3 questions; not rescored: q1: criterion 2 added, no verdict")
        got = re.search(r": (\d+\.\d\d) -> (\d+\.\d\d) \(([+-]\d+\.\d\d)\)", line).groups()  # type: ignore[union-attr]
        before, fresh = _scores(runs[cand, "v1"]), _scores(runs[cand, "v2"])
        kept = ("q2", "q3", "q4")  # q1 has a criterion without a verdict, q5 was never asked in version 1
        old_score, new_score = (100 * sum(s[q] for q in kept) / 3 for s in (before, fresh))
        assert got == (f"{old_score:.2f}", f"{new_score:.2f}", f"{new_score - old_score:+.2f}")
    # by hand for cand_a (fails "Suggests ..."): q2 1, q3 2/7 (was 2/6), q4 1
    assert f"{100 * (2 + 2 / 7) / 3:.2f}" in next(x for x in lines if x.startswith("  cand_a "))


def test_a_run_of_another_version_is_refused(tmp_path: Path, old: Path, env: dict[str, str]) -> None:
    with FakeServer(script) as srv:
        run = _run(srv.url, NEW, "cand_a", tmp_path / "run", env)
    res = run_cli(["diff", str(old), str(NEW), f"runs={run}"], env)
    assert res.returncode == 2 and res.stdout == "" and res.stderr.count("\n") == 1
    assert "a run of lint_mini 2, not of lint_mini 1" in res.stderr


def test_a_changelog_that_skips_a_version_is_one_line_exit_2(tmp_path: Path, old: Path, env: dict[str, str]) -> None:
    new = tmp_path / "v3"
    shutil.copytree(NEW, new)
    (new / "benchmark.yaml").write_text((new / "benchmark.yaml").read_text("utf-8").replace(
        'version: "2"', 'version: "3"'), "utf-8")
    (new / "changelog.yaml").write_text("versions:\n  - {version: 1}\n  - {version: 3}\n", "utf-8")
    before = sorted(p.name for p in new.iterdir())
    res = run_cli(["diff", str(old), str(new), f"out={tmp_path / 'diff.txt'}"], env)
    assert res.returncode == 2 and res.stdout == "" and res.stderr.count("\n") == 1
    assert "version 3 follows 1" in res.stderr and not (tmp_path / "diff.txt").exists()
    assert sorted(p.name for p in new.iterdir()) == before


def test_successors_by_hand() -> None:
    assert successors((1,)) == {(2,)}
    assert successors((1, 2)) == {(1, 3), (2, 0)}


def test_the_same_version_twice_is_no_change_exit_0(env: dict[str, str]) -> None:
    res = run_cli(["diff", str(NEW), str(NEW)], env)
    assert (res.returncode, res.stdout) == (0, "diff: lint_mini 2 -> lint_mini 2: 0 changes\n"), res.stderr
