"""Helpers for tests and benches on a local multi-node Ray cluster: start one small cluster, and the work a node
runs (a ModelClient calling the fake server under the limits a run would choose).

Why a module of its own: Ray sends a task's function to other processes; functions of this module travel by
value (`start` registers it), so worker processes need not import the tests directory.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

MB = 2**20


def start(nodes: int = 3) -> tuple[Any, Any]:
    """(ray, cluster): a head and nodes-1 more, one CPU each, no dashboard, this process connected."""
    import ray
    from ray.cluster_utils import Cluster

    from rubric_engine.cluster.connect import NAMESPACE

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    small = {"num_cpus": 1, "object_store_memory": 100 * MB, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args={**small, "resources": {"node0": 1}})
    for i in range(1, nodes):
        cluster.add_node(**small, resources={f"node{i}": 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False)
    return ray, cluster


def stop(ray: Any, cluster: Any) -> None:
    ray.shutdown()
    cluster.shutdown()


def calls(url: str, key_env: str, key: str, label: str, n: int, concurrency: int | str, rpm: float | None,
          limits: str = "auto") -> dict[str, Any]:
    """One node's work: `n` calls through one ModelClient (prompts `label-i`), its limits chosen by `limits=`, after
    one call (`warm-label`) through a client of its own that loads LiteLLM."""
    os.environ[key_env] = key
    from rubric_engine.cluster.limits import limits_source
    from rubric_engine.models.client import ModelClient
    from rubric_engine.models.entries import ModelSpec

    entry = ModelSpec.from_config({"name": "c", "model": "openai/c", "api_base": url, "api_key_env": key_env},
                                  role="candidate")

    async def main() -> dict[str, Any]:
        async with ModelClient(entry, cache=None, limits=limits_source("local")) as warm:  # LiteLLM's import and
            await warm.complete([{"role": "user", "content": f"warm-{label}"}])  # first call are not the measure
        client = ModelClient(entry, cache=None, concurrency=concurrency, rpm=rpm, max_retries=60, backoff_base=0.05,
                             backoff_max=0.5, limits=limits_source(limits))
        try:
            results = await asyncio.gather(*(client.complete([{"role": "user", "content": f"{label}-{i}"}])
                                             for i in range(n)))
        finally:
            await client.aclose()
        return {"texts": [r.text for r in results], "limits": type(client.limits).__name__,
                "gate": client.gate.report() if client.gate is not None else None,
                "requests": client.stats.requests, "retries": client.stats.retries}

    return asyncio.run(main())
