"""Verdict probabilities from the judge's token log-probabilities: P(met) per binary verdict, a score's expected
value over the score tokens (G-Eval style).

Why: a judge that writes `"met": true` with 51% and one that writes it with 99% give the same verdict; the
probability tells them apart (a steadier score, and a measure of how sure each verdict is). Where the server
returns `top_logprobs` (an entry's `params: {logprobs: true, top_logprobs: 5}`), the token that begins a verdict's
value is found by reading the reply token by token; the alternatives the server listed at that token give
  P(met) = sum p(true-like) / (sum p(true-like) + sum p(false-like))
  E[score] = sum v p(v) / sum p(v)   over alternatives that are numbers of the scale
Alternatives that are neither are left out (renormalised away), as G-Eval does. Nothing is computed (None) when
the reply has no log-probabilities, when a value's token has no decision among its alternatives, or when the
number of values found does not match the verdict; a verdict is never changed by it, only described.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["met_probabilities", "expected_score", "json_value", "pattern_prefix", "mean_probability"]

Tokens = Sequence[Sequence[Any]]  # per token: [token, [[alternative, logprob], ...]] (models/litellm_runtime.py)


def _word(token: str) -> str:
    return token.strip().strip('"').strip().lower()


def _is(word: str, *full: str) -> bool:
    return bool(word) and any(f.startswith(word) for f in full)


def json_value(field: str) -> str:
    """What the reply writes just before the value of JSON field `field` (a regex)."""
    return rf'"{re.escape(field)}"\s*:\s*"?'


def pattern_prefix(pattern: str | Sequence[str] | None) -> str | None:
    r"""What a free-text score pattern requires just before its number: the regex before its group (`\[\[` of
    `\[\[(\d+)\]\]`), from its first pattern; None when it has none."""
    first = pattern if isinstance(pattern, str) else (pattern or [None])[0]
    head = first.split("(", 1)[0] if first else ""
    try:
        return head if head and re.compile(head) else None
    except re.error:
        return None


def _values_at(tokens: Tokens, before: str) -> list[Sequence[Sequence[Any]]]:
    """The alternatives at each token that begins a value: the first non-blank token after text ending in `before`."""
    key = re.compile(before + r"\s*$")
    text, found = "", []
    for token, top in tokens:
        if token.strip() and key.search(text):
            found.append(top)
        text += token
    return found


def met_probabilities(tokens: Tokens, met: str) -> list[float | None]:
    """P(met) at each value of the field `met` the reply writes, in reply order (None: no decision listed there)."""
    out: list[float | None] = []
    for top in _values_at(tokens, json_value(met)):
        yes = sum(math.exp(lp) for alt, lp in top if _is(_word(alt), "true", "yes"))
        no = sum(math.exp(lp) for alt, lp in top if _is(_word(alt), "false", "no"))
        out.append(yes / (yes + no) if yes + no > 0 else None)
    return out


def expected_score(tokens: Tokens, before: str, values: Sequence[float]) -> float | None:
    """The expected score over the scale's numbers listed at the one value written after `before` (json_value,
    pattern_prefix), or None."""
    found = _values_at(tokens, before)
    if len(found) != 1:
        return None
    allowed = {float(v) for v in values}
    weights: dict[float, float] = {}
    for alt, lp in found[0]:
        try:
            number = float(_word(alt))
        except ValueError:
            continue
        if number in allowed:
            weights[number] = weights.get(number, 0.0) + math.exp(lp)
    total = sum(weights.values())
    return sum(v * p for v, p in weights.items()) / total if total > 0 else None


def mean_probability(values: Sequence[float | None]) -> float | None:
    """P(met) of a verdict combined from several gradings (repeats, jurors): the mean of theirs, the expected credit
    of one grading; None when any grading has none (never a mean over the few that have one)."""
    if not values or any(v is None for v in values):
        return None
    return math.fsum(v for v in values if v is not None) / len(values)
