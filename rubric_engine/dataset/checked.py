"""Rubric items the engine decides, read from a row: an item's check, a multiple-choice question, the spec's checks.

Why apart from dataset/load.py: these items are validated as strictly as the rest of a row (a check that
cannot run, such as a regex RE2 cannot compile, is one line naming the file, the row, the item and the key,
before any paid call), but they follow the check models of scoring/checks.py rather than the rubric's columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from rubric_engine.datatypes import Criterion
from rubric_engine.errors import DataError
from rubric_engine.scoring.checks import LETTERS, CheckProblem, Choice, describe, parse_check

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec


class _Row(Protocol):
    """dataset/load.py's row reader: errors naming the file and the row."""

    def err(self, message: str, fix: str = "") -> DataError: ...

    def get(self, obj: dict[str, Any], name: str, spec_key: str, where: str = "") -> Any: ...

    def text(self, obj: dict[str, Any], name: str, spec_key: str, where: str = "", empty_ok: bool = True) -> str: ...

__all__ = ["item_check", "item_text", "choice_items", "spec_items", "CHECKS_FIX"]

CHECKS_FIX = "see docs/authoring.md, \"Shapes: deterministic checks\""


def item_check(spec: "BenchmarkSpec", r: _Row, item: dict[str, Any], where: str) -> Any:
    """The item's check (data.fields.item_check), None for a judged item; a judged item under a spec without
    a judge, or a check that cannot run, is a DataError naming the row, the item and the key."""
    name = spec.data.fields.item_check
    if not name or item.get(name) is None:
        if spec.judge is None:
            raise r.err(f"{where}no check ({name or 'data.fields.item_check'}) and the spec declares no judge",
                        fix="give this item a check, or add a judge: block to the spec")
        return None
    try:
        return parse_check(item[name], allow_code=":" in spec.scoring.formula)  # such a spec loads only trusted
    except CheckProblem as exc:
        key = f"{name}.{exc.key}" if exc.key else name
        raise r.err(f"{where}{key}: {exc.message}", fix=CHECKS_FIX) from None


def item_text(r: _Row, item: dict[str, Any], name: str, where: str, check: Any) -> str:
    """The item's text; a checked item may leave it out (its check, described, stands in)."""
    if check is not None and item.get(name) in (None, ""):
        return describe(check)
    return r.text(item, name, "item_text", where, False)


def choice_items(spec: "BenchmarkSpec", r: _Row, raw: dict[str, Any]) -> tuple[tuple[str, ...], list[Criterion]]:
    """A multiple-choice row: its options and its one item, the `choice` check against the row's answer."""
    f, mc = spec.data.fields, spec.multiple_choice
    assert f.choices and f.answer
    options = r.get(raw, f.choices, "choices")
    if not (isinstance(options, list) and 2 <= len(options) <= len(LETTERS)
            and all(isinstance(o, str) and o.strip() for o in options)):
        raise r.err(f"{f.choices}: expected a list of 2 to {len(LETTERS)} non-empty strings (the options)",
                    fix=f"got {str(options)[:200]}")
    letters = LETTERS[:len(options)]
    answer = r.get(raw, f.answer, "answer")
    letter = _letter(answer, letters)
    if letter is None:
        raise r.err(f"{f.answer}: {answer!r} is not one of the {len(options)} options",
                    fix=f"give a letter {letters[0]}-{letters[-1]} or a 0-based index below {len(options)}")
    check = Choice(answer=letter, letters=letters, read=mc.read, pattern=mc.pattern)
    return tuple(options), [Criterion(index=1, label="", weight=1, text=describe(check), check=check)]


def _letter(answer: Any, letters: str) -> str | None:
    """The answer as an option letter: a letter (any case) or a 0-based index (a number, or digits in a CSV cell)."""
    if isinstance(answer, str) and answer.strip().isdigit():
        answer = int(answer.strip())
    if isinstance(answer, int) and not isinstance(answer, bool):
        return letters[answer] if 0 <= answer < len(letters) else None
    if isinstance(answer, str) and len(answer.strip()) == 1 and answer.strip().upper() in letters:
        return answer.strip().upper()
    return None


def spec_items(spec: "BenchmarkSpec", start: int) -> list[Criterion]:
    """The spec's `checks:` as items numbered from `start`, after the row's own."""
    to_ability = spec.label_to_ability()
    return [Criterion(index=start + i, label=c.label, weight=int(c.weight) if c.weight.is_integer() else c.weight,
                      text=c.text or describe(check), ability=to_ability.get(c.label), tags=tuple(c.tags),
                      check=check)
            for i, (c, check) in enumerate((c, parse_check(c.check)) for c in spec.checks)]
