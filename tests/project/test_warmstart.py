"""The suite's warm starts (tests/warmstart.py) behave as the console script does: same output and status,
streams and signals passed through, a killed launcher takes its run with it, and a start that could differ
from a cold one is a cold one. If these fail, every console-script test's evidence is in doubt. (Resource
limits set by a test's preexec_fn reaching the run: tests/hardening/test_adversarial_inputs.py's full-disk
leaderboard.)"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import conftest
from conftest import EXE, REAL_EXE, clean_env
from fakeserver import FakeServer, Reply

pytestmark = pytest.mark.slow


def _zygote_ready() -> None:
    if os.environ.get("TESTS_COLD_START") == "1":
        pytest.skip("TESTS_COLD_START=1: every start is a real one")
    deadline = time.monotonic() + 120
    while not conftest._WARM.socket.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert conftest._WARM.socket.exists(), (conftest._WARM.dir / "zygote.log").read_text()


def _zygote_log() -> str:
    return (conftest._WARM.dir / "zygote.log").read_text()


@pytest.mark.parametrize("args", [["--version"], ["no-such-word"], ["benchmark=nope", "candidate=mock", "judge=mock"]])
def test_a_warm_start_prints_and_ends_as_a_cold_one(tmp_path: Path, args: list[str]) -> None:
    _zygote_ready()
    env = clean_env(tmp_path)
    launcher = subprocess.Popen([EXE, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=tmp_path)
    out, err = launcher.communicate(timeout=120)
    cold = subprocess.run([REAL_EXE, *args], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert (launcher.returncode, out, err) == (cold.returncode, cold.stdout, cold.stderr)
    assert f"warm start: launcher {launcher.pid}," in _zygote_log()


def test_stdin_reaches_the_run(tmp_path: Path) -> None:
    """The launcher's standard streams are the run's: a subcommand reading a spec from stdin would see it."""
    _zygote_ready()
    code = subprocess.run([EXE, "--version"], env=clean_env(tmp_path), input="ignored\n", capture_output=True,
                          text=True, timeout=120)
    assert code.returncode == 0 and code.stdout.startswith("rubric-engine ")


def test_an_import_time_variable_of_its_own_means_a_cold_start(tmp_path: Path) -> None:
    _zygote_ready()
    env = {**clean_env(tmp_path), "PYTHONIOENCODING": "latin-1"}
    launcher = subprocess.Popen([EXE, "--version"], env=env, stdout=subprocess.PIPE, text=True)
    assert launcher.communicate(timeout=120)[0].startswith("rubric-engine ") and launcher.returncode == 0
    assert "cold start" in _zygote_log() and "PYTHONIOENCODING" in _zygote_log()
    assert f"warm start: launcher {launcher.pid}," not in _zygote_log()


def _hanging_run(tmp_path: Path, srv: FakeServer) -> subprocess.Popen:
    args = ["benchmark=heartbench", f"data.path={conftest.MINI}", "limit=1", "progress=none", "timeout=5",
            f"hydra.run.dir={tmp_path / 'run'}", *conftest.model_args(srv.url)]
    return subprocess.Popen([EXE, *args], env=clean_env(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _run_pid(launcher: int) -> int:
    marker = conftest._WARM.dir / f"run-{launcher}"
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return int(marker.read_text())


def test_sigkill_of_the_launcher_ends_its_run(tmp_path: Path) -> None:
    _zygote_ready()
    with FakeServer(lambda body: Reply(text="late", delay=60)) as srv:
        proc = _hanging_run(tmp_path, srv)
        run = _run_pid(proc.pid)
        while not srv.requests and proc.poll() is None:
            time.sleep(0.02)
        conftest.sigkill(proc)
        assert proc.returncode == -signal.SIGKILL
        with pytest.raises(ProcessLookupError):
            os.kill(run, 0)


def test_sigint_goes_to_the_run_and_its_status_comes_back(tmp_path: Path) -> None:
    _zygote_ready()
    with FakeServer(lambda body: Reply(text="late", delay=60)) as srv:
        proc = _hanging_run(tmp_path, srv)
        while not srv.requests and proc.poll() is None:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)  # the run waits for the call in flight at most `timeout`, then stops
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err.lower() or "resume" in err.lower(), err


def test_what_the_engine_sets_before_importing_litellm_keeps_starts_warm(tmp_path: Path) -> None:
    """A test process that imported LiteLLM in-process carries the engine's own pre-import settings in its
    environment; runs started from it import exactly what the zygote did, so they start warm."""
    _zygote_ready()
    from rubric_engine.models.litellm_runtime import RUNTIME

    RUNTIME.module()  # sets the engine's pre-import variables in this process's environment
    launcher = subprocess.Popen([EXE, "--version"], env=clean_env(tmp_path), stdout=subprocess.PIPE, text=True)
    launcher.communicate(timeout=120)
    assert f"warm start: launcher {launcher.pid}," in _zygote_log()


def test_what_litellm_writes_into_the_environment_when_it_first_counts_tokens_keeps_starts_warm(
        tmp_path: Path) -> None:
    """LiteLLM points TIKTOKEN_CACHE_DIR at its bundled tokenizers the first time it counts tokens, not at its
    import: a test process that counted tokens in-process passes that value on, and a run asking for it imports
    what the zygote did."""
    _zygote_ready()
    import importlib

    from rubric_engine.models.litellm_runtime import RUNTIME

    RUNTIME.module()  # LiteLLM as the engine imports it (no remote cost map), then its first token count
    importlib.import_module("litellm.litellm_core_utils.default_encoding")
    assert os.environ.get("TIKTOKEN_CACHE_DIR"), "LiteLLM no longer sets TIKTOKEN_CACHE_DIR: drop this test"
    launcher = subprocess.Popen([EXE, "--version"], env=clean_env(tmp_path), stdout=subprocess.PIPE, text=True)
    launcher.communicate(timeout=120)
    assert f"warm start: launcher {launcher.pid}," in _zygote_log()


def test_a_warm_run_finds_what_the_zygote_s_imports_set_in_its_environment(tmp_path: Path) -> None:
    """A module LiteLLM imports at its first token count sets TIKTOKEN_CACHE_DIR (its bundled tokenizers);
    the zygote imported it already, so a warm run's environment must hold that value as a cold run's does
    once it counted tokens, or tiktoken looks for the dry run's tokenizer on the network."""
    _zygote_ready()
    env = {k: v for k, v in clean_env(tmp_path).items() if not k.startswith("TIKTOKEN")}
    data = conftest.DATA / "pairwise_mini.jsonl"
    launcher = subprocess.Popen([EXE, "benchmark=arena_hard", f"data.path={data}", "candidate=mock",
                                 "baseline=mock", "dry_run=true", f"hydra.run.dir={tmp_path / 'out'}"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    _, err = launcher.communicate(timeout=120)
    assert f"warm start: launcher {launcher.pid}," in _zygote_log()
    assert launcher.returncode == 0, err


def test_a_sweep_through_a_parallel_launcher_starts_cold(tmp_path: Path) -> None:
    """joblib's loky and Ray workers are interpreters of their own that re-import the parent's __main__: a
    sweep through them runs from the real console script."""
    _zygote_ready()
    launcher = subprocess.Popen([EXE, "-m", "benchmark=nope", "hydra/launcher=joblib"], env=clean_env(tmp_path),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    launcher.communicate(timeout=120)
    assert "'hydra/launcher=joblib'" in _zygote_log()
    assert f"warm start: launcher {launcher.pid}," not in _zygote_log()


def test_a_warm_runs_report_worker_is_warm_too_and_writes_the_page(tmp_path: Path) -> None:
    """The report worker a warm run starts (`sys.executable -I -m rubric_engine.report.worker`) is forked by the
    report zygote: the page is the worker's, not the run's own fallback build, and the start is logged warm."""
    _zygote_ready()
    deadline = time.monotonic() + 120
    while not conftest._WARM.report_socket.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    before = (conftest._WARM.dir / "report.log").read_text()
    proc = subprocess.run([EXE, "benchmark=heartbench", "candidate=mock", "judge=mock", "limit=2",
                           f"data.path={conftest.MINI}", f"hydra.run.dir={tmp_path / 'run'}"], env=clean_env(tmp_path), capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "run" / "report.html").exists() and "report.html not written" not in proc.stderr
    assert (conftest._WARM.dir / "report.log").read_text().count("warm start:") == before.count("warm start:") + 1
