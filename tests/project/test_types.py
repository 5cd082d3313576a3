"""The spine type-checks: mypy over the packages `[tool.mypy] files` lists (pyproject.toml) reports no error.

Why a test: the record, the model layer, the shapes' strategies and the run are read or driven by most of
the engine; a misspelt field or a None passed where a value is needed there shows up far from its
cause. mypy sees it at the line. The test runs in the suite, so CI runs it from README's test command; the
cache goes to a temporary directory, so a clone is left as it was found.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import REPO


def test_the_spine_packages_type_check(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy comes with the test extra (pip install -e '.[test]')")
    files = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]["files"]
    assert {"rubric_engine/models", "rubric_engine/records.py", "rubric_engine/shapes", "rubric_engine/run"} <= set(files), files
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"mypy found type errors in the spine (fix them; do not widen an ignore):\n{done.stdout}{done.stderr}"
