"""concurrency=auto against fixed concurrency, on a fake provider that answers 429 above N calls in flight.

For each mode it sends the same calls through ModelClient (LiteLLM over HTTP to the fake server, the client's
own retry loop and backoff as a run uses them) and prints wall time, requests sent, 429s received and, for
auto, where the limit settled. No Retry-After is sent, so every 429 costs a backoff: too high a fixed
concurrency pays in retries, too low in wall time; auto should land near N on its own.

    python bench/bench_concurrency.py --n 600 --limit 12 --latency 0.1
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "tests", ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))
from _common import options  # noqa: E402
from fakeserver import FakeServer, Reply  # noqa: E402
from rubric_engine.models.client import ModelClient  # noqa: E402
from rubric_engine.models.entries import ModelSpec  # noqa: E402


def run_mode(concurrency: int | str, n: int, limit: int, latency: float) -> dict[str, Any]:
    counts = {"429": 0}
    with FakeServer() as srv:
        def handler(body: dict[str, Any]) -> Reply:
            if srv.in_flight > limit:
                counts["429"] += 1
                return Reply(status=429)
            return Reply(text="ok", delay=latency)

        srv.handler = handler
        os.environ["BENCH_FAKE_KEY"] = "sk-bench"
        spec = ModelSpec.from_config({"name": "c", "model": "openai/c", "api_base": srv.url,
                                      "api_key_env": "BENCH_FAKE_KEY"}, role="candidate")

        async def main() -> ModelClient:
            client = ModelClient(spec, cache=None, concurrency=concurrency, max_retries=50)
            try:
                await asyncio.gather(*(client.complete([{"role": "user", "content": f"q{i}"}]) for i in range(n)))
            finally:
                await client.aclose()
            return client

        t0 = time.perf_counter()
        client = asyncio.run(main())
        wall = time.perf_counter() - t0
        return {"wall": wall, "requests": len(srv.requests), "429": counts["429"],
                "gate": client.gate.report() if client.gate else None}


def main() -> None:
    args = options(__doc__, n=600, limit=12, latency=0.1)
    ideal = args.n * args.latency / args.limit
    print(f"{args.n} calls, provider limit {args.limit} in flight (429 above it, no Retry-After), latency "
          f"{args.latency}s; ideal at the limit {ideal:.1f}s")
    for mode in (4, args.limit, 64, "auto"):
        r = run_mode(mode, args.n, args.limit, args.latency)
        gate = r["gate"]
        where = f"; settled at {gate['final']} (min {gate['min']}, max {gate['max']}, {gate['throttles']} cuts)" \
            if gate else ""
        print(f"  concurrency={mode}: wall {r['wall']:.1f}s ({r['wall'] / ideal:.2f}x ideal), {r['requests']} requests, "
              f"{r['429']} x 429{where}")


if __name__ == "__main__":
    main()
