"""Costs from token counts (models/pricing.py) equal LiteLLM's own figures, to far below a cent.

Checked two ways: against `litellm.completion_cost` on canned replies for real model ids (simple prices,
cached-token prices, tiered and cache-write prices left to LiteLLM, a served model priced otherwise than
the one asked for, an unmapped model), and end to end: the cost a ModelClient records through the fake
server equals the cost a plain `litellm.acompletion` (no custom prices, today's path) reports for the
same reply.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.models.client import ModelClient
from rubric_engine.models.entries import ModelSpec
from rubric_engine.models.litellm_runtime import RUNTIME
from rubric_engine.models.pricing import ModelPricing

USAGES = [(1000, 100, 0), (123_457, 9_876, 0), (300_000, 2_000, 0), (5_000, 700, 4_096), (250_000, 10, 200_000)]
MODELS = [("openai/gpt-4o", "gpt-4o", "simple"), ("openai/gpt-4o", "gpt-4o-2024-08-06", "simple"),
          ("openai/gpt-4o", "gpt-4o-2024-05-13", "simple"), ("gpt-4.1", "gpt-4.1", "simple"),
          ("gpt-4o-mini", "gpt-4o-mini", "simple"), ("gpt-3.5-turbo", "gpt-3.5-turbo", "simple"),
          ("claude-sonnet-4-5", "claude-sonnet-4-5", "litellm"), ("gemini/gemini-2.5-pro", "gemini-2.5-pro", "litellm"),
          ("openai/not-a-priced-model", "not-a-priced-model", "unpriced"), ("openai/not-a-priced-model", "gpt-4o",
                                                                            "unpriced")]


def _litellm() -> Any:
    return RUNTIME.module()


def _reply(litellm: Any, served: str, prompt: int, completion: int, cached: int) -> Any:
    details = {"cached_tokens": cached} if cached else None
    return litellm.ModelResponse(model=served, choices=[{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "ok"}}], usage=litellm.Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
        prompt_tokens_details=details))


def _theirs(litellm: Any, reply: Any, model: str) -> float | None:
    try:
        return float(litellm.completion_cost(completion_response=reply, model=model))
    except Exception:  # noqa: BLE001 - unmapped models raise: unknown
        return None


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9,
                                                                                          abs_tol=1e-12))


@pytest.mark.parametrize("model, served, kind", MODELS)
def test_cost_from_tokens_equals_litellms_completion_cost(model: str, served: str, kind: str) -> None:
    litellm = _litellm()
    pricing = ModelPricing(litellm, model)
    assert pricing.kind == kind
    for prompt, completion, cached in USAGES:
        reply = _reply(litellm, served, prompt, completion, cached)
        ours, theirs = pricing.cost(litellm, reply), _theirs(litellm, reply, model)
        assert _same(ours, theirs), (model, served, prompt, completion, cached, ours, theirs)
        assert ours is None or round(ours, 2) == round(theirs or 0.0, 2)


def test_simple_prices_are_what_the_map_says_and_go_to_litellm_as_custom_pricing() -> None:
    litellm = _litellm()
    pricing = ModelPricing(litellm, "gpt-3.5-turbo")
    assert pricing.kwargs == {"input_cost_per_token": 5e-07, "output_cost_per_token": 1.5e-06}
    assert ModelPricing(litellm, "claude-sonnet-4-5").kwargs == {}  # cache writes: LiteLLM prices it, as before
    assert ModelPricing(litellm, "gpt-4o", {"service_tier": "priority"}).kind == "litellm"  # priority prices apply
    assert ModelPricing(litellm, "gpt-4o", {"input_cost_per_token": 1e-6}).kind == "litellm"  # the entry's own prices


def _raw(model: str, prompt: int, completion: int, cached: int) -> Reply:
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return Reply(raw=json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": "fine"}}],
                                 "usage": usage}))


@pytest.mark.parametrize("model, served", [("openai/gpt-4o", "gpt-4o"), ("openai/gpt-4o", "gpt-4o-2024-05-13"),
                                           ("openai/gpt-4.1", "gpt-4.1-2025-04-14"), ("openai/my-alias", "gpt-4o"),
                                           ("openai/my-alias", "my-alias")])
def test_a_recorded_cost_equals_todays_through_the_fake_server(model: str, served: str, fake_key: str) -> None:
    """Today's figure: LiteLLM's own, from a plain acompletion (no custom prices) of the same reply."""
    litellm = _litellm()

    async def both(url: str, srv: FakeServer) -> tuple[list[float | None], list[float | None]]:
        today, ours = [], []
        spec = ModelSpec(name="m", model=model, api_base=url, api_key_env="FAKE_KEY")
        async with ModelClient(spec, cache=None, max_retries=0) as client:
            for i, (p, c, cached) in enumerate(USAGES):
                srv.queue(_raw(served, p, c, cached), _raw(served, p, c, cached))
                plain = await litellm.acompletion(model=model, api_base=url, api_key="sk-test", max_retries=0,
                                                  messages=[{"role": "user", "content": f"plain {i}"}])
                today.append(plain._hidden_params.get("response_cost"))
                ours.append((await client.complete([{"role": "user", "content": f"engine {i}"}])).cost)
        return today, ours

    with FakeServer() as srv:
        today, ours = asyncio.run(both(srv.url, srv))
        bodies = srv.requests
    assert all(_same(a, b) for a, b in zip(today, ours)), (today, ours)
    assert all(not any("cost" in k for k in body) for body in bodies)  # prices never reach the server
