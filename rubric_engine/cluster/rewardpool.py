"""A rubric reward judged by a pool of Ray actors: `RubricReward(..., pool=N, ray=ADDRESS)`.

Why: one process carries ~100-200 judge calls a second through LiteLLM (5-10 ms of CPU each), and an RL step can
ask for tens of thousands; verl and OpenRLHF already run on Ray. So `RewardPool` stands where a reward's own
`RewardScorer` stands (reward/frameworks.Reward takes it as its `scorer`): every interface (TRL, verl, OpenRLHF,
`serve-reward`) hands it the batch, it splits the batch among N actors, each holding a `RewardScorer` built from
the same settings and shadow, and puts the answers back in the batch's order with the counts summed.

- Routing: a rollout goes to actor sha256(question id, completion) mod N (a stable hash, never Python's
  salted `hash()`), so identical completions of a question land on the same actor, which judges them once
  and marks the later copies as a single scorer does. The actors use the caller's call cache directory (made
  absolute): on one machine one cache for the pool; on several, each node's own disk at that path (SQLite: never
  on NFS), which still answers a repeated rollout, since the same rollout goes to the same actor.
- Paths in the settings (spec, data, cache) are made absolute before they travel: an actor's working directory
  is not the caller's. Of the caller's environment only the engine's own RUBRIC_ENGINE_* settings travel with
  the actors; API keys stay in each node's environment (a missing one is the pool's one-line start error).
- An actor lost mid-batch (killed, its node gone) never turns into zeros: its share of the batch is sent again
  to the next live actor (each actor tried at most once per share; what the lost one had paid for is in the
  shared cache), and when no actor is left its rollouts come back None with the error, counted in `failures`.
  A later batch is split among the actors still alive. The calls the lost actor made are not in the counts.
- A pool that cannot start (Ray missing, no cluster at the address, an actor failing to build its reward or not
  placed within `start_timeout` seconds) is one ConfigError line; the options are checked in this process first.

`pool=1` with `ray=` runs one actor; neither given is the in-process reward, with no Ray at all.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rubric_engine.cluster.connect import connect, require_ray
from rubric_engine.errors import ConfigError, RubricEngineError
from rubric_engine.models.cache import default_cache_dir
from rubric_engine.models.entries import ModelSpec
from rubric_engine.reward.scorer import RewardCounts, RewardInputs, RewardScorer, RolloutScore
from rubric_engine.run.settings import RunSettings
from rubric_engine.run.identity import is_shipped
from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["RewardPool", "RewardActor", "route", "pool_size", "portable"]

START_TIMEOUT = 300.0  # seconds for the actors to be placed and build their rewards (LiteLLM's import included)
ACTOR_CALLS = 8  # batches one actor judges at once (several serve-reward requests, several trainer threads)


def pool_size(pool: Any) -> int | None:
    """`pool=` checked: None, or a whole number >= 1 (one line otherwise)."""
    if pool is None:
        return None
    if isinstance(pool, bool) or not isinstance(pool, int) or pool < 1:
        raise ConfigError(f"pool={pool!r} is not valid; give the number of reward actors (a whole number >= 1), or "
                          "leave it unset to judge in this process")
    return pool


def route(qid: str, text: str, n: int) -> int:
    """The actor (0..n-1) a rollout goes to: a stable hash of question id and completion."""
    digest = hashlib.sha256(f"{qid}\0{text}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % n


def _absolute(path: str | None) -> str | None:
    return str(Path(path).expanduser().resolve()) if path else path


def portable(settings: RunSettings, spec: BenchmarkSpec) -> RunSettings:
    """The settings as another process in another directory reads them: the spec the shipped name or its absolute
    directory (as this process found it), every other path absolute, the call cache the one this process uses."""
    return replace(settings, benchmark=spec.dir.name if is_shipped(spec) else str(spec.dir.resolve()),
                   benchmark_dirs=[str(_absolute(d)) for d in settings.benchmark_dirs],
                   data_path=_absolute(settings.data_path), data_cache_dir=_absolute(settings.data_cache_dir),
                   cache_dir=str(Path(settings.cache_dir or default_cache_dir()).expanduser().resolve()))


def _environment() -> dict[str, str]:
    """The engine's own settings of this process ($RUBRIC_ENGINE_*), which the actors must judge by. API keys are
    not among them: they stay in each node's environment (Ray passes a new local instance this process's)."""
    return {k: v for k, v in os.environ.items() if k.startswith("RUBRIC_ENGINE_")}


class RewardActor:
    """One actor of the pool: a `RewardScorer` built from the pool's settings, judging the shares sent to it. A
    reward it cannot build (a key variable missing on its node, data it cannot read) is kept as one line for
    `ready()`, so the pool's caller reads that line rather than Ray's account of a failed constructor."""

    def __init__(self, settings: RunSettings, shadow: ModelSpec | None, shadow_fraction: float) -> None:
        self.scorer: RewardScorer | None = None
        self.problem: str | None = None
        try:
            self.scorer = RewardScorer(settings, shadow=shadow, shadow_fraction=shadow_fraction)
        except RubricEngineError as exc:
            self.problem = _first_line(exc)

    def ready(self) -> str | None:
        """None when the reward is built, else why not (one line)."""
        return self.problem

    def score(self, items: Sequence[tuple[str, str]]) -> tuple[list[RolloutScore], RewardCounts]:
        if self.scorer is None:
            raise ConfigError(f"this reward actor could not start: {self.problem}")
        return self.scorer.run(items)

    def close(self) -> None:
        if self.scorer is not None:
            self.scorer.close()


def _lost(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors for an actor that is gone (killed, its worker or node dead, its results lost)."""
    e = ray.exceptions
    return (e.RayActorError, e.WorkerCrashedError, e.NodeDiedError, e.ObjectLostError)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class RewardPool(RewardInputs):
    """`size` Ray actors judging a reward's batches (module docstring); `address` as `connect` takes it (None:
    the cluster this process is connected to, else one started on this machine)."""

    def __init__(self, settings: RunSettings, *, size: int, address: str | None = None,
                 shadow: ModelSpec | None = None, shadow_fraction: float = 0.0,
                 start_timeout: float = START_TIMEOUT) -> None:
        option = "ray=" if address else "pool="
        require_ray(option)  # the missing extra first, before the data is read
        super().__init__(settings, shadow=shadow, shadow_fraction=shadow_fraction)  # one line before any actor
        self._ray = ray = connect(address or "local", option)
        self.size = size
        env = _environment()
        remote = ray.remote(RewardActor).options(num_cpus=0, max_concurrency=ACTOR_CALLS, scheduling_strategy="SPREAD",
                                                 **({"runtime_env": {"env_vars": env}} if env else {}))
        travel = portable(settings, self.spec)
        self._actors: list[Any] = [remote.remote(travel, shadow, self.shadow_fraction) for _ in range(size)]
        self._started(start_timeout)

    def _started(self, timeout: float) -> None:
        ray = self._ray
        refs = [a.ready.remote() for a in self._actors]
        try:
            done, waiting = ray.wait(refs, num_returns=len(refs), timeout=timeout)
            if waiting:
                raise ConfigError(f"pool={self.size}: {len(waiting)} of {self.size} reward actors did not start "
                                  f"within {timeout:g} s; check the cluster's free resources (`ray status`) or "
                                  "ask for fewer (pool=)")
            problems = [p for p in ray.get(done) if p]
            if problems:
                raise ConfigError(f"pool={self.size}: {len(problems)} of {self.size} reward actors could not start: "
                                  f"{problems[0]}")
        except ray.exceptions.RayError as exc:
            self.close()
            raise ConfigError(f"pool={self.size}: a reward actor could not start: {_first_line(exc)}") from None
        except BaseException:
            self.close()
            raise

    # -- calling ---------------------------------------------------------------------------------
    def run(self, items: Sequence[tuple[str, str]]) -> tuple[list[RolloutScore], RewardCounts]:
        """Score (question id, reply) pairs on the actors, blocking this thread; the batch's order kept."""
        t0 = time.perf_counter()
        for qid, _ in items:
            self.question(qid)  # an unknown id is the caller's error: one line before any call
        alive = [i for i, a in enumerate(self._actors) if a is not None]
        shares: dict[int, list[int]] = {}
        if alive:
            for n, (qid, text) in enumerate(items):
                shares.setdefault(alive[route(qid, text, len(alive))], []).append(n)
        out: list[RolloutScore | None] = [None] * len(items)
        counts = RewardCounts()
        shadows: list[dict[str, Any]] = []
        pending = {self._send(i, items, rows): (i, rows, {i}) for i, rows in shares.items()}
        lost: list[tuple[Sequence[int], str]] = [] if alive else [(range(len(items)), "no reward actor is alive")]
        while pending:
            ready, _ = self._ray.wait(list(pending), num_returns=1)
            actor, rows, tried = pending.pop(ready[0])
            try:
                results, got = self._ray.get(ready[0])
            except self._ray.exceptions.RayTaskError as exc:  # the scorer raised (a refused key): the caller's
                raise (exc.cause if isinstance(getattr(exc, "cause", None), Exception) else exc) from None
            except _lost(self._ray) as exc:  # the actor (or its node) is gone
                self._actors[actor] = None
                why = f"reward actor {actor} lost ({_first_line(exc)})"
                others = [i for i, a in enumerate(self._actors) if a is not None and i not in tried]
                if others:
                    pending[self._send(others[0], items, rows)] = (others[0], rows, tried | {others[0]})
                else:
                    lost.append((rows, why))
                continue
            for n, r in zip(rows, results):
                out[n] = r
            counts.add(got)
            if got.shadow is not None:
                shadows.append(got.shadow)
        for rows, why in lost:
            for n in rows:
                out[n] = RolloutScore(items[n][0], None, None, error=f"not judged: {why}")
        counts.rollouts = len(items)
        counts.failures = sum(1 for r in out if r is not None and r.error)
        counts.seconds = time.perf_counter() - t0
        counts.shadow = _merge_shadow(shadows) if shadows else None
        return [r for r in out if r is not None], counts

    async def run_async(self, items: Sequence[tuple[str, str]]) -> tuple[list[RolloutScore], RewardCounts]:
        """Score (question id, reply) pairs from an event loop (the waiting happens on a thread)."""
        return await asyncio.to_thread(self.run, items)

    def _send(self, actor: int, items: Sequence[tuple[str, str]], rows: Sequence[int]) -> Any:
        return self._actors[actor].score.remote([items[n] for n in rows])

    def close(self) -> None:
        """Close every actor's clients and cache, then end the actors. Idempotent."""
        actors, self._actors = [a for a in getattr(self, "_actors", []) if a is not None], []
        ray = getattr(self, "_ray", None)
        if not actors or ray is None or not ray.is_initialized():  # at exit Ray may have stopped first: the actors went with it
            return
        try:
            ray.wait([a.close.remote() for a in actors], num_returns=len(actors), timeout=30)
        except ray.exceptions.RayError:
            pass
        for a in actors:
            ray.kill(a)


def _merge_shadow(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The shadow judge's counts over the actors' shares: sums, and the gaps weighted by how many were compared."""
    out: dict[str, Any] = {}
    for key in ("judged", "failures", "compared", "calls", "cache_hits", "prompt_tokens", "completion_tokens"):
        out[key] = sum(p.get(key) or 0 for p in parts)
    costs = [p.get("cost") for p in parts]
    out["cost"] = None if None in costs else float(sum(costs))
    for key in ("gap_mean", "gap_abs_mean"):
        weighted = [(p[key], p["compared"]) for p in parts if p.get(key) is not None]
        total = sum(w for _, w in weighted)
        out[key] = sum(v * w for v, w in weighted) / total if total else None
    return out
