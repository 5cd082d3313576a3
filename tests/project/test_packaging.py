"""The wheel a user would install: built from this checkout, installed into a clean venv, and the keyless
quickstart run from an empty directory (offline). Slow: it builds and installs a wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import REPO


@pytest.mark.slow
def test_wheel_installs_and_runs_the_keyless_quickstart(tmp_path: Path, env: dict[str, str]) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
                    str(REPO)], check=True, capture_output=True, text=True, timeout=600)
    (wheel,) = dist.glob("rubric_engine-*.whl")
    # every module of every subpackage is in the wheel (a subpackage missing from pyproject's list is not)
    with zipfile.ZipFile(wheel) as zf:
        shipped = {n for n in zf.namelist() if n.startswith("rubric_engine/") and n.endswith(".py")}
    source = {p.relative_to(REPO).as_posix() for p in (REPO / "rubric_engine").rglob("*.py")}
    assert source - shipped == set(), f"modules missing from the wheel: {sorted(source - shipped)}"
    clean = tmp_path / "venv"
    venv.create(clean, with_pip=False)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(clean), "platbase": str(clean)}))
    py = clean / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True, text=True, timeout=600)
    # then the dependencies come from the test venv (offline, fast), after the venv's own site-packages,
    # so the package itself is the wheel's (written after the install, or pip sees it already satisfied)
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    run_env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run_env["PATH"] = f"{clean / 'bin'}{os.pathsep}{run_env.get('PATH', '')}"
    where = subprocess.run([str(py), "-c", "import rubric_engine, sys; print(rubric_engine.__file__)"], cwd=empty,
                           env=run_env, capture_output=True, text=True, timeout=120)
    assert where.stdout.strip().startswith(str(clean)), where.stdout + where.stderr
    exe = clean / "bin" / "rubric-engine"
    res = subprocess.run([str(exe), "benchmark=heartbench_en", "candidate=mock", "judge=mock"], cwd=empty,
                         env=run_env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    (run_dir,) = (empty / "outputs" / "heartbench_en").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["counts"]["scored"] == 15 and summary["judge"]["name"] == "mock-judge"
    version = subprocess.run([str(exe), "--version"], env=run_env, capture_output=True, text=True, timeout=120)
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert version.stdout.strip() == f"rubric-engine {declared}"
