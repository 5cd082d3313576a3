"""Verdict shapes: the pydantic model that describes a judge's verdict JSON, and the parser built on it.

Why per spec: benchmarks name the verdict fields differently ({"criteria": [{"id", "reasoning", "met"}]}
for all criteria at once; {"explanation", "criteria_met"} for one criterion per call), but every shape is
validated the same way: the model describes it (the json_schema sent with response_format), and each item
is parsed by that model. Strict in content: "met" must be true/false, 0/1 or "0"/"1", never "yes"; a
reasoning must be a string; in the list shape, ids 1..n each exactly once.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model

from rubric_engine.models.request import VerdictJSON

__all__ = ["Verdict", "VerdictError", "VerdictShape", "extract_json", "DEFAULT_SHAPE"]


@dataclass(frozen=True)
class Verdict:
    """The judge's decision on one criterion, with its reasoning (carried to samples.jsonl and reports)."""

    index: int  # 1-based criterion number
    reasoning: str
    hit: bool
    p_met: float | None = None  # P(met) from the judge's token log-probabilities (judge/probability.py), if any
    probability: float | None = None  # how sure the judge says it is, 0-1, when the spec declares the field


class VerdictError(ValueError):
    """A judge reply that cannot be used; the message says what was wrong (it is sent back to the judge)."""


MAX_REPLY_CHARS = 200_000  # a verdict for ~40 items is a few KB; anything far longer is not a verdict
MAX_NESTING = 32  # a verdict nests 3 deep; 5,000 `[` would make json.loads raise RecursionError


def _nesting(text: str) -> int:
    """Deepest bracket nesting outside JSON strings (a cheap scan, so no parser ever recurses deeply)."""
    depth = deepest = 0
    in_str = escaped = False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_NESTING:
                    return deepest
        elif ch in "]}":
            depth = max(0, depth - 1)
    return deepest


def _objects(text: str) -> list[Any]:
    """Every top-level JSON object in the text, in order (objects inside a decoded one are not listed)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    pos = text.find("{")
    while pos >= 0:
        try:
            obj, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            pos = text.find("{", pos + 1)
            continue
        found.append(obj)
        pos = text.find("{", end)
    return found


def extract_json(text: str, marker: str | None = None) -> Any:
    """The one JSON object in a reply: fences and surrounding prose tolerated, two verdicts refused.

    `marker` is the key that makes an object a verdict (the list key, or the verdict field of the object
    shape). Why refuse two: a judge quoting a forged verdict from the candidate's reply, or hedging with
    two answers, must be re-asked rather than have the first one taken silently. Size and nesting are
    bounded before any parser runs, so a hostile reply cannot exhaust memory or the recursion limit.
    """
    if len(text) > MAX_REPLY_CHARS:
        raise VerdictError(f"the reply is {len(text)} characters long; a verdict is one short JSON object")
    if _nesting(text) > MAX_NESTING:
        raise VerdictError(f"the reply nests brackets more than {MAX_NESTING} deep; a verdict nests 3 deep")
    objects = _objects(text)
    if marker is not None:
        verdicts = [o for o in objects if isinstance(o, dict) and marker in o]
        if len(verdicts) > 1:
            raise VerdictError(f"the reply holds {len(verdicts)} verdict objects; give exactly one")
        if verdicts:
            return verdicts[0]
    if objects:
        return objects[0]
    start, end = text.find("{"), text.rfind("}")
    if start < 0:
        raise VerdictError("the reply contains no JSON object")
    try:
        return json.loads(text[start:end + 1] if end > start else text[start:])
    except json.JSONDecodeError as exc:
        raise VerdictError(f"the reply is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") \
            from None
    except RecursionError:  # belt and braces: _nesting already bounds this
        raise VerdictError("the reply nests brackets too deeply") from None


def _as_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise ValueError("not an integer")


def _as_bool(value: Any) -> bool:
    """true/false, 0/1 or "0"/"1"; anything else (e.g. "yes", 0.5) is not a decision."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return value.strip() == "1"
    raise ValueError("not a boolean")


def _as_probability(value: Any) -> float:
    """A number from 0 to 1 (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ValueError("not a probability")
    return float(value)


def _as_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value


Id = Annotated[int, BeforeValidator(_as_int)]
Met = Annotated[bool, BeforeValidator(_as_bool)]
Text = Annotated[str, BeforeValidator(_as_str)]
Probability = Annotated[float, BeforeValidator(_as_probability)]


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """Replace $ref with the definition: some OpenAI-compatible servers' grammar engines lack $ref."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline_refs(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


# The typed attributes of a parsed verdict item. Each shape subclasses one with its own field names as
# aliases. No docstrings: pydantic would send them to the judge as schema descriptions.
class _Judgement(BaseModel):
    model_config = ConfigDict(extra="forbid", title="verdict")
    reasoning: str
    met: bool


class _NumberedJudgement(BaseModel):  # not a subclass of _Judgement: the schema lists id first
    model_config = ConfigDict(extra="forbid", title="criterion_verdict")
    id: int
    reasoning: str
    met: bool


class VerdictShape:
    """One verdict shape: its pydantic models, its response_format, its parser and its format hint."""

    def __init__(self, shape: str = "list", list_key: str = "criteria", id: str = "id",
                 reasoning: str = "reasoning", met: str = "met", probability: str | None = None) -> None:
        self.shape, self.list_key, self.id, self.reasoning, self.met = shape, list_key, id, reasoning, met
        self.probability = probability  # a declared field: how sure the judge is (0-1), after its decision
        self._names = ({id, reasoning, met} if shape == "list" else {reasoning, met}) | ({probability} - {None})
        # the spec's field names are aliases of fixed attributes, so a parsed item is read as typed fields
        fields: dict[str, Any] = {}
        if shape == "list":
            fields["id"] = (Id, Field(alias=id, description="the criterion number, 1..n"))
        fields["reasoning"] = (Text, Field(alias=reasoning, description="short reasoning, written before deciding"))
        fields["met"] = (Met, Field(alias=met, description="true if the criterion applies to the response, else false"))
        if probability is not None:
            fields["probability"] = (Probability, Field(alias=probability, description="how sure you are of met, "
                                                        "from 0 to 1"))
        base: type[_Judgement | _NumberedJudgement] = _NumberedJudgement if shape == "list" else _Judgement
        self.item_model: type[_Judgement | _NumberedJudgement] = create_model("CriterionVerdict", __base__=base,
                                                                               **fields)
        if shape == "list":
            self.model: type[BaseModel] = create_model(
                "VerdictReply", __config__=ConfigDict(extra="forbid", title="verdict"),
                items=(list[self.item_model], Field(alias=list_key,  # type: ignore[name-defined]
                                                    description="one entry per criterion, ids 1..n in order")))
        else:
            self.model = self.item_model
        self._format = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": self.schema(), "strict": True}}

    def schema(self) -> dict[str, Any]:
        """JSON Schema for OpenAI strict mode: every object closed, every property required."""
        schema = self.model.model_json_schema()
        return _inline_refs(schema, schema.get("$defs", {}))

    def response_format(self) -> dict[str, Any]:
        """Built once per shape: generating a JSON schema costs about a millisecond, a call budget at C=64."""
        return self._format

    def answer(self, n: int) -> VerdictJSON:
        """What a valid reply for `n` criteria looks like, carried by the judge's request (models/request.py)."""
        fields = {self.id: "id"} if self.shape == "list" else {}
        fields.update({self.reasoning: "text", self.met: "bool"})
        fields.update({self.probability: "number"} if self.probability is not None else {})
        return VerdictJSON(items=n, list_key=self.list_key if self.shape == "list" else None, fields=fields)

    def example(self) -> str:
        item: dict[str, Any] = {self.reasoning: "...", self.met: True}
        item.update({self.probability: 0.9} if self.probability is not None else {})
        if self.shape == "object":
            return json.dumps(item)
        return json.dumps({self.list_key: [{self.id: 1, **item}]})[:-2] + ", ...]}"

    def _item(self, item: dict[str, Any], label: str) -> tuple[Verdict | None, list[str]]:
        """Parse one item with the item model; problems worded for the judge."""
        known = {k: v for k, v in item.items() if k in self._names}
        try:
            parsed = self.item_model.model_validate(known)
        except ValidationError as exc:
            problems = []
            for e in exc.errors():
                name = str(e["loc"][0]) if e["loc"] else "?"
                got = item.get(name)
                kind = ("true or false" if name == self.met else "a string" if name == self.reasoning
                        else "a number from 0 to 1" if name == self.probability else "an integer")
                problems.append(f'{label}"{name}" must be {kind} (got {got!r})')
            return None, problems
        index = parsed.id if isinstance(parsed, _NumberedJudgement) else 1
        return Verdict(index=index, reasoning=parsed.reasoning, hit=parsed.met,
                       probability=getattr(parsed, "probability", None)), []

    def parse(self, text: str, n: int) -> list[Verdict]:
        """Parse and validate a reply for n criteria (n == 1 for the object shape), sorted by id."""
        data = extract_json(text, self.met if self.shape == "object" else self.list_key)
        if self.shape == "object":
            if not isinstance(data, dict):
                raise VerdictError(f"the JSON must be one object like {self.example()}")
            verdict, problems = self._item(data, "")
            if problems:
                raise VerdictError("; ".join(problems).replace("\n", " "))
            assert verdict is not None
            return [verdict]
        if not isinstance(data, dict) or not isinstance(data.get(self.list_key), list):
            raise VerdictError(f'the JSON must be an object with a "{self.list_key}" list')
        items = data[self.list_key]
        problems: list[str] = []
        verdicts: list[Verdict] = []
        ids: list[int] = []
        for pos, item in enumerate(items, start=1):
            if not isinstance(item, dict):
                problems.append(f"item #{pos} is not an object")
                continue
            try:
                ident = _as_int(item.get(self.id))
            except ValueError:
                problems.append(f'item #{pos} has no integer "{self.id}" (got {item.get(self.id)!r})')
                continue
            ids.append(ident)
            verdict, bad = self._item(item, f"id {ident}: ")
            problems += bad
            if verdict is not None:
                verdicts.append(verdict)
        counts = Counter(ids)
        dupes = sorted(i for i, c in counts.items() if c > 1)
        out_of_range = sorted(i for i in counts if not 1 <= i <= n)
        missing = [i for i in range(1, n + 1) if i not in counts]
        if len(items) != n:
            problems.insert(0, f"expected exactly {n} items (one per criterion), got {len(items)}")
        if missing:
            problems.append(f"missing id(s): {', '.join(map(str, missing))}")
        if dupes:
            problems.append(f"duplicate id(s): {', '.join(map(str, dupes))}")
        if out_of_range:
            problems.append(f"id(s) out of range 1..{n}: {', '.join(map(str, out_of_range))}")
        if problems:
            shown = problems[:6] + ([f"and {len(problems) - 6} more problem(s)"] if len(problems) > 6 else [])
            raise VerdictError("; ".join(shown).replace("\n", " "))
        return sorted(verdicts, key=lambda v: v.index)

    def written_ids(self, text: str) -> list[int]:
        """The criterion ids in the order a parsed reply wrote them (the object shape: [1])."""
        if self.shape == "object":
            return [1]
        return [_as_int(item.get(self.id)) for item in extract_json(text, self.list_key)[self.list_key]]

    def reask(self, problem: str, n: int) -> str:
        """The user turn sent after an unusable reply: what was wrong, then the required format."""
        sure = f', "{self.probability}" a number from 0 to 1' if self.probability is not None else ""
        if self.shape == "object":
            return (f"Your previous reply could not be used: {problem}. Reply again with only one JSON object of "
                    f'the form {self.example()}: "{self.reasoning}" a string, "{self.met}" true or false{sure}. '
                    "No other text.")
        return (f"Your previous reply could not be used: {problem}. Reply again with only one JSON object of the "
                f"form {self.example()} containing exactly {n} items, {self.id}s 1 to {n} each exactly once (one per "
                f'criterion, in order), each with a "{self.reasoning}" string and "{self.met}" true or false{sure}. '
                "No other text.")


DEFAULT_SHAPE = VerdictShape()
