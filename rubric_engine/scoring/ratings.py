"""Ratings against a reference (`rating:` specs, e.g. EQ-Bench v2): read named ratings from a reply, score each
pass against the reference values, and pick the pass a benchmark reports: pure arithmetic, no model call.

Why here, apart from the shape (shapes/rating.py): the rules are EQ-Bench's and must equal them number for
number (tests/shapes/test_rating.py restates them independently); kept pure, they are tested without a run and the
shape only wires them to the record. What the rules are:

- **Reading** (`read_passes`): a rating is a `Name: number` pair, a word, a colon, at least one blank (a line
  break counts) and an integer (`7.5` reads as `7`, as upstream reads it). Without headings the whole reply is
  one pass. With headings (EQ-Bench's `First pass scores:` and `Revised scores:`), pass k is the text after
  heading k up to heading k+1 (the last pass: to the end); a heading that is missing leaves its pass empty, and
  the first pass needs the second heading after it. A name given twice keeps its last number. `json` reads the
  reply's first JSON object as `{name: number}`, one pass.
- **Parseable**: a pass is scored only when it names exactly the question's names, each once (another name, or
  not all of them, is unparseable: a counted error, never a score). v1 also needs a positive total.
- **Distances** (`DISTANCES`): `eq_bench_v2` (fullscale): each |rating - reference| d is scaled by an S curve
  6.5 / (1 + e^(-1.2 (d - 4))) for 0 < d <= 5 (0 stays 0, above 5 d itself) and the question scores
  10 - 0.7477 x their sum; `eq_bench_v1`: the ratings are first normalised to sum to 10, then 10 - sum |d|;
  `absolute`: 10 - sum |d| on the ratings as given.
- **The benchmark number of a pass**: 100 x (mean question score over its parseable questions) / 10; 0 when none
  is parseable. **Best pass** (`choose_pass`, EQ-Bench's rule): the later pass is reported when its number is
  at least the first's and it has at least `min_share` (0.95) of the first pass's parseable questions; else
  the first pass.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["read_passes", "rated", "DISTANCES", "pass_number", "choose_pass", "PassResult", "score_passes",
           "ZERO_TOTAL"]

_PAIR = re.compile(r"(\w+):\s+(\d+)")
_TOP = 10.0  # the best question score of every distance (all ratings equal to the reference)
ZERO_TOTAL = "the ratings sum to 0: nothing to normalise"  # eq_bench_v1's one unscorable case


def _pairs(text: str) -> dict[str, str]:
    """Every `Name: number` pair of `text`, the last number of a name kept."""
    return dict(_PAIR.findall(text))


def read_passes(text: str, parse: str, headings: Sequence[str]) -> list[dict[str, str]]:
    """One dict of name -> number text per pass (len(headings) passes, or one without headings)."""
    if parse == "json":
        return [_json_pairs(text)]
    if not headings:
        return [_pairs(text)]
    out = []
    for k, head in enumerate(headings):
        nxt = headings[k + 1] if k + 1 < len(headings) else None
        pattern = re.escape(head) + ("(.*?)" + re.escape(nxt) if nxt is not None else "(.*)$")
        found = re.search(pattern, text, re.DOTALL)
        out.append(_pairs(found.group(1)) if found else {})
    return out


def _json_pairs(text: str) -> dict[str, str]:
    """The first JSON object in `text` as name -> number text ({} when there is none or it holds no numbers)."""
    start = text.find("{")
    while start != -1:
        try:
            obj, _ = json.JSONDecoder().raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict):
            return {str(k): str(v) for k, v in obj.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        start = text.find("{", start + 1)
    return {}


def rated(pairs: Mapping[str, str], names: Sequence[str]) -> tuple[dict[str, float] | None, str | None]:
    """The pass's ratings by name, or None and why it is unparseable (names missing, extra or other)."""
    if not pairs:
        return None, "no `Name: number` ratings found"
    if len(pairs) != len(names) or set(pairs) != set(names):
        other = sorted(set(pairs) - set(names))
        return None, (f"{len(pairs)} ratings where {len(names)} were asked ({', '.join(names)})"
                      + (f"; not asked: {', '.join(other)}" if other else ""))
    return {n: float(pairs[n]) for n in names}, None


def _s_curve(d: float) -> float:
    """EQ-Bench v2's scaling of one absolute difference."""
    if d == 0:
        return 0.0
    return 6.5 / (1 + math.exp(-1.2 * (d - 4))) if d <= 5 else d


def _v2(ratings: Mapping[str, float], reference: Mapping[str, float]) -> float | None:
    return _TOP - 0.7477 * sum(_s_curve(abs(ratings[n] - reference[n])) for n in reference)


def _v1(ratings: Mapping[str, float], reference: Mapping[str, float]) -> float | None:
    total = sum(ratings.values())
    if total <= 0:
        return None
    return _TOP - sum(abs(ratings[n] / total * 10 - reference[n]) for n in reference)


def _absolute(ratings: Mapping[str, float], reference: Mapping[str, float]) -> float | None:
    return _TOP - sum(abs(ratings[n] - reference[n]) for n in reference)


# distance name -> question score from (ratings, reference); None: the ratings cannot be scored (v1: total 0)
DISTANCES: dict[str, Callable[[Mapping[str, float], Mapping[str, float]], float | None]] = {
    "eq_bench_v2": _v2, "eq_bench_v1": _v1, "absolute": _absolute}


@dataclass(frozen=True)
class PassResult:
    """One pass of one reply: its ratings and score, or why it is unparseable."""
    ratings: dict[str, float] | None
    score: float | None
    error: str | None


def score_passes(text: str, parse: str, headings: Sequence[str], reference: Mapping[str, float],
                 distance: str) -> list[PassResult]:
    """Every pass of `text` read and scored against `reference` (name -> value) with `distance`."""
    out = []
    for pairs in read_passes(text, parse, headings):
        ratings, error = rated(pairs, list(reference))
        score = DISTANCES[distance](ratings, reference) if ratings is not None else None
        if ratings is not None and score is None:
            error = ZERO_TOTAL
        out.append(PassResult(ratings, score, error))
    return out


def pass_number(scores: Sequence[float | None]) -> tuple[float, int]:
    """A pass's benchmark number (100 x mean / 10 over its parseable questions; 0 with none) and how many."""
    ok = [s for s in scores if s is not None]
    return (100 * (sum(ok) / len(ok)) / _TOP if ok else 0.0), len(ok)


def choose_pass(numbers: Sequence[tuple[float, int]], rule: str, min_share: float) -> int:
    """The index of the pass reported: `first`, `last`, or `best` (EQ-Bench: the last pass unless it scores
    lower than the first or has under `min_share` of the first pass's parseable questions)."""
    if rule == "first" or len(numbers) == 1:
        return 0
    last = len(numbers) - 1
    if rule == "last":
        return last
    (first_n, first_ok), (last_n, last_ok) = numbers[0], numbers[last]
    return last if last_n >= first_n and last_ok >= min_share * first_ok else 0
