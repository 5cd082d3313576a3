"""Deterministic rubric checks: items the engine decides from the reply itself, never a judge.

Why a pure module: a check is part of the scoring formula's input, so it must give the same answer on every
machine and every re-run, with nothing to pay for. The models are typed frozen dataclasses (no pydantic: this
layer imports no heavy library) and `parse_check` forbids unknown keys (a typo in a check must not turn it
into a different check); regular expressions run on RE2, which matches in time linear in the reply, so a
hostile spec's pattern (`(a+)+$`) cannot hang a run. `Choice` is the multiple-choice item:
the engine reads the option letter from the reply and compares it with the row's answer.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, Union

import re2

from rubric_engine.scoring.expression import ExpressionError, check_expression, evaluate
from rubric_engine.scoring.similarity import METRICS, REFUSED, similarity

__all__ = ["Contains", "NotContains", "Equals", "NotEquals", "Similarity", "Formula", "Python", "check_value", "Regex", "Words", "Chars", "Json", "Choice", "Check", "CheckResult",
           "CheckProblem", "parse_check", "check_dict", "compile_re2", "choice_pattern", "ITEM_TYPES", "run_check", "read_choice",
           "describe", "LETTERS", "READERS"]

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


@dataclass(frozen=True)
class _Text:
    value: str
    ignore_case: bool = False
    type: str = ""


@dataclass(frozen=True)
class Contains(_Text):
    """Met when the reply contains `value`."""
    type: str = "contains"


@dataclass(frozen=True)
class NotContains(_Text):
    """Met when the reply does not contain `value`."""
    type: str = "not_contains"


@dataclass(frozen=True)
class Equals(_Text):
    """Met when the reply is exactly `value` (OpenAI string_check `eq`, promptfoo `equals`)."""
    type: str = "equals"


@dataclass(frozen=True)
class NotEquals(_Text):
    """Met when the reply is not exactly `value` (OpenAI string_check `ne`)."""
    type: str = "not_equals"


@dataclass(frozen=True)
class Similarity:
    """Met when the `metric` similarity (scoring/similarity.py) of the reply to `reference` is >= `threshold`."""
    metric: str
    reference: str
    threshold: float
    type: str = "similarity"


@dataclass(frozen=True)
class Formula:
    """Met when `expression` (scoring/expression.py) over the values of its named `parts` is >= `threshold`:
    a part's value is its similarity for a similarity check, else 1 when met and 0 when not."""
    expression: str
    parts: tuple[tuple[str, Any], ...]
    threshold: float
    type: str = "formula"


@dataclass(frozen=True)
class Python:
    """An OpenAI python grader, run only in a spec the user trusts (dataset/checked.py): met when the `grade(sample,
    item)` its `source` defines returns at least `threshold` for the reply and the row's `item` (JSON text)."""
    source: str
    item: str
    threshold: float
    type: str = "python"


@dataclass(frozen=True)
class Regex:
    """Met when RE2 finds `pattern` anywhere in the reply (anchor it with ^ / $ to match the whole)."""
    pattern: str
    ignore_case: bool = False
    type: str = "regex"


@dataclass(frozen=True)
class _Limits:
    min: int | None = None
    max: int | None = None
    type: str = ""


@dataclass(frozen=True)
class Words(_Limits):
    """Met when the reply's whitespace-separated word count lies within [min, max]."""
    type: str = "words"


@dataclass(frozen=True)
class Chars(_Limits):
    """Met when the reply's length in characters (trimmed) lies within [min, max]."""
    type: str = "chars"


@dataclass(frozen=True)
class Json:
    """Met when the reply (trimmed, one surrounding ``` fence allowed) is valid JSON; with `keys`, a JSON
    object holding every one of them."""
    keys: tuple[str, ...] = ()
    type: str = "json"


@dataclass(frozen=True)
class Choice:
    """A multiple-choice answer: met when the option letter read from the reply is `answer` (built by the
    engine from a multiple-choice row, never written in a rubric item)."""
    answer: str
    letters: str
    read: str = "first_letter"
    pattern: str | None = None
    type: str = "choice"


Check = Union[Contains, NotContains, Equals, NotEquals, Regex, Words, Chars, Json, Similarity, Formula, Python, Choice]
_TYPES: dict[str, type] = {c.type: c for c in (Contains, NotContains, Equals, NotEquals, Regex, Words, Chars, Json,
                                               Similarity, Formula, Python, Choice)}
ITEM_TYPES = ("contains", "not_contains", "equals", "not_equals", "regex", "words", "chars", "json", "similarity",
              "formula")  # what a data item may declare


class CheckProblem(ValueError):
    """A check that cannot run: `key` is the check's key at fault (e.g. "pattern"; "" for the whole check)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key, self.message = key, message


def _field(key: str, value: Any, kind: str) -> Any:
    """One value of a check, strictly typed (a YAML `yes` is not a pattern, a "3" is not a limit)."""
    if kind == "text":
        if not isinstance(value, str) or not value:
            raise CheckProblem(key, f"expected a non-empty string, got {value!r}")
    elif kind == "bool":
        if not isinstance(value, bool):
            raise CheckProblem(key, f"expected true or false, got {value!r}")
    elif kind == "count":
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise CheckProblem(key, f"expected a whole number >= 0, got {value!r}")
    elif kind == "texts":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise CheckProblem(key, f"expected a list of non-empty strings, got {value!r}")
        return tuple(value)
    elif kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise CheckProblem(key, f"expected a number, got {value!r}")
        return float(value)
    elif kind == "parts":
        return _parts(key, value)
    return value


def _parts(key: str, value: Any) -> tuple[tuple[str, Any], ...]:
    """A formula's named checks (no formula inside a formula)."""
    if not isinstance(value, dict) or not value:
        raise CheckProblem(key, f"expected a mapping of names to checks, got {value!r}")
    out = []
    for name, part in value.items():
        if not (isinstance(name, str) and name.isidentifier()) or (isinstance(part, dict) and part.get("type") == "formula"):
            raise CheckProblem(f"{key}.{name}", "a part is named by an identifier and is not itself a formula")
        try:
            out.append((name, parse_check(part)))
        except CheckProblem as exc:
            raise CheckProblem(f"{key}.{name}.{exc.key}".rstrip("."), exc.message) from None
    return tuple(out)


_KINDS = {"value": "text", "pattern": "text", "ignore_case": "bool", "min": "count", "max": "count", "keys": "texts",
          "answer": "text", "letters": "text", "read": "text", "metric": "text", "reference": "text",
          "threshold": "number", "expression": "text", "parts": "parts", "source": "text", "item": "text"}


def parse_check(value: Any, allow_choice: bool = False, allow_code: bool = False) -> Any:
    """A typed check from its mapping (as a data item, a spec or a record holds it), or CheckProblem naming the
    key at fault: an unknown type or key, a missing or mistyped value, a regex RE2 cannot compile. `allow_code`:
    a `python` check may be read (a trusted spec's data, or a record, whose stored `hit` is never recomputed)."""
    if not isinstance(value, dict):
        raise CheckProblem("", f"a check is an object such as {{type: regex, pattern: ...}}, got {value!r}")
    if value.get("type") == "python" and not allow_code:
        raise CheckProblem("type", "a python check runs code: only in a spec loaded with trust_code=true, whose "
                           "scoring.formula is a module:function (as rubric-engine import writes it)")
    allowed = ITEM_TYPES + (("choice",) if allow_choice else ()) + (("python",) if allow_code else ())
    if value.get("type") not in allowed:
        raise CheckProblem("type", f"unknown check type {value.get('type')!r}; allowed: {', '.join(allowed)}")
    cls = _TYPES[value["type"]]
    names = [f.name for f in fields(cls) if f.name != "type"]
    for key in value:
        if key != "type" and key not in names:
            raise CheckProblem(str(key), f"unknown key; allowed with type {value['type']}: {', '.join(names)}")
    for f in fields(cls):
        if f.default is MISSING and f.name not in value:
            raise CheckProblem(f.name, "required key is missing")
    optional = {"pattern"} if cls is Choice else set()  # a choice's pattern may be null (records write it so)
    kw = {k: _field(k, v, _KINDS[k]) for k, v in value.items() if k != "type" and not (k in optional and v is None)}
    check = cls(**kw)
    _validate(check)
    return check


def _validate(check: Any) -> None:
    """What a value's type cannot say: the pattern compiles, the limits are in order."""
    if isinstance(check, Regex):
        try:
            compile_re2(check.pattern)
        except ValueError as exc:
            raise CheckProblem("pattern", str(exc)) from None
    if isinstance(check, _Limits):
        if check.min is None and check.max is None:
            raise CheckProblem("", "give min, max or both")
        if check.min is not None and check.max is not None and check.min > check.max:
            raise CheckProblem("min", f"min ({check.min}) is above max ({check.max})")
    if isinstance(check, Similarity) and check.metric not in METRICS:
        why = f" ({REFUSED[check.metric]})" if check.metric in REFUSED else ""
        raise CheckProblem("metric", f"unknown or unsupported metric {check.metric!r}{why}; allowed: "
                           f"{', '.join(METRICS)}")
    if isinstance(check, Formula):
        try:
            check_expression(check.expression, [n for n, _ in check.parts])
        except ExpressionError as exc:
            raise CheckProblem("expression", str(exc)) from None
    if isinstance(check, Choice):
        if check.read not in READERS:
            raise CheckProblem("read", f"unknown reader {check.read!r}; allowed: {', '.join(READERS)}")
        try:
            if check.pattern is not None:
                choice_pattern(check.pattern)
        except ValueError as exc:
            raise CheckProblem("pattern", str(exc)) from None


def choice_pattern(pattern: str) -> str:
    """A multiple-choice reading pattern, checked: RE2 compiles it and it has group 1 (the letter); ValueError."""
    if compile_re2(pattern).groups < 1:
        raise ValueError("the pattern needs a group: group 1 is the option letter")
    return pattern


def check_dict(check: Any) -> dict[str, Any]:
    """A check as records and the spec dump hold it: its type first, then every field."""
    if isinstance(check, Formula):
        return {"type": check.type, "expression": check.expression,
                "parts": {n: check_dict(p) for n, p in check.parts}, "threshold": check.threshold}
    out = {"type": check.type, **asdict(check)}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


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


def check_value(check: Any, reply: str) -> float:
    """A check's number: a similarity's value, a formula's value, else 1.0 when met and 0.0 when not."""
    if isinstance(check, Similarity):
        return similarity(check.metric, reply, check.reference)
    if isinstance(check, Formula):
        return evaluate(check.expression, {n: check_value(p, reply) for n, p in check.parts})
    return 1.0 if run_check(check, reply).hit else 0.0


def run_check(check: Any, reply: str) -> CheckResult:
    """Decide one check on one reply (pure; RE2 keeps every pattern linear in the reply's length)."""
    if isinstance(check, (Equals, NotEquals)):
        same = _fold(reply, check.ignore_case) == _fold(check.value, check.ignore_case)
        return CheckResult(same == isinstance(check, Equals), f"check {check.type}: {'equal' if same else 'differs'}")
    if isinstance(check, Python):
        return _run_python(check, reply)
    if isinstance(check, (Similarity, Formula)):
        try:
            value = check_value(check, reply)
        except ExpressionError as exc:
            return CheckResult(False, f"check formula: {exc}; counted as not met")
        name = check.metric if isinstance(check, Similarity) else "formula"
        return CheckResult(value >= check.threshold, f"check {name}: {value:.4f} (threshold {check.threshold:g})")
    if isinstance(check, _Text):
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


@functools.lru_cache(maxsize=64)
def _grade_function(source: str) -> Any:
    namespace: dict[str, Any] = {"__name__": "rubric_engine_python_grader"}
    exec(compile(source, "<python grader>", "exec"), namespace)  # noqa: S102 - a trusted spec's code (see Python)
    return namespace["grade"]


def _run_python(check: Python, reply: str) -> CheckResult:
    """Run a trusted python grader; a grader that fails or returns no number is not met, and says why."""
    try:
        value = float(_grade_function(check.source)({"output_text": reply}, json.loads(check.item)))
    except Exception as exc:  # the grader's own code: whatever it raises is its failure, recorded
        return CheckResult(False, f"check python: the grader failed ({type(exc).__name__}: {str(exc)[:160]}); "
                           "counted as not met")
    if not math.isfinite(value):
        return CheckResult(False, "check python: the grader returned no finite number; counted as not met")
    return CheckResult(value >= check.threshold, f"check python: {value:.4f} (threshold {check.threshold:g})")


def read_choice(reply: str, check: Choice) -> str | None:
    """The option letter a reply gives (see docs/authoring.md, "Shapes: multiple choice"):
    first_letter: the first capital letter among the options standing alone (not inside a word);
    answer_line: the first `Answer: X` (any case, optional parentheses or markdown bold); pattern: group 1 of the spec's RE2."""
    span = f"[{check.letters[0]}-{check.letters[-1]}]"
    if check.read == "first_letter":
        pattern = rf"(?:^|[^\pL\pN_])({span})(?:$|[^\pL\pN_])"
    elif check.read == "answer_line":
        pattern = rf"(?i:answer)[*\s]*[:\x{{FF1A}}][*\s]*[(\[]?\s*((?i:{span}))(?:$|[^\pL\pN_])"
    else:
        pattern = str(check.pattern)
    m = compile_re2(pattern).search(reply)
    if m is None or m.group(1) is None:
        return None
    letter = m.group(1).strip(" ()[].").upper()
    return letter if len(letter) == 1 and letter in check.letters else None


def describe(check: Any) -> str:
    """A short text for an item that gives none (what the record and the review show as its criterion)."""
    if isinstance(check, (Equals, NotEquals)):
        return f"{'is' if isinstance(check, Equals) else 'is not'} exactly {check.value!r}" + (
            " (any case)" if check.ignore_case else "")
    if isinstance(check, Similarity):
        return f"{check.metric} similarity to the reference is at least {check.threshold:g}"
    if isinstance(check, Formula):
        return f"{check.expression} over {', '.join(n for n, _ in check.parts)} is at least {check.threshold:g}"
    if isinstance(check, _Text):
        return f"{'contains' if isinstance(check, Contains) else 'does not contain'} {check.value!r}" + (
            " (any case)" if check.ignore_case else "")
    if isinstance(check, Regex):
        return f"matches /{check.pattern}/" + ("i" if check.ignore_case else "")
    if isinstance(check, _Limits):
        unit = "words" if isinstance(check, Words) else "characters"
        parts = [f"at least {check.min}" if check.min is not None else "", f"at most {check.max}" if check.max is not None else ""]
        return f"{' and '.join(p for p in parts if p)} {unit}"
    if isinstance(check, Json):
        return "valid JSON" + (f" object with keys {', '.join(check.keys)}" if check.keys else "")
    if isinstance(check, Choice):
        return f"the answer is {check.answer}"
    if isinstance(check, Python):
        return f"the python grader scores at least {check.threshold:g}"
    raise TypeError(f"not a check: {check!r}")
