"""What a client asks before each model call and reports after it: the limits protocol.

Why a protocol: a call waits for a place among the calls in flight (`concurrency=N`, or `auto`'s AIMD gate) and
for room under `rpm=` / `tpm=`; after it, the answer's latency, tokens, a 429 and the rate-limit headers teach the
gate and charge the token bucket. Where that state lives is the one thing that changes when a run leaves one
machine: in the client itself (`LocalLimits`, the default, as every client always had it), or shared by every
process on a Ray cluster using the same provider key (rubric_engine/cluster/limits.py). A `ModelClient` takes a
`LimitSource` at construction and asks it once for its own `Limits`; it never learns which one it got.

`SharedLimits` is the shared state itself, pure asyncio and Ray-free so tests drive it on one loop: per limit key
(the endpoint and a digest of the API key, `limit_key`; never the key) one token bucket (`RateLimiter`) and, for
`concurrency=auto`, one `AdaptiveGate`. Each granted place is a ticket with a lease: a client that dies holding one
(a lost node) gives it back when the lease runs out; a key unused for `idle` seconds is forgotten (its gate starts
again from 8).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from rubric_engine.models.concurrency import AUTO, AdaptiveGate, RateLimiter, Slot
from rubric_engine.models.entries import ModelSpec, provider_key_env, provider_of

__all__ = ["Permit", "Limits", "LimitSource", "LocalLimits", "LOCAL", "SharedLimits", "limit_key", "lease_of",
           "DIGEST_CHARS"]

DIGEST_CHARS = 16  # hex characters of sha256(key) naming a key in the shared limits: enough to tell keys apart
IDLE = 600.0  # seconds after which a key with nothing in flight is forgotten by the shared limits
LEASE_SLACK = 60.0  # seconds a granted place outlives its call's timeout before the shared limits take it back
# A shared gate's cut after a throttle: a tenth, not a client's quarter. One gate carries a whole cluster's calls on
# the key and grows back one call per window, so a quarter cut idles a quarter of the cluster for many windows
# (measured: 0.88 x the provider's limit in flight on average, bench/bench_cluster_limits.py); a tenth keeps it
# within 10% of the limit for one more round's 429s each time it crosses (still 2-3% of requests).
SHARED_BACKOFF = 0.9


class Permit(Protocol):
    """One call's place: how the call ended, said before the place is given back."""

    def answered(self, headers: Mapping[str, str] | None = None, tokens: int = 0) -> None: ...

    def throttled(self) -> None: ...


class Limits(Protocol):
    """One client's limits. `slot(key)`: `async with` waits for a place and for rpm / tpm room and gives a Permit
    (`key`: the API key value the client sends, None for the provider's own variable; only a digest of it may
    leave the process). `pause(seconds)`: the provider asked (Retry-After) that no call on this key start for that
    long. `gate`: with concurrency=auto, something whose `report()` says where the limit settled; else None."""

    gate: Any

    def slot(self, key: str | None) -> Any: ...

    def pause(self, seconds: float) -> None: ...


class LimitSource(Protocol):
    """What a run hands every client at construction: each client's `Limits`."""

    def limits(self, spec: ModelSpec, *, concurrency: int | str, rpm: float | None, tpm: float | None,
               clock: Callable[[], float], sleep: Callable[[float], Awaitable[Any]]) -> Limits: ...


def limit_key(spec: ModelSpec, key: str | None) -> str:
    """The shared limits' name for the (endpoint, key) a client calls: the api_base or the provider, and the first
    DIGEST_CHARS hex characters of sha256 of the key value (the provider's own variable when `key` is None)."""
    value = key if key is not None else os.environ.get(provider_key_env(spec.model), "")
    endpoint = spec.api_base.rstrip("/") if spec.api_base else provider_of(spec.model)
    return f"{endpoint}|{hashlib.sha256(value.encode()).hexdigest()[:DIGEST_CHARS]}"


# ----------------------------------------------------------------------------- one client's own (the default)

class _Done:
    """A place under an integer concurrency: the answer's tokens still go to the token bucket."""

    def __init__(self, limiter: RateLimiter) -> None:
        self._limiter = limiter

    def answered(self, headers: Mapping[str, str] | None = None, tokens: int = 0) -> None:
        self._limiter.spend(tokens)

    def throttled(self) -> None:
        pass


class _LocalSlot:
    def __init__(self, limits: "LocalLimits") -> None:
        self._limits = limits
        self._held: Any = None

    async def __aenter__(self) -> Permit:
        limits = self._limits
        if limits.gate is None:
            self._held = limits.semaphore()
            await self._held.acquire()
            permit: Permit = _Done(limits.limiter)
        else:
            self._held = slot = await limits.gate.acquire()
            permit = _GateSlot(slot, limits.limiter)
        try:
            await limits.limiter.wait()
        except BaseException:
            await self.__aexit__()
            raise
        return permit

    async def __aexit__(self, *exc: Any) -> None:
        held, self._held, gate = self._held, None, self._limits.gate
        if isinstance(held, Slot) and gate is not None:
            gate.release(held)
        elif held is not None:
            held.release()


class _GateSlot:
    """A place in the adaptive gate: what the call taught it, and its tokens to the bucket."""

    def __init__(self, slot: Slot, limiter: RateLimiter) -> None:
        self._slot, self._limiter = slot, limiter

    def answered(self, headers: Mapping[str, str] | None = None, tokens: int = 0) -> None:
        self._limiter.spend(tokens)
        self._slot.answered(headers, tokens)

    def throttled(self) -> None:
        self._slot.throttled()


class LocalLimits:
    """One client's limits in its own process, as every client had them before there was a choice: a semaphore
    of `concurrency` places (one per event loop: asyncio primitives bind to one), or with `auto` the client's own
    AdaptiveGate; rpm / tpm spacing by the client's RateLimiter."""

    def __init__(self, concurrency: int | str, rpm: float | None, tpm: float | None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.concurrency = concurrency
        self.limiter = RateLimiter(rpm, clock, sleep, tpm)
        self.gate = AdaptiveGate(rpm=rpm, tpm=tpm, clock=clock) if concurrency == AUTO else None
        self._sem: asyncio.Semaphore | None = None
        self._sem_loop: asyncio.AbstractEventLoop | None = None

    def semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._sem is None or self._sem_loop is not loop:
            self._sem, self._sem_loop = asyncio.Semaphore(int(self.concurrency)), loop
        return self._sem

    def slot(self, key: str | None = None) -> _LocalSlot:
        return _LocalSlot(self)

    def pause(self, seconds: float) -> None:
        self.limiter.pause(seconds)


class _LocalSource:
    def limits(self, spec: ModelSpec, *, concurrency: int | str, rpm: float | None, tpm: float | None,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> LocalLimits:
        return LocalLimits(concurrency, rpm, tpm, clock, sleep)

    def __repr__(self) -> str:
        return "local limits"


LOCAL: LimitSource = _LocalSource()


# ----------------------------------------------------------------------------- shared by many processes

@dataclass
class _Key:
    """One key's shared state: its token bucket, its gate (made when an auto client first asks) and the places
    granted (ticket -> (the gate's Slot or None, when its lease ends))."""

    limiter: RateLimiter
    rates: tuple[float | None, float | None]
    gate: AdaptiveGate | None = None
    tickets: dict[str, tuple[Slot | None, float]] = field(default_factory=dict)
    abandoned: set[str] = field(default_factory=set)
    used: float = 0.0

    def open_gate(self, clock: Callable[[], float]) -> AdaptiveGate:
        """The key's gate, made when its first concurrency=auto caller asks."""
        if self.gate is None:
            self.gate = AdaptiveGate(rpm=self.rates[0], tpm=self.rates[1], clock=clock, backoff=SHARED_BACKOFF)
        return self.gate

    def follow(self, rpm: float | None, tpm: float | None) -> None:
        self.rates = (rpm, tpm)
        self.limiter.rates(rpm, tpm)
        if self.gate is not None:
            self.gate.rates(rpm, tpm)


class SharedLimits:
    """The limits of every client that shares them, per limit key (see module docstring). Ray runs one of these
    as the named actor of rubric_engine/cluster/limits.py; every method is a coroutine so a waiting acquire does
    not hold the others up. `rpm` / `tpm` given with an acquire are the whole key's rates: the latest asked win."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep, idle: float = IDLE) -> None:
        self._clock, self._sleep, self._idle = clock, sleep, idle
        self._keys: dict[str, _Key] = {}

    async def acquire(self, key: str, ticket: str, auto: bool, rpm: float | None, tpm: float | None,
                      lease: float) -> dict[str, Any] | None:
        """Wait for a place (auto: in the key's gate) and for rpm / tpm room; hold it as `ticket` until released
        or `lease` seconds pass. Returns the key's gate report (None without a gate)."""
        state = self._state(key, rpm, tpm)
        gate = state.open_gate(self._clock) if auto else None
        slot = await gate.acquire() if gate is not None else None
        state.tickets[ticket] = (slot, self._clock() + lease)
        if ticket in state.abandoned:  # its caller gave up while it waited
            await self.release(key, ticket, "", None, 0)
            return None
        await state.limiter.wait()
        return state.gate.report() if state.gate is not None else None

    async def release(self, key: str, ticket: str, outcome: str, headers: Mapping[str, str] | None,
                      tokens: int) -> None:
        """Give `ticket`'s place back, with how its call ended ("answered", "throttled", "" for nothing learnt)."""
        state = self._keys.get(key)
        if state is None:
            return
        state.abandoned.discard(ticket)
        held = state.tickets.pop(ticket, None)
        if held is None:
            return
        state.used = self._clock()
        if outcome == "answered" and tokens:
            state.limiter.spend(tokens)
        slot = held[0]
        if slot is not None and state.gate is not None:
            if outcome == "answered":
                slot.answered(headers, tokens)
            elif outcome == "throttled":
                slot.throttled()
            state.gate.release(slot)

    async def abandon(self, key: str, ticket: str) -> None:
        """The caller of `ticket` stopped waiting: give its place back now, or as soon as it is granted."""
        state = self._keys.get(key)
        if state is None:
            return
        if ticket in state.tickets:
            await self.release(key, ticket, "", None, 0)
        else:
            state.abandoned.add(ticket)

    async def pause(self, key: str, seconds: float) -> None:
        """The provider asked (Retry-After) that no call on `key` start for `seconds`."""
        state = self._keys.get(key)
        if state is not None:
            state.limiter.pause(seconds)

    async def report(self, key: str) -> dict[str, Any] | None:
        state = self._keys.get(key)
        return state.gate.report() if state is not None and state.gate is not None else None

    async def held(self) -> dict[str, dict[str, Any]]:
        """What is held, per key: rates, places in flight, the gate's report (for tests and operators)."""
        return {k: {"rpm": s.rates[0], "tpm": s.rates[1], "in_flight": len(s.tickets),
                    "gate": s.gate.report() if s.gate is not None else None} for k, s in self._keys.items()}

    async def reset(self, key: str | None = None) -> None:
        """Forget one key's state (or every key's): its gate starts again, its bucket is full."""
        for k in [key] if key is not None else list(self._keys):
            self._keys.pop(k, None)

    def _state(self, key: str, rpm: float | None, tpm: float | None) -> _Key:
        now = self._clock()
        for k, s in list(self._keys.items()):
            for ticket, (slot, until) in list(s.tickets.items()):
                if until < now:  # its holder is gone (a lost node, a killed process): the place comes back
                    s.tickets.pop(ticket)
                    if s.gate is not None and slot is not None:
                        s.gate.release(slot)
            idle = not s.tickets and (s.gate is None or s.gate.in_flight == 0)  # (woken waiters count in flight)
            if idle and now - s.used > self._idle and k != key:
                del self._keys[k]
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _Key(RateLimiter(rpm, self._clock, self._sleep, tpm), (rpm, tpm), used=now)
        elif state.rates != (rpm, tpm):  # the latest asked win: the bucket's spacing and the gate's cap follow
            state.follow(rpm, tpm)
        state.used = now
        return state


def lease_of(spec: ModelSpec) -> float:
    """How long a granted shared place may be held: one attempt's timeout and some slack."""
    return float(spec.timeout) + LEASE_SLACK
