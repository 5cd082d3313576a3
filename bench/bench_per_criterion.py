"""Per-criterion judging throughput against the fake server (a script, not a test).

Why: a per-criterion benchmark (HealthBench: ~11 criteria per example) makes one judge call per
criterion. Those calls must pipeline under the client's concurrency like any others: at latency L and
concurrency C, N examples x K criteria ideally take N*K*L/C seconds. This runs the real path
(judge.judge_response with the shipped healthbench spec: prompt rendering, json_schema, validation by
the verdict model, the durable cache) and prints calls/s against the ideal.

    python bench/bench_per_criterion.py --n 5000 --criteria 11 --latency 0.5 --concurrency 64

Measured on the 2-core development machine while shared (load average ~8): N=300 x 11 = 3,300 calls,
L=1.0 s, C=64: 120.9 s against the ideal 51.6 s (2.35x, 27 calls/s of 64); bench_calls.py's plain judge
stage at the same C and L on the same machine at the same time: 1.73x. Rendering and parsing a
per-criterion call cost ~0.15 ms of it; the rest is LiteLLM / the OpenAI SDK per call, CPU-bound here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rubric_engine.cache import ResultCache  # noqa: E402
from rubric_engine.datatypes import Criterion, Question, Turn  # noqa: E402
from rubric_engine.judge import judge_response  # noqa: E402
from rubric_engine.models import ModelClient, ModelSpec  # noqa: E402
from rubric_engine.spec import load_spec  # noqa: E402

KEY_ENV = "BENCH_FAKE_KEY"


def _reply(body: dict[str, Any]) -> Any:
    from fakeserver import Reply
    return Reply(text=json.dumps({"explanation": "fine", "criteria_met": len(json.dumps(body)) % 2 == 0}),
                 usage=(300, 30))


def _serve(latency: float, conn: Any) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from fakeserver import FakeServer

    with FakeServer(_reply, latency=latency) as srv:
        conn.send(srv.url)
        conn.recv()
        conn.send((len(srv.requests), srv.max_in_flight))


def questions(n: int, k: int) -> list[Question]:
    return [Question(id=f"ex{i}", dialogue=(Turn("user", f"Example {i}: I have had a headache for two days."),),
                     criteria=tuple(Criterion(index=j, label="", weight=(-3 if j % 4 == 0 else 5),
                                              text=f"Criterion {j} of example {i}", tags=("axis:accuracy",))
                                    for j in range(1, k + 1)), tags=("theme:x",))
            for i in range(n)]


async def judge_all(url: str, cache_dir: str, qs: list[Question], concurrency: int) -> tuple[float, int]:
    spec = load_spec(ROOT / "benchmarks" / "healthbench")
    model = ModelSpec(name="judge", model="openai/fake-judge", api_base=url, api_key_env=KEY_ENV)
    with ResultCache(cache_dir) as cache:
        async with ModelClient(model, cache=None, role="warm-up") as first:  # LiteLLM's lazy imports, timed apart
            await first.complete([{"role": "user", "content": "warm up"}])
        async with ModelClient(model, cache=cache, concurrency=concurrency, role="judge") as client:
            t0 = time.perf_counter()
            results = await asyncio.gather(*(judge_response(client, spec, q, "Rest, fluids, see a doctor if it "
                                                            "gets worse.") for q in qs))
            wall = time.perf_counter() - t0
    errors = sum(1 for r in results if r.error)
    return wall, errors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--criteria", type=int, default=11)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--concurrency", type=int, default=64)
    a = ap.parse_args()
    os.environ[KEY_ENV] = "sk-bench"
    ctx = multiprocessing.get_context("spawn")
    conn, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(a.latency, child), daemon=True)
    server.start()
    url = conn.recv()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            wall, errors = asyncio.run(judge_all(url, tmp, questions(a.n, a.criteria), a.concurrency))
        conn.send("stats")
        requests, max_in_flight = conn.recv()
        requests -= 1  # the warm-up call
    finally:
        server.terminate()
        server.join()
    calls = a.n * a.criteria
    ideal = calls * a.latency / a.concurrency
    print(f"per-criterion judging: {a.n} examples x {a.criteria} criteria = {calls} calls, latency {a.latency}s, "
          f"C={a.concurrency}")
    print(f"  requests seen {requests}, max in flight {max_in_flight}, judge errors {errors}")
    print(f"  wall {wall:.1f}s vs ideal {ideal:.1f}s -> ratio {wall / ideal:.2f}x (goal <= 1.3x); "
          f"{calls / wall:.1f} calls/s vs ideal {a.concurrency / a.latency:.1f} calls/s")


if __name__ == "__main__":
    main()
