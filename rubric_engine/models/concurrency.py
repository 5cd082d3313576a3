"""`concurrency=auto`: how many calls a client keeps in flight, found from the provider's answers (AIMD).

Why: a fixed `concurrency=` is either too low (a fast provider idles) or too high (429s and retries); the
provider's own limit is rarely known in advance and changes with its load. TCP's rule finds it: start low,
double the limit each round-trip until the first throttle (slow start), then add one call per limit's worth
of answers (additive increase) and cut the limit by a quarter on a 429 or a rate-limit header saying nothing
is left (multiplicative decrease), once per round: the 429s of calls sent before a cut do not cut again.
The limit stays within 1..256, grows only while every slot is taken, and, with `rpm=` / `tpm=`, never above
the calls those rates can feed (rpm / 60 x the measured latency, plus one; tpm likewise over the measured
tokens per call). An integer `concurrency=` never comes
here: the client keeps its plain semaphore. `RateLimiter` is the rpm / tpm spacing every client applies either way.
Both are a client's own by default, or one per provider key shared across a Ray cluster (models/limits.py; the
shared gate cuts by a tenth, its `backoff`).

The logic is pure apart from asyncio futures for waiting; `clock` is injectable (tests use a fake one).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["AUTO", "AUTO_START", "AUTO_MIN", "AUTO_MAX", "AdaptiveGate", "RateLimiter", "Slot", "ceiling", "parse_concurrency"]

AUTO = "auto"
AUTO_START = 8  # a sane first guess: most providers take 8 calls at once from any paid tier
AUTO_MIN, AUTO_MAX = 1, 256
BACKOFF = 0.75  # the limit after a throttle, as a share of the limit before it
_EWMA = 0.2  # weight of the newest latency in the running mean


def parse_concurrency(value: Any) -> int | str:
    """`auto`, or a whole number >= 1; anything else raises ValueError with the fix."""
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"concurrency={value} is not valid; give a whole number >= 1 or auto")
    return value


def ceiling(concurrency: int | str) -> int:
    """The most calls a client may have in flight: the number itself, or AUTO_MAX for auto."""
    return AUTO_MAX if concurrency == AUTO else int(concurrency)


@dataclass
class Slot:
    """One call's place in the gate. The caller says how the call ended; the gate learns on release."""

    started: float
    epoch: int
    mark: int  # the gate's count of fillings when this call took its place
    outcome: str = ""  # "answered" | "throttled" | "" (another failure or a cancellation: nothing learnt)
    headers: Mapping[str, str] | None = None

    tokens: int = 0

    def answered(self, headers: Mapping[str, str] | None = None, tokens: int = 0) -> None:
        self.outcome, self.headers, self.tokens = "answered", headers, tokens

    def throttled(self) -> None:
        self.outcome = "throttled"


class AdaptiveGate:
    """Additive-increase, multiplicative-decrease limit on calls in flight. See module docstring."""

    def __init__(self, *, start: int = AUTO_START, low: int = AUTO_MIN, high: int = AUTO_MAX,
                 rpm: float | None = None, tpm: float | None = None,
                 clock: Callable[[], float] = time.monotonic, backoff: float = BACKOFF) -> None:
        self.low, self.high, self.rpm, self.tpm, self._clock = low, high, rpm, tpm, clock
        self.backoff = backoff  # the limit after a throttle, as a share of the limit before it
        self.limit = float(min(max(start, low), high))
        self.start = int(self.limit)
        self.in_flight = 0
        self.lowest = self.highest = int(self.limit)
        self.throttles = 0  # decreases made (one per round of throttled calls)
        self.slow_start = True
        self.latency: float | None = None  # running mean of answered calls' seconds
        self.tokens: float | None = None  # running mean of answered calls' tokens
        self._epoch = 0
        self._fills = 0  # times the gate was found or made full: a call that saw one may grow the limit
        self._waiters: deque[asyncio.Future[None]] = deque()

    # -- the slot ----------------------------------------------------------------------------------
    async def acquire(self) -> Slot:
        """Wait for a free place (first come, first served) and take it."""
        mark = self._fills
        if self.in_flight >= self.allowed or self._waiters:
            self._fills += 1  # demand is above the limit
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():  # woken, then cancelled: pass the place on
                    self.in_flight -= 1
                    self._wake()
                elif waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
        else:
            self.in_flight += 1
            if self.in_flight >= self.allowed:
                self._fills += 1
        return Slot(self._clock(), self._epoch, mark)

    def slot(self) -> "_Acquire":
        """`async with gate.slot() as slot:` takes a place and gives it back."""
        return _Acquire(self)

    def release(self, slot: Slot) -> None:
        full = self._fills > slot.mark  # every place was taken while this call was in flight
        self.in_flight -= 1
        if slot.outcome == "answered":
            self._answered(slot, full)
        elif slot.outcome == "throttled":
            self._decrease(slot.epoch)
        self._wake()

    def rates(self, rpm: float | None, tpm: float | None) -> None:
        """New rpm / tpm caps (a shared gate follows the rates its latest caller asked for)."""
        self.rpm, self.tpm = rpm, tpm

    @property
    def allowed(self) -> int:
        return max(self.low, min(self.high, int(self.limit)))

    def report(self) -> dict[str, Any]:
        """Where the limit settled, for the run summary."""
        return {"mode": AUTO, "start": self.start, "final": self.allowed, "min": self.lowest, "max": self.highest,
                "throttles": self.throttles}

    # -- learning ----------------------------------------------------------------------------------
    def _answered(self, slot: Slot, full: bool) -> None:
        seconds = max(0.0, self._clock() - slot.started)
        self.latency = _mean(self.latency, seconds)
        if slot.tokens:
            self.tokens = _mean(self.tokens, float(slot.tokens))
        requests, tokens = _remaining(slot.headers or {})
        if requests == 0 or tokens == 0:  # the provider says this window has nothing left: back off before the 429s
            self._decrease(slot.epoch)
            return
        if not full or (requests is not None and requests <= self.in_flight):
            return  # the limit was not what held calls back, or the window is nearly spent: hold
        step = 1.0 if self.slow_start else 1.0 / self.limit
        self._set(min(self.limit + step, self._rate_cap()))

    def _decrease(self, epoch: int) -> None:
        if epoch != self._epoch:  # sent before the last cut: that cut already answered this round's throttles
            return
        self._epoch += 1
        self.slow_start = False
        self.throttles += 1
        self._set(max(self.low, math.floor(self.limit * self.backoff)))

    def _rate_cap(self) -> float:
        """With rpm= / tpm=, the calls those rates keep busy at the measured latency (and tokens per call), +1;
        else the upper bound."""
        per_minute = [r for r in (self.rpm, self.tpm / self.tokens if self.tpm and self.tokens else None) if r]
        if not per_minute or self.latency is None:
            return float(self.high)
        return max(float(self.low), min(float(self.high), math.ceil(min(per_minute) / 60.0 * self.latency) + 1.0))

    def _set(self, value: float) -> None:
        self.limit = max(float(self.low), min(float(self.high), value))
        self.lowest, self.highest = min(self.lowest, self.allowed), max(self.highest, self.allowed)

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.allowed:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)


class _Acquire:
    def __init__(self, gate: AdaptiveGate) -> None:
        self.gate, self._slot = gate, None  # type: AdaptiveGate, Slot | None

    async def __aenter__(self) -> Slot:
        self._slot = slot = await self.gate.acquire()
        return slot

    async def __aexit__(self, *exc: Any) -> None:
        if self._slot is not None:
            self.gate.release(self._slot)


def _mean(old: float | None, new: float) -> float:
    return new if old is None else (1 - _EWMA) * old + _EWMA * new


def _remaining(headers: Mapping[str, str]) -> tuple[int | None, int | None]:
    """(requests, tokens) left in the provider's window, from x-ratelimit-remaining-requests / -tokens (as
    LiteLLM keeps them, plain or prefixed `llm_provider-`); None for a header the reply does not carry."""
    def read(what: str) -> int | None:
        for name in (f"x-ratelimit-remaining-{what}", f"llm_provider-x-ratelimit-remaining-{what}"):
            try:
                return int(float(headers[name]))
            except (KeyError, ValueError, TypeError, OverflowError):
                continue
        return None
    return read("requests"), read("tokens")


class RateLimiter:
    """Spaces request starts >= 60/rpm s apart (no bursts) and honours client-wide pauses after a 429; with tpm,
    each answer's tokens push the next start back by tokens x 60/tpm s (paid after: a call's size is known
    only once answered, so up to `concurrency` calls may start before the first is counted)."""

    def __init__(self, rpm: float | None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep, tpm: float | None = None) -> None:
        self.rates(rpm, tpm)
        self._next = 0.0
        self._paused_until = 0.0
        self._clock, self._sleep = clock, sleep

    def rates(self, rpm: float | None, tpm: float | None) -> None:
        """New rpm / tpm: the spacing of the starts from now on."""
        self.interval = 60.0 / rpm if rpm else 0.0
        self.per_token = 60.0 / tpm if tpm else 0.0

    async def wait(self) -> None:
        now = self._clock()
        slot = max(now, self._next, self._paused_until)
        if self.interval:
            self._next = slot + self.interval  # reserved before sleeping: no await between read and write
        if slot > now:
            await self._sleep(slot - now)

    def spend(self, tokens: int) -> None:
        if self.per_token:
            self._next = max(self._next, self._clock()) + tokens * self.per_token

    def pause(self, seconds: float) -> None:
        self._paused_until = max(self._paused_until, self._clock() + seconds)
