"""`rubric-engine import openai-evals FILE data=JSONL`: an OpenAI eval (its JSON as exported) as a spec directory.

Why these mappings (docs/imports.md has the table): each testing criterion becomes one rubric item of weight 1,
met when the grader passes, so a question's score is the share of its criteria that pass, as the Evals
dashboard counts them.
- `string_check` compares its rendered `input` with its rendered `reference`: `eq` equal, `ne` not equal,
  `like` the reference is contained in the input, `ilike` the same ignoring case; it becomes an engine check
  (equals, not_equals, contains) whose value is the row's reference, rendered now.
- `text_similarity` passes when its metric's value is at least `pass_threshold` (similarity check).
- `multi` combines its graders' values (a string check is 1 or 0, a similarity its value) with
  `calculate_output`, read by scoring/expression.py (never eval), and passes at `pass_threshold` (formula check).
- `score_model` and `label_model` are judged items: the judge is shown the grader's instructions (its input
  messages, rendered with the row), its range and threshold or its labels and passing labels.
- `python` runs code: refused in one line, unless `trust_code=true`: then its source is kept in a `python` check
  and the spec's formula is met_over_positive named as a module:function, so the spec (and its python checks)
  loads only with trust_code=true, as any spec whose formula runs code.
The reply is `{{ sample.output_text }}`; a check needs it as its `input` (the other side is the row's text).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rubric_engine.authoring.imported import REPLY, Imported, Item, Row, known_keys, read_json, read_jsonl, refuse, render
from rubric_engine.scoring.expression import ExpressionError, check_expression
from rubric_engine.scoring.similarity import METRICS, REFUSED

__all__ = ["import_openai_eval", "GRADER_TYPES"]

SOURCE = "openai-evals"
_TOP = ("object", "id", "name", "data_source_config", "testing_criteria", "created_at", "metadata", "share_with_openai")
_DATA_SOURCE = ("type", "item_schema", "include_sample_schema", "schema", "metadata")
_COMMON = ("type", "name", "id")
_FIELDS = {
    "string_check": ("input", "reference", "operation"),
    "text_similarity": ("input", "reference", "evaluation_metric", "pass_threshold"),
    "score_model": ("input", "model", "range", "pass_threshold", "sampling_params"),
    "label_model": ("input", "model", "labels", "passing_labels"),
    "multi": ("graders", "calculate_output", "pass_threshold"),
    "python": ("source", "image_tag", "pass_threshold"),
}
_REQUIRED = {"string_check": ("input", "reference", "operation"),
             "text_similarity": ("input", "reference", "evaluation_metric", "pass_threshold"),
             "score_model": ("input", "model", "pass_threshold"), "label_model": ("input", "model", "labels",
                                                                                 "passing_labels"),
             "multi": ("graders", "calculate_output", "pass_threshold"), "python": ("source",)}
GRADER_TYPES = tuple(_FIELDS)
_OPS = {"eq": ("equals", False), "ne": ("not_equals", False), "like": ("contains", False), "ilike": ("contains", True)}


TRUSTED_FORMULA = "rubric_engine.scoring.question:met_over_positive"  # met_over_positive, named so it needs trust


def _grader(where: str, g: Any, inside_multi: bool = False, trust_code: bool = False) -> dict[str, Any]:
    kind = g.get("type") if isinstance(g, Mapping) else None
    if kind not in _FIELDS:
        raise refuse(SOURCE, f"{where}: unknown grader type {kind!r}", f"known types: {', '.join(GRADER_TYPES)}")
    required = tuple(k for k in _REQUIRED[kind] if not (inside_multi and k == "pass_threshold"))
    g = known_keys(SOURCE, f"{where} ({kind})", g, _COMMON + _FIELDS[kind], required)
    _values(where, g)
    if kind == "python" and not trust_code:
        raise refuse(SOURCE, f"{where}: a python grader runs code", "pass trust_code=true if you trust this eval "
                     "(its runs then need trust_code=true too), or rewrite it as another grader")
    if kind == "python":
        if "pass_threshold" not in g or not isinstance(g["source"], str):
            raise refuse(SOURCE, f"{where} (python): needs its source text and a pass_threshold", "add them")
        try:
            compile(g["source"], f"{where}.source", "exec")
        except (SyntaxError, ValueError) as exc:
            raise refuse(SOURCE, f"{where}.source: not Python ({exc})", "fix the grader's source") from None
    if kind == "text_similarity" and g["evaluation_metric"] not in METRICS:
        metric = g["evaluation_metric"]
        why = REFUSED.get(metric, f"unknown metric; known: {', '.join(METRICS)}")
        raise refuse(SOURCE, f"{where}: evaluation_metric {metric!r} is not supported ({why})",
                     f"use one of {', '.join(METRICS)}")
    if kind == "string_check" and g["operation"] not in _OPS:
        raise refuse(SOURCE, f"{where}: unknown operation {g['operation']!r}", "use eq, ne, like or ilike")
    if inside_multi and kind not in ("string_check", "text_similarity"):
        raise refuse(SOURCE, f"{where}: a multi grader's part of type {kind} cannot be combined by the engine",
                     "only string_check and text_similarity parts are combined here")
    if kind == "multi":
        if not isinstance(g["graders"], Mapping) or not g["graders"]:
            raise refuse(SOURCE, f"{where}.graders: expected a mapping of names to graders", "see docs/imports.md")
        for name, part in g["graders"].items():
            _grader(f"{where}.graders.{name}", part, inside_multi=True)
        try:
            check_expression(g["calculate_output"], [str(n) for n in g["graders"]])
        except ExpressionError as exc:
            raise refuse(SOURCE, f"{where}.calculate_output: {exc}", "see docs/imports.md") from None
    return g


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf")


def _values(where: str, g: Mapping[str, Any]) -> None:
    """The grader's numbers and lists are what OpenAI documents, else one line naming the field."""
    bad = ""
    if "pass_threshold" in g and not _number(g["pass_threshold"]):
        bad = "pass_threshold: expected a number"
    elif "range" in g and not (isinstance(g["range"], list) and len(g["range"]) == 2 and all(map(_number, g["range"]))
                               and g["range"][0] < g["range"][1]):
        bad = "range: expected [min, max], two numbers with min < max"
    elif g["type"] == "label_model" and not (
            isinstance(g["labels"], list) and g["labels"] and all(isinstance(x, str) and x for x in g["labels"])
            and isinstance(g["passing_labels"], list) and g["passing_labels"]
            and set(g["passing_labels"]) <= set(g["labels"])):
        bad = "labels / passing_labels: expected non-empty lists of texts, the passing labels among the labels"
    elif any(k in g and not isinstance(g[k], str) for k in ("name", "model", "reference", "calculate_output")):
        bad = "name, model, reference and calculate_output are texts"
    if bad:
        raise refuse(SOURCE, f"{where} ({g['type']}): {bad}", "see docs/imports.md")


def _reply_side(where: str, g: Mapping[str, Any], variables: Mapping[str, Any]) -> str:
    """The grader's rendered reference, once its input is checked to be the reply itself."""
    given = render(SOURCE, f"{where}.input", g["input"], variables)
    reference = render(SOURCE, f"{where}.reference", g["reference"], variables)
    if given != REPLY or REPLY in reference:
        raise refuse(SOURCE, f"{where}: input must be exactly {{{{ sample.output_text }}}} and the reference "
                     "must not use it", "the engine checks the reply against the row's text")
    return reference


def _check(where: str, g: Mapping[str, Any], variables: Mapping[str, Any]) -> dict[str, Any]:
    reference = _reply_side(where, g, variables)
    if g["type"] == "string_check":
        kind, fold = _OPS[g["operation"]]
        if not reference:
            raise refuse(SOURCE, f"{where}: the reference renders empty for this row", "give every row a reference")
        return {"type": kind, "value": reference, "ignore_case": fold}
    return {"type": "similarity", "metric": g["evaluation_metric"], "reference": reference or " ",
            "threshold": float(g.get("pass_threshold", 0.0))}


def _messages(where: str, g: Mapping[str, Any], variables: Mapping[str, Any]) -> str:
    """A model grader's input messages rendered with the row; the reply stands as "[the reply]"."""
    messages = g["input"]
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, list):
        raise refuse(SOURCE, f"{where}.input: expected a list of messages", "see docs/imports.md")
    parts = []
    for i, m in enumerate(messages):
        m = known_keys(SOURCE, f"{where}.input[{i}]", m, ("role", "content", "type"), ("content",))
        content = m["content"]
        if isinstance(content, Mapping) and content.get("type") in ("input_text", "output_text"):
            content = content.get("text", "")
        text = render(SOURCE, f"{where}.input[{i}]", content, variables)
        parts.append(f"[{m.get('role', 'user')}] {text.replace(REPLY, '[the reply]')}")
    return " ".join(" ".join(parts).split())


def _judged(where: str, g: Mapping[str, Any], variables: Mapping[str, Any]) -> str:
    asked = _messages(where, g, variables)
    if g["type"] == "score_model":
        lo, hi = g.get("range") or (0, 1)
        return (f"{g['name']}: {asked} Rate the reply on a scale from {lo:g} to {hi:g}; the criterion is met when "
                f"that score is at least {float(g['pass_threshold']):g}.")
    return (f"{g['name']}: {asked} Choose one label of {', '.join(map(str, g['labels']))}; the criterion is met "
            f"when the label is one of {', '.join(map(str, g['passing_labels']))}.")


def _item(where: str, g: Mapping[str, Any], variables: Mapping[str, Any]) -> Item:
    kind, name = g["type"], str(g.get("name", where))
    if kind in ("score_model", "label_model"):
        return Item(text=_judged(where, g, variables))
    if kind == "python":
        check = {"type": "python", "source": g["source"], "item": json.dumps(variables["item"], ensure_ascii=False),
                 "threshold": float(g["pass_threshold"])}
        return Item(text=f"{name} (python, at least {float(g['pass_threshold']):g})", check=check)
    if kind == "multi":
        parts = {str(n): _check(f"{where}.graders.{n}", p, variables) for n, p in g["graders"].items()}
        check = {"type": "formula", "expression": g["calculate_output"], "parts": parts,
                 "threshold": float(g["pass_threshold"])}
        return Item(text=f"{name}: {g['calculate_output']} at least {float(g['pass_threshold']):g}", check=check)
    return Item(text=f"{name} ({kind})", check=_check(where, g, variables))


def _rows(raw: list[Any], data: Path) -> list[dict[str, Any]]:
    rows = []
    for n, r in enumerate(raw, 1):
        item = r.get("item") if isinstance(r, Mapping) and set(r) <= {"item", "sample"} and "item" in r else r
        if not isinstance(item, Mapping):
            raise refuse(SOURCE, f"{data}:{n}: expected an object (or {{\"item\": {{...}}}})", "one item a line")
        rows.append(dict(item))
    return rows


def import_openai_eval(file: Path, data: Path, prompt: str = "{{ item.input }}", trust_code: bool = False) -> Imported:
    """The rows and items an eval's testing criteria give on `data`'s items (refused in one line otherwise)."""
    ev = known_keys(SOURCE, str(file), read_json(SOURCE, file), _TOP, ("testing_criteria",))
    if ev.get("data_source_config") is not None:
        known_keys(SOURCE, "data_source_config", ev["data_source_config"], _DATA_SOURCE)
    criteria = ev["testing_criteria"]
    if not isinstance(criteria, list) or not criteria:
        raise refuse(SOURCE, "testing_criteria: expected a non-empty list of graders", "see docs/imports.md")
    graders = [_grader(f"testing_criteria[{i}]", g, trust_code=trust_code) for i, g in enumerate(criteria)]
    rows = []
    for n, item in enumerate(_rows(read_jsonl(SOURCE, data), data), 1):
        variables = {"item": item, "sample": {"output_text": REPLY}}
        text = render(SOURCE, f"prompt (row {n})", prompt, variables)
        items = [_item(f"testing_criteria[{i}]", g, variables) for i, g in enumerate(graders)]
        rows.append(Row(id=str(item.get("id", f"item{n}")), prompt=text, items=items))
    models = [g["model"] for g in graders if g["type"] in ("score_model", "label_model")]
    unmapped = [f"testing_criteria[{i}] ({g['type']}): sampling_params (the judge's own parameters apply)"
                for i, g in enumerate(graders) if g.get("sampling_params")]
    if len(set(models)) > 1:
        unmapped.append(f"model graders name several models ({', '.join(sorted(set(models)))}); the spec's judge is "
                        f"openai/{models[0]} for every judged item")
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(ev.get("name") or file.stem))[:60] or "imported"
    imported = Imported(name=name, source=f"OpenAI eval {file.name}", rows=rows, unmapped=unmapped)
    if models:
        imported.judge_model = f"openai/{models[0]}"
    if any(g["type"] == "python" for g in graders):
        imported.formula = TRUSTED_FORMULA
    return imported
