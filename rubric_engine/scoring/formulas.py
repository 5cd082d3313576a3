"""Resolving `scoring.formula`: a built-in name, an installed plugin, or (only when trusted) module:function.

Why the trust rule: a benchmark directory is data a stranger may hand you. A spec that could name any
importable `module:function` would run that code on `validate`. So a spec may name:
- a built-in formula (log_normalised, linear, met_over_positive);
- an entry point of the group `rubric_engine.formulas`: installing the package that declares it is the
  user's explicit opt-in;
- `module:function`, imported only when the user passes `trust_code=true` (CLI) / `trust_code=True` (Python).
A formula is called as fn(raw, lo, hi, params) -> float with the group's summed hit weights, negative
weights and positive weights, and the spec's `scoring.params`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any, Callable, Mapping

from rubric_engine.scoring.question import RAW_FORMULAS

__all__ = ["ENTRY_POINT_GROUP", "resolve_formula", "FormulaProblem"]

ENTRY_POINT_GROUP = "rubric_engine.formulas"
Formula = Callable[[float, float, float, Mapping[str, Any]], float]


class FormulaProblem(ValueError):
    """What is wrong with a formula reference and what is allowed (the spec check turns it into a SpecError)."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def known_names() -> list[str]:
    return [*RAW_FORMULAS, *sorted(_entry_points())]


def resolve_formula(name: str, trust_code: bool = False) -> Formula:
    """The callable a formula name stands for; FormulaProblem when it cannot or may not be loaded."""
    if name in RAW_FORMULAS:
        return RAW_FORMULAS[name]
    eps = _entry_points()
    if name in eps:
        try:
            fn = eps[name].load()
        except Exception as exc:  # a broken plugin: say which, never a traceback
            raise FormulaProblem(f"entry point {name!r} ({eps[name].value}) does not load: {exc}",
                                 "reinstall the package that provides it") from None
    elif ":" in name:
        if not trust_code:
            raise FormulaProblem("a module:function formula runs Python code and is imported only when you "
                                 "trust this spec", "pass trust_code=true, or install it as an entry point of "
                                 f"the group {ENTRY_POINT_GROUP}")
        module, _, attr = name.partition(":")
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise FormulaProblem(f"cannot import {name!r}: {exc}",
                                 "check the module is importable (on PYTHONPATH) and defines that function") from None
    else:
        raise FormulaProblem("unknown formula", f"known formulas: {', '.join(known_names())}; or an entry point "
                             f"of {ENTRY_POINT_GROUP}, or module:function with trust_code=true")
    if not callable(fn):
        raise FormulaProblem(f"{name!r} is not callable", "point it at a function fn(raw, lo, hi, params) -> float")
    return fn
