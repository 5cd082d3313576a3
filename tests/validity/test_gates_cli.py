"""The benchmark-building gates end to end through the console script: `pilot` (the `items` statistics as a
gate with declared thresholds) and `release` (a blind reply sheet from the pilot runs, judge-human agreement
against the declared threshold, a release note in the spec directory), over a sweep of a strong and a weak
candidate on the shipped English sample against tests/fakeserver.py. The judge's script plants saturated
criteria (met by both candidates); every other criterion separates them, so the gate's shares are known."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, QuestionScript, clean_env, read_rows, run_cli
from fakeserver import FakeServer, Reply

SAMPLE = REPO / "data" / "heartbench_en_sample.jsonl"
ROWS, BY_ID = read_rows(SAMPLE)
SATURATED = {("enq002", 2), ("enq007", 3), ("enq003", 1)}
REPLY_RE = re.compile(r"REPLY\[(\w+)\|(\w+)\]")
CANDIDATES = ("strong", "weak")
RULES = sum(c["score"] is None for r in ROWS for c in r["rubric"])  # failure rules never fire: dead
JUDGED = sum(len(r["rubric"]) for r in ROWS)
SHARE = 1 - (len(SATURATED) + RULES) / JUDGED  # every other criterion separates the two candidates
GATES = f"""
release:
  agreement: 0.75
  pilot: {{min_discriminating: {SHARE - 0.01:.4f}, max_saturated: 1}}
"""


def met(qid: str, i: int, cand: str) -> bool:
    """The judge's verdict: the strong reply meets every reward and no penalty, the weak the opposite."""
    if (qid, i) in SATURATED:
        return True
    score = BY_ID[qid]["rubric"][i - 1]["score"]
    if score is None:  # a failure rule never fires
        return False
    return (cand == "strong") == (score > 0)


class Script(QuestionScript):
    def judge(self, model: str, text: str) -> Reply:
        qid, cand = REPLY_RE.search(text).groups()  # type: ignore[union-attr]
        return self.verdict(len(BY_ID[qid]["rubric"]), lambda i: met(qid, i, cand))

    def candidate(self, model: str, qid: str) -> Reply:
        return Reply(text=f"REPLY[{qid}|{model}] I hear you.", usage=(30, 10))


def _copy_spec(dest: Path, version: str = "1.0", gates: str = "") -> None:
    """The shipped English spec copied with its sample data inside it (a spec's files stay in its directory)."""
    shutil.copytree(REPO / "benchmarks" / "heartbench_en", dest)
    shutil.copy(SAMPLE, dest / SAMPLE.name)
    path = dest / "benchmark.yaml"
    text = path.read_text(encoding="utf-8").replace("../../data/heartbench_en_sample.jsonl", SAMPLE.name)
    path.write_text(text.replace('version: "1.0"', f'version: "{version}"') + gates, encoding="utf-8")


def _entry(name: str, url: str) -> str:
    return f"name: {name}\nmodel: openai/{name}\napi_base: {url}\napi_key_env: FAKE_KEY\nparams: {{}}\n"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("gates")
    env = clean_env(tmp)
    env["RUBRIC_ENGINE_CONFIG_DIRS"] = str(tmp / "conf")
    spec = tmp / "heartbench_en"  # a copy: `release` writes its sheet and note into the spec directory
    _copy_spec(spec, gates=GATES)  # the gates' thresholds declared in the spec
    with FakeServer(Script(ROWS)) as srv:
        for group, names in (("candidate", CANDIDATES), ("judge", ["judge"])):
            (tmp / "conf" / group).mkdir(parents=True)
            for name in names:
                (tmp / "conf" / group / f"{name}.yaml").write_text(_entry(name, srv.url), encoding="utf-8")
        res = run_cli(["-m", f"benchmark={spec}", "progress=none", "bootstrap.samples=20",
                       f"hydra.sweep.dir={tmp / 'sweep'}", f"candidate={','.join(CANDIDATES)}", "judge=judge"],
                      env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return {"tmp": tmp, "env": env, "sweep": tmp / "sweep", "spec": spec}


def test_pilot_gate_fails_below_and_passes_above_its_threshold(sweep: dict[str, Any]) -> None:
    runs = [str(sweep["sweep"])]
    out = sweep["tmp"] / "pilot"
    res = run_cli(["pilot", *runs, f"out={out}"], sweep["env"])  # the spec's thresholds: just under the share
    assert res.returncode == 0, res.stdout + res.stderr
    gate = json.loads((out / "pilot.json").read_text(encoding="utf-8"))
    checks = {c["check"]: c for c in gate["checks"]}
    assert checks["discriminating criteria"]["value"] == pytest.approx(SHARE)
    assert checks["discriminating criteria"]["threshold"] == pytest.approx(SHARE - 0.01, abs=1e-4)
    assert checks["saturated criteria"]["value"] == pytest.approx(len(SATURATED) / JUDGED)
    assert gate["passed"] and "pilot gate passed" in res.stdout
    assert (out / "hard_set.ids").read_text(encoding="utf-8").strip() and (out / "items.csv").is_file()
    res = run_cli(["pilot", *runs, f"out={out}", f"min_discriminating={SHARE + 0.01:.4f}"], sweep["env"])
    assert res.returncode == 1 and "FAIL: discriminating criteria" in res.stdout, res.stdout + res.stderr
    res = run_cli(["pilot", *runs, f"out={out}", f"max_saturated={len(SATURATED) / JUDGED - 0.01:.4f}"],
                  sweep["env"])
    assert res.returncode == 1 and "FAIL: saturated criteria" in res.stdout, res.stdout + res.stderr


def test_pilot_bad_threshold_is_one_line(sweep: dict[str, Any]) -> None:
    res = run_cli(["pilot", str(sweep["sweep"]), "min_discriminating=1.5"], sweep["env"])
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "min_discriminating=1.5" in res.stderr


def _labels(sheet: Path, path: Path, wrong: int, sheet_id: str | None = None) -> int:
    """A labels CSV from the release sheet: one rater agreeing with the judge except on `wrong` items; returns
    the number of items."""
    with (sheet / "review.csv").open(encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    for n, row in enumerate(rows):
        qid, cand = REPLY_RE.search(row["reply"]).groups()  # type: ignore[union-attr]
        row["met"] = str(int(met(qid, int(row["criterion_index"]), cand) != (n < wrong)))
        row["rater"] = "ann"
        row["sheet_id"] = sheet_id or row["sheet_id"]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return len(rows)


def test_release_gate_fails_below_and_passes_above_the_threshold(sweep: dict[str, Any]) -> None:
    spec, env, tmp = sweep["spec"], sweep["env"], sweep["tmp"]
    common = ["release", f"benchmark={spec}", f"runs={sweep['sweep']}"]
    res = run_cli([*common, "n=12"], env)
    assert res.returncode == 0, res.stdout + res.stderr
    sheet = spec / "release" / "1.0"
    meta = json.loads((sheet / "sheet.json").read_text(encoding="utf-8"))
    assert meta["unit"] == "reply" and meta["version"] == "1.0" and meta["stratify"] == ["candidate", "subset"]
    n = _labels(sheet, tmp / "probe.csv", 0)
    wrong_below = int(n * 0.25) + 1  # agreement (n - wrong) / n just under 75%
    wrong_above = int(n * 0.25) - 1
    assert (n - wrong_below) / n < 0.75 <= (n - wrong_above) / n
    note = spec / "RELEASE-1.0.md"
    _labels(sheet, tmp / "below.csv", wrong_below)
    res = run_cli([*common, f"labels={tmp / 'below.csv'}"], env)
    assert res.returncode == 1 and "release gate failed" in res.stdout, res.stdout + res.stderr
    assert not note.exists()
    _labels(sheet, tmp / "other.csv", 0, sheet_id="0123456789ab")  # labels of another sheet: refused
    res = run_cli([*common, f"labels={tmp / 'other.csv'}"], env)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and not note.exists(), res.stderr
    _labels(sheet, tmp / "above.csv", wrong_above)
    res = run_cli([*common, f"labels={tmp / 'above.csv'}"], env)
    assert res.returncode == 0 and "release gate passed" in res.stdout, res.stdout + res.stderr
    text = note.read_text(encoding="utf-8")
    assert f"{100 * (n - wrong_above) / n:.1f}%" in text and "75.0%" in text
    res = run_cli([*common, f"labels={tmp / 'above.csv'}"], env)  # released once: the note is never replaced
    assert res.returncode == 2 and note.read_text(encoding="utf-8") == text, res.stderr


def test_release_refuses_a_sheet_of_another_version(sweep: dict[str, Any]) -> None:
    tmp, env = sweep["tmp"], sweep["env"]
    bumped = tmp / "bumped" / "heartbench_en"
    _copy_spec(bumped, "1.1")
    res = run_cli(["release", f"benchmark={bumped}", f"runs={sweep['sweep']}"], env)  # runs of 1.0
    assert res.returncode == 2 and "version '1.0'" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (bumped / "release").exists()
    old = tmp / "old_sheet"  # a sheet drawn for 1.0, labelled, checked against the spec at 1.1
    res = run_cli(["release", f"benchmark={sweep['spec']}", f"runs={sweep['sweep']}", "n=6", f"sheet={old}"], env)
    assert res.returncode == 0, res.stderr
    _labels(old, tmp / "old.csv", 0)
    res = run_cli(["release", f"benchmark={bumped}", f"runs={sweep['sweep']}", f"labels={tmp / 'old.csv'}",
                   f"sheet={old}"], env)
    assert res.returncode == 2 and "drawn for version '1.0'" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (bumped / "RELEASE-1.1.md").exists()


def test_the_release_block_changes_no_spec_hash_until_declared(tmp_path: Path) -> None:
    from rubric_engine.errors import SpecError
    from rubric_engine.spec.load import load_spec

    assert "release" not in load_spec("heartbench_en").resolved()  # the spec hash of existing specs, unchanged
    _copy_spec(tmp_path / "declared", gates=GATES)
    assert load_spec(tmp_path / "declared").resolved()["release"]["pilot"]["max_saturated"] == 1
    _copy_spec(tmp_path / "bad", gates="\nrelease: {agreement: 1.5}\n")
    with pytest.raises(SpecError, match="release.agreement"):
        load_spec(tmp_path / "bad")
