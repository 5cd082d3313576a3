"""A newcomer's first hour, through the installed console script: the keyless quickstart, streams and
exit codes, one argument style with --help everywhere, --version, did-you-mean, user model entries,
and `data fetch` (against a file server on 127.0.0.1)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import re
import signal
import subprocess
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import EXE, MINI, REPO
from fakeserver import FakeServer, Reply
from rubric_engine.cli.args import COMMANDS
from rubric_engine.judge.grading import parse_verdict
from rubric_engine.models.mock import mock_verdict
from rubric_engine.models.request import VerdictJSON


def run(args: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def no_litellm(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """An environment in which `import litellm` fails loudly: proves a mock run never imports it."""
    shadow = tmp_path / "shadow"
    shadow.mkdir(exist_ok=True)
    (shadow / "litellm.py").write_text("raise ImportError('litellm was imported by a mock run')\n")
    return dict(env, PYTHONPATH=str(shadow))


# ------------------------------------------------------------------------------------------ quickstart

def test_keyless_quickstart_runs_offline_and_says_mock(tmp_path: Path, env: dict[str, str]) -> None:
    res = run(["benchmark=heartbench_en", "candidate=mock", "judge=mock"], no_litellm(tmp_path, env), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    # results on stdout, progress and warnings on stderr
    assert "Overall" in res.stdout and "mock-candidate judged by mock-judge" in " ".join(res.stdout.split())
    assert f"outputs: {tmp_path / 'outputs' / 'heartbench_en'}/" in res.stdout
    assert "generate: 15/15" in res.stderr and "judge: 15/15" in res.stderr and "Overall" not in res.stderr
    assert "offline mock model(s)" in res.stderr
    (run_dir,) = (tmp_path / "outputs" / "heartbench_en").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["candidate"] == {"name": "mock-candidate", "model": "mock/candidate", "family": "mock"}
    assert summary["judge"] == {"name": "mock-judge", "model": "mock/judge", "family": "mock"}
    assert summary["counts"]["scored"] == 15 and summary["counts"]["judge_errors"] == 0
    samples = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert all(s["response"].startswith("[mock]") for s in samples)
    assert all(c["reasoning"].startswith("[mock]") for s in samples for c in s["criteria"])
    # deterministic: the same command elsewhere gives the same scores
    again = run(["benchmark=heartbench_en", "candidate=mock", "judge=mock", f"hydra.run.dir={tmp_path / 'b'}",
                 "cache.enabled=false"], env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["overall"] == summary["overall"]


@pytest.mark.parametrize("n", [1, 2, 7, 22, 40])
def test_mock_verdict_is_valid_for_any_number_of_criteria(n: int) -> None:
    text = mock_verdict(VerdictJSON(items=n), seed="prompt")
    assert [v.index for v in parse_verdict(text, n)] == list(range(1, n + 1))
    assert mock_verdict(VerdictJSON(items=n), seed="prompt") == text


def test_mock_verdict_follows_declared_fields() -> None:
    shape = VerdictJSON(items=3, list_key="items", fields={"n": "id", "why": "text", "grade": ["A", "B", "C"]})
    data = json.loads(mock_verdict(shape, "s"))
    assert [i["n"] for i in data["items"]] == [1, 2, 3] and all(i["grade"] in "ABC" for i in data["items"])


# --------------------------------------------------------------------------------- streams, exit codes

def _judge_always_500(body: dict[str, Any]) -> Reply:
    if body["model"] == "judge":
        return Reply(status=500)
    return Reply(text="我在这里。")


def test_nothing_scored_exits_1_with_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(_judge_always_500) as srv:
        res = run(["benchmark=heartbench", f"data.path={MINI}", "limit=2", "max_retries=0", "progress=plain",
                   f"hydra.run.dir={tmp_path / 'r'}", "candidate=openai_compatible", "candidate.model=openai/cand",
                   f"candidate.api_base={srv.url}", "candidate.api_key_env=FAKE_KEY", "judge=openai_compatible",
                   "judge.model=openai/judge", f"judge.api_base={srv.url}", "judge.api_key_env=FAKE_KEY"], env)
    assert res.returncode == 1, res.stderr
    line = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine: nothing was scored")]
    assert line == ["rubric-engine: nothing was scored: 0 of 2 questions (0 candidate errors, 2 judge errors); "
                    "see samples.jsonl for each error; to ask the failed questions again: rubric-engine "
                    "benchmark=heartbench " + line[0].split(" benchmark=heartbench ", 1)[1]]
    assert line[0].endswith(f"hydra.run.dir={tmp_path / 'r'} retry_errors=true"), line
    assert "Traceback" not in res.stderr and "0 of 2" in res.stdout  # the tables still show what happened


def test_interrupt_exits_130_and_says_how_to_resume(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(lambda body: Reply(text="x", delay=3)) as srv:  # in flight at the signal: waited for
        proc = subprocess.Popen([EXE, "benchmark=heartbench", f"data.path={MINI}", "limit=2", "progress=none",
                                 f"hydra.run.dir={tmp_path / 'r'}", "candidate=openai_compatible",
                                 "candidate.model=openai/cand", f"candidate.api_base={srv.url}",
                                 "candidate.api_key_env=FAKE_KEY", "judge=mock"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not srv.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert f"resume with: rubric-engine benchmark=heartbench data.path={MINI}" in err
    assert err.rstrip().endswith(f"hydra.run.dir={tmp_path / 'r'}"), err[-500:]


@pytest.mark.parametrize("args, message", [
    (["candiate=gpt-4o"], "unknown key 'candiate' (did you mean candidate=?)"),
    (["limt=5"], "unknown key 'limt' (did you mean limit=?)"),
    (["candidate=gpt4o"], "unknown candidate entry 'gpt4o' (did you mean gpt-4o?)"),
    (["judge=claude"], "unknown judge entry 'claude'"),
    (["limit=="], "cannot parse override 'limit=='"),
    (["candidate=mock", "candidate.modle=x"], "unknown key 'candidate.modle' (did you mean candidate.model=?)"),
    (["cache.dri=/tmp/x"], "unknown key 'cache.dri' (did you mean cache.dir=?)"),
    (["benchmark=heartbench_en", "candidate=mock", "judge=mock", "limit=[1"], "cannot parse override 'limit=[1'"),
])
def test_user_errors_are_one_line_exit_2(tmp_path: Path, env: dict[str, str], args: list[str], message: str) -> None:
    res = run([*args, f"hydra.run.dir={tmp_path / 'r'}"], env)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert lines[0].startswith("rubric-engine: error: ") and message in lines[0], lines
    assert lines[1:] == []  # one line: the fix, no traceback hint (debug=true is in README)
    assert "+candiate" not in res.stderr and "HYDRA_FULL_ERROR" not in res.stderr


# ---------------------------------------------------------------------------------------- one CLI

def test_version_is_the_package_version(env: dict[str, str]) -> None:
    res = run(["--version"], env)
    assert res.returncode == 0 and res.stdout.strip() == f"rubric-engine {version('rubric-engine')}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_has_help(name: str, env: dict[str, str]) -> None:
    res = run([*name.split(), "--help"], env)  # "review criteria": a command and its word
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"usage: rubric-engine {name}") and "options (key=value):" in res.stdout


def test_top_level_help_lists_subcommands(env: dict[str, str]) -> None:
    res = run(["--help"], env)
    assert res.returncode == 0
    for name in COMMANDS:
        assert f"rubric-engine {name}" in res.stdout, name


@pytest.mark.parametrize("args, message", [
    (["cache", "--dir", "x"], "cache: unknown option '--dir'"),
    (["cache", "cache.dri=x"], "unknown key 'cache.dri' (did you mean cache.dir?)"),
    (["leaderboard"], "leaderboard: missing DIR..."),
    (["new", "x", "--extends", "heartbench"], "write extends=VALUE"),
    (["validate", "heartbench", "extra"], "validate: unexpected argument 'extra'"),
])
def test_subcommand_argument_errors(env: dict[str, str], args: list[str], message: str) -> None:
    res = run(args, env)
    assert res.returncode == 2 and message in res.stderr, res.stderr


def test_validate_takes_the_benchmark_as_positional(env: dict[str, str]) -> None:
    res = run(["validate", "heartbench_en"], dict(env, COLUMNS="200"))
    assert res.returncode == 0, res.stderr
    assert "15 questions" in res.stdout and "ok: spec and data are valid" in res.stdout


def _entry(directory: Path, name: str) -> None:
    (directory / "candidate").mkdir(parents=True, exist_ok=True)
    (directory / "candidate" / f"{name}.yaml").write_text(
        f"name: {name}\nmodel: mock/{name}\napi_base: null\napi_key_env: null\nparams: {{}}\n", encoding="utf-8")


def test_user_model_entries_from_conf_and_env(tmp_path: Path, env: dict[str, str]) -> None:
    work = tmp_path / "work"
    _entry(work / "conf", "my-local")
    res = run(["benchmark=heartbench_en", "candidate=my-local", "judge=mock", "limit=2", "progress=none",
               "hydra.run.dir=out"], env, cwd=work)
    assert res.returncode == 0, res.stderr
    assert json.loads((work / "out" / "summary.json").read_text())["candidate"]["name"] == "my-local"
    _entry(tmp_path / "team", "team-model")
    res = run(["benchmark=heartbench_en", "candidate=team-model", "judge=mock", "limit=2", "progress=none",
               f"hydra.run.dir={tmp_path / 'out2'}"], dict(env, RUBRIC_ENGINE_CONFIG_DIRS=str(tmp_path / "team")),
              cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    # a shipped entry is never silently replaced by a user file of the same name
    _entry(work / "conf", "mock")
    res = run(["benchmark=heartbench_en", "candidate=mock", "judge=mock", "limit=1", "progress=none",
               "hydra.run.dir=out3"], env, cwd=work)
    assert json.loads((work / "out3" / "summary.json").read_text())["candidate"]["model"] == "mock/candidate"


def test_a_jury_takes_the_shipped_entry_over_a_user_file_of_the_same_name(tmp_path: Path, env: dict[str, str]) -> None:
    """judge=[a,b] follows the rule judge=a follows: a shipped name means the shipped entry, a new name a user's."""
    work = tmp_path / "work"
    for name in ("mock", "my-judge"):  # a user file shadowing the shipped mock judge, and a new name
        (work / "conf" / "judge").mkdir(parents=True, exist_ok=True)
        (work / "conf" / "judge" / f"{name}.yaml").write_text(
            f"name: user-{name}\nmodel: mock/user-{name}\napi_base: null\napi_key_env: null\nparams: {{}}\n",
            encoding="utf-8")
    res = run(["benchmark=heartbench_en", "candidate=mock", "judge=[mock,my-judge]", "limit=1", "progress=none",
               "hydra.run.dir=out"], env, cwd=work)
    assert res.returncode == 0, res.stderr
    judge = json.loads((work / "out" / "summary.json").read_text())["judge"]
    assert judge == {"name": "mock-judge+user-my-judge", "model": "mock/judge,mock/user-my-judge"}


# ------------------------------------------------------------------------------------------ data fetch

@pytest.fixture
def served_mini(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A benchmark dir whose pinned data.url is the mini file on a 127.0.0.1 file server."""
    www = tmp_path / "www"
    www.mkdir()
    (www / "rows.jsonl").write_bytes(MINI.read_bytes())
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(
        type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda *a: None}), directory=str(www)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    sha = hashlib.sha256(MINI.read_bytes()).hexdigest()
    bench = tmp_path / "remote_bench"
    bench.mkdir()
    (bench / "benchmark.yaml").write_text(
        f"extends: heartbench\nname: remote_bench\ndata:\n  url: http://127.0.0.1:{srv.server_address[1]}/rows.jsonl\n"
        f"  sha256: {sha}\n", encoding="utf-8")
    try:
        yield bench, sha
    finally:
        srv.shutdown()
        srv.server_close()


def test_data_fetch_then_path(tmp_path: Path, env: dict[str, str], served_mini: tuple[Path, str]) -> None:
    bench, sha = served_mini
    env = dict(env, no_proxy="127.0.0.1", NO_PROXY="127.0.0.1")
    args = [f"benchmark={bench}", f"benchmark_dirs=[{REPO / 'benchmarks'}]", f"data.cache_dir={tmp_path / 'dc'}"]
    missing = run(["data", "path", *args], env)
    assert missing.returncode == 1 and "rubric-engine data fetch" in missing.stderr
    res = run(["data", "fetch", *args], env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(tmp_path / "dc" / sha / "rows.jsonl")
    assert hashlib.sha256(Path(res.stdout.strip()).read_bytes()).hexdigest() == sha
    assert run(["data", "path", *args], env).returncode == 0


# ------------------------------------------------------------------------------------------- progress

def test_progress_retries_log_and_wall_time(tmp_path: Path, env: dict[str, str]) -> None:
    env = dict(env, TESTS_COLD_START="1")  # a real start: the "loading LiteLLM" line is shown while it loads
    args = ["benchmark=heartbench", f"data.path={MINI}", "limit=4", "progress=plain", "concurrency=1",
            "candidate=openai_compatible", "candidate.model=openai/cand", "candidate.name=cand",
            "candidate.api_key_env=FAKE_KEY", "judge=mock"]
    with FakeServer(lambda body: Reply(text="我在这里，慢慢说。")) as srv:
        srv.queue(Reply(status=429, headers={"Retry-After": "1"}))
        res = run([*args, f"candidate.api_base={srv.url}", f"hydra.run.dir={tmp_path / 'a'}"], env)
        assert res.returncode == 0, res.stderr
        again = run([*args, f"candidate.api_base={srv.url}", f"hydra.run.dir={tmp_path / 'b'}"], env)
        assert again.returncode == 0, again.stderr
    err = res.stderr.splitlines()
    assert any(x.startswith("loading LiteLLM") for x in err)
    retry = [x for x in err if "retry 1/4" in x]
    assert retry == ["candidate 'cand': HTTP 429; retry 1/4 in 1.0s (rate limit: waiting as asked (Retry-After))"]
    # per-stage plain lines with rate and an ETA of their own; long lines are never wrapped
    assert any(re.match(r"generate: 4/4 \(100%\) \| [\d.]+/s \| cache hits 0 \| errors 0 .*\| done$", x) for x in err)
    assert any(re.match(r"judge: 4/4 \(100%\) \| [\d.]+/s \|", x) for x in err)
    assert any(x.startswith("data warning: ") and len(x) > 80 for x in err)
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    wall = summary["wall_seconds"]
    assert set(wall) == {"generate", "judge", "total"} and all(v >= 0 for v in wall.values())
    assert wall["total"] >= wall["generate"]
    assert summary["calls"]["candidate"] == {"made": 4, "cache_hits": 0, "retries": 1}
    # the second run is served from the cache: no call is counted as made
    second = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert second["calls"]["candidate"] == {"made": 0, "cache_hits": 4, "retries": 0}
    assert "calls sent / cache hits" in again.stdout and "0 / 4" in again.stdout
    log = (tmp_path / "a" / "rubric-engine.log").read_text().splitlines()
    assert "start: benchmark heartbench, 4 questions" in log[0] and "end: 4 of 4 scored" in log[-1]
    assert any("retry 1/4" in x for x in log) and not any("sk-test" in x for x in log)
    assert len(log) == 4  # start, LiteLLM loading, the retry, end: one line per notable event
