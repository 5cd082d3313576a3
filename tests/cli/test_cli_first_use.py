"""What a new user meets first, through the console script: error lines that keep their fix, words from other
evaluation tools mapped to our keys, a provider typo refused before LiteLLM loads, the endpoint a provider's
base-URL variable sends calls to, a mock multiple-choice try-out with a realistic mix of answers, and one
`candidate.api_base=` shared by a sweep over ad-hoc ids."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import MINI, REPO, FakeServer, Reply, run_cli

CHOICE = REPO / "tests" / "data" / "choice_mini"
BASE = ["benchmark=heartbench", f"data.path={MINI}", "limit=1", "judge=mock", "progress=none"]


def error_line(res: subprocess.CompletedProcess) -> str:
    """The run failed with exit 2 and exactly one line on stderr (no second hint line)."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rubric-engine: error: "), lines
    return lines[0]


# ------------------------------------------------------------------------------- item 6: the fix is never cut

def test_an_unknown_entry_keeps_its_fix_however_many_entries_there_are(tmp_path: Path, env: dict[str, str]) -> None:
    own = tmp_path / "conf" / "candidate"
    own.mkdir(parents=True)
    for i in range(40):
        (own / f"my-own-local-model-number-{i:02d}.yaml").write_text(
            f"name: m{i}\nmodel: mock/m{i}\napi_base: null\napi_key_env: null\nparams: {{}}\n", encoding="utf-8")
    line = error_line(run_cli(["candidate=nosuch", "judge=mock"], env, cwd=tmp_path, timeout=60))
    assert "unknown candidate entry 'nosuch'" in line
    assert line.endswith("Your own entries go in ./conf/candidate/<name>.yaml or a directory named in "
                         "$RUBRIC_ENGINE_CONFIG_DIRS (see docs/cli.md: Models and API keys)"), line


def test_an_unknown_benchmark_keeps_the_closest_names_and_where_it_looked(tmp_path: Path,
                                                                          env: dict[str, str]) -> None:
    for i in range(60):
        (tmp_path / "benchmarks" / f"a-benchmark-of-my-own-number-{i:02d}").mkdir(parents=True)
        (tmp_path / "benchmarks" / f"a-benchmark-of-my-own-number-{i:02d}" / "benchmark.yaml").write_text("name: x\n")
    line = error_line(run_cli(["benchmark=heartbenc", "candidate=mock", "judge=mock"], env, cwd=tmp_path, timeout=60))
    assert "did you mean 'heartbench'?" in line and "searched: " in line, line
    assert str(tmp_path / "benchmarks") in line and "more" in line, line


def test_a_leaderboard_of_two_benchmarks_names_both(tmp_path: Path, env: dict[str, str]) -> None:
    for bench, run in ((str(CHOICE), "a"), ("heartbench_en", "b")):
        res = run_cli([f"benchmark={bench}", "candidate=mock", "judge=mock", "limit=1", "progress=none",
                       f"hydra.run.dir={tmp_path / run}"], env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
    line = error_line(run_cli(["leaderboard", str(tmp_path / "a"), str(tmp_path / "b")], env, cwd=tmp_path))
    assert "different benchmarks" in line and "choice_mini" in line and "heartbench_en" in line, line
    assert "versions of the spec" not in line


# --------------------------------------------------------------------- item 9: words of other evaluation tools

@pytest.mark.parametrize(("args", "hint"), [
    (["--model", "openai/gpt-4o"], "candidate=openai/gpt-4o"),
    (["--log-dir", "D"], "hydra.run.dir=D"),
    (["--output-dir", "D"], "hydra.run.dir=D"),
    (["log_dir=D"], "hydra.run.dir=D"),
    (["output_dir=D"], "hydra.run.dir=D"),
    (["model=openai/gpt-4o"], "candidate=openai/gpt-4o"),
    (["--tasks", "heartbench"], "benchmark=heartbench"),
])
def test_words_from_other_tools_get_our_key(tmp_path: Path, env: dict[str, str], args: list[str], hint: str) -> None:
    line = error_line(run_cli(args, env, cwd=tmp_path, timeout=60))
    assert f"did you mean {hint}?" in line, line


# ------------------------------------------------------------------------ item 11: a provider typo, refused fast

@pytest.mark.parametrize(("value", "words"), [("opneai/gpt-4o", "did you mean openai/gpt-4o?"),
                                              ("zzqqxx/gpt-4o", "unknown provider 'zzqqxx'")])
def test_a_provider_typo_is_refused_without_loading_litellm(tmp_path: Path, env: dict[str, str], value: str,
                                                           words: str) -> None:
    """The check reads the installed LiteLLM's provider list without importing LiteLLM (seconds, and its
    price-map fetch): Python's own import log shows no LiteLLM module loaded."""
    res = run_cli([*BASE, f"candidate={value}"], dict(env, PYTHONPROFILEIMPORTTIME="1"), cwd=tmp_path)
    imports = [ln for ln in res.stderr.splitlines() if ln.startswith("import time:")]
    assert imports and not [ln for ln in imports if ln.split("|")[-1].strip().startswith("litellm")]
    res = run_cli([*BASE, f"candidate={value}"], env, cwd=tmp_path)
    assert words in error_line(res)


# ---------------------------------------------------------------- item 7: the provider's base-URL variable

@pytest.mark.parametrize(("args", "provider"), [
    ([*BASE, "candidate=openai/gpt-4o", "dry_run=true"], "OPENAI"),
    (["validate", "benchmark=heartbench", f"data.path={MINI}"], "ANTHROPIC"),  # the spec's declared judge
])
def test_a_base_url_variable_is_named_with_its_endpoint(tmp_path: Path, env: dict[str, str], args: list[str],
                                                        provider: str) -> None:
    env = dict(env, **{f"{provider}_API_BASE": "http://someone:hunter22@127.0.0.1:9/v1?token=abc123",
                       f"{provider}_API_KEY": "sk-x"})
    res = run_cli(args, env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = " ".join(res.stdout.split())
    assert f"${provider}_API_BASE (http://***:***@127.0.0.1:9/v1?token=***), key from ${provider}_API_KEY" in out, out
    assert "provider's endpoint" not in out and "hunter22" not in out and "abc123" not in out


# ------------------------------------------------------------------- item 12: the mock's multiple-choice answers

def test_the_mock_multiple_choice_try_out_shows_a_mix(tmp_path: Path, env: dict[str, str]) -> None:
    run = tmp_path / "run"
    res = run_cli([f"benchmark={CHOICE}", "candidate=mock", "progress=none", f"hydra.run.dir={run}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    recs = [json.loads(x) for x in (run / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len({r["choice"] for r in recs}) >= 3, [r["choice"] for r in recs]  # a mix, not all "A"
    answers = [json.loads(x) for x in (run / "answers.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(json.dumps(a, ensure_ascii=False).count("[mock]") for a in answers)  # still labelled mock
    again = tmp_path / "again"
    res = run_cli([f"benchmark={CHOICE}", "candidate=mock", "progress=none", "cache.enabled=false",
                   f"hydra.run.dir={again}"], env, cwd=tmp_path)
    assert [json.loads(x)["choice"] for x in (again / "samples.jsonl").read_text().splitlines()] == \
        [r["choice"] for r in recs]  # deterministic


# ----------------------------------------------------------------- item 13: a sweep over ids, one endpoint

def test_a_sweep_over_adhoc_ids_shares_one_api_base(tmp_path: Path, env: dict[str, str]) -> None:
    env = dict(env, SHARED_KEY="sk-shared-server-key")
    with FakeServer(lambda body: Reply(text="a reply")) as srv:
        res = run_cli(["-m", *BASE, "candidate=openai/model-a,openai/model-b", f"candidate.api_base={srv.url}",
                       "candidate.api_key_env=SHARED_KEY", f"hydra.sweep.dir={tmp_path / 'sweep'}"], env,
                      cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert sorted(b["model"] for b in srv.requests) == ["model-a", "model-b"]
        assert all("sk-shared-server-key" in h for h in srv.auth_headers)
