"""Pairwise verdicts: reading a judge's label, and turning each game's label into the candidate's scores.

Why pure and apart from the judge: the run, `rescore`, the summary and the exactness tests must all map a
label to scores the same way. A label compares two replies, A and B (`A>>B`, `A>B`, `A=B`, `B>A`, `B>>A`, and
the mirrored spellings `A<B`, `B<<A` ...). A game is judged in one order: `baseline_first` (A = baseline,
B = candidate) or `candidate_first` (A = candidate, B = baseline). Each game gives the candidate a score of
1 (win), 0.5 (tie) or 0 (loss), counted `strong_weight` times for a strong label (`>>`, `<<`), once
otherwise; a question's score is the mean of its games' counted scores and its `weight` their count, so
the pooled mean over questions is the mean over every counted game score (the win rate, ties as half).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rubric_engine.scoring.checks import compile_re2

__all__ = ["DEFAULT_PATTERN", "ORDERS", "GameScore", "label_value", "game_scores", "question_value", "read_label",
           "label_problem", "written_form", "patterns_of"]

DEFAULT_PATTERN = r"\[\[([AB<>=]+)\]\]"
ORDERS = ("baseline_first", "candidate_first")  # game 1: A = baseline; game 2 (swap): A = candidate
_LABEL = re.compile(r"^(A|B)(>>|>|==|=|<<|<)(A|B)$")
_WRAPS = ("[[{}]]", "[{}]", "{}", "**{}**", "({})", "<{}>", "{{{}}}", "Verdict: {}")


@dataclass(frozen=True)
class GameScore:
    """One game from the candidate's side: 1 win, 0.5 tie, 0 loss, counted `weight` times."""

    score: float
    weight: float


def label_value(label: str) -> tuple[float, bool]:
    """(A's score: 1, 0.5 or 0; strong) of a label such as `A>>B`; ValueError for anything else."""
    m = _LABEL.match(label.strip())
    if m is None or m.group(1) == m.group(3):
        raise ValueError(f"{label!r} is not a verdict of the form A>>B, A>B, A=B, B>A or B>>A")
    left, op, _ = m.groups()
    if op in ("=", "=="):
        return 0.5, False
    left_wins = op.startswith(">")
    a_wins = left_wins if left == "A" else not left_wins
    return (1.0 if a_wins else 0.0), len(op) == 2


def game_scores(label: str, order: str, strong_weight: float) -> GameScore:
    """The candidate's score of one game: A's score when the candidate is A, 1 - A's score when it is B."""
    a, strong = label_value(label)
    if order not in ORDERS:
        raise ValueError(f"unknown game order {order!r}; known: {', '.join(ORDERS)}")
    return GameScore(a if order == "candidate_first" else 1.0 - a, strong_weight if strong else 1.0)


def question_value(games: Sequence[tuple[str, str]], strong_weight: float) -> tuple[float, float]:
    """(score, weight) of a question from its (order, label) games: the weighted mean of the game scores and
    the total count. With strong_weight 3 this is Arena-Hard's list of exploded scores, averaged."""
    parts = [game_scores(label, order, strong_weight) for order, label in games]
    weight = sum(p.weight for p in parts)
    return sum(p.score * p.weight for p in parts) / weight, weight


def patterns_of(pattern: str | Sequence[str] | None) -> list[str]:
    """The declared judge.verdict.pattern as a list tried in order (None: the default)."""
    if pattern is None:
        return [DEFAULT_PATTERN]
    return [pattern] if isinstance(pattern, str) else list(pattern)


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> Any:
    """A spec's label pattern under RE2 (linear time: a stranger's pattern cannot hang a run on a long reply)."""
    return compile_re2(pattern)


def _found(text: str, patterns: Sequence[str]) -> list[str]:
    """The distinct labels the first matching pattern finds in `text` ([] when none matches)."""
    for pattern in patterns:
        found = list(dict.fromkeys(m.strip() for m in _compiled(pattern).findall(text)
                                   if isinstance(m, str) and m.strip()))
        if found:
            return found
    return []


def read_label(text: str, patterns: Sequence[str], labels: Sequence[str]) -> str:
    """The label a judge's reply gives: the first pattern that matches decides; several different labels
    from it, or a label that is not declared, is a ValueError worded for the judge (it is re-asked)."""
    found = _found(text, patterns)
    if len(found) > 1:
        raise ValueError(f"the reply gives several different verdicts ({', '.join(found)}); give exactly one")
    if found and found[0] not in labels:
        raise ValueError(f"{found[0]!r} is not one of the allowed verdicts: {', '.join(labels)}")
    if found:
        return found[0]
    raise ValueError(f"no verdict found; end the reply with exactly one of: "
                     f"{', '.join(written_form(lab, patterns) or lab for lab in labels)}")


def written_form(label: str, patterns: Sequence[str]) -> str | None:
    """How a judge writes `label` so the patterns read it back (e.g. `[[A>B]]`); None: they cannot."""
    return next((w.format(label) for w in _WRAPS if _found(w.format(label), patterns) == [label]), None)


def label_problem(labels: Sequence[str], patterns: Sequence[str], strong_weight: float) -> tuple[str, str] | None:
    """(key, problem) for declared labels or patterns that cannot work; None when all can."""
    for p in patterns:
        try:
            compiled = _compiled(p)
        except ValueError as exc:
            return "pattern", f"{p!r}: {exc}"
        if compiled.groups < 1:
            return "pattern", f"{p!r} has no group: group 1 must capture the label"
    if len(set(labels)) != len(labels):
        return "labels", "a label is declared twice"
    for lab in labels:
        try:
            label_value(lab)
        except ValueError as exc:
            return "labels", str(exc)
        if written_form(lab, patterns) is None:
            return "labels", (f"{lab!r} cannot be read by judge.verdict.pattern {patterns[0]!r} (its group 1 "
                              "never captures it)")
    if strong_weight < 1:
        return "strong_weight", f"{strong_weight} is below 1 (a strong verdict counts at least as much as a plain one)"
    return None
