"""How each server family's OpenAI-compatible endpoint takes, and refuses, a structured-output request.

Why: `FakeServer(dialect=...)` plays one family. It accepts its own structured field and refuses every other
family's with that server's own error shape (the status and body a real server of that family answers with),
so a test sees both that the engine asks in the right dialect and that it recognises each refusal.
  openai, sglang  response_format {type: json_schema}
  llamacpp        response_format {type: json_object, schema}   (llama-cpp-python: FastAPI's 422 `detail` list)
  vllm            structured_outputs {json: schema}              (vLLM >= 0.12: `{"object": "error", ...}`)
  ollama          format: schema
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DIALECTS", "structured_field", "refusal"]

DIALECTS = ("openai", "sglang", "llamacpp", "vllm", "ollama")


def structured_field(body: dict[str, Any]) -> str | None:
    """Which family's structured field the request carries (None: a plain request)."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return "json_schema"
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        return "json_object"
    for name in ("structured_outputs", "guided_json", "format"):
        if name in body:
            return name
    return None


_OWN = {"openai": {"json_schema"}, "sglang": {"json_schema"}, "llamacpp": {"json_object"},
        "vllm": {"structured_outputs"}, "ollama": {"format"}}


def refusal(dialect: str, body: dict[str, Any]) -> tuple[int, str] | None:
    """(status, body) of this family's refusal of the request's structured field, or None when it takes it."""
    got = structured_field(body)
    if got is None or got in _OWN[dialect]:
        return None
    param = "response_format" if got in ("json_schema", "json_object") else got
    if dialect == "llamacpp":
        detail = ({"type": "literal_error", "loc": ["body", "response_format", "type"],
                   "msg": "Input should be 'text' or 'json_object'", "input": "json_schema"} if got == "json_schema"
                  else {"type": "extra_forbidden", "loc": ["body", param], "msg": "Extra inputs are not permitted"})
        return 422, json.dumps({"detail": [detail]})
    if dialect in ("vllm", "sglang"):
        return 400, json.dumps({"object": "error", "message": f"{param}: this server does not support {got}",
                                "type": "BadRequestError", "param": None, "code": 400})
    return 400, json.dumps({"error": {"message": f"Unrecognized request argument supplied: {param}",
                                      "type": "invalid_request_error", "param": param, "code": None}})
