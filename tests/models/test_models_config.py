"""How a model entry's settings and the process environment reach LiteLLM, through the real entry points.

- An entry that needs `api_base` (`openai_compatible`) given without it is one config error line
  (exit 2) naming the override to add, before any call; it used to reach LiteLLM as the text "???"
  and come back as a retried connection error.
- LiteLLM's import must not load a `.env` file: in its default DEV mode it runs python-dotenv's
  `load_dotenv()`, which from `python -c`, a notebook or a debugger searches the working directory.
  A bogus key there must never be sent anywhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakeserver import FakeServer, Reply

from conftest import EXE  # noqa: E402 - the console script under test (warm-started: tests/warmstart.py)
from conftest import MINI as DATA
BOGUS = "sk-dotenv-bogus-0123456789"

pytestmark = pytest.mark.slow


def _env(tmp_path: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("LITELLM_")}
    e.update(RUBRIC_ENGINE_CACHE=str(tmp_path / "cache"), XDG_CACHE_HOME=str(tmp_path / "xdg"), FAKE_KEY="sk-test")
    return e


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("rubric-engine: error:")]


@pytest.mark.parametrize("role", ["candidate", "judge"])
def test_openai_compatible_without_api_base_is_one_config_error(tmp_path: Path, role: str) -> None:
    with FakeServer() as srv:
        other = "judge" if role == "candidate" else "candidate"
        args = [f"{role}=openai_compatible", f"{role}.model=openai/m", f"{role}.api_key_env=FAKE_KEY",
                f"{other}=openai_compatible", f"{other}.model=openai/other", f"{other}.api_base={srv.url}",
                f"{other}.api_key_env=FAKE_KEY"]
        res = subprocess.run([EXE, "benchmark=heartbench", f"data.path={DATA}", "progress=none", "limit=2",
                              "max_retries=3", f"hydra.run.dir={tmp_path / 'run'}", *args],
                             env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert res.returncode == 2, res.stderr
        [line] = _error_lines(res.stderr)
        assert f"{role}.api_base is not set" in line and f"{role}.api_base=http://" in line, line
        assert "???" not in res.stderr and "Traceback" not in res.stderr and "retry" not in res.stderr
        assert srv.requests == []  # refused before any call, for either role


@pytest.fixture
def dotenv_dir(tmp_path: Path) -> Path:
    """A working directory whose .env holds a bogus provider key."""
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={BOGUS}\n", encoding="utf-8")
    return tmp_path


def test_dotenv_in_the_working_directory_is_not_read(dotenv_dir: Path) -> None:
    """The engine's CLI started the way a notebook or `python -c` runs it (python-dotenv then searches the
    working directory). The candidate entry sends no key of its own, so LiteLLM looks for
    $OPENAI_API_KEY, which is set only in .env; $OPENAI_BASE_URL points at the fake server, so a key
    read from .env would arrive there. It must not: the call fails for want of a key, naming the variable."""
    with FakeServer() as srv:
        srv.handler = lambda body: Reply(text="hello")
        env = {**_env(dotenv_dir), "OPENAI_BASE_URL": srv.url, "OPENAI_API_BASE": srv.url}
        code = "import sys; from rubric_engine.cli.main import main; sys.argv[0] = 'rubric-engine'; main()"
        res = subprocess.run([sys.executable, "-c", code, "benchmark=heartbench", f"data.path={DATA}",
                              "progress=none", "limit=1", "stage=generate", "max_retries=0",
                              f"hydra.run.dir={dotenv_dir / 'run'}", "candidate=openai_compatible",
                              "candidate.model=openai/m", "candidate.api_base=null"],
                             env=env, cwd=dotenv_dir, capture_output=True, text=True, timeout=300)
        assert [h for h in srv.auth_headers if BOGUS in h] == [] and srv.requests == []
        assert res.returncode != 0, res.stderr
        [line] = _error_lines(res.stderr)
        assert "OPENAI_API_KEY" in line and BOGUS not in res.stderr, res.stderr



@pytest.mark.parametrize("key", ["model", "api_base"])
def test_unset_mandatory_entry_value_names_the_override(key: str) -> None:
    from rubric_engine.errors import ConfigError
    from rubric_engine.models.entries import ModelSpec

    entry = {"model": "openai/m", "api_base": "http://127.0.0.1:1/v1", key: "???"}
    with pytest.raises(ConfigError, match=rf"^judge\.{key} is not set .*; add judge\.{key}="):
        ModelSpec.from_config(entry, role="judge")
    assert ModelSpec.from_config({**entry, key: "openai/x" if key == "model" else None}, role="judge")


@pytest.mark.parametrize("text, expected", [
    ("Authorization: Bearer abcdefgh123", "Authorization: *** ***"),
    ("AUTHORIZATION=tok_live_99", "AUTHORIZATION=***"),
    ("BEARER tok12345", "BEARER ***"),
    ("key sk-abcdef123456 here", "key sk-*** here"),
    ('{"Api-Key": "zzzzzz"}', '{"Api-Key": "***"}'),
    ("x-api-key='qwerty12'", "x-api-key='***'"),
    ("APIKEY:hunter22", "APIKEY:***"),
    ("回应体现了理解 sk-ok", "回应体现了理解 sk-ok"),
    ("a verdict with no key-shaped text: met, not met", "a verdict with no key-shaped text: met, not met"),
])
def test_key_shaped_text_is_redacted_in_any_case(text: str, expected: str) -> None:
    """Each pattern runs only when its marker is present (judge replies are long): the markers must be
    found in any letter case the pattern accepts."""
    from rubric_engine.models.redact import redact

    assert redact(text) == expected
