"""A K=3 jury (and judge.repeats) against the fake server: do the multiplied calls pipeline? (a script)

Why: `judge=[a,b,c]` and `judge.repeats=K` multiply judge calls; jury.Panel starts every juror's and
every repeat's call of a question together, each juror through its own client (its own concurrency C).
With latency L, N replies, J jurors (each with its own limit C) and K repeats, the ideal wall time is
N*K*L/C: the jurors run side by side. This runs the real path (jury.Panel -> judge.judge_response ->
ModelClient -> LiteLLM -> HTTP, the shipped heartbench_en spec, the durable cache) and prints the ratio.

    python bench/bench_jury.py --n 600 --jurors 3 --repeats 1 --latency 1.0 --concurrency 32

Measured on the shared 2-core machine (load average ~9-10 from other work): N=300, J=3, K=1, C=32:
L=1.0 s: 900 calls in 18.3 s vs ideal 9.4 s (1.95x; 96 in flight = 3 x C); L=3.0 s: 37.9 s vs 28.1 s
(1.35x). All 3 x C calls are in flight at once; the excess is per-call CPU (LiteLLM / the SDK) on a
loaded machine, as for a single judge (bench_calls.py, bench_per_criterion.py), not waiting between jurors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rubric_engine.cache import ResultCache  # noqa: E402
from rubric_engine.dataset import load_dataset  # noqa: E402
from rubric_engine.jury import Panel  # noqa: E402
from rubric_engine.models import ModelClient, ModelSpec  # noqa: E402
from rubric_engine.spec import load_spec  # noqa: E402

KEY_ENV = "BENCH_FAKE_KEY"


def _reply(body: dict[str, Any]) -> Any:
    from fakeserver import Reply

    text = json.dumps(body["messages"])
    found = re.search(r"N_ITEMS=(\d+)", text)
    n = int(found.group(1)) if found else 1  # the warm-up call names no question
    return Reply(text=json.dumps({"criteria": [{"id": i, "reasoning": "r", "met": (i + len(text)) % 3 == 0}
                                               for i in range(1, n + 1)]}), usage=(900, 200))


def _serve(latency: float, conn: Any) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from fakeserver import FakeServer

    with FakeServer(_reply, latency=latency) as srv:
        conn.send(srv.url)
        conn.recv()
        conn.send((len(srv.requests), srv.max_in_flight))


async def judge_all(url: str, cache_dir: str, n: int, jurors: int, repeats: int, concurrency: int) -> tuple[float, int]:
    spec = load_spec(ROOT / "benchmarks" / "heartbench_en")
    qs = load_dataset(spec, ROOT / "data" / "heartbench_en_sample.jsonl").questions
    work = [(qs[i % len(qs)], f"Reply {i}: I hear you. N_ITEMS={len(qs[i % len(qs)].criteria)}") for i in range(n)]
    models = [ModelSpec(name=f"j{j}", model=f"openai/judge-{j}", api_base=url, api_key_env=KEY_ENV) for j in range(jurors)]
    with ResultCache(cache_dir) as cache:
        async with ModelClient(models[0], cache=None, role="warm-up") as first:  # LiteLLM's lazy imports, apart
            await first.complete([{"role": "user", "content": "warm up"}])
        clients = [ModelClient(m, cache=cache, concurrency=concurrency, role="judge") for m in models]
        panel = Panel(clients, [m.name for m in models], spec, repeats)
        t0 = time.perf_counter()
        results = await asyncio.gather(*(panel.judge(q, text) for q, text in work))
        wall = time.perf_counter() - t0
        for c in clients:
            await c.aclose()
    return wall, sum(1 for r in results if r.error)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--jurors", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=32)
    a = ap.parse_args()
    os.environ[KEY_ENV] = "sk-bench"
    ctx = multiprocessing.get_context("spawn")
    conn, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(a.latency, child), daemon=True)
    server.start()
    url = conn.recv()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            wall, errors = asyncio.run(judge_all(url, tmp, a.n, a.jurors, a.repeats, a.concurrency))
        conn.send("stats")
        requests, max_in_flight = conn.recv()
        requests -= 1  # the warm-up call
    finally:
        server.terminate()
        server.join()
    calls = a.n * a.jurors * a.repeats
    ideal = a.n * a.repeats * a.latency / a.concurrency
    print(f"jury: {a.n} replies x {a.jurors} jurors x {a.repeats} repeats = {calls} calls, latency {a.latency}s, "
          f"C={a.concurrency} per juror")
    print(f"  requests seen {requests}, max in flight {max_in_flight} (ideal {a.jurors * a.concurrency}), "
          f"judge errors {errors}")
    print(f"  wall {wall:.1f}s vs ideal {ideal:.1f}s -> ratio {wall / ideal:.2f}x (goal <= 1.3x)")


if __name__ == "__main__":
    main()
