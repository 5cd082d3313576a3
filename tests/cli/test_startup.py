"""Start-up: LiteLLM (seconds to import) starts loading early when calls are certain, and a fully
cached re-score of a whole run still never imports it.

Each run is a fresh Python process using the public API against the fake server, so `sys.modules`
shows what the run really imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fakeserver import FakeServer
from test_cli import DATA, Script

RUN = textwrap.dedent("""
    import json, sys, threading
    from pathlib import Path
    from rubric_engine import ModelSpec, RunSettings, run_benchmark
    url, out, cache, enabled = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    spec = lambda name: ModelSpec(name=name, model="openai/" + name, api_base=url, api_key_env="FAKE_KEY")
    summary = run_benchmark(RunSettings(benchmark="heartbench", out_dir=Path(out), data_path={data!r}, limit=3,
                                        candidate=spec("cand"), judge=spec("judge"), cache_dir=cache,
                                        cache_enabled=enabled, progress="none"))
    print(json.dumps({{"scored": summary["counts"]["scored"], "calls": summary["calls"],
                      "litellm": "litellm" in sys.modules}}))
""").format(data=str(DATA))


def _run(url: str, out: Path, cache: Path, enabled: bool = True) -> dict:
    env = {**os.environ, "FAKE_KEY": "sk-test"}
    res = subprocess.run([sys.executable, "-c", RUN, url, str(out), str(cache), "1" if enabled else "0"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_cached_rescore_never_imports_litellm(tmp_path: Path) -> None:
    with FakeServer(Script()) as srv:
        first = _run(srv.url, tmp_path / "a", tmp_path / "cache")  # a fresh cache: LiteLLM preloaded
        assert first["scored"] == 3 and first["litellm"] and first["calls"]["candidate"]["cache_hits"] == 0
        sent = len(srv.requests)
        again = _run(srv.url, tmp_path / "b", tmp_path / "cache")
        assert len(srv.requests) == sent
        assert again["scored"] == 3 and again["calls"]["judge"]["cache_hits"] == 3
        assert again["litellm"] is False
        nocache = _run(srv.url, tmp_path / "c", tmp_path / "cache", enabled=False)
        assert nocache["scored"] == 3 and nocache["litellm"] and len(srv.requests) == 2 * sent


REFUSED = textwrap.dedent("""
    import sys
    from pathlib import Path
    from rubric_engine import ModelSpec, RunSettings, run_benchmark
    from rubric_engine.errors import ConfigError
    url, out = sys.argv[1], sys.argv[2]
    spec = lambda name: ModelSpec(name=name, model="openai/" + name, api_base=url, api_key_env="NO_KEY_HERE")
    try:
        run_benchmark(RunSettings(benchmark="heartbench", out_dir=Path(out), data_path={data!r}, limit=3,
                                  candidate=spec("cand"), judge=spec("judge"), cache_enabled=False, progress="none"))
    except ConfigError as exc:
        print("refused:", exc)
    print("litellm" in sys.modules)
""").format(data=str(DATA))


@pytest.mark.slow
def test_a_run_refused_by_its_checks_never_starts_importing_litellm(tmp_path: Path) -> None:
    """LiteLLM (seconds of CPU) is preloaded only once the run has passed its checks: a missing key is
    reported without paying for an import that no call will use."""
    env = {k: v for k, v in os.environ.items() if k != "NO_KEY_HERE"}
    with FakeServer(Script()) as srv:
        res = subprocess.run([sys.executable, "-c", REFUSED, srv.url, str(tmp_path / "run")], capture_output=True,
                             text=True, env=env, timeout=300)
        assert srv.requests == []
    assert res.returncode == 0, res.stderr
    refused, imported = res.stdout.strip().splitlines()[-2:]
    assert refused.startswith("refused:") and "NO_KEY_HERE" in refused
    assert imported == "False"


# The command line's own main(), with the report worker's start counted (it still starts the real worker).
COUNTED = textwrap.dedent("""
    import sys
    from rubric_engine.report import worker
    starts = []
    real = worker.start
    worker.start = lambda: starts.append(1) or real()
    from rubric_engine.cli.main import main
    try:
        main(sys.argv[1:])
    finally:
        print("worker starts:", len(starts), file=sys.stderr)
""")


@pytest.mark.slow
@pytest.mark.parametrize(("extra", "code", "starts"), [([], 0, 1),  # a run that writes report.html
                                                        (["candidate.api_key_env=NO_KEY_HERE"], 2, 0),  # refused
                                                        (["benchmark=no_such_bench"], 2, 0)])  # refused
def test_the_report_worker_starts_once_the_run_has_passed_its_checks(tmp_path: Path, extra: list[str], code: int,
                                                                       starts: int) -> None:
    """The worker (it loads matplotlib: about a second of CPU) is started for a run that will write its
    report, not for one whose spec, data or keys are refused."""
    env = {k: v for k, v in os.environ.items() if k != "NO_KEY_HERE"}
    run = tmp_path / "run"
    args = ["benchmark=heartbench", f"data.path={DATA}", "limit=2", "candidate=mock", "judge=mock",
            "progress=none", f"hydra.run.dir={run}"]
    if extra and extra[0].startswith("candidate."):
        args[3:4] = ["candidate=openai_compatible", "candidate.model=openai/cand", "candidate.api_base=http://127.0.0.1:9/v1"]
    res = subprocess.run([sys.executable, "-c", COUNTED, *args, *extra], capture_output=True, text=True, env=env,
                         timeout=300, cwd=tmp_path)
    assert res.returncode == code, res.stderr
    assert res.stderr.strip().splitlines()[-1] == f"worker starts: {starts}"
    assert (run / "report.html").is_file() == (code == 0)
