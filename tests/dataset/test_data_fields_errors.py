"""A misspelt `data.fields` mapping that a report table depends on is an error (one line: the spec file and line,
the key path, the bad name, the closest of the data's columns), not a warning followed by an empty table; one no
table uses stays a counted warning. A data file's errors say which format it was read in and which file chose it
(a JSONL file under a CSV parent is read as CSV). Through the console script."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import MINI, run_cli

pytestmark = pytest.mark.slow


def _variant(tmp_path: Path, parent: str, body: str) -> Path:
    spec = tmp_path / "variant"
    spec.mkdir()
    (spec / "benchmark.yaml").write_text(f"extends: {parent}\nname: variant\n{body}", encoding="utf-8")
    return spec


def _error(stderr: str) -> str:
    [line] = [x for x in stderr.splitlines() if x.startswith("rubric-engine: error:")]
    return line


def test_a_misspelt_field_a_breakdown_uses_is_one_error(tmp_path: Path, env: dict[str, str]) -> None:
    spec = _variant(tmp_path, "heartbench", "data:\n  fields:\n    scenario: primary_scen\n")
    checked = run_cli(["validate", str(spec), f"data.path={MINI}"], env, cwd=tmp_path)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    line = _error(checked.stderr)
    assert f"{spec / 'benchmark.yaml'}:5: data.fields.scenario: no row of {MINI} has this column" in line, line
    assert "(scenarios, by: scenario) depends on it (got 'primary_scen'); did you mean 'primary_scene'?" in line
    run = run_cli([f"benchmark={spec}", f"data.path={MINI}", "candidate=mock", "judge=mock",
                   f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
    assert run.returncode == 2 and "data.fields.scenario" in _error(run.stderr) and not (tmp_path / "run").exists()


@pytest.mark.parametrize(("key", "name"), [("secondary_scenario", "secondary_scen"),  # no table uses it
                                         ("scenario", "setting")])  # a column the file lacks, none resembling it
def test_other_absent_columns_stay_warnings(tmp_path: Path, env: dict[str, str], key: str, name: str) -> None:
    """A per-subset file without its subset column is data as published, not a typo: counted, not refused."""
    spec = _variant(tmp_path, "heartbench", f"data:\n  fields:\n    {key}: {name}\n")
    checked = run_cli(["validate", str(spec), f"data.path={MINI}"], env, cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert f"no row has the field {name!r}" in checked.stdout + checked.stderr


def test_a_jsonl_file_under_a_csv_parent_says_it_was_read_as_csv(tmp_path: Path, env: dict[str, str]) -> None:
    spec = _variant(tmp_path, "reference_qa", "data:\n  path: rows.jsonl\n")
    row = {"id": "x1", "question": "Name a primary colour.", "reference": "Red.", "topics": ["topic:art"],
           "checks": [{"check": "Names red, blue or yellow.", "points": 1}]}
    (spec / "rows.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    checked = run_cli(["validate", str(spec)], env, cwd=tmp_path)
    assert checked.returncode == 2, checked.stdout
    # the parent's benchmark.yaml wherever the package is installed (the checkout, or site-packages)
    said = re.search(r"\(read as csv though the name says jsonl: data\.format csv, set in (\S+):\d+\)",
                     _error(checked.stderr))
    assert said and Path(said.group(1)).parts[-3:] == ("benchmarks", "reference_qa", "benchmark.yaml"), checked.stderr
    (spec / "benchmark.yaml").write_text("extends: reference_qa\nname: variant\ndata:\n  path: rows.jsonl\n"
                                         "  format: jsonl\n", encoding="utf-8")
    fixed = run_cli(["validate", str(spec)], env, cwd=tmp_path)  # the fix the error names
    assert fixed.returncode == 0, fixed.stderr
