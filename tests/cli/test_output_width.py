"""Output written to a file or a pipe is never hard-wrapped: a long run directory and a long model name come
out whole on one line each, in the `outputs:` line and in the table headings and cells (rich fits a console
that is not a terminal to 80 columns, or to $COLUMNS, unless told otherwise). Through the console script,
stdout a pipe, with the keyless mock models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import MINI, run_cli

pytestmark = pytest.mark.slow

NAME = "a-candidate-" + "n" * 110  # longer than any terminal's default width


def test_a_run_piped_breaks_no_line(tmp_path: Path, env: dict[str, str]) -> None:
    run_dir = tmp_path / ("d" * 150) / "run"
    res = run_cli(["benchmark=heartbench", f"data.path={MINI}", "limit=2", "candidate=mock", "judge=mock",
                   f"candidate.name={NAME}", f"hydra.run.dir={run_dir}"], dict(env, COLUMNS="60"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert f"outputs: {run_dir}" in lines  # the whole path on its own line
    named = [line for line in lines if "nnnnnnnnnn" in line]
    assert named and all(NAME in line for line in named), named  # the heading holds the whole name, unbroken
    # the tables' rows are not folded either: each ability's label and its score share a line
    overall = f"{json.loads((run_dir / 'summary.json').read_text('utf-8'))['overall']:.2f}"
    assert any("Overall" in line and overall in line for line in lines), res.stdout
    # and the warnings on stderr (a pipe as well) keep the name whole
    assert any(NAME in line for line in res.stderr.splitlines() if line.startswith("warning:")), res.stderr
