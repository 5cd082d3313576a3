"""Whole-process speed of `rubric-engine` against the fake server, side by side (a script, not a test).

Prints, for N questions at latency L and concurrency C (defaults: HeartBench's 296, 1 s, 32):
  full run (generate + judge)  vs the pipelined ideal N*L/C + L       target: ratio <= 1.25
  stage=generate               vs a bare async OpenAI client (same   target: difference <= 1 s
                               server, same messages, own process)
Each is a fresh process timed from start to exit (imports, config, data loading included), with
a fresh cache, so every call is really made. For each it also prints where the time went, from the
fake server's arrival times: start-up (process start to the first request), the request phase (first
to last request) and the finish (the last reply, i.e. last request + L, to the process's exit), and
the floor that LiteLLM's import alone sets: a process must import it (CPU-bound, one core) before its
first request, so no full run can beat (ideal + import) / ideal.

    python bench/bench_run.py [--n 296] [--latency 1.0] [--concurrency 32] [--repeat 1]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import KEY_ENV, ServerProcess, engine_args, options, run_engine, write_synthetic  # noqa: E402

# The engine's environment for LiteLLM's import (litellm_runtime: the shipped price map, production mode).
IMPORT_LITELLM = ("import os; os.environ.update(LITELLM_LOCAL_MODEL_COST_MAP='True', LITELLM_MODE='PRODUCTION'); "
                  "import litellm")

# The baseline: what any async client must pay (start-up, reading the rows, N requests at C in flight).
BARE_CLIENT = r'''
import asyncio, json, os, sys
from openai import AsyncOpenAI

async def main(url, path, c):
    rows = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
    client = AsyncOpenAI(base_url=url, api_key=os.environ["%s"], max_retries=0, timeout=120)
    sem = asyncio.Semaphore(c)
    async def one(row):
        msgs = [{"role": "user", "content": "\n".join(t["content"] for t in row["dialogue"])}]
        async with sem:
            r = await client.chat.completions.create(model="cand", messages=msgs)
        return r.choices[0].message.content
    out = await asyncio.gather(*(one(r) for r in rows))
    await client.close()
    assert all(out)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
''' % KEY_ENV


def _phases(res: dict[str, float], arrivals: list[float], latency: float) -> tuple[float, float, float]:
    """(start-up, request phase, finish) seconds of one process from its requests' arrival times."""
    mine = sorted(t for t in arrivals if res["start"] <= t <= res["end"])
    if not mine:
        return float("nan"), float("nan"), float("nan")
    return mine[0] - res["start"], mine[-1] - mine[0], res["end"] - mine[-1] - latency


def main(argv: list[str] | None = None) -> int:
    args = options(__doc__, argv, n=296, latency=1.0, concurrency=32, repeat=1)  # repeat: runs of each, median shown
    n, lat, c = args.n, args.latency, args.concurrency
    with tempfile.TemporaryDirectory() as tmp_s, ServerProcess(lat) as srv:
        tmp = Path(tmp_s)
        data = write_synthetic(n, tmp / "rows.jsonl")
        walls: dict[str, list[float]] = {"full": [], "generate": [], "bare": []}
        cpus: dict[str, list[float]] = {"full": [], "generate": [], "bare": []}
        phases: dict[str, list[tuple[float, float, float]]] = {"full": [], "generate": [], "bare": []}
        runs: list[tuple[str, dict[str, float]]] = []
        for r in range(args.repeat):
            for stage in ("full", "generate"):
                cmd = engine_args(srv.url, data, tmp / f"{stage}{r}", tmp / f"cache-{stage}{r}", c, stage)
                runs.append((stage, run_engine(cmd)))
            runs.append(("bare", run_engine([sys.executable, "-c", BARE_CLIENT, srv.url, str(data), str(c)])))
        arrivals = srv.request_times()
        for kind, res in runs:
            walls[kind].append(res["wall"])
            cpus[kind].append(res["cpu"])
            phases[kind].append(_phases(res, arrivals, lat))
        python = run_engine([sys.executable, "-c", "pass"])["cpu"]
        imports = [run_engine([sys.executable, "-c", IMPORT_LITELLM])["cpu"] - python for _ in range(3)]
        full, gen, bare = (statistics.median(walls[k]) for k in ("full", "generate", "bare"))
        ideal = n * lat / c + lat
        load = os.getloadavg()
        print(f"N={n} L={lat}s C={c} (median of {args.repeat}; whole process, fresh cache)")
        print(f"full run (generate + judge)  {full:7.2f}s   pipelined ideal N*L/C + L = {ideal:6.2f}s   "
              f"ratio {full / ideal:5.2f}  (target <= 1.25)")
        print(f"stage=generate               {gen:7.2f}s   bare async OpenAI client = {bare:6.2f}s   "
              f"difference {gen - bare:+5.2f}s  ratio {gen / bare:5.2f}  (target difference <= 1 s)")
        print("CPU seconds of each process, its report worker included (a busy machine stretches wall times "
              "far more than these): " + ", ".join(f"{k} {statistics.median(v):.2f}s" for k, v in cpus.items()))
        for kind in ("full", "generate", "bare"):
            s, q, f = (statistics.median(p[i] for p in phases[kind]) for i in range(3))
            print(f"  {kind:8s} start-up {s:5.2f}s (to the first request)  requests {q:5.2f}s (first to last; "
                  f"ideal {(n / c - 1) * lat if kind != 'full' else n * lat / c:5.2f}s)  finish {f:5.2f}s "
                  f"(last reply to exit)")
        imp = statistics.median(imports)
        print(f"floor: LiteLLM's import alone takes {imp:.2f}s of CPU before any request, so a full run cannot "
              f"beat (ideal + import) / ideal = {(ideal + imp) / ideal:.2f} (target 1.25)")
        print(f"server: {srv.stats()[0]} requests, max in flight {srv.stats()[1]}; load average "
              f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
