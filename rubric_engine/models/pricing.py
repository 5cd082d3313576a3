"""A model's price, looked up once per model from LiteLLM's price map, and a reply's cost from its tokens.

Why: LiteLLM prices every response inside `acompletion` (its response cost calculator: model lookups,
name generalisations, a zero-cost diagnostic), about a quarter of its CPU per call against a local
server, and it has no switch to turn that off. What it does offer is documented custom pricing: a call
given `input_cost_per_token` / `output_cost_per_token` (and `cache_read_input_token_cost`) is priced from
those, without the lookups. So the engine looks each model up once (`litellm.get_model_info`), passes
LiteLLM the same per-token prices, and computes the cost itself from the reply's token counts.

The figure must be the one LiteLLM's own calculator gives. That calculator prices by the model the
server says it served (a reply's `model`, e.g. a dated snapshot) when that one has a price, and knows
tiers (above N prompt tokens), cache writes, audio and per-query prices. So the simple form is used
only after it was checked, once per (requested, served) model pair, against `litellm.completion_cost`
on probe usages (a small prompt, a 300k-token prompt, cached prompt tokens); where it differs, each
reply is priced by `litellm.completion_cost` as before. A model whose map entry is not of the simple
form never gets custom prices: LiteLLM's own per-call figure is used, as before. A model LiteLLM has
no price for is passed zero prices and its cost stays unknown (None), never 0.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ModelPricing", "cached_prompt_tokens"]

_SIMPLE = frozenset({"input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost"})
# prices that apply to a plain synchronous chat call only when a param asks for them: (key suffix, params)
_NOT_APPLYING = (("_batches", ()), ("_priority", ("service_tier",)), ("_flex", ("service_tier",)),
                 ("search_context_cost_per_query", ("web_search_options", "tools")))
# (prompt, completion, cached prompt tokens): where tiers and cache prices would show
_PROBES = ((1000, 100, 0), (300_000, 100, 0), (1000, 100, 600))


def cached_prompt_tokens(usage: Any) -> int:
    """Prompt tokens the provider read from its prompt cache (OpenAI-style `prompt_tokens_details`)."""
    details = getattr(usage, "prompt_tokens_details", None)
    value = details.get("cached_tokens") if isinstance(details, dict) else getattr(details, "cached_tokens", None)
    return int(value or 0) if isinstance(value, (int, float)) else 0


class ModelPricing:
    """How one model's replies are priced in this process. `kind`: "simple" (the engine computes from tokens),
    "litellm" (LiteLLM's own per-call figure) or "unpriced" (LiteLLM has no price: None)."""

    def __init__(self, litellm: Any, model: str, params: dict[str, Any] | None = None) -> None:
        self.model = model
        self.kind, self.prices = _entry(litellm, model, params or {})
        self._served: dict[str, bool] = {}  # served model name -> the simple form gives LiteLLM's figure

    @property
    def kwargs(self) -> dict[str, float]:
        """LiteLLM's documented custom-pricing arguments for `acompletion` (none for "litellm")."""
        if self.kind == "unpriced":
            return {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0}
        return dict(self.prices) if self.kind == "simple" else {}

    def simple_cost(self, prompt: int, completion: int, cached: int) -> float | None:
        if self.kind != "simple":
            return None
        p = self.prices
        if cached and "cache_read_input_token_cost" in p:
            prompt_cost = (prompt - cached) * p["input_cost_per_token"] + cached * p["cache_read_input_token_cost"]
        else:
            prompt_cost = prompt * p["input_cost_per_token"]
        return prompt_cost + completion * p["output_cost_per_token"]

    def cost(self, litellm: Any, response: Any) -> float | None:
        """USD of one reply, or None when unknown (never 0 for an unknown price)."""
        if self.kind == "litellm":
            return _litellm_cost(litellm, response, self.model, stamped=True)
        served = str(getattr(response, "model", None) or "")
        same = self._served.get(served)
        if same is None:
            same = self._served[served] = self._agrees(litellm, served)
        if not same:  # the served model is priced otherwise: LiteLLM's calculator, as before
            return _litellm_cost(litellm, response, self.model, stamped=False)
        usage = getattr(response, "usage", None)
        return self.simple_cost(int(getattr(usage, "prompt_tokens", 0) or 0),
                                int(getattr(usage, "completion_tokens", 0) or 0), cached_prompt_tokens(usage))

    def _agrees(self, litellm: Any, served: str) -> bool:
        """The simple form (or 'no price') gives what `litellm.completion_cost` gives for replies of `served`."""
        for prompt, completion, cached in _PROBES:
            details = {"cached_tokens": cached} if cached else None
            probe = litellm.ModelResponse(model=served or None, usage=litellm.Usage(
                prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                prompt_tokens_details=details))
            theirs = _number(_safe(lambda: litellm.completion_cost(completion_response=probe, model=self.model)))
            ours = self.simple_cost(prompt, completion, cached)
            if (theirs is None) != (ours is None):
                return False
            if theirs is not None and ours is not None and not math.isclose(theirs, ours, rel_tol=1e-9, abs_tol=1e-12):
                return False
        return True


def _entry(litellm: Any, model: str, params: dict[str, Any]) -> tuple[str, dict[str, float]]:
    """The model's map entry reduced to the simple form, or why not."""
    if any("cost" in k for k in params):
        return "litellm", {}  # the model entry sets prices itself: LiteLLM applies them as given
    try:
        info = dict(litellm.get_model_info(model=model))
    except Exception:  # noqa: BLE001 - LiteLLM raises for a model it has no price for
        return "unpriced", {}
    prices: dict[str, float] = {}
    for key, value in info.items():
        if "cost" not in key or value is None:
            continue
        if key in _SIMPLE and isinstance(value, (int, float)) and math.isfinite(value) and value >= 0:
            prices[key] = float(value)
        elif not any((key.endswith(mark)) and not any(p in params for p in asks) for mark, asks in _NOT_APPLYING):
            return "litellm", {}  # tiers, cache writes, audio, per-query prices: LiteLLM's calculator knows them
    if {"input_cost_per_token", "output_cost_per_token"} - prices.keys() or str(info.get("mode") or "chat") != "chat":
        return "litellm", {}
    return "simple", prices


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except Exception:  # noqa: BLE001 - unmapped models raise; unknown cost is None, never 0
        return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _litellm_cost(litellm: Any, response: Any, model: str, stamped: bool) -> float | None:
    """LiteLLM's own figure: the one it stamped on the reply (`stamped`: the call had no custom prices), else
    `completion_cost` asked now (a second completion_cost raising for unmapped models costs ~2 ms of CPU)."""
    hidden = getattr(response, "_hidden_params", None)
    if stamped and isinstance(hidden, dict) and "response_cost" in hidden:
        return _number(hidden["response_cost"])
    return _number(_safe(lambda: litellm.completion_cost(completion_response=response, model=model)))
