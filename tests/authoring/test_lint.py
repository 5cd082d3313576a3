"""`rubric-engine lint`: every defect planted in tests/data/lint_mini (en, taxonomy, lint.yaml weights 1..5) and
lint_mini_zh (zh rules, no taxonomy) is one line naming question and criterion, and nothing else is flagged;
exit 1 with findings, 0 clean, 2 for an unreadable spec or a changelog that skips a version."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import DATA, clean_env, run_cli
from rubric_engine.authoring.lint import normalised, similarity

PLANTED_EN = {  # question, criterion, kind: each planted defect of lint_mini.jsonl
    ("q1", 2, "compound"),  # "Acknowledges the failure and suggests booking another lesson"
    ("q1", 3, "vague"),  # "Responds appropriately ..."
    ("q2", 2, "duplicate"),  # q2's first criterion with a full stop
    ("q2", 3, "weight"),  # 9, outside lint.yaml's 1..5
    ("q3", 1, "not observable"),  # "Understands the user's anxiety"
    ("q3", 3, "near-duplicate"),  # "... the exam" vs "... an exam"
    ("q4", 2, "group"),  # "advice" is no data label of the taxonomy
}  # q4's "Lists needs and feelings ..." joins two nouns, not two demands: not compound
PLANTED_ZH = {("z1", 2, "compound"), ("z1", 3, "vague"), ("z2", 2, "near-duplicate"), ("z2", 3, "not observable")}


def _found(stdout: str) -> set[tuple[str, int, str]]:
    out = set()
    for line in stdout.splitlines():
        if " criterion " in line:
            head, kind, _ = line.split(": ", 2)
            qid, _, n = head.split(" ")
            out.add((qid, int(n), kind))
    return out


@pytest.mark.parametrize(("spec", "planted"), [("lint_mini", PLANTED_EN), ("lint_mini_zh", PLANTED_ZH)])
def test_lint_flags_every_planted_defect_and_nothing_else(tmp_path: Path, spec: str,
                                                          planted: set[tuple[str, int, str]]) -> None:
    out = tmp_path / "lint.txt"
    res = run_cli(["lint", str(DATA / spec), f"out={out}"], clean_env(tmp_path))
    assert res.returncode == 1, res.stderr
    assert _found(res.stdout) == planted
    assert out.read_text("utf-8").splitlines() == [x for x in res.stdout.splitlines() if " criterion " in x]
    assert f"lint: {len(planted)} findings in {spec} 1" in res.stdout


def test_a_clean_spec_exits_0(tmp_path: Path) -> None:
    spec = tmp_path / "clean"
    shutil.copytree(DATA / "lint_mini", spec)
    rows = (spec / "lint_mini.jsonl").read_text("utf-8").splitlines()
    (spec / "lint_mini.jsonl").write_text(rows[3].replace('"advice"', '"guidance"') + "\n", "utf-8")
    res = run_cli(["lint", f"benchmark={spec}"], clean_env(tmp_path))
    assert (res.returncode, res.stdout.strip()) == (0, "lint: 0 findings in lint_mini 1"), res.stderr


def test_a_changelog_that_skips_a_version_is_one_line_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "skips"
    shutil.copytree(DATA / "lint_mini", spec)
    text = (spec / "benchmark.yaml").read_text("utf-8")
    (spec / "benchmark.yaml").write_text(text.replace('version: "1"', 'version: "3"'), "utf-8")
    (spec / "changelog.yaml").write_text("versions:\n  - {version: 1, changes: [first]}\n"
                                         "  - {version: 3, changes: [third]}\n", "utf-8")
    res = run_cli(["lint", str(spec)], clean_env(tmp_path))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "version 3 follows 1" in res.stderr


def test_a_bad_lint_file_is_one_line_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "badlint"
    shutil.copytree(DATA / "lint_mini", spec)
    (spec / "lint.yaml").write_text("weights: {min: 5, max: 1}\n", "utf-8")
    res = run_cli(["lint", str(spec)], clean_env(tmp_path))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "weights.min <= weights.max" in res.stderr


def test_similarity_is_jaccard_of_character_ngrams() -> None:
    assert normalised("Asks, WHAT it is!") == "askswhatitis"
    # by hand: "abcd" -> {abc, bcd}, "abce" -> {abc, bce}: 1 shared of 3
    assert similarity("abcd", "abce") == pytest.approx(1 / 3)
    assert similarity("same text", "Same  text.") == 1.0


def test_items_the_engine_checks_are_not_judged_by_their_text(tmp_path: Path) -> None:
    # checks_mini: several items per question with a check and no text; only a judge reads a criterion's text
    res = run_cli(["lint", str(DATA / "checks_mini")], clean_env(tmp_path))
    assert (res.returncode, res.stdout.strip()) == (0, "lint: 0 findings in checks_mini 1"), res.stderr
