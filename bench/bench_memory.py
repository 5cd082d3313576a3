"""Peak RSS of a whole run against the number of questions (a script, not a test).

HeartBench's rows repeated under new ids (synthetic rows of its shape without ../shared), fake
server at zero latency, C=64, generate + judge, fresh cache. Prints each run's peak RSS (the
engine process alone, data loading included) and the per-question slope between sizes, so the
streaming-journal work (issue "Scale", target: 100,000 questions under 1 GB) can be measured.

    python bench/bench_memory.py [--sizes 296 10000 100000] [--concurrency 64] [--extra judge.repeats=3 ...]
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
    ap.add_argument("--sizes", type=int, nargs="+", default=[296, 10_000, 100_000])
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--extra", nargs="*", default=[],
                    help="overrides added to every run, e.g. judge.repeats=3 candidate.samples=2 (panel runs)")
    args = ap.parse_args(argv)
    rows: list[tuple[int, float, float, float]] = []
    with ServerProcess(0.0) as srv:
        for n in sorted(args.sizes):
            with tempfile.TemporaryDirectory() as tmp_s:
                tmp = Path(tmp_s)
                data = write_synthetic(n, tmp / "rows.jsonl")
                mb = data.stat().st_size / 1e6
                res = run_engine([*engine_args(srv.url, data, tmp / "run", tmp / "cache", args.concurrency, "full"),
                                  *args.extra])
                rows.append((n, res["rss_mb"], res["wall"], mb))
                slope = ""
                if len(rows) > 1:
                    (n0, r0, _, _), (n1, r1, _, _) = rows[-2], rows[-1]
                    slope = f"  slope {1000 * (r1 - r0) / (n1 - n0):6.2f} KB/question since n={n0}"
                print(f"n={n:>7}  data {mb:7.1f} MB  peak RSS {res['rss_mb']:7.1f} MB  wall {res['wall']:7.1f}s{slope}",
                      flush=True)
    if len(rows) > 1:
        (n0, r0, _, _), (n1, r1, _, _) = rows[0], rows[-1]
        per_q = (r1 - r0) / (n1 - n0)
        print(f"overall slope {1000 * per_q:.2f} KB/question; extrapolated peak at 100,000 questions: "
              f"{r0 + per_q * (100_000 - n0):.0f} MB (target < 1000 MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
