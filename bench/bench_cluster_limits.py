"""One concurrency=auto limit per key across a Ray cluster, against each node finding its own.

A local Ray cluster of 3 nodes (one CPU each) runs, on every node, a ModelClient at concurrency=auto calling one
fake provider that answers 429 above N calls in flight counted over all of them (latency 1 s, no Retry-After).
Shared (limits=cluster): one gate for the key in the rubric-engine-limits actor. Own (limits=local): each node its
own gate, as before this existed. For each it prints where the limit of calls in flight settled against N (the
gate's final limit, and the calls in flight at the server averaged over the middle half of the run), whether
every prompt was answered exactly once, the share of requests answered 429, the answers a second from the
first request to the last answer against N / latency (the most the provider allows), and the wall time; then the cost of
one acquire + release round trip to the actor against the local gate.

    python bench/bench_cluster_limits.py --n 200 --limit 24 --latency 1.0
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "tests", ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))
import clusterwork  # noqa: E402
from _common import options  # noqa: E402
from fakeserver import FakeServer, Reply  # noqa: E402

NODES = 3


def run_mode(ray: Any, limits: str, n: int, limit: int, latency: float) -> dict[str, Any]:
    from rubric_engine.cluster.limits import limits_actor

    actor = limits_actor(ray)
    ray.get(actor.reset.remote())
    answered: Counter[str] = Counter()
    seen: list[int] = []
    counts = {"429": 0, "requests": 0}
    arrivals: list[float] = []
    with FakeServer() as srv:
        def handler(body: dict[str, Any]) -> Reply:
            prompt = str(body["messages"][-1]["content"])
            if prompt.startswith("warm-"):
                return Reply(text="ok")
            counts["requests"] += 1
            arrivals.append(time.monotonic())
            if srv.in_flight > limit:
                counts["429"] += 1
                return Reply(status=429)
            answered[prompt] += 1
            return Reply(text="ok", delay=latency)

        srv.handler = handler
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.05):
                seen.append(srv.in_flight)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        task = ray.remote(clusterwork.calls)
        t0 = time.perf_counter()
        refs = [task.options(num_cpus=0, resources={f"node{i}": 1}).remote(
            srv.url, "BENCH_KEY", "sk-bench-cluster", f"n{i}", n, "auto", None, limits) for i in range(NODES)]
        out = ray.get(refs)
        wall = time.perf_counter() - t0
        done.set()
        sampler.join()
    held = ray.get(actor.held.remote())
    busy = [s for s in seen if s > 0]  # in time order: the middle half of the time calls were in flight
    mid = busy[len(busy) // 4: 3 * len(busy) // 4] or [0]
    gates = [o["gate"] for o in out]
    final = next(iter(held.values()))["gate"]["final"] if held else sum(g["final"] for g in gates)
    expected = {f"n{i}-{k}" for i in range(NODES) for k in range(n)}
    once = set(answered) == expected and set(answered.values()) == {1}
    rate = len(answered) / (max(arrivals) + latency - min(arrivals))  # answers a second, start-up left out
    return {"final": final, "rate": rate, "in_flight": sum(mid) / len(mid), "once": once, "429": counts["429"],
            "requests": counts["requests"], "wall": wall, "gates": gates}


def round_trips(ray: Any, count: int) -> tuple[float, float]:
    """Seconds per acquire + release: through the actor (awaited acquire, release not awaited, as a client does)
    and through a local gate."""
    from rubric_engine.cluster.limits import ClusterSource
    from rubric_engine.models.entries import ModelSpec
    from rubric_engine.models.limits import LOCAL

    entry = ModelSpec.from_config({"name": "c", "model": "openai/c", "api_base": "http://127.0.0.1:9/v1",
                                   "api_key_env": "BENCH_KEY"}, role="candidate")

    async def loop(limits: Any) -> float:
        t0 = time.perf_counter()
        for _ in range(count):
            async with limits.slot("sk-bench-cluster") as permit:
                permit.answered({}, 10)
        return (time.perf_counter() - t0) / count

    shared = ClusterSource().limits(entry, concurrency="auto", rpm=None, tpm=None)
    local = LOCAL.limits(entry, concurrency="auto", rpm=None, tpm=None, clock=time.monotonic, sleep=asyncio.sleep)
    return asyncio.run(loop(shared)), asyncio.run(loop(local))


def main() -> None:
    args = options(__doc__, n=200, limit=24, latency=1.0, trips=300)
    print(f"{NODES} nodes x {args.n} calls at concurrency=auto, one provider: 429 above {args.limit} in flight over "
          f"all nodes, latency {args.latency}s, no Retry-After; ideal wall {NODES * args.n * args.latency / args.limit:.1f}s")
    ray, cluster = clusterwork.start(NODES)
    try:
        for limits, name in (("cluster", "shared (limits=cluster)"), ("local", "own    (limits=local)  ")):
            r = run_mode(ray, limits, args.n, args.limit, args.latency)
            share = r["429"] / max(1, r["requests"])
            per_node = "" if limits == "cluster" else f" (per node {', '.join(str(g['final']) for g in r['gates'])})"
            print(f"  {name}: limit settled at {r['final']}{per_node} vs N={args.limit} "
                  f"({r['final'] / args.limit:.2f} x N); in flight at the server {r['in_flight']:.1f} "
                  f"({r['in_flight'] / args.limit:.2f} x N, middle half); every prompt answered once: {r['once']}; "
                  f"{r['429']} x 429 of {r['requests']} requests ({share:.1%}); {r['rate']:.1f} answers/s "
                  f"({r['rate'] * args.latency / args.limit:.2f} x N/latency); wall {r['wall']:.1f}s")
        shared, local = round_trips(ray, args.trips)
        print(f"  one acquire + release: {shared * 1000:.2f} ms through the actor, {local * 1000:.3f} ms local "
              f"({shared / args.latency:.2%} of a {args.latency}s call)")
    finally:
        clusterwork.stop(ray, cluster)


if __name__ == "__main__":
    main()
