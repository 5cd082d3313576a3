"""Shared pieces of the bench/ scripts: synthetic HeartBench-shaped data, a fake server in its own
process that answers both candidate and judge, and timing of the real console script.

Why a separate server process: like a remote provider, it must not compete with the measured
client for the GIL. Why the console script: the targets are about the whole process (start-up,
imports, data loading), not one function.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

ROOT = Path(__file__).resolve().parents[1]
_GIVEN = Path(os.environ.get("RUBRIC_ENGINE_HEARTBENCH", "")).expanduser()  # as the tests take it (conftest.py)
SHARED_DATA = (_GIVEN if _GIVEN.is_file() else _GIVEN / "question_all.jsonl") if os.environ.get("RUBRIC_ENGINE_HEARTBENCH") \
    else ROOT.parent / "shared" / "heartbench" / "question_all.jsonl"
KEY_ENV = "BENCH_FAKE_KEY"
_BESIDE = Path(sys.executable).with_name("rubric-engine")  # the environment running the bench, not another on PATH
EXE = str(_BESIDE) if _BESIDE.exists() else (shutil.which("rubric-engine") or str(_BESIDE))

__all__ = ["write_synthetic", "SHARED_DATA", "ServerProcess", "run_engine", "engine_args", "drive_clients", "ROOT", "EXE",
           "KEY_ENV", "varied_reply", "options", "timed", "print_call_rate", "ABILITIES", "DIMS", "scored_questions"]

# A HeartBench-sized taxonomy for the statistics benches: 15 abilities in 5 dimensions.
ABILITIES = [f"a{i}" for i in range(15)]
DIMS = {"d0": ABILITIES[:7], "d1": ABILITIES[7:11], "d2": ABILITIES[11:13], "d3": ABILITIES[13:14], "d4": ABILITIES[14:]}


def options(doc: str | None, argv: list[str] | None = None, **defaults: Any) -> argparse.Namespace:
    """The command line every bench script has: `--name VALUE` for each default (typed like it), the
    script's docstring's first line as the description."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    for name, default in defaults.items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    return ap.parse_args(argv)


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """(wall seconds, result) of one call."""
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - t0, result


def scored_questions(n: int, seed: int = 1) -> list[Any]:
    """n ScoredQuestions over ABILITIES, 3-8 random abilities each (the statistics benches' data)."""
    import random  # noqa: PLC0415

    from rubric_engine.scoring.aggregate import ScoredQuestion  # noqa: PLC0415

    rng = random.Random(seed)
    out = []
    for i in range(n):
        scores = {a: rng.random() for a in rng.sample(ABILITIES, rng.randint(3, 8))}
        out.append(ScoredQuestion(f"q{i}", "normal", "", scores, sum(scores.values()) / len(scores), False))
    return out


def print_call_rate(wall: float, ideal: float, calls: int, cpu: float, concurrency: int, latency: float,
                    goal: float = 1.3) -> None:
    """The call benches' two result lines: wall time against the ideal, and the CPU the calls took (which
    says whether the ideal is reachable at all on this machine, at its load)."""
    print(f"  wall {wall:.1f}s vs ideal {ideal:.1f}s -> ratio {wall / ideal:.2f}x (goal <= {goal}x); "
          f"{calls / wall:.1f} calls/s vs ideal {calls / ideal:.1f} calls/s (C={concurrency}, L={latency}s)")
    print(f"  CPU {cpu:.1f}s ({1000 * cpu / calls:.2f} ms per call): the calls need {cpu / ideal:.0%} of one core "
          f"for the ideal wall time; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


_ITEM_RE = re.compile(r"^(\d+)\. \[", re.M)  # "1. [label][weight] text" in the judge prompt
_RULE_ITEM_RE = re.compile(r"^(\d+)\. \[(?:其他|Other)\]", re.M)  # a failure-rule item (zeroes the question when met)
_LABELS = ["好奇心", "情绪感知", "情绪理解", "温暖", "第一人称使用", "言语表达"]


def _synthetic_row(i: int) -> dict[str, Any]:
    """A row in HeartBench's shape when ../shared is absent (labels from its taxonomy)."""
    turns = [{"role": "A" if t % 2 == 0 else "B", "content": f"第{t}句：最近工作压力很大，晚上总是睡不好。" * 3}
             for t in range(8)]
    rubric = [{"dimension": _LABELS[k % len(_LABELS)], "score": 3 if k % 3 else -3, "content": f"细则{k}：回应用户的感受"}
              for k in range(9)] + [{"dimension": "其他", "score": None, "content": "扮演用户本身进行发言"}]
    return {"question_id": f"S{i:07d}", "rubric": rubric, "dialogue": turns, "scenario": "个人成长",
            "category": "normal" if i % 3 else "hard"}


def write_synthetic(n: int, path: Path, unique: bool = False) -> Path:
    """n rows: HeartBench's rows (../shared) repeated under new ids, else synthetic rows of its shape.
    Written line by line, so making 100,000 rows holds only the 296 source rows in memory.
    A repeated row asks the same prompts, so its calls are cache hits; `unique` marks each repeat's
    last turn so that every question costs real calls."""
    source = [json.loads(line) for line in SHARED_DATA.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if SHARED_DATA.is_file() else None
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            row = dict(source[i % len(source)]) if source else _synthetic_row(i)
            if source:
                if i >= len(source):
                    row["question_id"] = f"{row['question_id']}_{i // len(source)}"
                    if unique:
                        turns = [dict(t) for t in row["dialogue"]]
                        turns[-1]["content"] += f"（{i // len(source)}）"
                        row["dialogue"] = turns
            elif unique:
                row["dialogue"][-1]["content"] += f"（{i}）"
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def _reply(body: dict[str, Any]) -> Any:
    """Candidate: a fixed reply. Judge (asked for JSON): a verdict with one entry per numbered item."""
    from fakeserver import Reply  # noqa: PLC0415 - tests/ is on sys.path in the server process

    text = "\n".join(str(m.get("content", "")) for m in body["messages"])
    if "criteria" in text and ("response_format" in body or '"met"' in text):
        n = max((int(x) for x in _ITEM_RE.findall(text)), default=1)
        return Reply(text=json.dumps({"criteria": [{"id": i, "reasoning": "ok", "met": i % 2 == 0}
                                                   for i in range(1, n + 1)]}), usage=(900, 40 * n))
    return Reply(text="听起来你最近真的很累，我在这里，愿意听你慢慢说。" * 4, usage=(600, 120))


def varied_reply(body: dict[str, Any]) -> Any:
    """`_reply` with the variety real models give: the candidate's reply length and each verdict depend on
    the prompt (crc32, deterministic), so the finish's statistics (length against score, the bootstrap)
    have real work to do; with one fixed reply the length analysis finds no variation and is skipped."""
    import zlib  # noqa: PLC0415

    from fakeserver import Reply  # noqa: PLC0415

    text = "\n".join(str(m.get("content", "")) for m in body["messages"])
    h = zlib.crc32(text.encode("utf-8"))
    if "criteria" in text and ("response_format" in body or '"met"' in text):
        n = max((int(x) for x in _ITEM_RE.findall(text)), default=1)
        rules = {int(x) for x in _RULE_ITEM_RE.findall(text)}  # HeartBench's role-confusion items: never met
        return Reply(text=json.dumps({"criteria": [{"id": i, "reasoning": "ok",
                                                    "met": i not in rules and (h >> (i % 29)) & 1 == 1}
                                                   for i in range(1, n + 1)]}), usage=(900, 40 * n))
    return Reply(text="听起来你最近真的很累，我在这里，愿意听你慢慢说。" * (1 + h % 12), usage=(600, 30 + h % 300))


def _serve(latency: float, conn: Any, reply: Callable[[dict[str, Any]], Any] | None = None,
           keep_bodies: bool = True) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from fakeserver import FakeServer  # noqa: PLC0415

    with FakeServer(reply or _reply, latency=latency, keep_bodies=keep_bodies) as srv:
        conn.send(srv.url)
        while (cmd := conn.recv()) in ("stats", "times"):
            conn.send((len(srv.requests), srv.max_in_flight) if cmd == "stats" else list(srv.request_times))


class ServerProcess:
    """The fake server (tests/fakeserver.py) with a fixed latency, in a spawned process.

    `reply(body) -> fakeserver.Reply` scripts the answers (default: a candidate reply, or a verdict
    when the prompt lists numbered criteria); it must be a module-level function (it is pickled). With
    `keep_bodies=False` the server forgets each request's body once answered (tests/fakeserver.py)."""

    def __init__(self, latency: float, reply: Callable[[dict[str, Any]], Any] | None = None,
                 keep_bodies: bool = True) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(latency, child, reply, keep_bodies), daemon=True)
        self.url = ""

    def __enter__(self) -> "ServerProcess":
        self._proc.start()
        self.url = self._conn.recv()
        return self

    def stats(self) -> tuple[int, int]:
        """(requests so far, max in flight)."""
        self._conn.send("stats")
        return self._conn.recv()

    def request_times(self) -> list[float]:
        """time.monotonic() at the arrival of every request so far (the clock is the machine's, so it
        compares with the same clock read in this process)."""
        self._conn.send("times")
        return self._conn.recv()

    def calls_span(self, latency: float) -> float:
        """Seconds from the first request's arrival to the last one's answer (`latency` after it arrived): the
        engine's throughput, its start-up and LiteLLM's import left out."""
        times = self.request_times()
        return max(times) + latency - min(times)

    def __exit__(self, *exc: Any) -> None:
        self._conn.send("stop")
        self._proc.join(10)


def served(role: str, model: str, url: str) -> list[str]:
    """The overrides that make `role` (candidate, judge, user) the fake server's model `model` (key from KEY_ENV)."""
    return [f"{role}=openai_compatible", f"{role}.model=openai/{model}", f"{role}.api_base={url}",
            f"{role}.api_key_env={KEY_ENV}"]


def engine_args(url: str, data: Path, out: Path, cache: Path, concurrency: int, stage: str = "full") -> list[str]:
    """A run of the real console script against the fake server (both roles), no progress display."""
    return [EXE, "benchmark=heartbench", f"data.path={data}", f"hydra.run.dir={out}", f"cache.dir={cache}",
            f"concurrency={concurrency}", "progress=none", f"stage={stage}", "max_retries=0",
            *served("candidate", "cand", url), *served("judge", "judge", url)]


def run_engine(args: list[str]) -> dict[str, float]:
    """Run a command; wall time, CPU seconds (user+sys, with the child processes it waited for, e.g. the
    report worker) and peak RSS (MB, the largest of those processes), and its start and end on
    time.monotonic() (`start`, `end`: to place the fake server's request times)."""
    env = {**os.environ, KEY_ENV: "sk-bench"}
    with tempfile.TemporaryFile() as errf:
        start = time.monotonic()
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=errf)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        end = time.monotonic()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            errf.seek(0)
            raise SystemExit(f"run failed ({proc.returncode}): {' '.join(args[:3])} ...\n"
                             f"{errf.read().decode('utf-8', 'replace')[-2000:]}")
    per_unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss * per_unit / 1e6,
            "start": start, "end": end}


def drive_clients(latency: float, reply: Callable[[dict[str, Any]], Any],
                  work: Callable[[str, Any], Awaitable[tuple[float, int]]]) -> tuple[float, int, int, int, float]:
    """The in-process benches' driver: a fake server answering `reply` at `latency`, the key variable
    set, LiteLLM imported and one call made before timing (its lazy provider imports are a one-off),
    then `work(url, cache) -> (wall seconds, errors)` with a fresh durable cache.

    Returns (wall, errors, requests the server saw for `work`, max in flight, CPU seconds of `work`).
    The CPU seconds say whether the goal is reachable at all: calls in one process share one core (the
    GIL), so wall time cannot drop below them, and on a loaded machine the process gets less than a core."""
    import asyncio  # noqa: PLC0415

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from rubric_engine.models.cache import ResultCache  # noqa: PLC0415
    from rubric_engine.models.client import ModelClient
    from rubric_engine.models.entries import ModelSpec  # noqa: PLC0415

    os.environ[KEY_ENV] = "sk-bench"

    async def run(url: str, cache_dir: str) -> tuple[float, int]:
        warm = ModelSpec(name="warm-up", model="openai/warm-up", api_base=url, api_key_env=KEY_ENV)
        async with ModelClient(warm, cache=None, role="warm-up") as first:
            await first.complete([{"role": "user", "content": "warm up"}])
        with ResultCache(cache_dir) as cache:
            cpu0 = time.process_time()
            wall, errors = await work(url, cache)
            cpu.append(time.process_time() - cpu0)
            return wall, errors

    cpu: list[float] = []

    with ServerProcess(latency, reply) as srv, tempfile.TemporaryDirectory() as tmp:
        wall, errors = asyncio.run(run(srv.url, tmp))
        requests, max_in_flight = srv.stats()
    return wall, errors, requests - 1, max_in_flight, cpu[0]

