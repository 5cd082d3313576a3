"""workers=N on one machine: the engine's local pool against Ray actors, side by side (a script, not a test).

The question (issue "Beyond one machine", item 1): should `workers=N` on one machine become Ray actors, now that
the multi-machine path is Ray, or stay the local pool of models/workers.py (processes over a socketpair)? The
same N calls with unique prompts at concurrency C go to one fake server (tests/fakeserver.py in its own process)
at latency L, three ways, each in a fresh process so that its start-up counts:
  workers=1        ModelClient, calls in its own process (today's default; the baseline)
  workers=2        ModelClient with a WorkerPool(2): the local pool, each worker running LiteLLM
  Ray, 2 actors    `ray.init(num_cpus=2)` started from scratch on this machine, two async actors each running
                   the engine's LiteLLM call (the same `RUNTIME.acompletion` and reply slimming as a pool
                   worker), the calls sent one `.remote()` each, spread over the actors, from an asyncio loop

Printed per way: start-up to first answer (process start to the first reply in hand) and the CPU it took, wall (process start to
the last reply), CPU seconds per call summed over every process involved (the driver, its workers; for Ray also
the GCS, the raylet, Ray's agents and the Ray workers; in all and after start-up), the peak of the summed RSS of those
processes, how many processes that was, and the requests the server saw (a way that failed never passes for a
fast one). The process tree is read from /proc every 50 ms (Linux only) while the way runs; its CPU is read once
more after the last reply, before shut-down, so shut-down is not counted. Ways run --runs times, interleaved.

    python bench/bench_ray_workers.py [--calls 3000] [--concurrency 64] [--latency 0] [--runs 2]

Reading it: docs/scaling.md, "workers=N on one machine: local pool or Ray actors".
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import KEY_ENV, ROOT, ServerProcess, options  # noqa: E402

WAYS = {"workers=1": "one", "workers=2 (local pool)": "pool", "Ray, 2 actors": "ray"}
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


# -- the measured side: one way, in its own process ------------------------------------------------------------
def _reply(body: dict[str, Any]) -> Any:
    from fakeserver import Reply  # noqa: PLC0415 - tests/ is on sys.path in the server process

    return Reply(text="Rest, drink fluids, and see a doctor if it gets worse. " * 3, usage=(300, 60))


def _messages(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Question {i}: I have had a headache for two days. What should I do?"}]


async def _drive(calls: int, concurrency: int, one: Any) -> dict[str, Any]:
    """`calls` calls of `one(i)` at most `concurrency` at a time; when the first answer came and the last."""
    sem = asyncio.Semaphore(concurrency)
    first: list[float] = []
    errors: list[str] = []

    async def call(i: int) -> None:
        async with sem:
            try:
                await one(i)
            except Exception as exc:  # noqa: BLE001 - counted and shown, never passed for an answer
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
                return
        if not first:
            first.append(time.monotonic())
            print(json.dumps({"first": first[0]}), flush=True)  # the parent reads the start-up's CPU now

    await asyncio.gather(*(call(i) for i in range(calls)))
    return {"first": first[0] if first else None, "end": time.monotonic(), "errors": len(errors),
            "error": errors[0] if errors else ""}


async def _engine(url: str, calls: int, concurrency: int, workers: int) -> dict[str, Any]:
    from rubric_engine.models.client import ModelClient  # noqa: PLC0415
    from rubric_engine.models.entries import ModelSpec  # noqa: PLC0415
    from rubric_engine.models.workers import WorkerPool  # noqa: PLC0415

    pool = WorkerPool(workers)
    pool.start()  # as a run does: the workers import LiteLLM while the run loads its spec and data
    spec = ModelSpec(name="cand", model="openai/cand", api_base=url, api_key_env=KEY_ENV, timeout=120)
    async with ModelClient(spec, cache=None, concurrency=concurrency, max_retries=0, workers=pool) as client:
        async def one(i: int) -> None:
            result = await client.complete(_messages(i))
            if not result.text:
                raise RuntimeError("empty answer")
        out = await _drive(calls, concurrency, one)
    await pool.aclose()
    return out


def _ray_way(url: str, calls: int, concurrency: int) -> tuple[dict[str, Any], Any]:
    """Two Ray actors doing what a pool worker does with a call; the driver sends each call as one `.remote()`."""
    import ray  # noqa: PLC0415 - the bench's own actor: nothing in the engine imports Ray below cli/ but cluster/

    # address="local": a fresh instance even where another Ray runs on this machine (address=None would join the
    # cluster that the machine's last `ray start` recorded in Ray's temporary directory)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             namespace="rubric-engine-bench")

    @ray.remote(num_cpus=1)
    class Caller:
        def __init__(self) -> None:
            from rubric_engine.models.litellm_runtime import RUNTIME  # noqa: PLC0415

            RUNTIME.quiet_gc = True  # as a pool worker
            self.runtime, self.litellm = RUNTIME, RUNTIME.module()

        async def call(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
            from rubric_engine.models.litellm_runtime import parse_reply  # noqa: PLC0415
            from rubric_engine.models.workers import slim_reply  # noqa: PLC0415

            response, cost = await self.runtime.acompletion(self.litellm, kwargs)
            return slim_reply(response, parse_reply(response)[0]), cost

    actors = [Caller.remote() for _ in range(2)]
    key = os.environ[KEY_ENV]

    async def main() -> dict[str, Any]:
        async def one(i: int) -> None:
            kwargs = {"model": "openai/cand", "api_base": url, "api_key": key, "messages": _messages(i),
                      "timeout": 120, "num_retries": 0, "max_retries": 0}
            reply, _ = await actors[i % len(actors)].call.remote(kwargs)
            if not reply["choices"][0]["message"]["content"]:
                raise RuntimeError("empty answer")
        return await _drive(calls, concurrency, one)

    return asyncio.run(main()), ray


def _run_way(way: str, url: str, calls: int, concurrency: int) -> None:
    """The child: run one way, print its timings as one JSON line, wait for the parent's last reading, end."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    ray = None
    if way == "ray":
        out, ray = _ray_way(url, calls, concurrency)
    else:
        out = asyncio.run(_engine(url, calls, concurrency, 2 if way == "pool" else 1))
    print(json.dumps(out), flush=True)
    sys.stdin.readline()  # the parent has read every process's CPU: shut-down is not counted
    if ray is not None:
        ray.shutdown()


# -- the measuring side: the process tree from /proc -----------------------------------------------------------
def _proc(pid: int) -> tuple[int, float, int, int, str] | None:
    """(parent pid, CPU seconds user+sys, RSS bytes, start time, name) of a live process, from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        rss_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK, rss_pages * _PAGE, int(fields[19]), name


class TreeWatch:
    """Every process under one root, sampled: each one's last CPU reading (keyed by pid and start time, so a
    reused pid is another process) and the peak of the summed RSS."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.cpu: dict[tuple[int, int], float] = {}
        self.names: dict[tuple[int, int], str] = {}
        self.peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> None:
        procs = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (info := _proc(int(entry))) is not None:
                procs[int(entry)] = info
        tree, frontier = {self.root}, [self.root]
        while frontier:
            parent = frontier.pop()
            for pid, info in procs.items():
                if info[0] == parent and pid not in tree:
                    tree.add(pid)
                    frontier.append(pid)
        rss = 0
        for pid in tree:
            if pid in procs:
                _, cpu, proc_rss, start, name = procs[pid]
                self.cpu[(pid, start)] = cpu
                self.names[(pid, start)] = name
                rss += proc_rss
        self.peak_rss = max(self.peak_rss, rss)

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            self.sample()

    def __enter__(self) -> "TreeWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def _measure(way: str, srv: ServerProcess, args: Any) -> dict[str, Any]:
    before = srv.stats()[0]
    env = {**os.environ, KEY_ENV: "sk-bench", "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    errf = tempfile.TemporaryFile(mode="w+")  # not a pipe: Ray's chatter must never block the way on a full pipe
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, __file__, "--way", way, "--url", srv.url, "--calls", str(args.calls),
                             "--concurrency", str(args.concurrency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=errf, text=True, env=env)
    startup_cpu = 0.0
    with TreeWatch(proc.pid) as watch:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.startswith('{"first"'):
            watch.sample()
            startup_cpu = sum(watch.cpu.values())  # the start-up's CPU, the first call's included
            line = proc.stdout.readline()
        watch.sample()  # every process's CPU after the last reply, before any shut-down
    proc.communicate("end\n", timeout=120)
    errf.seek(0)
    if not line.strip():
        raise SystemExit(f"{way} failed ({proc.returncode}):\n{errf.read()[-2000:]}")
    errf.close()
    out = json.loads(line)
    cpu = sum(watch.cpu.values())
    return {"startup": (out["first"] or out["end"]) - start, "wall": out["end"] - start, "cpu": cpu,
            "startup_cpu": startup_cpu, "call_cpu": (cpu - startup_cpu) / max(1, args.calls - 1),
            "rss_mb": watch.peak_rss / 1e6, "processes": len(watch.cpu),
            "requests": srv.stats()[0] - before, "errors": out["errors"], "error": out["error"],
            "names": sorted(set(watch.names.values()))}


def _span(values: list[float], fmt: str = "{:.2f}") -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if abs(hi - lo) < 1e-9 else f"{fmt.format(lo)}-{fmt.format(hi)}"


def main(argv: list[str] | None = None) -> int:
    if argv is None and "--way" in sys.argv:  # the child: one way
        opts = options(__doc__, sys.argv[1:], way="", url="", calls=0, concurrency=0)
        _run_way(opts.way, opts.url, opts.calls, opts.concurrency)
        return 0
    args = options(__doc__, argv, calls=3000, concurrency=64, latency=0.0, runs=2)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in WAYS}
    with ServerProcess(args.latency, _reply) as srv:
        for _ in range(args.runs):
            for name, way in WAYS.items():
                results[name].append(_measure(way, srv, args))
    calls = args.calls
    print(f"{calls:,} calls each, unique prompts, C={args.concurrency}, L={args.latency}s, {args.runs} run(s) "
          f"interleaved; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"  {'way':<24} {'start-up s':>11} {'start CPU s':>12} {'wall s':>12} {'CPU ms/call':>12} "
          f"{'after start':>12} {'peak RSS MB':>12} {'processes':>10} {'requests':>9} {'errors':>7}")
    for name, rs in results.items():
        print(f"  {name:<24} {_span([r['startup'] for r in rs]):>11} {_span([r['startup_cpu'] for r in rs]):>12} "
              f"{_span([r['wall'] for r in rs]):>12} {_span([1000 * r['cpu'] / calls for r in rs]):>12} "
              f"{_span([1000 * r['call_cpu'] for r in rs]):>12} {_span([r['rss_mb'] for r in rs], '{:.0f}'):>12} "
              f"{_span([r['processes'] for r in rs], '{:.0f}'):>10} {_span([r['requests'] for r in rs], '{:.0f}'):>9} "
              f"{_span([r['errors'] for r in rs], '{:.0f}'):>7}")
    base = results["workers=1"]
    mid = (lambda rs, k: statistics.median(r[k] for r in rs))
    for name, rs in results.items():
        if name != "workers=1":
            print(f"  {name}: wall {mid(rs, 'wall') / mid(base, 'wall'):.2f}x, CPU {mid(rs, 'cpu') / mid(base, 'cpu'):.2f}x "
                  f"(after start-up {mid(rs, 'call_cpu') / mid(base, 'call_cpu'):.2f}x), "
                  f"peak RSS {mid(rs, 'rss_mb') / mid(base, 'rss_mb'):.2f}x, start-up "
                  f"{mid(rs, 'startup') / mid(base, 'startup'):.2f}x of workers=1's (medians)")
    for name, rs in results.items():
        print(f"  {name} processes: {', '.join(rs[-1]['names'])}")
        if any(r["error"] for r in rs):
            print(f"  {name} first error: {next(r['error'] for r in rs if r['error'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
