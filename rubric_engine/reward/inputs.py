"""What the frameworks hand a reward, as (question id, reply text) pairs: completions as strings or chat
messages, the question id from a dataset column, verl's ground truth, OpenRLHF's query minus its prompt.

Why apart from the scorer: each framework spells a rollout differently, and a wrong guess here (the prompt
judged as part of the reply, the id of another question) is a silent wrong reward. So every shape is read
in one place, and anything that is not a rollout we understand is a one-line error, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rubric_engine.errors import ConfigError

__all__ = ["completion_text", "column_ids", "verl_id", "openrlhf_rollouts"]


def _content_text(content: Any, where: str) -> str:
    """A message's content: a string, or OpenAI-style parts of which the text parts are kept."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (str, bytes)):
        texts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type", "text") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, str):
                texts.append(part)
        return "".join(texts)
    if content is None:
        return ""
    raise ConfigError(f"{where}: a message's content is {type(content).__name__}; give a string or a list of "
                      "text parts")


def completion_text(completion: Any, where: str = "completions") -> str:
    """The reply to judge: a string as given; chat messages (TRL's conversational completions) give the text
    of their assistant messages, joined by a blank line (a completion of several assistant turns is judged
    whole; tool and user messages inside it are not the policy's words)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    if isinstance(completion, Sequence) and not isinstance(completion, (bytes, str)):
        if not all(isinstance(m, Mapping) for m in completion):
            raise ConfigError(f"{where}: a completion is a string or a list of chat messages ({{role, content}})")
        parts = [_content_text(m.get("content"), where) for m in completion
                 if m.get("role", "assistant") == "assistant"]
        return "\n\n".join(p for p in parts if p)
    raise ConfigError(f"{where}: a completion is a string or a list of chat messages, not {type(completion).__name__}")


def _as_id(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise ConfigError(f"{where}: {value!r} is not a question id; give the benchmark's id (a string or integer)")
    return str(value)  # ids are compared as strings everywhere: 7 is question "7"


def column_ids(columns: Mapping[str, Any], id_column: str, n: int) -> list[str]:
    """The question id of each of n rollouts from the dataset column `id_column` (TRL passes every column of
    the dataset as a list, one value per completion)."""
    if id_column not in columns:
        given = ", ".join(sorted(k for k in columns if k not in ("trainer_state", "completion_ids"))) or "none"
        raise ConfigError(f"no dataset column {id_column!r} with the question ids (columns given: {given}); "
                          f"add it to the dataset or name the column with id_column=")
    values = columns[id_column]
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) != n:
        raise ConfigError(f"column {id_column!r}: expected {n} values, one per completion")
    return [_as_id(v, f"column {id_column!r}") for v in values]


def verl_id(ground_truth: Any, extra_info: Any, id_column: str) -> str:
    """verl's question id: `extra_info[id_column]` when the row carries it, else the ground truth (a rubric
    benchmark has no reference answer to put there, so the dataset's `reward_model.ground_truth` holds the id)."""
    if isinstance(extra_info, Mapping) and extra_info.get(id_column) not in (None, ""):
        return _as_id(extra_info[id_column], f"extra_info[{id_column!r}]")
    if isinstance(ground_truth, Mapping) and ground_truth.get(id_column) not in (None, ""):
        return _as_id(ground_truth[id_column], f"ground_truth[{id_column!r}]")
    return _as_id(ground_truth, "ground_truth (the question id, or put it in extra_info)")


def openrlhf_rollouts(body: Any, id_column: str) -> list[tuple[str, str]]:
    """(question id, reply) per rollout of an OpenRLHF remote-reward request `{"query": [...], "prompts": [...],
    "labels": [...]}`: `query` is prompt + response as the trainer decoded it, `prompts` the prompts (each
    query must start with its prompt, which is cut off), `labels` the values of the dataset's `--label_key`
    column: the question ids."""
    if not isinstance(body, Mapping):
        raise ConfigError("the request body is a JSON object {\"query\": [...], \"prompts\": [...], \"labels\": [...]}")
    queries, prompts, labels = body.get("query"), body.get("prompts"), body.get("labels")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ConfigError("'query' must be a list of strings (prompt + response of each rollout)")
    n = len(queries)
    if not isinstance(labels, list) or len(labels) != n:
        raise ConfigError(f"'labels' must be a list of {n} question ids (OpenRLHF's --label_key column, e.g. "
                          f"{id_column})")
    if prompts is None:
        prompts = [""] * n
    if not isinstance(prompts, list) or len(prompts) != n or not all(isinstance(p, str) for p in prompts):
        raise ConfigError(f"'prompts' must be a list of {n} strings, one per query")
    out = []
    for i, (query, prompt, label) in enumerate(zip(queries, prompts, labels)):
        if not query.startswith(prompt):
            raise ConfigError(f"rollout {i}: the query does not start with its prompt, so the reply cannot be cut "
                              "from it; send the prompt exactly as it opens the query")
        out.append((_as_id(label, f"labels[{i}]"), query[len(prompt):]))
    return out
