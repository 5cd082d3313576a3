"""Per-role figures of a run's calls beyond counts: prompt-cache tokens, money saved, where concurrency=auto settled.

Read from the clients once the pipeline ends, written into summary.json's `calls`.

Why apart from the pipeline: the pipeline only gathers clients; the price look-up and the shape of these
fields are one concern, used by the summary, the console and the docs alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rubric_engine.models.client import ModelClient
from rubric_engine.models.litellm_runtime import RUNTIME
from rubric_engine.models.promptcache import saving

__all__ = ["call_notes"]


def call_notes(clients: Sequence[ModelClient]) -> dict[str, Any]:
    """{cached_tokens, cache_saved (USD, None when a price is unknown), prompt_cache} for one role's clients when
    the marker was on or the provider reported cache reads, and `concurrency` (start, final, min, max,
    throttles) when they ran with concurrency=auto; {} otherwise."""
    cached = sum(c.stats.cached_tokens for c in clients)
    saved: float | None = 0.0
    for c in clients:
        if c.stats.cached_tokens:  # LiteLLM is loaded: this client made the calls that reported them
            part = saving(RUNTIME.module(), c.spec.model, c.stats.cached_tokens)
            saved = None if part is None or saved is None else saved + part
    marked = any(c.prompt_cache for c in clients)
    out: dict[str, Any] = {"cached_tokens": cached, "cache_saved": saved, "prompt_cache": marked} \
        if marked or cached else {}
    gates = [c.gate.report() for c in clients  # a mock, or a run answered from the cache, learnt nothing
             if c.gate is not None and c.stats.requests and not c.spec.offline]
    if len(gates) == 1:
        out["concurrency"] = gates[0]
    elif gates:
        out["concurrency"] = {"mode": "auto", "per_client": gates}
    return out
