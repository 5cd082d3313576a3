"""Shared fixtures: a started fake OpenAI-compatible server and its API-key env var.

Why here: every module that calls models (models, judge, runner, cli) tests against the same server.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

# The package under test is the installed one (`pip install .` or `-e .`), as users get it:
# conf/, benchmarks/ and data/ are only importable as rubric_engine.* once installed.
_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:  # `from fakeserver import ...` works from any test module
    sys.path.insert(0, _TESTS)

from fakeserver import FakeServer, Reply  # noqa: E402
from rubric_engine.dataset import load_dataset  # noqa: E402
from rubric_engine.spec import load_spec  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "heartbench"

__all__ = ["fake_server", "fake_key", "FakeServer", "Reply"]


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A started FakeServer (echo handler, empty queue); stopped after the test."""
    with FakeServer() as srv:
        yield srv


@pytest.fixture
def fake_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """Sets FAKE_KEY=sk-test (the env var ModelSpec.api_key_env names in tests) and returns its name."""
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    return "FAKE_KEY"


@pytest.fixture(scope="module")
def spec():
    """The shipped HeartBench spec, loaded from this checkout."""
    return load_spec(REPO / "benchmarks" / "heartbench")


@pytest.fixture(scope="module")
def questions(spec):
    """The 296 HeartBench questions from ../shared (never copied into the project)."""
    return load_dataset(spec, SHARED / "question_all.jsonl").questions


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """Environment for console-script runs: no real API keys, a private cache, FAKE_KEY set."""
    e = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    e.update(RUBRIC_ENGINE_CACHE=str(tmp_path / "cache"), FAKE_KEY="sk-test", XDG_CACHE_HOME=str(tmp_path / "xdg"))
    return e


@pytest.fixture(scope="session")
def review_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three run dirs (candidates cand_a, cand_b, cand_c; one judge) on the shipped English sample,
    made once by the console script against the fake server (see agree_runs.py)."""
    from agree_runs import make_runs

    root = tmp_path_factory.mktemp("review_runs")
    e = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    e.update(RUBRIC_ENGINE_CACHE=str(root / "cache"), FAKE_KEY="sk-test", XDG_CACHE_HOME=str(root / "xdg"))
    return make_runs(root, e, ("cand_a", "cand_b", "cand_c"))
