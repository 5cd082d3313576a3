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
