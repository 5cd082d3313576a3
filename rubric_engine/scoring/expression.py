"""A formula over named numbers, evaluated without `eval`: OpenAI's multi-grader `calculate_output`.

Why a parser of our own: the formula comes from an imported file (data a stranger may hand you), so it is read
with Python's `ast` and walked node by node; only numbers, the given names, + - * / ^ (power; ** too), unary
minus, parentheses and the functions min, max, abs, floor, ceil, exp, sqrt, log are allowed. Anything else
(an attribute, a call to another name, a subscript, a string) is refused when the formula is read, and a huge
power or a division by zero is an ExpressionError at evaluation, never a hang or a crash.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Collection, Mapping

__all__ = ["ExpressionError", "check_expression", "evaluate", "FUNCTIONS"]

FUNCTIONS: dict[str, Callable[..., float]] = {
    "min": min, "max": max, "abs": abs, "floor": math.floor, "ceil": math.ceil, "exp": math.exp, "sqrt": math.sqrt,
    "log": math.log}
_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a ** b, ast.BitXor: lambda a, b: a ** b}
MAX_CHARS = 2_000
MAX_POWER = 1_000


class ExpressionError(ValueError):
    """A formula that may not be read or cannot be evaluated, in words a user can act on."""


def _parse(formula: str) -> ast.expr:
    if not isinstance(formula, str) or not formula.strip() or len(formula) > MAX_CHARS:
        raise ExpressionError(f"a formula is a non-empty text of at most {MAX_CHARS} characters")
    try:
        return ast.parse(formula.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ExpressionError(f"not a formula ({getattr(exc, 'msg', exc)})") from None


def _walk(node: ast.expr, names: Mapping[str, float] | Collection[str], values: bool) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ExpressionError(f"unknown name {node.id!r}; known: {', '.join(sorted(names)) or 'none'}")
        return float(names[node.id]) if values and isinstance(names, Mapping) else 0.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        x = _walk(node.operand, names, values)
        return -x if isinstance(node.op, ast.USub) else x
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        a, b = _walk(node.left, names, values), _walk(node.right, names, values)
        if not values:
            return 0.0
        if isinstance(node.op, (ast.Pow, ast.BitXor)) and abs(b) > MAX_POWER:
            raise ExpressionError(f"a power above {MAX_POWER}")
        result = _BINARY[type(node.op)](a, b)
        if isinstance(result, complex):
            raise ExpressionError("a negative number to a fractional power")
        return result
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
            and not node.keywords and node.args):
        args = [_walk(a, names, values) for a in node.args]
        return float(FUNCTIONS[node.func.id](*args)) if values else 0.0
    what = (node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)) if isinstance(node, ast.Call) \
        else ast.unparse(node)
    raise ExpressionError(f"{what!r} is not allowed; a formula uses numbers, names, + - * / ^ and "
                          f"{', '.join(FUNCTIONS)}")


def check_expression(formula: str, names: Collection[str]) -> None:
    """Refuse a formula that is not allowed or names something other than `names` (ExpressionError)."""
    _walk(_parse(formula), names, values=False)


def evaluate(formula: str, values: Mapping[str, float]) -> float:
    """The formula's value for these names' values; ExpressionError for an impossible operation."""
    try:
        result = _walk(_parse(formula), values, values=True)
    except (ZeroDivisionError, OverflowError, ValueError, TypeError) as exc:
        if isinstance(exc, ExpressionError):
            raise
        raise ExpressionError(f"the formula cannot be computed ({exc})") from None
    if not math.isfinite(result):
        raise ExpressionError("the formula's value is not a finite number")
    return result
