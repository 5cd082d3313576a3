"""How each server family is asked for a structured (JSON-schema constrained) reply, in its own dialect.

Why: "structured output" is one idea spelt differently by every server. OpenAI (and Anthropic, SGLang, Ollama's
`ollama/` ids, which LiteLLM translates) take `response_format: {type: json_schema}`; llama-cpp-python's server
refuses json_schema and takes `json_object` with a `schema`; vLLM >= 0.12 takes one `structured_outputs` field
(its `guided_json` was removed); Ollama's own API takes `format: <schema>`. A request plans one neutral
response_format (the json_schema form, judge/verdicts.py, part of the cache key); the client translates it here,
just before LiteLLM is called, into the kwargs the entry's server family reads. Fields LiteLLM does not know go
through its `extra_body`, which it merges into the request body as given. An entry names its family with
`server:`; without it the family is read from the LiteLLM id's provider prefix (`hosted_vllm/` is vLLM, `ollama/`
and `ollama_chat/` Ollama, `anthropic/` Anthropic, anything else OpenAI's dialect).

`REFUSAL` recognises a server's 400/422 naming any of these parameters: judge/structured.py then asks again in
plain text.
"""

from __future__ import annotations

import re
from typing import Any

from rubric_engine.models.request import VerdictJSON

__all__ = ["SERVERS", "REFUSAL", "server_of", "counted", "structured_kwargs", "ask_structured_in"]

SERVERS = ("openai", "anthropic", "vllm", "sglang", "llamacpp", "ollama")
_BY_PREFIX = {"hosted_vllm": "vllm", "vllm": "vllm", "ollama": "ollama", "ollama_chat": "ollama",
              "anthropic": "anthropic"}

# Ollama's field is a common word: only as a quoted name or named as an argument/parameter/field, so a 400 about
# the "format" of something else never switches structured output off for the rest of the run
REFUSAL = re.compile(r"response[_ ]?format|json[_ ]?schema|json[_ ]?object|structured[_ ]?outputs?|guided[_ ]?json"
                     r"|['\"]format['\"]|(?:argument|parameter|field)s?\b[^.]{0,24}\bformat\b", re.I)


def server_of(model: str, declared: str | None) -> str:
    """The entry's server family: as declared, else from the LiteLLM id's provider prefix."""
    if declared:
        return declared
    return _BY_PREFIX.get(model.split("/", 1)[0].lower() if "/" in model else "", "openai")


def _schema(response_format: dict[str, Any]) -> dict[str, Any] | None:
    inner = response_format.get("json_schema") if response_format.get("type") == "json_schema" else None
    return inner.get("schema") if isinstance(inner, dict) else None


GRAMMAR_TEXT_CHARS = 400  # a reasoning bound in a grammar: a model looping inside the string still closes its JSON


def counted(schema: dict[str, Any], answer: Any) -> dict[str, Any]:
    """The verdict schema held to the request's own count: exactly `answer.items` entries, the i-th with id i, each
    text field (the reasoning) at most GRAMMAR_TEXT_CHARS characters.

    Why only for llama.cpp: its server turns the schema into a grammar, so the count and the ids bind every token
    (a 135M model otherwise closes the list after one criterion, valid JSON and useless); OpenAI's strict mode
    takes the neutral schema as planned, and what other servers make of `prefixItems` is not known here."""
    if not isinstance(answer, VerdictJSON) or answer.list_key is None or answer.items < 1:
        return schema
    ids = [name for name, kind in answer.fields.items() if kind == "id"]
    array = schema.get("properties", {}).get(answer.list_key)
    if len(ids) != 1 or not isinstance(array, dict) or not isinstance(array.get("items"), dict):
        return schema
    entry, list_key, n = array["items"], answer.list_key, answer.items
    bounded = {name for name, kind in answer.fields.items() if kind == "text"}
    fields = {name: {**spec, "maxLength": GRAMMAR_TEXT_CHARS} if name in bounded and isinstance(spec, dict) else spec
              for name, spec in entry.get("properties", {}).items()}
    prefix = [{**entry, "properties": {**fields, ids[0]: {"const": i}}} for i in range(1, n + 1)]
    held = {**array, "prefixItems": prefix, "items": False, "minItems": n, "maxItems": n}
    return {**schema, "properties": {**schema["properties"], list_key: held}}


def structured_kwargs(server: str, model: str, response_format: dict[str, Any], answer: Any = None) -> dict[str, Any]:
    """The `acompletion` kwargs asking `server` for a reply shaped by `response_format` (a json_schema one);
    `answer`: what a valid reply looks like (models/request.py's VerdictJSON), where the dialect can hold to it."""
    schema = _schema(response_format)
    if schema is None or server in ("openai", "anthropic", "sglang"):
        return {"response_format": response_format}
    if server == "llamacpp":
        return {"response_format": {"type": "json_object", "schema": counted(schema, answer)}}
    if server == "vllm":
        return {"extra_body": {"structured_outputs": {"json": schema}}}
    if model.split("/", 1)[0] in ("ollama", "ollama_chat"):  # LiteLLM's Ollama providers write `format` themselves
        return {"response_format": response_format}
    return {"extra_body": {"format": schema}}  # Ollama behind an OpenAI-compatible id


def ask_structured_in(kwargs: dict[str, Any], server: str, response_format: dict[str, Any], answer: Any = None) -> None:
    """Add the structured request to `kwargs` (an `acompletion` call's), merged into an entry's own `extra_body`."""
    extra = structured_kwargs(server, str(kwargs.get("model", "")), response_format, answer)
    if "extra_body" in extra and isinstance(kwargs.get("extra_body"), dict):
        extra["extra_body"] = {**kwargs["extra_body"], **extra["extra_body"]}
    kwargs.update(extra)
