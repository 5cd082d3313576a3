"""Whole-process speed of `rubric-engine` against the fake server, side by side (a script, not a test).

Prints, for N questions at latency L and concurrency C (defaults: HeartBench's 296, 1 s, 32):
  full run (generate + judge)  vs the pipelined ideal N*L/C + L       target: ratio <= 1.25
  stage=generate               vs a bare async OpenAI client (same   target: difference <= 1 s
                               server, same messages, own process)
Each is a fresh process timed from start to exit (imports, config, data loading included), with
a fresh cache, so every call is really made.

    python bench/bench_run.py [--n 296] [--latency 1.0] [--concurrency 32] [--repeat 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import KEY_ENV, ServerProcess, engine_args, run_engine, write_synthetic  # noqa: E402

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=296)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each; the median is printed")
    args = ap.parse_args(argv)
    n, lat, c = args.n, args.latency, args.concurrency
    with tempfile.TemporaryDirectory() as tmp_s, ServerProcess(lat) as srv:
        tmp = Path(tmp_s)
        data = write_synthetic(n, tmp / "rows.jsonl")
        walls: dict[str, list[float]] = {"full": [], "generate": [], "bare": []}
        cpus: dict[str, list[float]] = {"full": [], "generate": [], "bare": []}
        for r in range(args.repeat):
            for stage in ("full", "generate"):
                cmd = engine_args(srv.url, data, tmp / f"{stage}{r}", tmp / f"cache-{stage}{r}", c, stage)
                res = run_engine(cmd)
                walls[stage].append(res["wall"])
                cpus[stage].append(res["cpu"])
            res = run_engine([sys.executable, "-c", BARE_CLIENT, srv.url, str(data), str(c)])
            walls["bare"].append(res["wall"])
            cpus["bare"].append(res["cpu"])
        full, gen, bare = (statistics.median(walls[k]) for k in ("full", "generate", "bare"))
        ideal = n * lat / c + lat
        print(f"N={n} L={lat}s C={c} (median of {args.repeat}; whole process, fresh cache)")
        print(f"full run (generate + judge)  {full:7.2f}s   pipelined ideal N*L/C + L = {ideal:6.2f}s   "
              f"ratio {full / ideal:5.2f}  (target <= 1.25)")
        print(f"stage=generate               {gen:7.2f}s   bare async OpenAI client = {bare:6.2f}s   "
              f"difference {gen - bare:+5.2f}s  ratio {gen / bare:5.2f}  (target difference <= 1 s)")
        print("CPU seconds of each process (a busy machine stretches wall times, not these): " +
              ", ".join(f"{k} {statistics.median(v):.2f}s" for k, v in cpus.items()))
        print(f"server: {srv.stats()[0]} requests, max in flight {srv.stats()[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
