"""A model named by its LiteLLM id (`candidate=openai/gpt-4o-mini`) instead of an entry: the entry it stands for.

Why one module: every role that names a model on the command line (candidate=, judge=, user=, a juror of
judge=[...], baseline=, robustness's paraphraser=) accepts an id with a provider prefix the same way: the
provider is checked against LiteLLM's provider list (a typo gets a "did you mean"), and the key variable
follows the provider as it does for a spec's declared judge (entries.provider_key_env). The list below is
LiteLLM's, so start-up pays no LiteLLM import; a provider missing from it (a newer LiteLLM) is looked up in
the installed LiteLLM's source (its provider enum, read as text, not imported) before it is refused.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError
from rubric_engine.models.entries import KEYED_PROVIDERS, provider_key_env
from rubric_engine.models.mock import MOCK_PREFIX

__all__ = ["KNOWN_PROVIDERS", "is_model_id", "adhoc_entry", "check_provider", "installed_providers"]

# litellm.provider_list of litellm 1.110.2 (tests/models/test_adhoc_models.py checks each name against the
# installed one)
KNOWN_PROVIDERS = frozenset({'a2a', 'a2a_agent', 'abliteration', 'ai21', 'ai21_chat', 'aiand', 'aiml', 'aiohttp_openai',
    'amazon_nova', 'anthropic', 'anthropic_text', 'apertis', 'assemblyai', 'auto_router', 'aws_polly',
    'aws_textract', 'azure', 'azure_ai', 'azure_speech', 'azure_text', 'baseten', 'bedrock', 'bedrock_mantle',
    'bespoke', 'bigmodel', 'black_forest_labs', 'bytez', 'cerebras', 'charity_engine', 'chatgpt', 'chutes',
    'clarifai', 'clf_ai_gateway', 'cloudflare', 'codestral', 'cognition', 'cohere', 'cohere_chat', 'cometapi',
    'compactifai', 'coralbricks', 'cortecs', 'cursor', 'custom', 'custom_openai', 'darkbloom', 'dashscope',
    'databricks', 'databricks_agent', 'datarobot', 'deepgram', 'deepinfra', 'deepseek', 'docker_model_runner',
    'dotprompt', 'edenai', 'elevenlabs', 'empiriolabs', 'empower', 'eu_jev', 'fal_ai', 'featherless_ai',
    'fireworks_ai', 'friendliai', 'galadriel', 'gdc', 'gemini', 'gigachat', 'github', 'github_copilot',
    'gradient_ai', 'groq', 'helicone', 'heroku', 'hosted_vllm', 'hostinger_router', 'huggingface', 'humanloop',
    'hyperbolic', 'inception', 'inferenceapis', 'infinity', 'jina_ai', 'kyma', 'lambda_ai', 'langflow', 'langfuse',
    'langgraph', 'laya', 'lemonade', 'libertai', 'litellm_agent', 'litellm_proxy', 'llamafile', 'lm_studio',
    'manus', 'maritalk', 'meta', 'meta_llama', 'microsoft_365_copilot', 'milvus', 'minimax', 'mistral',
    'modelscope', 'mongodb', 'moonshot', 'morph', 'nace', 'nadir', 'nano-gpt', 'nebius', 'neosantara', 'nlp_cloud',
    'novita', 'nscale', 'nvidia_nim', 'nvidia_riva', 'oci', 'ollama', 'ollama_chat', 'oobabooga', 'openai',
    'openai_like', 'opencode_go', 'openinfer', 'openrouter', 'opensearch', 'ovhcloud', 'parallel_ai', 'parasail',
    'perplexity', 'petals', 'pg_vector', 'pinstripes', 'poe', 'predibase', 'prism', 'publicai', 'qwen_ai_platform',
    'qwencloud', 'ragflow', 'recraft', 'reducto', 'refuseless', 'reka', 'replicate', 'runwayml', 's3_vectors',
    'sagemaker', 'sagemaker_chat', 'sagemaker_nova', 'sail', 'sambanova', 'sap', 'scaledown', 'scaleway', 'scx-ai',
    'snowflake', 'soniox', 'stability', 'strands_decider', 'streamlake', 'synthetic', 'tencent', 'tensormesh',
    'text-completion-codestral', 'text-completion-inception', 'text-completion-openai', 'together_ai', 'topaz',
    'transcribe', 'triton', 'typesafe', 'v0', 'valkey', 'vercel_ai_gateway', 'vertex_ai', 'vertex_ai_beta', 'vllm',
    'volcengine', 'voyage', 'wally', 'wandb', 'watsonx', 'watsonx_text', 'xai', 'xiaomi_mimo', 'xinference', 'zai',
    'zerogpu'})
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/\S+")


def is_model_id(value: str) -> bool:
    """True for what reads as `provider/model` (a value with a `/` that is not a path such as ./x or /x)."""
    return bool(_ID.fullmatch(value))


def installed_providers() -> frozenset[str]:
    """The installed LiteLLM's provider names, for a name the list above lacks. Read from the source of its
    `LlmProviders` enum (the values of `litellm.provider_list`) without importing LiteLLM, whose import takes
    seconds and may fetch its price map: a typo is refused as fast as any other error. A LiteLLM whose
    source no longer holds that enum is imported instead."""
    import importlib.util

    found = importlib.util.find_spec("litellm")
    for root in (found.submodule_search_locations or []) if found else []:
        try:
            text = (Path(root) / "types" / "utils.py").read_text(encoding="utf-8")
        except OSError:
            continue
        body = re.search(r"^class LlmProviders\(.*?\):\n(.*?)(?=^\S)", text, re.S | re.M)
        names = re.findall(r"^\s+[A-Z0-9_]+\s*=\s*[\"']([^\"']+)[\"']", body.group(1), re.M) if body else []
        if names:
            return frozenset(names)
    from rubric_engine.models.litellm_runtime import RUNTIME

    return frozenset(str(getattr(p, "value", p)) for p in RUNTIME.module().provider_list)


def check_provider(model_id: str, where: str) -> None:
    """One line (ConfigError) when `model_id`'s provider is not one LiteLLM knows, with the closest one."""
    provider = model_id.split("/", 1)[0]
    if provider + "/" == MOCK_PREFIX or provider in KNOWN_PROVIDERS:
        return
    known = installed_providers()
    if provider in known:
        return
    close = difflib.get_close_matches(provider, sorted(known | {MOCK_PREFIX[:-1]}), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}/{model_id.split('/', 1)[1]}?)" if close else ""
    raise ConfigError(f"{where}: unknown provider {provider!r}{hint}; a LiteLLM id is provider/model, e.g. "
                      "openai/gpt-4o-mini or anthropic/claude-sonnet-4-5 (providers: docs.litellm.ai/docs/providers)")


def adhoc_entry(model_id: str, role: str) -> dict[str, Any]:
    """The model entry `role=model_id` stands for: named by its id, the key from the provider's usual variable
    (OPENAI_API_KEY for openai/...) when the provider is a hosted one that wants a key, no endpoint (an
    `api_base` given beside it gets a key only from an `api_key_env` given beside it, as for any entry)."""
    check_provider(model_id, f"{role}={model_id}")
    provider = model_id.split("/", 1)[0]
    return {"name": model_id, "model": model_id, "api_base": None,
            "api_key_env": provider_key_env(model_id) if provider in KEYED_PROVIDERS else None,
            "params": {}, "family": None, "revision": None}
