"""Shared fixtures: the fake OpenAI-compatible server, the test data and where the real HeartBench file is.

Why here and only here: every test module finds data the same way. Most tests run on
`tests/data/mini_heartbench.jsonl` (12 HeartBench-shaped questions written for this project, with the
spec's Chinese ability labels), so a fresh clone with nothing beside it passes. Tests that need the real
HeartBench file use the `heartbench_file` fixture, which looks in ../shared/heartbench/,
$RUBRIC_ENGINE_HEARTBENCH and the engine's data cache (`rubric-engine data fetch benchmark=heartbench`),
and otherwise skips with one line saying so. Nothing here reads data at import time.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

# The package under test is the installed one (`pip install .` or `-e .`), as users get it:
# conf/, benchmarks/ and data/ are only importable as rubric_engine.* once installed.
TESTS = Path(__file__).resolve().parent  # tests/: the support modules, data/ and one directory per concept
REPO = TESTS.parent
DATA = TESTS / "data"  # the project's own test data (tests/data/), whatever directory a test module is in


def _test_dirs() -> list[Path]:
    """tests/ and each directory of test modules under it. Test modules are imported by their bare name
    (pytest's default `prepend` import mode, no __init__.py), so a name may be used once in the whole tree."""
    seen: dict[str, Path] = {}
    for path in sorted([*TESTS.glob("test_*.py"), *TESTS.glob("*/test_*.py")]):  # a module not yet moved too
        if path.stem in seen:
            raise RuntimeError(f"two test modules named {path.stem}: {seen[path.stem]} and {path}; rename one "
                               "(test modules are imported by their bare name)")
        seen[path.stem] = path
    return [TESTS, *sorted({p.parent for p in seen.values()} - {TESTS})]


# `from fakeserver import ...` and `from test_cli import ...` work from any test module, whichever files a
# pytest command names: tests/ and every concept directory are on the import path
for _dir in reversed(_test_dirs()):
    if str(_dir) not in sys.path:
        sys.path.insert(0, str(_dir))

from fakeserver import FakeServer, Reply  # noqa: E402
from warmstart import REPORT_SOCKET_ENV, SOCKET_ENV, Warm  # noqa: E402
from rubric_engine.dataset.load import default_data_cache_dir, load_dataset  # noqa: E402
from rubric_engine.spec.load import load_spec  # noqa: E402

MINI = DATA / "mini_heartbench.jsonl"
HEARTBENCH_SHA256 = "ef14a94d29668342a4a40039c21e3cb42bba528c31181d8d61fdf6caf420af6e"
HEARTBENCH_FILE = "question_all.jsonl"
REAL_EXE = str(Path(sys.executable).with_name("rubric-engine"))  # the environment under test, never another on PATH
# What tests start: a launcher that runs REAL_EXE's main() in a child of a process that has already imported
# it (tests/warmstart.py: the same run without the seconds of imports), or REAL_EXE itself when that could
# differ. TESTS_COLD_START=1 makes every start a real one.
_WARM = Warm(REAL_EXE)
os.environ[SOCKET_ENV] = str(_WARM.socket)
os.environ[REPORT_SOCKET_ENV] = str(_WARM.report_socket)  # a warm run's report worker, warm too
EXE = str(_WARM.exe)
MISSING = ("real HeartBench data not found: put it in ../shared/heartbench/, set $RUBRIC_ENGINE_HEARTBENCH, "
           "or run `rubric-engine data fetch benchmark=heartbench`")

__all__ = ["fake_server", "fake_key", "FakeServer", "Reply", "MINI", "REPO", "TESTS", "DATA", "EXE", "heartbench_dir",
           "read_rows", "run_cli", "clean_env", "model_args", "QuestionScript", "complete_lines", "kill_after_lines", "sigkill",
           "REAL_EXE"]


# ------------------------------------------------------------------ scripted console-script runs (shared)

def read_rows(path: Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """A HeartBench-shaped JSONL file as (rows, rows by question_id)."""
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows, {r["question_id"]: r for r in rows}


def run_cli(args: list[str], env: dict[str, str], timeout: float = 300, **kw: Any) -> subprocess.CompletedProcess:
    """The console script of the environment under test, output captured as text."""
    return subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=timeout, **kw)


def edited_spec(src: Path, dest: Path, old: str, new: str) -> Path:
    """A copy of the spec directory `src` at `dest` whose benchmark.yaml has `old` replaced by `new` (which must
    be there: a test whose edit no longer applies fails instead of testing the unedited spec)."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest)
    text = (dest / "benchmark.yaml").read_text()
    assert old in text
    (dest / "benchmark.yaml").write_text(text.replace(old, new))
    return dest


def complete_lines(path: Path) -> list[dict[str, Any]]:
    """The whole lines of a JSONL file (a journal being written: a line without its newline is left out)."""
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_bytes().split(b"\n")[:-1]]


def kill_after_lines(cmd: list[str], journal: Path, n: int, env: dict[str, str], *, cwd: Path | None = None,
                     timeout: float = 120) -> list[dict[str, Any]]:
    """Start `cmd`, wait until `journal` holds `n` whole lines (its header included), kill it with SIGKILL and
    return the whole lines left. A process that ends first is not killed: the caller's "midway" check fails."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while len(complete_lines(journal)) < n and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            sigkill(proc)
        proc.wait()
    return complete_lines(journal)


def sigkill(proc: subprocess.Popen) -> None:
    """SIGKILL a started console script and wait until its run is gone too (a warm start's run is the
    launcher's child's, killed by the zygote when the launcher dies: tests/warmstart.py)."""
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _WARM.settle(proc.pid)


@pytest.fixture(scope="session", autouse=True)
def _warm_starts(request: pytest.FixtureRequest) -> Iterator[None]:
    """The zygotes of warm console-script starts, for a session that starts processes at all."""
    if any(item.get_closest_marker("slow") for item in request.session.items):
        _WARM.start()
    yield
    _WARM.stop()


def forge_crash(finished: Path, run: Path, whole: int = 5) -> list[str]:
    """Make `run` look like what a crash leaves of the finished run `finished`: its manifest, a journal with
    the header the manifest's identity gives, `whole` whole records and the next one cut mid-line. Returns
    the finished run's samples.jsonl lines."""
    from rubric_engine.run.journal import run_fingerprint  # noqa: PLC0415

    manifest = json.loads((finished / "manifest.json").read_text())
    fp = run_fingerprint({k: v for k, v in manifest.items() if k not in ("run_id", "state", "started", "resumed",
                                                                         "finished")})
    lines = (finished / "samples.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    run.mkdir()
    (run / "manifest.json").write_bytes((finished / "manifest.json").read_bytes())
    header = json.dumps({"journal": 1, "run": fp, "questions": len(lines)}) + "\n"
    cut = lines[whole][: len(lines[whole]) // 2]
    (run / "samples.jsonl").write_text(header + "".join(lines[:whole]) + cut, encoding="utf-8")
    return lines


def clean_env(root: Path) -> dict[str, str]:
    """Environment for console-script runs: no real API keys, a private cache under root, FAKE_KEY set."""
    e = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    e.update(RUBRIC_ENGINE_CACHE=str(root / "cache"), FAKE_KEY="sk-test", XDG_CACHE_HOME=str(root / "xdg"))
    return e


def model_args(url: str, candidate: str = "cand", judge: str = "judge") -> list[str]:
    """Candidate and judge entries pointing at a fake server (model ids openai/<name>, key from FAKE_KEY)."""
    return ["candidate=openai_compatible", f"candidate.model=openai/{candidate}", f"candidate.api_base={url}",
            f"candidate.name={candidate}", "candidate.api_key_env=FAKE_KEY",
            "judge=openai_compatible", f"judge.model=openai/{judge}", f"judge.api_base={url}",
            f"judge.name={judge}", "judge.api_key_env=FAKE_KEY"]


class QuestionScript:
    """Base of the fake server's scripts: a request to one of `judges` goes to `judge(model, text)`, any
    other to `candidate(model, question id)`, the question found from the dialogue turns in the prompt."""

    judges: frozenset[str] = frozenset({"judge"})

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        # longest dialogues first, so a question whose turns all appear in the prompt is found
        # before a shorter question that shares its opening turn
        self.turns = sorted(((tuple(t["content"] for t in r["dialogue"]), r["question_id"]) for r in rows),
                            key=lambda x: -len(x[0]))

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = self.text(body)
        if body["model"] in self.judges:
            return self.judge(body["model"], text)
        return self.candidate(body["model"], self.question(text))

    def judge(self, model: str, text: str) -> Reply:
        raise NotImplementedError

    def candidate(self, model: str, qid: str) -> Reply:
        raise NotImplementedError

    @staticmethod
    def text(body: dict[str, Any]) -> str:
        """Every message of a request body as one text."""
        return "\n".join(str(m.get("content", "")) for m in body["messages"])

    def question(self, text: str) -> str:
        return next(q for turns, q in self.turns if all(t in text for t in turns))

    @staticmethod
    def verdict(n: int, met: Any, reasoning: Any = lambda i: f"item {i}") -> Reply:
        """The judge's reply for items 1..n: met(i) and reasoning(i) per item, in the default verdict shape."""
        items = [{"id": i, "reasoning": reasoning(i), "met": met(i)} for i in range(1, n + 1)]
        return Reply(text=json.dumps({"criteria": items}), usage=(100, 50))


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that starts a process (the console script above all) is `slow`, marked or not
    (tests/slowmarks.py): `pytest -m "not slow"` is the in-process inner loop (docs/development.md)."""
    from slowmarks import starts_a_process  # noqa: PLC0415

    for item in items:
        if isinstance(item, pytest.Function) and item.get_closest_marker("slow") is None:
            name = f"{item.cls.__name__}.{item.originalname}" if item.cls else item.originalname
            if starts_a_process(Path(str(item.fspath)).stem, name):
                item.add_marker(pytest.mark.slow)


@pytest.fixture
def static_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path, list[str]]]:
    """Serves tmp_path/www on 127.0.0.1 (proxies off); yields (base url, directory, request paths seen)."""
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    www = tmp_path / "www"
    www.mkdir()
    seen: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            seen.append(self.path)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(www)))
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", www, seen
    finally:
        srv.shutdown()
        srv.server_close()


def heartbench_dir() -> Path | None:
    """The directory holding the real HeartBench `question_all.jsonl`, or None (first match wins)."""
    candidates = [REPO.parent / "shared" / "heartbench"]
    if os.environ.get("RUBRIC_ENGINE_HEARTBENCH"):
        given = Path(os.environ["RUBRIC_ENGINE_HEARTBENCH"]).expanduser()
        candidates.insert(0, given.parent if given.is_file() else given)
    candidates.append(default_data_cache_dir() / HEARTBENCH_SHA256)
    return next((d for d in candidates if (d / HEARTBENCH_FILE).is_file()), None)


@pytest.fixture(scope="session")
def heartbench_file() -> Path:
    """The real HeartBench question_all.jsonl; the test is skipped (reason shown) when it is absent."""
    found = heartbench_dir()
    if found is None:
        pytest.skip(MISSING)
    return found / HEARTBENCH_FILE


@pytest.fixture(scope="session")
def mini_file() -> Path:
    """The project's own 12-question HeartBench-shaped file (always present)."""
    return MINI


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A started FakeServer (echo handler, empty queue); stopped after the test."""
    with FakeServer() as srv:
        yield srv


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Any]:
    """A ResultCache of the test's own (a module may define its own `cache` instead)."""
    from rubric_engine.models.cache import ResultCache  # noqa: PLC0415

    c = ResultCache(tmp_path / "cache")
    yield c
    c.close()


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
    """The 12 questions of the project's mini HeartBench-shaped file."""
    return load_dataset(spec, MINI).questions


@pytest.fixture(scope="module")
def real_questions(spec, heartbench_file):
    """The 296 real HeartBench questions (never copied into the project); skips when absent."""
    return load_dataset(spec, heartbench_file).questions


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """Environment for console-script runs: no real API keys, a private cache, FAKE_KEY set."""
    return clean_env(tmp_path)


@pytest.fixture(scope="session")
def review_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three run dirs (candidates cand_a, cand_b, cand_c; one judge) on the shipped English sample,
    made once by the console script against the fake server (see agree_runs.py)."""
    from agree_runs import make_runs

    root = tmp_path_factory.mktemp("review_runs")
    return make_runs(root, clean_env(root), ("cand_a", "cand_b", "cand_c"))
