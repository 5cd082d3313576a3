"""Deterministic rubric checks: items the engine decides from the reply itself, never a judge.

Why a pure module: a check is part of the scoring formula's input, so it must give the same answer on every
machine and every re-run, with nothing to pay for. The models are typed and forbid unknown keys (a typo in a
check must not turn it into a different check); regular expressions run on RE2, which matches in time linear
in the reply, so a hostile spec's pattern (`(a+)+$`) cannot hang a run. `Choice` is the multiple-choice item:
the engine reads the option letter from the reply and compares it with the row's answer.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

import re2
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

__all__ = ["Contains", "NotContains", "Regex", "Words", "Chars", "Json", "Choice", "Check", "ItemCheck", "CheckResult",
           "CheckProblem", "parse_check", "run_check", "read_choice", "describe", "LETTERS", "READERS"]

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
READERS = ("first_letter", "answer_line", "pattern")


@functools.lru_cache(maxsize=256)
def compile_re2(pattern: str, ignore_case: bool = False) -> Any:
    """An RE2 pattern, or ValueError saying why RE2 refuses it (look-arounds and back-references, which
    need backtracking, are not RE2 syntax)."""
    options = re2.Options()
    options.log_errors = False  # the reason is in the exception; RE2 would also print it to stderr
    options.case_sensitive = not ignore_case
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"RE2 cannot compile this regular expression ({why}); RE2 has no look-arounds or "
                         "back-references") from None


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Contains(_Check):
    """Met when the reply contains `value`."""
    type: Literal["contains"]
    value: str = Field(min_length=1)
    ignore_case: bool = False


class NotContains(_Check):
    """Met when the reply does not contain `value`."""
    type: Literal["not_contains"]
    value: str = Field(min_length=1)
    ignore_case: bool = False


class Regex(_Check):
    """Met when RE2 finds `pattern` anywhere in the reply (anchor it with ^ / $ to match the whole)."""
    type: Literal["regex"]
    pattern: str = Field(min_length=1)
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        compile_re2(value)
        return value


class _Limits(_Check):
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> "_Limits":
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self


class Words(_Limits):
    """Met when the reply's whitespace-separated word count lies within [min, max]."""
    type: Literal["words"]


class Chars(_Limits):
    """Met when the reply's length in characters (trimmed) lies within [min, max]."""
    type: Literal["chars"]


class Json(_Check):
    """Met when the reply (trimmed, one surrounding ``` fence allowed) is valid JSON; with `keys`, a JSON
    object holding every one of them."""
    type: Literal["json"]
    keys: tuple[str, ...] = ()


class Choice(_Check):
    """A multiple-choice answer: met when the option letter read from the reply is `answer`."""
    type: Literal["choice"]
    answer: str = Field(pattern=r"^[A-Z]$")
    letters: str = Field(pattern=r"^[A-Z]{2,26}$")
    read: Literal["first_letter", "answer_line", "pattern"] = "first_letter"
    pattern: str | None = None

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None and compile_re2(value).groups < 1:
            raise ValueError("the pattern needs a group: group 1 is the option letter")
        return value


Check = Annotated[Union[Contains, NotContains, Regex, Words, Chars, Json, Choice], Field(discriminator="type")]
ItemCheck = Annotated[Union[Contains, NotContains, Regex, Words, Chars, Json], Field(discriminator="type")]
_ADAPTER: TypeAdapter[Any] = TypeAdapter(Check)
ITEM_TYPES = ("contains", "not_contains", "regex", "words", "chars", "json")  # what a data item may declare


class CheckProblem(ValueError):
    """A check that cannot run: `key` is the check's key at fault (e.g. "pattern"), `message` why."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key, self.message = key, message


def parse_check(value: Any, allow_choice: bool = False) -> Any:
    """A typed check from its mapping (as a data item or a record holds it), or CheckProblem naming the key."""
    if not isinstance(value, dict):
        raise CheckProblem("", f"a check is an object such as {{type: regex, pattern: ...}}, got {value!r}")
    allowed = ITEM_TYPES + (("choice",) if allow_choice else ())
    if value.get("type") not in allowed:
        raise CheckProblem("type", f"unknown check type {value.get('type')!r}; allowed: {', '.join(allowed)}")
    try:
        return _ADAPTER.validate_python(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"][1:] if not isinstance(p, int)]  # [0] is the union's tag
        what = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            what = "required key is missing"
        raise CheckProblem(".".join(loc), what) from None


@dataclass(frozen=True)
class CheckResult:
    """What a check found: `hit` (the item is met) and `found`, one sentence for the record's reasoning;
    `choice` is the letter read from a multiple-choice reply (None: none could be read)."""

    hit: bool
    found: str
    choice: str | None = None


def _fold(text: str, ignore_case: bool) -> str:
    return text.casefold() if ignore_case else text


def _limits(name: str, n: int, c: _Limits) -> CheckResult:
    ok = (c.min is None or n >= c.min) and (c.max is None or n <= c.max)
    bounds = ", ".join(f"{k} {v}" for k, v in (("min", c.min), ("max", c.max)) if v is not None)
    return CheckResult(ok, f"check {name}: {n} ({bounds})")


def _json_body(text: str) -> str:
    body = text.strip()
    if body.startswith("```") and body.endswith("```") and body.count("```") == 2:
        body = body[3:-3]
        first, _, rest = body.partition("\n")
        body = rest if first.strip().isalpha() or not first.strip() else body  # ```json
    return body.strip()


def run_check(check: Any, reply: str) -> CheckResult:
    """Decide one check on one reply (pure; RE2 keeps every pattern linear in the reply's length)."""
    if isinstance(check, (Contains, NotContains)):
        at = _fold(reply, check.ignore_case).find(_fold(check.value, check.ignore_case))
        found = f"found at {at}" if at >= 0 else "not found"
        return CheckResult((at >= 0) == isinstance(check, Contains), f"check {check.type}: {found}")
    if isinstance(check, Regex):
        m = compile_re2(check.pattern, check.ignore_case).search(reply)
        return CheckResult(m is not None, f"check regex: matched at {m.start()}" if m else "check regex: no match")
    if isinstance(check, Words):
        return _limits("words", len(reply.split()), check)
    if isinstance(check, Chars):
        return _limits("chars", len(reply.strip()), check)
    if isinstance(check, Json):
        try:
            value = json.loads(_json_body(reply))
        except (ValueError, RecursionError) as exc:
            return CheckResult(False, f"check json: not valid JSON ({str(exc)[:120]})")
        if check.keys and not isinstance(value, dict):
            return CheckResult(False, f"check json: valid JSON but a {type(value).__name__}, not an object")
        missing = [k for k in check.keys if k not in value]
        if missing:
            return CheckResult(False, f"check json: object without key(s) {', '.join(missing)}")
        return CheckResult(True, "check json: valid JSON" + (" with every key" if check.keys else ""))
    if isinstance(check, Choice):
        letter = read_choice(reply, check)
        if letter is None:
            return CheckResult(False, f"check choice: no option letter could be read ({check.read}); counted "
                               "as wrong", None)
        return CheckResult(letter == check.answer, f"check choice: read {letter}, the answer is {check.answer}",
                           letter)
    raise TypeError(f"not a check: {check!r}")


def read_choice(reply: str, check: Choice) -> str | None:
    """The option letter a reply gives (see docs/authoring.md, "Shapes: multiple choice"):
    first_letter: the first capital letter among the options standing alone (not inside a word);
    answer_line: the first `Answer: X` (any case, optional parentheses); pattern: group 1 of the spec's RE2."""
    span = f"[{check.letters[0]}-{check.letters[-1]}]"
    if check.read == "first_letter":
        pattern = rf"(?:^|[^\pL\pN_])({span})(?:$|[^\pL\pN_])"
    elif check.read == "answer_line":
        pattern = rf"(?i:answer)\s*[:：]\s*[(\[]?\s*((?i:{span}))(?:$|[^\pL\pN_])"
    else:
        pattern = str(check.pattern)
    m = compile_re2(pattern).search(reply)
    if m is None or m.group(1) is None:
        return None
    letter = m.group(1).strip(" ()[].").upper()
    return letter if len(letter) == 1 and letter in check.letters else None


def describe(check: Any) -> str:
    """A short text for an item that gives none (what the record and the review show as its criterion)."""
    if isinstance(check, (Contains, NotContains)):
        return f"{'contains' if isinstance(check, Contains) else 'does not contain'} {check.value!r}" + (
            " (any case)" if check.ignore_case else "")
    if isinstance(check, Regex):
        return f"matches /{check.pattern}/" + ("i" if check.ignore_case else "")
    if isinstance(check, (Words, Chars)):
        unit = "words" if isinstance(check, Words) else "characters"
        parts = [f"at least {check.min}" if check.min is not None else "", f"at most {check.max}" if check.max is not None else ""]
        return f"{' and '.join(p for p in parts if p)} {unit}"
    if isinstance(check, Json):
        return "valid JSON" + (f" object with keys {', '.join(check.keys)}" if check.keys else "")
    if isinstance(check, Choice):
        return f"the answer is {check.answer}"
    raise TypeError(f"not a check: {check!r}")
