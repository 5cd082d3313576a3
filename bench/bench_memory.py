"""Peak RSS of a whole run against the number of questions (a script, not a test).

HeartBench's rows repeated under new ids (synthetic rows of its shape without ../shared: its 15
abilities, long dialogues, real criteria counts), fake server at zero latency whose reply lengths
and verdicts vary with the prompt (`varied_reply`), C=64, generate + judge, fresh cache. Prints each
run's peak RSS (the engine process and the report worker it reaps, data loading and the finish
included), the per-question slope between sizes and each size's ratio to the smallest, so the goals
(issue "Scale": 100,000 questions under 1 GB; 8,880 within 1.5x of 296) can be measured.
`--unique` marks each repeated row so every question costs real calls (slower; else repeats are
cache hits).

    python bench/bench_memory.py [--sizes 296 8880 100000] [--concurrency 64] [--unique] [--extra judge.repeats=3 ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED_DATA, ServerProcess, engine_args, run_engine, varied_reply, write_synthetic  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[296, 8_880, 100_000])
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--unique", action="store_true", help="every question asks new prompts (no cache hits)")
    ap.add_argument("--extra", nargs="*", default=[],
                    help="overrides added to every run, e.g. judge.repeats=3 candidate.samples=2 (panel runs)")
    args = ap.parse_args(argv)
    print(f"rows: {'HeartBench ' + str(SHARED_DATA) if SHARED_DATA.is_file() else 'synthetic (no HeartBench file: set RUBRIC_ENGINE_HEARTBENCH)'}",
          flush=True)
    rows: list[tuple[int, float, float, float]] = []
    with ServerProcess(0.0, varied_reply) as srv:
        for n in sorted(args.sizes):
            with tempfile.TemporaryDirectory() as tmp_s:
                tmp = Path(tmp_s)
                data = write_synthetic(n, tmp / "rows.jsonl", unique=args.unique)
                mb = data.stat().st_size / 1e6
                res = run_engine([*engine_args(srv.url, data, tmp / "run", tmp / "cache", args.concurrency, "full"),
                                  *args.extra])
                rows.append((n, res["rss_mb"], res["wall"], mb))
                slope = ""
                if len(rows) > 1:
                    (n0, r0, _, _), (n1, r1, _, _) = rows[-2], rows[-1]
                    slope = f"  slope {1000 * (r1 - r0) / (n1 - n0):6.2f} KB/question since n={n0}"
                ratio = f"  {res['rss_mb'] / rows[0][1]:.2f}x of n={rows[0][0]}" if len(rows) > 1 else ""
                print(f"n={n:>7}  data {mb:7.1f} MB  peak RSS {res['rss_mb']:7.1f} MB  wall {res['wall']:7.1f}s{ratio}{slope}",
                      flush=True)
    if len(rows) > 1:
        (n0, r0, _, _), (n1, r1, _, _) = rows[0], rows[-1]
        per_q = (r1 - r0) / (n1 - n0)
        print(f"overall slope {1000 * per_q:.2f} KB/question; extrapolated peak at 100,000 questions: "
              f"{r0 + per_q * (100_000 - n0):.0f} MB (target < 1000 MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
