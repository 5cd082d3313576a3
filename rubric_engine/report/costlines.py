"""Console lines for what summary.json's `calls` says beyond counts: prompt-cache tokens and the money they
saved per role, and where concurrency=auto settled (its fields come from run/callnotes.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["cost_lines", "estimate_lines"]


def cost_lines(calls: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per role that read prompt-cache tokens, and one per role that ran with concurrency=auto."""
    lines = []
    for role, c in calls.items():
        cached = int(c.get("cached_tokens") or 0)
        if cached:
            lines.append(f"{role}: {cached:,} prompt tokens served from the provider's prompt cache; saved "
                         f"{_money(c.get('cache_saved'), 4)} against the full input price")
    for role, c in calls.items():
        gate = c.get("concurrency")
        for g in (gate.get("per_client") or [gate]) if isinstance(gate, Mapping) else []:
            lines.append(f"{role}: concurrency=auto settled at {g['final']} in flight (started at {g['start']}, "
                         f"ranged {g['min']}-{g['max']}, {g['throttles']} cut(s) after 429s or spent rate limits)"
                         + ("; one limit for its key across the Ray cluster" if g.get("scope") == "cluster" else ""))
    return lines


def estimate_lines(est: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The dry run's prompt-cache estimate, one line per role that has one."""
    lines = []
    for role, e in est.items():
        tokens = int(e.get("cached_prompt_tokens") or 0)
        if tokens:
            lines.append(f"{role}: ~{tokens:,} of the ~{int(e['prompt_tokens']):,} prompt tokens may come from the "
                         f"provider's prompt cache (each question's shared prefix, for every criterion but the first; "
                         f"prefixes under 1,024 tokens are not cached), saving {_money(e.get('cache_saved'), 2)}")
    return lines


def _money(saved: float | None, digits: int) -> str:
    """A saving in USD, or 'unknown' with why: never a number the price map did not give."""
    return "unknown (no cache-read price in LiteLLM's price map)" if saved is None else f"~${saved:,.{digits}f}"
