"""Ad-hoc models: `candidate=openai/some-model` (any LiteLLM id with a provider prefix; judge= and user= alike) works
without a YAML entry: the key variable follows the provider, `candidate.api_base=` moves the endpoint (a key goes
there only from `candidate.api_key_env=`), a missing key and an unknown provider are one line each (exit 2), and an
entry file of that name wins. Through the console script, LiteLLM speaking HTTP to the fake server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import MINI, FakeServer, Reply, run_cli
from rubric_engine.models.adhoc import KNOWN_PROVIDERS

pytestmark = pytest.mark.slow

BASE = ["benchmark=heartbench", f"data.path={MINI}", "limit=2", "judge=mock", "progress=none"]
ADHOC_KEY, PROVIDER_KEY = "sk-adhoc-from-var", "sk-openai-must-not-travel"


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("rubric-engine: error:")]


@pytest.fixture
def server() -> FakeServer:
    with FakeServer(lambda body: Reply(text="a reply from the ad-hoc model")) as srv:
        yield srv


def test_an_adhoc_id_with_api_base_sends_the_key_from_its_variable_only(tmp_path: Path, env: dict[str, str],
                                                                         server: FakeServer) -> None:
    env = dict(env, ADHOC_VAR=ADHOC_KEY, OPENAI_API_KEY=PROVIDER_KEY)
    run = tmp_path / "run"
    res = run_cli([*BASE, "candidate=openai/some-model", f"candidate.api_base={server.url}",
                   "candidate.api_key_env=ADHOC_VAR", f"hydra.run.dir={run}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert len(server.requests) == 2 and {b["model"] for b in server.requests} == {"some-model"}
    assert server.auth_headers and all(ADHOC_KEY in h for h in server.auth_headers), server.auth_headers
    assert not any(PROVIDER_KEY in h for h in server.auth_headers)
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["candidate"]["name"] == "openai/some-model"


def test_an_adhoc_id_with_api_base_and_no_key_variable_sends_no_provider_key(tmp_path: Path, env: dict[str, str],
                                                                              server: FakeServer) -> None:
    """The trust model: an endpoint moved on the command line never receives $OPENAI_API_KEY."""
    env = dict(env, OPENAI_API_KEY=PROVIDER_KEY)
    res = run_cli([*BASE, "candidate=openai/some-model", f"candidate.api_base={server.url}",
                   f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert server.auth_headers and not any(PROVIDER_KEY in h for h in server.auth_headers), server.auth_headers


@pytest.mark.parametrize(("args", "variable"), [(["candidate=openai/x"], "OPENAI_API_KEY"),
                                                (["candidate=mock", "judge=anthropic/claude-sonnet-4-5"],
                                                 "ANTHROPIC_API_KEY")])
def test_a_missing_key_names_the_providers_variable(tmp_path: Path, env: dict[str, str], args: list[str],
                                                     variable: str) -> None:
    res = run_cli([*BASE, *args, f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
    assert res.returncode == 2, res.stderr  # README: a missing API key is a user error
    [line] = _errors(res.stderr)
    assert f"export {variable}=" in line, line
    assert "Traceback" not in res.stderr and not (tmp_path / "run").exists()


@pytest.mark.parametrize(("arg", "words"), [("judge=[mock,anthropic/claude-sonnet-4-5]", "export ANTHROPIC_API_KEY="),
                                           ("judge=[mock,opneai/j]", "did you mean openai/j?"),
                                           ("baseline=opneai/b", "did you mean openai/b?")])
def test_a_juror_and_a_baseline_are_named_the_same_way(tmp_path: Path, env: dict[str, str], arg: str,
                                                        words: str) -> None:
    """One way for every role: a juror's and a baseline's id get the same key and provider checks."""
    where = ["benchmark=arena_hard", "judge=mock"] if arg.startswith("baseline") else ["benchmark=heartbench_en"]
    res = run_cli([*where, "limit=1", "candidate=mock", arg, f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    [line] = _errors(res.stderr)
    assert words in line, line


def test_an_unknown_provider_gets_a_did_you_mean(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli([*BASE, "candidate=opneai/x", f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    [line] = _errors(res.stderr)
    assert "unknown provider 'opneai'" in line and "did you mean openai/x?" in line, line
    assert not (tmp_path / "run").exists()


def test_a_sweep_mixes_ids_and_entries(tmp_path: Path, env: dict[str, str]) -> None:
    """Each job of a sweep finds its id's entry (the engine's own mock/ provider: keyless, no server)."""
    sweep = tmp_path / "sweep"
    res = run_cli(["-m", *BASE, "candidate=mock/an-id,mock", f"hydra.sweep.dir={sweep}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    names = {json.loads(p.read_text(encoding="utf-8"))["candidate"]["name"] for p in sweep.glob("*/summary.json")}
    assert names == {"mock/an-id", "mock-candidate"}
    assert (sweep / "leaderboard.json").is_file()


@pytest.mark.parametrize(("group", "args", "field"), [
    ("candidate", ["candidate=openai/mine"], "candidate"),
    ("judge", ["candidate=mock", "judge=[mock,openai/mine]"], "jury")])
def test_an_entry_file_of_that_name_wins(tmp_path: Path, env: dict[str, str], group: str, args: list[str],
                                         field: str) -> None:
    own = tmp_path / "conf" / group / "openai"
    own.mkdir(parents=True)
    (own / "mine.yaml").write_text(f"name: from-the-file\nmodel: mock/{group}\napi_base: null\napi_key_env: null\n"
                                   "params: {}\n", encoding="utf-8")
    run = tmp_path / "run"
    base = [a for a in BASE if a != "judge=mock"] if group == "judge" else BASE
    res = run_cli([*base, *args, f"hydra.run.dir={run}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr  # no OPENAI_API_KEY needed: the file's mock model answered
    assert "from-the-file" in json.dumps(json.loads((run / "summary.json").read_text(encoding="utf-8"))[field])


def test_the_provider_list_is_litellms() -> None:
    """Every name the start-up check accepts without importing LiteLLM is a provider of the installed LiteLLM, and
    the list read from its source is the one the imported LiteLLM holds."""
    from rubric_engine.models.adhoc import installed_providers
    from rubric_engine.models.litellm_runtime import RUNTIME

    imported = {str(getattr(p, "value", p)) for p in RUNTIME.module().provider_list}
    assert installed_providers() == imported
    assert KNOWN_PROVIDERS <= imported and {"openai", "anthropic", "ollama"} <= KNOWN_PROVIDERS
