"""One rate limit and one adaptive concurrency per provider key across a Ray cluster (`limits=`).

Why: every process on a cluster (a run's shards, a pool of reward actors, a sweep's jobs under Hydra's Ray
launcher) calls the same providers with the same keys, and a provider's limit is per key, not per process. With
each process keeping its own `rpm=` and its own `concurrency=auto` gate, three nodes send three times the rate
and each finds a third of the limit only after the 429s. Here one Ray actor, `rubric-engine-limits` in the
`rubric-engine` namespace, holds per limit key (the endpoint and sha256 of the key, first 16 hex characters:
models/limits.limit_key; the key itself never leaves the process that sends it) the token bucket and the gate
(models/limits.SharedLimits); every client asks it before each attempt and tells it how the attempt ended.

What is shared: `rpm=` / `tpm=` are the whole cluster's rates for a key, and `concurrency=auto` finds one limit of
calls in flight for the key across the cluster. A whole number `concurrency=N` stays each process's own cap (a
shard keeps N calls in flight), so with no rpm / tpm and a whole number a client asks the actor nothing.

Lifetime: the actor is detached (it outlives the job that made it: a sweep's jobs and shard tasks come and go and
find the same state), lives on the head node (a lost worker node does not take it along), takes no CPU, and
restarts empty if it is lost all the same (its calls in flight are retried there). State per key is forgotten once the key
has nothing in flight for 10 minutes (the next run starts its gate again from 8); a place held by a process that
died is taken back when its lease (the call's timeout plus a minute) ends. `ray stop` ends it with the cluster;
`reset(key)` or `ray.kill` forgets at once.

Choices: `limits=local` (each client its own, as on one machine), `cluster` (this actor: Ray required; joins the
cluster at `ray=` or the machine's), `auto` (the default: the actor when this process is already connected to Ray,
i.e. a shard task, a reward actor, a Ray-launcher job or a head that joined with `ray=`; else local). The choice is
made here once, as a `LimitSource` handed down to every client at construction.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from rubric_engine.cluster.connect import NAMESPACE, connect, connected, require_ray
from rubric_engine.errors import ConfigError
from rubric_engine.models.concurrency import AUTO, AdaptiveGate
from rubric_engine.models.entries import ModelSpec
from rubric_engine.models.limits import LOCAL, LimitSource, LocalLimits, SharedLimits, lease_of, limit_key

__all__ = ["ACTOR", "CHOICES", "ClusterSource", "AutoSource", "limits_source", "limits_actor"]

ACTOR = "rubric-engine-limits"
CHOICES = ("auto", "local", "cluster")
_HEAD = "node:__internal_head__"  # the resource Ray gives its head node only
_MAX_WAITING = 100_000  # acquires the actor may hold waiting at once (each a coroutine, not a thread)


def limits_actor(ray: Any) -> Any:
    """The cluster's limits actor, made by the first process that asks (detached, on the head, no CPU, restarted
    empty if lost)."""
    return ray.remote(SharedLimits).options(
        name=ACTOR, namespace=NAMESPACE, get_if_exists=True, lifetime="detached", num_cpus=0,
        resources={_HEAD: 0.001},  # on the head node, which outlives the workers that come and go
        max_concurrency=_MAX_WAITING, max_restarts=-1, max_task_retries=-1).remote()


def in_ray() -> bool:
    """Whether this process is connected to Ray already (without importing Ray when nothing here has)."""
    return "ray" in sys.modules and connected()


class ClusterSource:
    """`limits=cluster`: every client's limits in the cluster's actor (see module docstring). `address`: where to
    join when this process is not connected yet (`ray=`; None: the machine's cluster)."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address
        self._actor: Any = None

    def actor(self) -> Any:
        if self._actor is None:
            ray = connect(self.address or "auto", "limits=cluster")
            self._actor = limits_actor(ray)
        return self._actor

    def limits(self, spec: ModelSpec, *, concurrency: int | str, rpm: float | None, tpm: float | None,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> Any:
        if concurrency != AUTO and rpm is None and tpm is None:  # nothing shared to ask: the process's own cap
            return LocalLimits(concurrency, None, None, clock, sleep)
        return ClusterLimits(self.actor(), spec, concurrency, rpm, tpm)

    def __getstate__(self) -> dict[str, Any]:  # sent to a shard task: it finds the actor by name there
        return {"address": self.address, "_actor": None}

    def __repr__(self) -> str:
        return "cluster limits"


class AutoSource:
    """`limits=auto`: the cluster's limits in a process connected to Ray when its clients are built, else local."""

    def __init__(self, address: str | None = None) -> None:
        self.cluster = ClusterSource(address)

    def limits(self, spec: ModelSpec, **kw: Any) -> Any:
        return (self.cluster if in_ray() else LOCAL).limits(spec, **kw)

    def __repr__(self) -> str:
        return "auto limits"


def limits_source(choice: Any, address: str | None = None) -> LimitSource:
    """The `LimitSource` for `limits=<choice>` (`ray=` as `address`): one line naming the choices otherwise."""
    if choice == "local":
        return LOCAL
    if choice == "auto":
        return AutoSource(address)
    if choice == "cluster":
        require_ray("limits=cluster")
        return ClusterSource(address)
    raise ConfigError(f"limits={choice} is not valid; use auto (one limit per key across a Ray cluster when "
                      f"connected to one), local (each process its own) or cluster")


class ClusterLimits:
    """One client's limits kept by the cluster's actor. A whole-number concurrency stays a semaphore here."""

    def __init__(self, actor: Any, spec: ModelSpec, concurrency: int | str, rpm: float | None,
                 tpm: float | None) -> None:
        self.actor, self.spec, self.rpm, self.tpm = actor, spec, rpm, tpm
        self.auto = concurrency == AUTO
        self.local = None if self.auto else LocalLimits(concurrency, None, None)  # this process's own cap
        self.gate = _Settled() if self.auto else None
        self.lease = lease_of(spec)
        self._names: dict[str | None, str] = {}
        self.name: str | None = None  # the limit key of the latest call (for pause)

    def key_name(self, key: str | None) -> str:
        if key not in self._names:
            self._names[key] = limit_key(self.spec, key)
        self.name = self._names[key]
        return self.name

    def slot(self, key: str | None) -> "_ClusterSlot":
        return _ClusterSlot(self, self.key_name(key))

    def pause(self, seconds: float) -> None:
        if self.name is not None:
            self.actor.pause.remote(self.name, seconds)  # not awaited: the next acquire queues behind it


class _Settled:
    """concurrency=auto under cluster limits: the key's gate as the actor last reported it."""

    def __init__(self) -> None:
        self.last: dict[str, Any] = AdaptiveGate().report()  # until the actor's first answer: the gate's start

    def report(self) -> dict[str, Any]:
        return {**self.last, "scope": "cluster"}


class _ClusterSlot:
    def __init__(self, limits: ClusterLimits, name: str) -> None:
        self.limits, self.name, self.ticket = limits, name, uuid.uuid4().hex
        self.outcome, self.headers, self.tokens = "", None, 0  # type: str, Mapping[str, str] | None, int
        self._local: Any = None

    async def __aenter__(self) -> "_ClusterSlot":
        limits = self.limits
        if limits.local is not None:
            self._local = limits.local.slot()
            await self._local.__aenter__()
        try:
            report = await limits.actor.acquire.remote(self.name, self.ticket, limits.auto, limits.rpm, limits.tpm,
                                                       limits.lease)
        except BaseException:
            limits.actor.abandon.remote(self.name, self.ticket)  # granted later or never: either way given back
            await self._leave_local()
            raise
        if report is not None and limits.gate is not None:
            limits.gate.last = report
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.limits.actor.release.remote(self.name, self.ticket, self.outcome, self.headers, self.tokens)
        await self._leave_local()

    async def _leave_local(self) -> None:
        local, self._local = self._local, None
        if local is not None:
            await local.__aexit__()

    def answered(self, headers: Mapping[str, str] | None = None, tokens: int = 0) -> None:
        self.outcome, self.tokens = "answered", tokens
        self.headers = {k: v for k, v in (headers or {}).items() if "ratelimit-remaining" in k}  # all the gate reads

    def throttled(self) -> None:
        self.outcome = "throttled"
