"""Model families and the self-preference audit, through the console script and stored run directories.

The grid (tests/gridruns.py) has judge `ja` (openai) plant a bias: it passes its own family's failed
items with probability PLANT on top of symmetric noise; `ja_fair` has the same noise and no plant.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

import gridruns as g
from rubric_engine.errors import ConfigError
from rubric_engine.models.entries import ModelSpec

from conftest import REPO as ROOT
KNOWN_FAMILIES = {"openai", "anthropic", "google", "qwen", "deepseek", "moonshot"}


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return g.build_grid(tmp_path_factory.mktemp("grid"))


def audit(grid: dict[str, Any], judges: list[str], tmp: Path, *extra: str) -> tuple[Any, dict[str, Any]]:
    dirs = [str(d) for (c, j), d in sorted(grid["dirs"].items()) if j in judges]
    res = g.run_cli(["audit", *dirs, f"out={tmp}", "n_boot=2000", *extra], grid["env"], timeout=300)
    report = json.loads((tmp / "audit.json").read_text()) if res.returncode == 0 else {}
    return res, report


def test_every_shipped_entry_declares_a_family() -> None:
    for path in sorted((ROOT / "conf").glob("*/*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if path.stem == "openai_compatible":
            assert "family" in data and data["family"] is None  # the user names it
            continue
        assert data.get("family") in (("mock",) if path.stem == "mock" else KNOWN_FAMILIES), path
        assert ModelSpec.from_config(data, role=path.parent.name).family == data["family"]


def test_family_is_checked_and_normalised() -> None:
    assert ModelSpec.from_config({"model": "openai/x", "family": "Qwen"}, role="judge").family == "qwen"
    assert ModelSpec.from_config({"model": "openai/x"}, role="judge").family is None
    with pytest.raises(ConfigError, match="family must be a short name"):
        ModelSpec.from_config({"model": "openai/x", "family": "open ai!"}, role="judge")


def test_summary_records_both_families(grid: dict[str, Any]) -> None:
    s = json.loads((grid["dirs"][("c_an", "jc")] / "summary.json").read_text())
    assert s["candidate"] == {"name": "c_an", "model": "openai/c_an", "family": "anthropic"}
    assert s["judge"] == {"name": "jc", "model": "openai/jc", "family": "google"}


def _expected_rates(judge: str) -> dict[bool, tuple[int, int]]:
    """Independent count from the script: items the two noise-free judges fail are exactly the base
    failures; (passes by `judge`, items) split by own family."""
    out = {True: [0, 0], False: [0, 0]}
    for qid, row in g.BY_ID.items():
        for i, it in enumerate(row["rubric"], 1):
            rule = it["dimension"] == g.RULE_LABEL
            for cand, fam in g.CANDIDATES.items():
                if not g.base_pass(qid, i, cand, rule):
                    own = fam == g.JUDGES[judge]
                    out[own][0] += g.judge_pass(judge, qid, i, cand, rule)
                    out[own][1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def test_audit_recovers_a_planted_bias(grid: dict[str, Any], tmp_path: Path) -> None:
    res, report = audit(grid, ["ja", "jb", "jc"], tmp_path)
    assert res.returncode == 0, res.stderr
    a = {x["judge"]: x for x in report["judges"]}["ja"]
    (own_p, own_n), (oth_p, oth_n) = _expected_rates("ja")[True], _expected_rates("ja")[False]
    assert (a["own_items"], a["other_items"]) == (own_n, oth_n)
    assert a["own_rate"] == pytest.approx(own_p / own_n) and a["other_rate"] == pytest.approx(oth_p / oth_n)
    planted = (1 - g.NOISE["ja"]) * g.PLANT["ja"]  # expected own - other difference
    assert a["lo"] <= planted <= a["hi"]
    assert a["lo"] > 0 and a["points"] > 0 and a["points_lo"] > 0
    paragraphs = " ".join(report["paragraphs"])
    assert "ja (openai) favours its own family" in paragraphs
    assert "no evidence that jb (anthropic)" in paragraphs and "no evidence that jc (google)" in paragraphs
    assert "favours its own family" in res.stdout and (tmp_path / "audit.md").is_file()


def test_audit_finds_nothing_when_nothing_is_planted(grid: dict[str, Any], tmp_path: Path) -> None:
    res, report = audit(grid, ["ja_fair", "jb", "jc"], tmp_path)
    assert res.returncode == 0, res.stderr
    for a in report["judges"]:
        assert a["lo"] <= 0 <= a["hi"], a
    fair = {x["judge"]: x for x in report["judges"]}["ja_fair"]
    assert fair["own_rate"] > 0 and fair["other_rate"] > 0  # the noise is there; only the bias is not
    assert all(p.startswith("no evidence") for p in report["paragraphs"])


def test_rank_under_each_judge_alone(grid: dict[str, Any], tmp_path: Path) -> None:
    res, report = audit(grid, ["ja", "jb", "jc"], tmp_path)
    assert res.returncode == 0, res.stderr
    for j in ("ja", "jb", "jc"):
        overall = {c: json.loads((grid["dirs"][(c, j)] / "summary.json").read_text())["overall"] for c in g.CANDIDATES}
        order = sorted(overall, key=lambda c: -overall[c])
        assert [report["ranks"][c][j] for c in order] == sorted(report["ranks"][c][j] for c in order)
        assert report["ranks"][order[0]][j] == 1


def _copy(grid: dict[str, Any], judges: list[str], tmp: Path) -> list[Path]:
    out = []
    for (c, j), d in sorted(grid["dirs"].items()):
        if j in judges:
            target = tmp / f"{c}_{j}"
            shutil.copytree(d, target)
            out.append(target)
    return out


def _one_error_line(res: Any, *needles: str) -> None:
    assert res.returncode == 2, res.stdout + res.stderr
    first = res.stderr.strip().splitlines()[0]
    assert first.startswith("rubric-engine: error: audit:") and "Traceback" not in res.stderr
    for n in needles:
        assert n in first, first


def test_missing_family_is_one_line_and_family_option_fixes_it(grid: dict[str, Any], tmp_path: Path) -> None:
    dirs = _copy(grid, ["jb", "jc"], tmp_path)
    path = dirs[0] / "summary.json"
    s = json.loads(path.read_text())
    s["judge"]["family"] = None
    path.write_text(json.dumps(s))
    res = g.run_cli(["audit", *map(str, dirs), f"out={tmp_path}"], grid["env"])
    _one_error_line(res, "has no family", f"family.{s['judge']['name']}=")
    res = g.run_cli(["audit", *map(str, dirs), f"out={tmp_path}", f"family.{s['judge']['name']}=anthropic"], grid["env"])
    assert res.returncode == 0, res.stderr


def test_runs_judged_on_different_replies_are_refused(grid: dict[str, Any], tmp_path: Path) -> None:
    dirs = _copy(grid, ["jb", "jc"], tmp_path)
    victim = next(d for d in dirs if d.name == "c_go_jc") / "samples.jsonl"
    rows = [json.loads(x) for x in victim.read_text().splitlines()]
    rows[3]["response"] += " (edited)"
    victim.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = g.run_cli(["audit", *map(str, dirs), f"out={tmp_path}"], grid["env"])
    _one_error_line(res, "different replies", "c_go", rows[3]["id"])


@pytest.mark.parametrize("judges, needle", [(["jb"], "at least two judges"), (None, "missing: ")])
def test_incomplete_grids_are_refused(grid: dict[str, Any], tmp_path: Path, judges: list[str] | None,
                                      needle: str) -> None:
    dirs = [d for (c, j), d in grid["dirs"].items() if j in (judges or ["jb", "jc"])]
    if judges is None:  # drop one cell of the grid
        dirs = [d for d in dirs if d != grid["dirs"][("c_an", "jc")]]
    res = g.run_cli(["audit", *map(str, dirs), f"out={tmp_path}"], grid["env"])
    _one_error_line(res, needle)


def test_audit_help_and_bad_option(grid: dict[str, Any]) -> None:
    res = g.run_cli(["audit", "--help"], grid["env"])
    assert res.returncode == 0 and "usage: rubric-engine audit" in res.stdout
    res = g.run_cli(["audit", str(grid["sweep"]), "bogus=1"], grid["env"])
    _one_error_line(res, "unknown option 'bogus'")


def test_regrading_a_run_keeps_its_candidate_and_feeds_the_audit(grid: dict[str, Any], tmp_path: Path) -> None:
    """The README's flow: `stage=score from_run=RUN judge=...` (here fully cached: no server needed)."""
    src = grid["dirs"][("c_an", "jb")]
    conf = grid["sweep"].parent / "conf"
    out = tmp_path / "regraded"
    res = g.run_cli(["benchmark=heartbench_en", "stage=score", f"from_run='{src}'", "judge=jc", "progress=none",
                     f"hydra.run.dir={out}"], grid["env"])
    assert res.returncode == 0, res.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["candidate"] == {"name": "c_an", "model": "openai/c_an", "family": "anthropic"}
    assert s["calls"]["judge"]["made"] == 0 and s["calls"]["judge"]["cache_hits"] > 0  # nothing was sent
    assert s["overall"] == json.loads((grid["dirs"][("c_an", "jc")] / "summary.json").read_text())["overall"]
    res = g.run_cli(["audit", str(src), str(out), f"out={tmp_path}"], grid["env"])
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "audit.json").read_text())["families"] == {"c_an": "anthropic", "jb": "anthropic",
                                                                              "jc": "google"}
