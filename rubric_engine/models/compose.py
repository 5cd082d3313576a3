"""A run's model clients, built in one place from the layers the run chose: cache, limits, workers, batches,
prompt-cache marks, notes and the transcript observer.

Why: a ModelClient's collaborators are constructor arguments, never attributes attached once it is built (a
client that gets its batcher or observer later can make a call without it, and a reader cannot see from the
constructor what a client does). A run decides its layers once (`ClientLayers`, the run's own objects: its
WorkerPool, its BatchRun, its cache handle) and every role's client is built from them by `client()`, so the
candidate, the simulated user, the baseline and each judge get the same layers and nothing is set on a client
afterwards (tests/models/test_client_layers.py scans the package for that). Nothing here is process-wide: two runs in
one process build two ClientLayers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from rubric_engine.models.cache import ResultCache
from rubric_engine.models.client import BatchSource, ModelClient
from rubric_engine.models.entries import ModelSpec
from rubric_engine.models.events import Observer
from rubric_engine.models.limits import LOCAL, LimitSource
from rubric_engine.models.litellm_runtime import RUNTIME, LiteLLMRuntime
from rubric_engine.models.workers import WorkerPool

__all__ = ["ClientLayers"]


@dataclass(frozen=True)
class ClientLayers:
    """What every client of a run is built with. `prompt_cache` applies to the clients built with
    `client(..., prompt_cache=True)` (judges asked per criterion), the rest to all of them."""

    cache: ResultCache | None = None
    concurrency: int | str = 8
    rpm: float | None = None
    tpm: float | None = None
    max_retries: int = 4
    workers: WorkerPool | None = None  # the run's worker processes (workers=N); None: calls in this process
    batches: BatchSource | None = None  # batch=true: the run's provider batches (models/batches.BatchRun)
    prompt_cache: bool = False  # mark a shared prompt prefix for providers that cache only marked content
    notify: Callable[[str], None] | None = None  # one-line events (LiteLLM loading, retries, refusals)
    observer: Observer | None = None  # every call's outcome (the run's transcripts)
    runtime: LiteLLMRuntime = RUNTIME
    limits: LimitSource = LOCAL  # where places in flight and rpm / tpm room are kept (models/limits.py)
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep

    def client(self, spec: ModelSpec, role: str, *, prompt_cache: bool = False) -> ModelClient:
        """A client for `spec` in `role`, with every layer chosen here and nothing attached afterwards."""
        return ModelClient(spec, role=role, cache=self.cache, concurrency=self.concurrency, rpm=self.rpm,
                           tpm=self.tpm, max_retries=self.max_retries, workers=self.workers, batches=self.batches,
                           prompt_cache=prompt_cache and self.prompt_cache, notify=self.notify,
                           observer=self.observer, runtime=self.runtime, clock=self.clock, sleep=self.sleep,
                           limits=self.limits)

    def with_(self, **changes: Any) -> "ClientLayers":
        """These layers with some changed (a run adds its notes and batches once its progress board exists)."""
        return replace(self, **changes)
