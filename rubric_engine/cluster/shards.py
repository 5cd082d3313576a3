"""One run's shards as Ray tasks: how many, where they run, and running one again when its node is lost.

Why here: the run itself (run/shards.py, run/shardrun.py) knows nothing of Ray; this is the `Spread` the command
line hands the runner for `ray=ADDRESS`. Each shard is one task (num_cpus=1, spread over the nodes) running
`run_shard`; Ray's own task retries are off, so the head sees a lost node (a worker or node that died under the
task) and submits that shard again itself, a bounded number of times, saying so in one line. The shard run again
resumes from its segment: only its questions without a journalled record are asked again, and the calls its lost
attempt had answered but not yet journalled come from the call cache (on shared storage). What the lost node had
in flight got no answer and is asked again: that cannot be avoided (docs/operations.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from rubric_engine.cluster.connect import connect
from rubric_engine.errors import ConfigError, RubricEngineError
from rubric_engine.run.shardrun import run_shard
from rubric_engine.run.shards import ShardDone, ShardJob

__all__ = ["RaySpread", "ATTEMPTS"]

ATTEMPTS = 3  # runs of one shard before the head gives up (the same command then resumes)


class RaySpread:
    """Shards on the Ray cluster at `address` (connect.connect): `shards` of them, or one per alive node with CPUs."""

    def __init__(self, address: str, shards: int | None = None, attempts: int = ATTEMPTS) -> None:
        self.address, self.shards, self.attempts = address, shards, attempts

    def count(self) -> int:
        ray = connect(self.address, "ray=")
        if self.shards is not None:
            return self.shards
        nodes = sum(1 for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0)
        if not nodes:
            raise ConfigError(f"ray={self.address}: the cluster has no node with a CPU to run a shard on; add one "
                              "(ray start --address=... --num-cpus=N) or give shards=N")
        return nodes

    async def run(self, jobs: Sequence[ShardJob], say: Callable[[str], None]) -> list[ShardDone]:
        """Every job to its end; a shard whose worker or node died is submitted again (at most `attempts` runs)."""
        ray = connect(self.address, "ray=")
        task = ray.remote(num_cpus=1, max_retries=0)(run_shard).options(scheduling_strategy="SPREAD")
        tries = {job.index: 1 for job in jobs}
        running: dict[asyncio.Future[Any], tuple[ShardJob, Any]] = {}

        def submit(job: ShardJob) -> None:
            ref = task.remote(job)
            running[asyncio.wrap_future(ref.future())] = (job, ref)

        for job in jobs:
            submit(job)
        done: dict[int, ShardDone] = {}
        try:
            while running:
                finished, _ = await asyncio.wait(list(running), return_when=asyncio.FIRST_COMPLETED)
                for fut in finished:
                    job, _ref = running.pop(fut)
                    try:
                        done[job.index] = fut.result()
                    except ray.exceptions.RayTaskError as exc:  # the shard itself failed: its own one line
                        raise _own(exc, job) from None
                    except ray.exceptions.RayError as exc:  # its worker or node is gone: run it again
                        if tries[job.index] >= self.attempts:
                            raise ConfigError(f"shard {job.name} was lost {tries[job.index]} times "
                                              f"({type(exc).__name__}); check the cluster's nodes, then run the same "
                                              "command: it resumes")
                        tries[job.index] += 1
                        say(f"shard {job.name}: its node or worker was lost ({type(exc).__name__}); running it again "
                            f"on another node from its journal segment (attempt {tries[job.index]} of {self.attempts})")
                        submit(job)
        finally:
            for _job, ref in running.values():  # interrupted, or another shard failed: the rest stop too
                ray.cancel(ref, force=True)
        return [done[job.index] for job in jobs]


def _own(exc: Any, job: ShardJob) -> Exception:
    """A shard's own failure as the engine's one-line error (its exit code kept); anything else named as the shard's."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, RubricEngineError):
        return cause
    first = (str(cause or exc).strip().splitlines() or [type(cause or exc).__name__])[-1]
    return ConfigError(f"shard {job.name} failed on its node: {first}")
