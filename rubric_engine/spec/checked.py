"""The spec keys of items the engine decides (scoring/checks.py): `checks:` and `multiple_choice:`.

Why apart from spec/schema.py: both validate through the check models of scoring/checks.py (a pattern RE2
cannot compile is a spec error naming the file, line and key), and both are left out of a resolved spec's dump
at their defaults, so every spec that uses neither keeps its bytes and its hash.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from rubric_engine.scoring.checks import CheckProblem, choice_pattern, parse_check

__all__ = ["MultipleChoice", "SpecCheck", "drop_checked_defaults"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class MultipleChoice(_Model):
    """How the option letter is read from a multiple-choice reply (scoring/checks.read_choice)."""
    read: Literal["first_letter", "answer_line", "pattern"] = "first_letter"
    pattern: str | None = None  # read: pattern: an RE2 regular expression whose group 1 is the letter

    @field_validator("pattern")
    @classmethod
    def _re2(cls, value: str | None) -> str | None:
        try:
            if value is not None:
                choice_pattern(value)
        except ValueError as exc:
            raise PydanticCustomError("pattern", str(exc)) from None
        return value


class SpecCheck(_Model):
    """A checked item every question gets, after the data's own items."""
    check: dict[str, Any]  # as an item's check (scoring/checks.py), validated here
    text: str | None = None  # what the record and the report show; default: the check described
    weight: float = Field(default=1.0, allow_inf_nan=False)
    label: str = ""  # with a taxonomy: the data label of the ability it is scored in
    tags: list[str] = []

    @field_validator("check")
    @classmethod
    def _valid(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            parse_check(value)
        except CheckProblem as exc:
            raise PydanticCustomError("check", str(exc)) from None  # the message as is, no "Value error, "
        return value


def drop_checked_defaults(dump: dict[str, Any]) -> None:
    """Checks and multiple choice left at their defaults stay out of the dump (and the spec hash): a spec
    that uses neither resolves to the bytes it did before they existed."""
    fields = dump["data"]["fields"]
    for key in ("item_check", "choices", "answer"):
        if fields.get(key) is None:
            fields.pop(key, None)
    if dump.get("multiple_choice") == MultipleChoice().model_dump(mode="json"):
        del dump["multiple_choice"]
    if not dump.get("checks"):
        dump.pop("checks", None)
