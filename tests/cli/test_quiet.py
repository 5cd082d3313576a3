"""progress= hides progress only; quiet=true hides the result tables too: through the console script,
with the keyless mock models (no server, no key)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import MINI, run_cli

pytestmark = pytest.mark.slow

PROGRESS = re.compile(r"\b(generate|judge): \d+/\d+")  # a progress line, e.g. "generate: 3/3"
ARGS = ["benchmark=heartbench", f"data.path={MINI}", "limit=3", "candidate=mock", "judge=mock"]


def test_progress_none_hides_progress_but_keeps_the_tables(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli([*ARGS, "progress=none", f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Overall" in res.stdout and f"outputs: {tmp_path / 'run'}" in res.stdout
    assert not PROGRESS.search(res.stderr)  # no progress lines


def test_quiet_prints_only_the_outputs_line(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli([*ARGS, "quiet=true", "progress=plain", f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"outputs: {tmp_path / 'run'}"
    assert not PROGRESS.search(res.stderr)  # quiet wins over progress=plain
    assert "offline mock model(s)" in res.stderr  # warnings still reach stderr
    assert (tmp_path / "run" / "summary.json").is_file()


def test_progress_plain_shows_progress(tmp_path: Path, env: dict[str, str]) -> None:
    """The contrast that makes the two tests above mean something: the pattern does match progress."""
    res = run_cli([*ARGS, "progress=plain", f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert PROGRESS.search(res.stderr) and "Overall" in res.stdout


def test_quiet_takes_true_or_false_only(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli([*ARGS, "quiet=loud", f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
    assert res.returncode == 2 and "quiet=loud is not valid; use true or false" in res.stderr
