"""One run as 1 shard against the same run as 3 shards on a 3-node Ray cluster in this box (a script, not a test).

Goal (issue #40): at 1 s latency and a fixed per-shard concurrency, 3 shards carry >= 2.7x the questions per
second of 1 shard, and the server is asked each prompt once. The cluster is Ray's own `cluster_utils.Cluster` (a
head without CPUs, 3 nodes of one CPU each, each node a real raylet with its own workers); both runs are the real
console script joining it with `ray=ADDRESS`, `shards=1` then `shards=3`, each with a fresh call cache. The fake
server runs in its own process. Throughput is counted over the calls' span (the first request's arrival to the
last answer), so each shard's start-up (a Ray worker importing the engine and LiteLLM) is left out; the whole
command's wall time is printed beside it.

    python bench/bench_shards.py [--n 480] [--concurrency 4] [--latency 1.0]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import KEY_ENV, ServerProcess, engine_args, options, run_engine, write_synthetic  # noqa: E402

_MB = 100 * 1024 * 1024


def _cluster(nodes: int) -> Any:
    """A head with no CPU and `nodes` nodes of one CPU; their workers hold the fake key (a node's own environment)."""
    from ray.cluster_utils import Cluster  # noqa: PLC0415

    os.environ[KEY_ENV] = "sk-bench"
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": _MB,
                                                      "include_dashboard": False})
    for _ in range(nodes):
        c.add_node(num_cpus=1, object_store_memory=_MB)
    c.wait_for_nodes()
    return c


def _one(srv: ServerProcess, tmp: Path, data: Path, name: str, address: str, shards: int, concurrency: int,
         latency: float) -> dict[str, float]:
    before = srv.stats()[0]
    seen = len(srv.request_times())
    res = run_engine([*engine_args(srv.url, data, tmp / name, tmp / f"cache-{name}", concurrency),
                      f"ray={address}", f"shards={shards}"])
    times = srv.request_times()[seen:]
    res["requests"] = srv.stats()[0] - before
    res["span"] = max(times) + latency - min(times)
    return res


def main(argv: list[str] | None = None) -> int:
    args = options(__doc__, argv, n=480, concurrency=4, latency=1.0, nodes=3)
    cluster = _cluster(args.nodes)
    try:
        with tempfile.TemporaryDirectory() as tmp_s, ServerProcess(args.latency) as srv:
            tmp = Path(tmp_s)
            data = write_synthetic(args.n, tmp / "rows.jsonl", unique=True)
            one = _one(srv, tmp, data, "one", cluster.address, 1, args.concurrency, args.latency)
            many = _one(srv, tmp, data, "many", cluster.address, args.nodes, args.concurrency, args.latency)
    finally:
        cluster.shutdown()
    print(f"{args.n} questions (generate + judge: 2 calls each), {args.latency:g} s latency, concurrency "
          f"{args.concurrency} per shard, {args.nodes}-node local Ray cluster (1 CPU per node)")
    print(f"{'':10} {'questions/s':>12} {'calls span':>11} {'command wall':>13} {'requests':>9}")
    for label, r in (("1 shard", one), (f"{args.nodes} shards", many)):
        print(f"{label:10} {args.n / r['span']:12.2f} {r['span']:10.1f}s {r['wall']:12.1f}s {int(r['requests']):9d}")
    ratio = one["span"] / many["span"]
    print(f"throughput ratio ({args.nodes} shards / 1 shard): {ratio:.2f}x over the calls' span "
          f"(goal >= 2.7x), {one['wall'] / many['wall']:.2f}x over the whole command")
    expected = 2 * args.n
    print(f"each prompt once: {'yes' if one['requests'] == many['requests'] == expected else 'NO'} "
          f"({expected} expected per run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
