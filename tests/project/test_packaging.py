"""The wheel a user would install: built from this checkout, installed into a clean venv, and the keyless
quickstart run from an empty directory (offline); then every shipped spec's keyless try-out from there, the
specs whose data is a download reading the sample packaged in the wheel. Slow: it builds and installs a wheel
(once for the module) and runs the console script once per shipped spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, clean_env


@dataclass(frozen=True)
class Installed:
    """The wheel's file, the clean venv's console script and an environment that finds only the wheel."""

    wheel: Path
    venv: Path
    exe: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp_path = tmp_path_factory.mktemp("wheel")
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
                    str(REPO)], check=True, capture_output=True, text=True, timeout=600)
    (wheel,) = dist.glob("rubric_engine-*.whl")
    clean = tmp_path / "venv"
    venv.create(clean, with_pip=False)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(clean), "platbase": str(clean)}))
    py = clean / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True, text=True, timeout=600)
    # then the dependencies come from the test venv (offline, fast), after the venv's own site-packages,
    # so the package itself is the wheel's (written after the install, or pip sees it already satisfied)
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run_env = {k: v for k, v in clean_env(tmp_path).items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run_env["PATH"] = f"{clean / 'bin'}{os.pathsep}{run_env.get('PATH', '')}"
    # a download attempted anyway fails at once on a dead local proxy instead of leaving the machine
    run_env.update({k: "http://127.0.0.1:9" for k in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY")})
    run_env.pop("no_proxy", None), run_env.pop("NO_PROXY", None)
    return Installed(wheel, clean, clean / "bin" / "rubric-engine", run_env)


@pytest.mark.slow
def test_wheel_installs_and_runs_the_keyless_quickstart(tmp_path: Path, installed: Installed) -> None:
    # every module of every subpackage is in the wheel (a subpackage missing from pyproject's list is not)
    with zipfile.ZipFile(installed.wheel) as zf:
        shipped = {n for n in zf.namelist() if n.startswith("rubric_engine/") and n.endswith(".py")}
    source = {p.relative_to(REPO).as_posix() for p in (REPO / "rubric_engine").rglob("*.py")}
    assert source - shipped == set(), f"modules missing from the wheel: {sorted(source - shipped)}"
    empty = tmp_path / "empty"
    empty.mkdir()
    py, run_env = installed.venv / "bin" / "python", installed.env
    where = subprocess.run([str(py), "-c", "import rubric_engine, sys; print(rubric_engine.__file__)"], cwd=empty,
                           env=run_env, capture_output=True, text=True, timeout=120)
    assert where.stdout.strip().startswith(str(installed.venv)), where.stdout + where.stderr
    res = subprocess.run([str(installed.exe), "benchmark=heartbench_en", "candidate=mock", "judge=mock"], cwd=empty,
                         env=run_env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    (run_dir,) = (empty / "outputs" / "heartbench_en").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["counts"]["scored"] == 15 and summary["judge"]["name"] == "mock-judge"
    version = subprocess.run([str(installed.exe), "--version"], env=run_env, capture_output=True, text=True,
                             timeout=120)
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert version.stdout.strip() == f"rubric-engine {declared}"


def _shipped_specs(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return sorted(n.split("/")[2] for n in zf.namelist()
                      if n.startswith("rubric_engine/benchmarks/") and n.endswith("/benchmark.yaml"))


@pytest.mark.slow
def test_every_shipped_spec_tries_out_keyless_from_the_wheel(tmp_path: Path, installed: Installed) -> None:
    """README and docs/authoring.md promise it: `benchmark=<spec> candidate=mock judge=mock` (user=mock for a
    simulated user; accepted and unused elsewhere) from a directory with nothing in it, offline."""
    specs = _shipped_specs(installed.wheel)
    assert {"heartbench", "mt_bench", "arena_hard", "healthbench"} <= set(specs)
    for name in specs:
        cwd = tmp_path / name
        cwd.mkdir()
        res = subprocess.run([str(installed.exe), f"benchmark={name}", "candidate=mock", "judge=mock", "user=mock",
                              "progress=none"], cwd=cwd, env=installed.env, capture_output=True, text=True,
                             timeout=300)
        assert res.returncode == 0, f"{name}: {res.stderr[-2000:]}"
        (run_dir,) = (cwd / "outputs" / name).iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["counts"]["scored"] >= 1, (name, summary["counts"])
        assert summary["data_trust"] == "local", (name, summary["data_trust"])  # a file at hand, not a download
        data = json.loads((run_dir / "spec.resolved.json").read_text())["data"]
        if Path(data["path"]).is_absolute():  # a try-out: the sample packaged in the wheel
            assert Path(data["path"]).resolve().is_relative_to(installed.venv.resolve()), (name, data)
            assert "try-out: every model is a mock" in res.stderr, (name, res.stderr[-2000:])
