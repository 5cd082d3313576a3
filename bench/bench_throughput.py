"""Sustained calls per second per core of the engine at zero latency (a script, not a test).

The fake server answers at once, so the engine's own CPU cost per call (LiteLLM, HTTP, our
bookkeeping, the cache) is the only bound. Runs the console script on N questions (generate +
judge: 2 calls each) with a fresh cache and prints calls/s of wall time and calls per CPU-second
of the engine process (= calls/s one core sustains). Start-up (imports, data) is measured apart by
a stage=generate run on 1 question and subtracted.

    python bench/bench_throughput.py [--n 2000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ServerProcess, engine_args, run_engine, write_synthetic  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="questions (2 calls each)")
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp_s, ServerProcess(0.0) as srv:
        tmp = Path(tmp_s)
        one = write_synthetic(1, tmp / "one.jsonl", unique=True)
        base = run_engine(engine_args(srv.url, one, tmp / "base", tmp / "cache0", args.concurrency, "full"))
        data = write_synthetic(args.n, tmp / "rows.jsonl", unique=True)
        before = srv.stats()[0]
        res = run_engine(engine_args(srv.url, data, tmp / "run", tmp / "cache1", args.concurrency, "full"))
        calls = srv.stats()[0] - before
        wall, cpu = res["wall"] - base["wall"], res["cpu"] - base["cpu"]
        print(f"start-up and 1 question: wall {base['wall']:.2f}s, CPU {base['cpu']:.2f}s (subtracted below)")
        print(f"{calls} calls ({args.n} questions, generate + judge) at C={args.concurrency}, zero latency: "
              f"wall {wall:.2f}s, CPU {cpu:.2f}s")
        print(f"sustained: {calls / wall:6.1f} calls/s of wall time, {calls / cpu:6.1f} calls per CPU-second "
              f"(= per core), {1000 * cpu / calls:.2f} ms CPU per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
