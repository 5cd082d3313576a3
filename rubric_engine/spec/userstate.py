"""The `user_state:` block of a spec (SAGE, "sentient agent as a judge"): the simulated user writes, after each
line, a hidden inner state as a JSON object (e.g. an emotion 0-100, its change and the reason); a declared rule
on the state ends the session, and the question's score is a field of the final state. No judge model is called.

Why a block of its own, like `rating:`: the state is decided by the simulator and read by the engine, so a spec
that declares `user_state:` and no `judge:` says exactly what runs (spec/facts.JUDGELESS_KINDS). The reading is
here as well, as plain functions of the block, so the session driver (run/dialogue.py) and the verdict
(shapes/userstate.py) read a state the same way.

How a state is written: after the user's visible line, one JSON object (optionally in a ```json fence), the last
thing in the reply (the stop signal may follow it). The candidate sees only the text before it. A stop rule is
a list of comparisons `field op number` (op one of < <= > >= ==), any of which ends the session: a small
declarative form, never evaluated as code.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["UserState", "StateField", "BadState", "read_state", "stop_rule", "stops", "answer_fields", "reasked", "written"]

_OPS: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, ">=": operator.ge, "==": operator.eq,
                                                   "<": operator.lt, ">": operator.gt}
_RULE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(<=|>=|==|<|>)\s*(-?\d+(?:\.\d+)?)\s*$")
_FENCE = re.compile(r"```(?:json)?\s*$")


class BadState(ValueError):
    """A user reply whose state is missing, not JSON, or not what the block declares (the sentence says which)."""


class StateField(BaseModel):
    """One declared field of the state: a number (within `min`..`max` when given) or a text."""
    model_config = ConfigDict(extra="forbid")

    type: Literal["number", "text"]
    min: float | None = None
    max: float | None = None


class UserState(BaseModel):
    """`fields`: name -> {type: number|text, min, max}, every one required each turn. `stop_when`: comparisons
    on number fields, any of which ends the session (`emotion <= 0`). `score_from: final_state` with `field`:
    the question's score is that number field of the last valid state."""
    model_config = ConfigDict(extra="forbid")

    fields: dict[str, StateField] = Field(min_length=1, max_length=32)
    stop_when: list[str] = Field(default=[], max_length=16)
    score_from: Literal["final_state"] = "final_state"
    field: str = Field(min_length=1)

    @field_validator("stop_when")
    @classmethod
    def _rules_parse(cls, rules: list[str]) -> list[str]:
        for rule in rules:
            if not _RULE.match(rule):
                raise ValueError(f"stop rule {rule!r} is not `field op number` (op one of <, <=, >, >=, ==)")
        return rules

    @model_validator(mode="after")
    def _numbers_named(self) -> "UserState":
        names = [self.field] + [stop_rule(r)[0] for r in self.stop_when]
        for name in names:
            if name not in self.fields or self.fields[name].type != "number":
                raise ValueError(f"{name!r} is not a number field of user_state.fields "
                                 f"({', '.join(self.fields)}); score and stop rules read number fields")
        return self


def stop_rule(rule: str) -> tuple[str, Callable[[float, float], bool], float]:
    """A stop rule as (field, comparison, number) (the block checked that it parses)."""
    m = _RULE.match(rule)
    assert m is not None, rule
    return m.group(1), _OPS[m.group(2)], float(m.group(3))


def _validated(block: UserState, obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise BadState("the state is not a JSON object")
    missing = [name for name in block.fields if name not in obj]
    if missing:
        raise BadState(f"the state lacks {', '.join(missing)}")
    for name, spec in block.fields.items():
        value = obj[name]
        if spec.type == "text":
            if not isinstance(value, str):
                raise BadState(f"the state's {name} is {value!r}, not a text")
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise BadState(f"the state's {name} is {value!r}, not a number")
        if (spec.min is not None and value < spec.min) or (spec.max is not None and value > spec.max):
            raise BadState(f"the state's {name} is {value}, outside {spec.min}..{spec.max}")
    return {name: obj[name] for name in block.fields}


def read_state(block: UserState, text: str, stop: str) -> tuple[str, dict[str, Any]]:
    """The visible line and the validated state of a user's reply (BadState: none, or not as declared). The
    state is the JSON object that ends the reply (fenced or not; the stop signal may follow it)."""
    body = text.replace(stop, " ").rstrip()
    body = _FENCE.sub("", body).rstrip() if body.endswith("```") else body
    if not body.endswith("}"):
        raise BadState("the reply does not end with a JSON state object")
    for start in [i for i, ch in enumerate(body) if ch == "{"]:
        try:
            obj = json.loads(body[start:])
        except ValueError:
            continue
        visible = _FENCE.sub("", body[:start].rstrip()).rstrip()
        return visible, _validated(block, obj)
    raise BadState("the reply's state is not valid JSON")


def stops(block: UserState, state: Mapping[str, Any]) -> str | None:
    """The first stop rule the state meets (None: the session goes on)."""
    for rule in block.stop_when:
        name, compare, number = stop_rule(rule)
        if compare(float(state[name]), number):
            return rule
    return None


def answer_fields(block: "UserState | None") -> tuple[tuple[str, str, float | None, float | None], ...]:
    """The state's fields as a request's answer description says them (models/request.UserLines.state)."""
    if block is None:
        return ()
    return tuple((name, f.type, f.min, f.max) for name, f in block.fields.items())


def reasked(messages: list[dict[str, Any]], bad: str, why: str) -> list[dict[str, Any]]:
    """The simulated user's request asked once more after a reply whose state was bad: its reply, then what was
    wrong with it (in the simulator's view the user's own lines are the assistant's)."""
    return [*messages, {"role": "assistant", "content": bad},
            {"role": "user", "content": f"Your reply's state was not valid: {why}. Write your reply again, ending "
                                        "with the JSON state object with every declared field."}]


def written(line: str, state: Mapping[str, Any]) -> str:
    """A user's line as the simulator wrote it, its state after it (what it sees of its own earlier turns)."""
    return f"{line}\n{json.dumps(dict(state), ensure_ascii=False)}"
