"""`rubric-engine estimate` through the console script against the fake server: an item model fitted on six stored
runs, a new model run on the anchor subset only (the server counts its requests: only the anchors' questions are
asked; with ids= from anchors.ids or with item_model=), then its full score estimated; two adaptive rounds; and the
bad inputs, each one line, exit 2, nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fakeserver import FakeServer
import gridruns
from gridruns import BY_ID, GridScript, entry, u

CANDIDATES = {f"m{i}": "openai" for i in range(1, 7)}
SKILL = {f"m{i}": 0.1 * (i + 1) for i in range(1, 8)}  # m1 passes an item with probability 0.2, ..., m7 0.8


class SkillScript(GridScript):
    """The grid's script with models of different skill: a positive item is met with the model's probability,
    a penalty item or a failure-rule item with its complement (so a skilled model triggers fewer)."""

    def judge(self, model: str, text: str) -> Any:
        qid = re.search(r"REPLY\[(\w+)\]", text).group(1)  # type: ignore[union-attr]
        cand = re.search(r"MODEL\[(\w+)\]", text).group(1)  # type: ignore[union-attr]
        rubric = BY_ID[qid]["rubric"]

        def met(i: int) -> bool:
            good = u("skill", qid, i, cand) < SKILL[cand]
            return good if (rubric[i - 1]["score"] or 0) > 0 else not good

        return self.verdict(len(rubric), met, lambda i: "scripted")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("estimate")
    grid = gridruns.build_grid(tmp, candidates=CANDIDATES, judges={"jb": "anthropic"}, script=SkillScript())
    bank = tmp / "bank" / "item_model.json"
    res = run_cli(["estimate", "fit", str(grid["sweep"]), "anchors=4", f"out={bank}"], grid["env"])
    assert res.returncode == 0, res.stderr
    return {**grid, "tmp": tmp, "bank": bank, "fit_out": res.stdout}


def test_fit_writes_the_model_and_the_anchor_override(fitted: dict[str, Any]) -> None:
    model = json.loads(fitted["bank"].read_text(encoding="utf-8"))
    assert model["benchmark"] == "heartbench_en" and len(model["training"]) == 6
    assert {i["question"] for i in model["items"]} == set(BY_ID)
    override = (fitted["bank"].parent / "anchors.ids").read_text(encoding="utf-8").strip()
    assert override == f"ids=[{','.join(model['anchors'])}]" and len(model["anchors"]) == 4
    assert "6 runs" in fitted["fit_out"] and "4 anchor questions" in fitted["fit_out"]


def test_a_run_on_the_anchors_asks_only_them_and_is_estimated(fitted: dict[str, Any]) -> None:
    tmp, env = fitted["tmp"], fitted["env"]
    override = (fitted["bank"].parent / "anchors.ids").read_text(encoding="utf-8").strip()
    anchors = json.loads(fitted["bank"].read_text(encoding="utf-8"))["anchors"]
    script = SkillScript()
    with FakeServer(script) as srv:
        (tmp / "conf" / "candidate" / "m7.yaml").write_text(entry("m7", "openai", srv.url), encoding="utf-8")
        (tmp / "conf" / "judge" / "jb.yaml").write_text(entry("jb", "anthropic", srv.url), encoding="utf-8")
        run_dir = tmp / "new_run"
        res = run_cli(["benchmark=heartbench_en", "candidate=m7", "judge=jb", "progress=none", override,
                       f"hydra.run.dir={run_dir}"], env)
        assert res.returncode == 0, res.stderr[-2000:]
        asked = [script.question(script.text(b)) for b in srv.requests if b["model"] == "m7"]
        judged = [re.search(r"REPLY\[(\w+)\]", script.text(b)).group(1)  # type: ignore[union-attr]
                  for b in srv.requests if b["model"] == "jb"]
    assert sorted(asked) == sorted(anchors)  # one candidate request per anchor question, none other
    assert sorted(judged) == sorted(anchors)
    res = run_cli(["estimate", "score", str(run_dir), f"model={fitted['bank']}", "adaptive=2"], env)
    assert res.returncode == 0, res.stderr
    record = json.loads((run_dir / "estimate.json").read_text(encoding="utf-8"))
    assert sorted(record["questions_used"]) == sorted(anchors) and record["questions_total"] == len(BY_ID)
    low, high = record["interval"]
    assert 0 <= low <= record["estimate"] <= high <= 100
    assert len(record["next"]) == 2 and not set(record["next"]) & set(anchors)
    assert f"from 4 of {len(BY_ID)} questions" in res.stdout and "next to ask: ids=[" in res.stdout


def _one_line_exit_2(res: Any, *words: str) -> None:
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rubric-engine: error:"), res.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_too_few_runs_to_fit(fitted: dict[str, Any], tmp_path: Path) -> None:
    two = sorted(fitted["dirs"].values())[:2]
    out = tmp_path / "m.json"
    res = run_cli(["estimate", "fit", *map(str, two), f"out={out}"], fitted["env"])
    _one_line_exit_2(res, "2 complete run(s)", "at least 5")
    assert not out.exists() and not (tmp_path / "anchors.ids").exists()


def _edited_model(fitted: dict[str, Any], tmp_path: Path, edit: Any) -> Path:
    model = json.loads(fitted["bank"].read_text(encoding="utf-8"))
    edit(model)
    path = tmp_path / "item_model.json"
    path.write_text(json.dumps(model), encoding="utf-8")
    return path


def test_a_model_fitted_on_another_spec_version_is_refused(fitted: dict[str, Any], tmp_path: Path) -> None:
    path = _edited_model(fitted, tmp_path, lambda m: m.update(spec_hash="0" * 64, spec_version="0.9"))
    run_dir = sorted(fitted["dirs"].values())[0]
    res = run_cli(["estimate", "score", str(run_dir), f"model={path}", f"out={tmp_path / 'e.json'}"], fitted["env"])
    _one_line_exit_2(res, "version 0.9", "fit the item model again")
    assert not (tmp_path / "e.json").exists()


def test_a_run_that_does_not_match_the_model_is_refused(fitted: dict[str, Any], tmp_path: Path) -> None:
    dropped = sorted(BY_ID)[0]
    path = _edited_model(fitted, tmp_path, lambda m: m.update(items=[i for i in m["items"] if i["question"] != dropped]))
    run_dir = sorted(fitted["dirs"].values())[0]
    res = run_cli(["estimate", "score", str(run_dir), f"model={path}", f"out={tmp_path / 'e.json'}"], fitted["env"])
    _one_line_exit_2(res, "does not know", repr(dropped))
    assert not (tmp_path / "e.json").exists()


def _run_m7(fitted: dict[str, Any], run_dir: Path, *extra: str) -> tuple[Any, list[str]]:
    """A run of the new model m7 on the fake server; returns the result and the question of every candidate
    request the server received."""
    tmp, script = fitted["tmp"], SkillScript()
    with FakeServer(script) as srv:
        (tmp / "conf" / "candidate" / "m7.yaml").write_text(entry("m7", "openai", srv.url), encoding="utf-8")
        (tmp / "conf" / "judge" / "jb.yaml").write_text(entry("jb", "anthropic", srv.url), encoding="utf-8")
        res = run_cli(["benchmark=heartbench_en", "candidate=m7", "judge=jb", "progress=none", *extra,
                       f"hydra.run.dir={run_dir}"], fitted["env"])
        asked = [script.question(script.text(b)) for b in srv.requests if b["model"] == "m7"]
    return res, asked


def test_the_run_option_asks_the_anchors_and_writes_the_estimate(fitted: dict[str, Any]) -> None:
    anchors = json.loads(fitted["bank"].read_text(encoding="utf-8"))["anchors"]
    run_dir = fitted["tmp"] / "anchored_run"
    res, asked = _run_m7(fitted, run_dir, f"item_model={fitted['bank']}")
    assert res.returncode == 0, res.stderr[-2000:]
    assert sorted(asked) == sorted(anchors)
    record = json.loads((run_dir / "estimate.json").read_text(encoding="utf-8"))
    assert sorted(record["questions_used"]) == sorted(anchors)
    assert f"estimated full score {record['estimate']:.1f}" in res.stdout


def test_the_run_option_refuses_another_spec_version_before_any_call(fitted: dict[str, Any], tmp_path: Path) -> None:
    path = _edited_model(fitted, tmp_path, lambda m: m.update(spec_hash="f" * 64, spec_version="0.9"))
    run_dir = tmp_path / "refused_run"
    res, asked = _run_m7(fitted, run_dir, f"item_model={path}")
    _one_line_exit_2(res, "version 0.9", "this run is heartbench_en")
    assert asked == [] and not run_dir.exists()


def test_adaptive_rounds_through_the_console_script(fitted: dict[str, Any]) -> None:
    """Round 1 asks the anchors; `estimate score ... adaptive=3` names 3 questions not yet asked; round 2 asks them
    (and only them); scoring both rounds uses the 7 questions and never names an asked one again."""
    tmp, env, bank = fitted["tmp"], fitted["env"], fitted["bank"]
    anchors = json.loads(bank.read_text(encoding="utf-8"))["anchors"]
    first = tmp / "round1"
    res, asked1 = _run_m7(fitted, first, f"item_model={bank}")
    assert res.returncode == 0 and sorted(asked1) == sorted(anchors), res.stderr[-2000:]
    res = run_cli(["estimate", "score", str(first), f"model={bank}", "adaptive=3"], env)
    assert res.returncode == 0, res.stderr
    override = re.search(r"next to ask: (ids=\[[^\]]*\])", res.stdout).group(1)  # type: ignore[union-attr]
    nxt = json.loads((first / "estimate.json").read_text(encoding="utf-8"))["next"]
    assert override == f"ids=[{','.join(nxt)}]" and len(nxt) == 3 and not set(nxt) & set(anchors)
    second = tmp / "round2"
    res, asked2 = _run_m7(fitted, second, override)
    assert res.returncode == 0 and sorted(asked2) == sorted(nxt), res.stderr[-2000:]
    res = run_cli(["estimate", "score", str(first), str(second), f"model={bank}", "adaptive=2"], env)
    assert res.returncode == 0, res.stderr
    record = json.loads((second / "estimate.json").read_text(encoding="utf-8"))
    assert sorted(record["questions_used"]) == sorted(anchors + nxt)
    assert not set(record["next"]) & set(anchors + nxt)
    twice = run_cli(["estimate", "score", str(first), str(first), f"model={bank}", f"out={tmp / 'twice.json'}"], env)
    _one_line_exit_2(twice, "is in two of these runs")
    assert not (tmp / "twice.json").exists()


def test_runs_of_two_spec_versions_are_not_fitted_together(fitted: dict[str, Any], tmp_path: Path) -> None:
    """A copy of one run recorded under another spec hash (summary and manifest alike, as a run of an edited spec
    would be) beside the six: one line, exit 2, no model written."""
    import shutil

    other = tmp_path / "other_version"
    shutil.copytree(sorted(fitted["dirs"].values())[0], other)
    for name in ("summary.json", "manifest.json"):
        path = other / name
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            data["spec_hash"] = "e" * 64
            path.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "m.json"
    res = run_cli(["estimate", "fit", str(fitted["sweep"]), str(other), f"out={out}"], fitted["env"])
    _one_line_exit_2(res, "different versions of its spec")
    assert not out.exists() and not (tmp_path / "anchors.ids").exists()


def test_a_dry_run_with_the_item_model_counts_only_the_anchors(fitted: dict[str, Any]) -> None:
    res, asked = _run_m7(fitted, fitted["tmp"] / "dry", f"item_model={fitted['bank']}", "dry_run=true")
    assert res.returncode == 0, res.stderr[-2000:]
    row = next(line for line in res.stdout.splitlines() if "candidate" in line and "m7" in line)
    assert re.split(r"\s*[│|]\s*", row.strip(" │|"))[2] == "4", row  # Role | Model | Calls: the 4 anchors
    assert asked == [] and not (fitted["tmp"] / "dry").exists()


def test_a_model_of_another_judge_is_refused(fitted: dict[str, Any], tmp_path: Path) -> None:
    """An item's difficulty is its judge's too: a run graded by jb against a model fitted on another judge's runs is
    one line, exit 2, for `estimate score` and, before any call, for item_model= on a run."""
    path = _edited_model(fitted, tmp_path, lambda m: m.update(judge="other-judge"))
    run_dir = sorted(fitted["dirs"].values())[0]
    res = run_cli(["estimate", "score", str(run_dir), f"model={path}", f"out={tmp_path / 'e.json'}"], fitted["env"])
    _one_line_exit_2(res, "graded by other-judge", "graded by jb")
    assert not (tmp_path / "e.json").exists()
    res, asked = _run_m7(fitted, tmp_path / "refused", f"item_model={path}")
    _one_line_exit_2(res, "graded by other-judge", "this run is graded by jb")
    assert asked == [] and not (tmp_path / "refused").exists()


# ------------------------------------------------------------------ adaptive selection during a run (item_budget=)

def _waves_by_the_rule(bank_path: Path, run_dir: Path, budget: int, wave: int) -> list[list[str]]:
    """The waves an adaptive run must ask, restated from the run's own records: each wave the `wave` questions
    chosen one after another by the least-expected-variance rule at the ability estimated from the waves before it
    (the prior's 0 for the first)."""
    from rubric_engine.stats.irt import estimate_ability
    from rubric_engine.stats.subset import item_values
    from rubric_engine.stats.subsetpick import next_for_estimate
    from rubric_engine.store.runs import load_run
    from rubric_engine.validity.estimate import read_model

    model, bank = read_model(bank_path)
    items = item_values(load_run(run_dir).scored, model["item"] != "question")
    waves: list[list[str]] = []
    asked: list[int] = []
    theta = 0.0
    while len(asked) < budget:
        this: list[str] = []
        for _ in range(min(wave, budget - len(asked))):
            g = next_for_estimate(bank, theta, asked)
            asked.append(g)
            this.append(bank.questions[g])
        waves.append(this)
        seen = [j for j, k in enumerate(bank.keys) if k in items and bank.questions.index(k[0]) in asked]
        theta = estimate_ability([items[bank.keys[j]] for j in seen], bank.fit.a[seen], bank.fit.b[seen])[0]
    return waves


def test_an_adaptive_run_asks_its_budget_wave_by_wave_by_the_rule(fitted: dict[str, Any]) -> None:
    """item_budget=7 with concurrency=2: 7 questions, each asked once, in waves of 2 whose order the server saw
    is the rule's at the ability estimated from the waves before; estimate.json uses exactly them."""
    run_dir = fitted["tmp"] / "adaptive_run"
    res, asked = _run_m7(fitted, run_dir, f"item_model={fitted['bank']}", "item_budget=7", "concurrency=2")
    assert res.returncode == 0, res.stderr[-2000:]
    assert len(asked) == 7 == len(set(asked)), asked
    waves = _waves_by_the_rule(fitted["bank"], run_dir, 7, 2)
    assert [len(w) for w in waves] == [2, 2, 2, 1]
    at = 0
    for wave in waves:  # a wave starts only once the one before it is answered
        assert sorted(asked[at:at + len(wave)]) == sorted(wave), (asked, waves)
        at += len(wave)
    record = json.loads((run_dir / "estimate.json").read_text(encoding="utf-8"))
    assert sorted(record["questions_used"]) == sorted(asked)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["counts"]["questions"] == 7
    assert f"from 7 of {len(BY_ID)} questions" in res.stdout


def test_a_killed_adaptive_run_resumes_to_the_same_selection_and_estimate(fitted: dict[str, Any]) -> None:
    """SIGKILL midway through an adaptive run (waves of one question), then the same command: no question in the
    journal is asked again, and the selection and the estimate are those of an uninterrupted run."""
    from conftest import EXE, kill_after_lines

    tmp, env, script = fitted["tmp"], fitted["env"], SkillScript()
    with FakeServer(script, latency=0.25) as srv:
        (tmp / "conf" / "candidate" / "m7.yaml").write_text(entry("m7", "openai", srv.url), encoding="utf-8")
        (tmp / "conf" / "judge" / "jb.yaml").write_text(entry("jb", "anthropic", srv.url), encoding="utf-8")

        def args(run_dir: Path) -> list[str]:
            return ["benchmark=heartbench_en", "candidate=m7", "judge=jb", "progress=none", "cache.enabled=false",
                    f"item_model={fitted['bank']}", "item_budget=6", "concurrency=1", f"hydra.run.dir={run_dir}"]

        def asked() -> list[str]:
            return [script.question(script.text(b)) for b in srv.requests if b["model"] == "m7"]

        ref = tmp / "adaptive_ref"
        assert run_cli(args(ref), env).returncode == 0
        srv.reset()
        run = tmp / "adaptive_killed"
        lines = kill_after_lines([EXE, *args(run)], run / "samples.jsonl", 4, env)
        done = {r["id"] for r in lines[1:]}
        assert 3 <= len(done) < 6, "the kill must land midway"
        assert not (run / "estimate.json").exists()
        srv.reset()
        res = run_cli(args(run), env)
        assert res.returncode == 0, res.stderr[-2000:]
        again = asked()
    assert not set(again) & done and len(again) == len(set(again))
    first, second = (json.loads((d / "estimate.json").read_text(encoding="utf-8")) for d in (ref, run))
    assert sorted(second["questions_used"]) == sorted(first["questions_used"]) and len(first["questions_used"]) == 6
    assert (second["estimate"], second["interval"], second["theta"]) == (first["estimate"], first["interval"],
                                                                         first["theta"])


@pytest.mark.parametrize(("extra", "words"), [
    (["item_budget=5"], ("item_budget= needs item_model=",)),
    (["item_budget=5", "ITEM_MODEL", "ids=[a,b]"], ("drop ids=",)),
    (["item_budget=0", "ITEM_MODEL"], ("item_budget=0", "at least 1")),
    (["item_budget=5", "ITEM_MODEL", "retry_errors=true"], ("retry_errors=true cannot", "start a new run")),
])
def test_bad_adaptive_run_options_are_one_line(fitted: dict[str, Any], tmp_path: Path, extra: list[str],
                                               words: tuple[str, ...]) -> None:
    opts = [f"item_model={fitted['bank']}" if e == "ITEM_MODEL" else e for e in extra]
    res, asked = _run_m7(fitted, tmp_path / "refused", *opts)
    _one_line_exit_2(res, *words)
    assert asked == [] and not (tmp_path / "refused").exists()


def test_a_dry_run_with_a_budget_counts_the_budget(fitted: dict[str, Any]) -> None:
    res, asked = _run_m7(fitted, fitted["tmp"] / "dry_budget", f"item_model={fitted['bank']}", "item_budget=5",
                         "dry_run=true")
    assert res.returncode == 0, res.stderr[-2000:]
    row = next(line for line in res.stdout.splitlines() if "candidate" in line and "m7" in line)
    assert re.split(r"\s*[│|]\s*", row.strip(" │|"))[2] == "5", row
    assert asked == [] and not (fitted["tmp"] / "dry_budget").exists()
