"""Provider prompt caching: the shared prefix of per-criterion judge prompts, its marker, and what it saved.

Why: per-criterion judging sends the conversation and the reply once per criterion. Providers serve a
repeated prompt prefix from their prompt cache at a fraction of the input price: OpenAI-style providers do
it on their own (the bytes must only be identical, which a template that puts the criterion last gives),
Anthropic only for content marked with `cache_control` (LiteLLM passes the marker through its message
format to Anthropic, and to Claude on Bedrock and Vertex AI). The marker is added when the request is sent,
never to the messages the result cache keys on, so `prompt_cache` on or off finds the same answers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["MIN_CACHED_PREFIX_TOKENS", "shared_prefix", "needs_marker", "mark_prefix", "saving", "cache_read_price",
           "cacheable_tokens"]

# Providers cache no prefix shorter than this (OpenAI: 1,024 tokens; Anthropic: 1,024 for most models, more
# for some): the dry run counts only prefixes at least this long.
MIN_CACHED_PREFIX_TOKENS = 1024
_MARKER = {"type": "ephemeral"}


def shared_prefix(texts: Sequence[str]) -> int:
    """Characters every text starts with, cut after the last line break they share when there is one (so the
    marked block ends where a section ends, not inside the first words of the criteria); 0 for fewer than two
    texts: nothing is repeated."""
    if len(texts) < 2:
        return 0
    common = os.path.commonprefix(list(texts))
    return common.rfind("\n") + 1 or len(common)


def needs_marker(model: str) -> bool:
    """True for providers that cache only marked content: Anthropic, and Claude served by Bedrock or Vertex AI."""
    provider, _, name = model.partition("/")
    return provider == "anthropic" or (provider in ("bedrock", "vertex_ai") and "claude" in name)


def mark_prefix(messages: list[dict[str, Any]], chars: int) -> list[dict[str, Any]]:
    """The messages with the first user message split into its first `chars` characters, marked
    `cache_control: ephemeral`, and the rest: the same text, in two content blocks. Messages before it (a
    system prompt) are part of the cached prefix by position. Unchanged when there is nothing to split."""
    out = list(messages)
    for i, message in enumerate(out):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if not isinstance(content, str) or not 0 < chars < len(content):
            return messages
        out[i] = {**message, "content": [{"type": "text", "text": content[:chars], "cache_control": dict(_MARKER)},
                                         {"type": "text", "text": content[chars:]}]}
        return out
    return messages


def cache_read_price(litellm: Any, model: str) -> tuple[float, float] | None:
    """(input price, cache-read price) per token from LiteLLM's bundled price map; None when either is unknown."""
    table = getattr(litellm, "model_cost", None) or {}
    info = table.get(model) or table.get(model.split("/", 1)[-1])
    if not isinstance(info, dict):
        return None
    full, read = info.get("input_cost_per_token"), info.get("cache_read_input_token_cost")
    if not isinstance(full, (int, float)) or not isinstance(read, (int, float)):
        return None
    return float(full), float(read)


def saving(litellm: Any, model: str, cached_tokens: int) -> float | None:
    """USD the provider's prompt cache saved on `cached_tokens` (input price minus cache-read price); 0.0 when
    nothing was cached, None when the price map does not know both prices. A cache write's surcharge
    (Anthropic: 1.25x the input price) is in the recorded cost, not subtracted here."""
    if cached_tokens <= 0:
        return 0.0
    prices = cache_read_price(litellm, model)
    if prices is None:
        return None
    return cached_tokens * (prices[0] - prices[1])


def cacheable_tokens(requests: Sequence[list[dict[str, Any]]], count: Callable[[list[dict[str, Any]]], int],
                     unknown_reply: int = 0) -> int:
    """An estimate of the prompt tokens a provider serves from its cache for one question's per-criterion
    requests (all of them sent): the shared prefix's tokens for every request but the first, 0 when the prefix
    is shorter than MIN_CACHED_PREFIX_TOKENS. `unknown_reply`: tokens to add for a reply not known yet (it is
    part of the prefix)."""
    firsts = [next((str(m.get("content", "")) for m in r if m.get("role") == "user"), "") for r in requests]
    chars = shared_prefix(firsts)
    if not chars:
        return 0
    request = list(requests[0])
    at = next(i for i, m in enumerate(request) if m.get("role") == "user")
    tokens = count(request[:at] + [{**request[at], "content": firsts[0][:chars]}]) + unknown_reply
    return (len(requests) - 1) * tokens if tokens >= MIN_CACHED_PREFIX_TOKENS else 0
