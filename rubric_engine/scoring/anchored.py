"""Anchored comparisons (`judge.verdict.kind: anchored`): a game's reward against one anchor after the length
rule, a question's value, and the candidate's rating on the anchor scale with the anchors' ratings held fixed.

Why pure and apart from the shape: the run, `rescore`, the summary and the exactness tests must turn stored
labels and lengths into numbers the same way. The arithmetic, stated once:
- A game's label (scoring/pairwise.label_value) from the candidate's side is a strong win, a win, a tie, a loss or
  a strong loss; its reward is +1, +0.5, 0, -0.5, -1 (WildBench's much better ... much worse).
- Length rule `margin` (K characters, WildBench): a plain win, for either side, whose winner's reply is longer
  than the loser's by more than K characters is a tie; a strong win is never discounted. Lengths are of the full
  replies. Rule `truncate` changes what the judge is shown (`shown`), not the counting.
- A question's score is the mean reward of its games and its weight their count, so the pooled mean over
  questions is the mean over all games; with every anchor met equally often it is the mean over anchors of each
  anchor's mean reward (WildBench's mixture of rewards).
- The rating: each game is a win (1), tie (0.5) or loss (0) for the candidate, counted `strong_weight` times
  when its label is strong (as the win rate counts it); the candidate's rating r maximises the likelihood with
  P(win against an anchor rated R) = 1 / (1 + base ** ((R - r) / per)), every anchor's rating fixed at its
  declared value. All wins or all losses have no finite maximum: None, never a made-up number. The interval is
  the bootstrap over questions (percentiles 2.5 and 97.5), its unbounded rounds counted.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from rubric_engine.scoring.pairwise import game_scores, label_value

__all__ = ["TRUNCATED", "Outcome", "shown", "outcome", "question_value", "fit_rating", "rating_interval"]

TRUNCATED = " [... truncated]"


@dataclass(frozen=True)
class Outcome:
    """One game counted: `reward` in {1, .5, 0, -.5, -1}; `score` 1 / .5 / 0 for the rating, counted `weight`
    times; `discounted`: a win the margin rule turned into a tie."""
    reward: float
    score: float
    weight: float
    discounted: bool


def shown(rule: str, chars: int | None, candidate: str, anchor: str) -> tuple[str, str]:
    """The two replies as the judge sees them: rule `truncate` cuts each to `chars` characters (None: the shorter
    reply's length), marking a cut; any other rule shows them whole."""
    if rule != "truncate":
        return candidate, anchor
    limit = min(len(candidate), len(anchor)) if chars is None else chars

    def cut(text: str) -> str:
        return text if len(text) <= limit else text[:limit] + TRUNCATED

    return cut(candidate), cut(anchor)


def outcome(label: str, order: str, strong_weight: float, rule: str, chars: int | None, candidate_chars: int,
            anchor_chars: int) -> Outcome:
    """A game's outcome from the candidate's side (ValueError for a label or order that is not one)."""
    g = game_scores(label, order, strong_weight)
    _, strong = label_value(label)
    reward = (g.score - 0.5) * (2.0 if strong else 1.0)  # 1 -> +0.5 / +1, 0 -> -0.5 / -1, 0.5 -> 0
    if rule == "margin" and chars is not None and not strong and g.score != 0.5:
        winner, loser = (candidate_chars, anchor_chars) if g.score == 1.0 else (anchor_chars, candidate_chars)
        if winner > loser + chars:
            return Outcome(0.0, 0.5, 1.0, True)
    return Outcome(reward, g.score, g.weight, False)


def question_value(outcomes: Sequence[Outcome]) -> tuple[float, float]:
    """(score, weight): the mean reward of the question's games, and their count."""
    return sum(o.reward for o in outcomes) / len(outcomes), float(len(outcomes))


def fit_rating(games: Sequence[tuple[float, float, float]], per: float = 400.0, base: float = 10.0) -> float | None:
    """The candidate's maximum-likelihood rating from (anchor rating, score, weight) games, the anchors fixed.
    The likelihood's slope falls as r grows, so bisection finds its zero; None when it has none (all wins or
    all losses, or no game)."""
    total = sum(w for _, _, w in games)
    won = sum(s * w for _, s, w in games)
    if not games or won <= 0 or won >= total:
        return None
    k = math.log(base) / per

    def slope(r: float) -> float:
        return won - sum(w / (1.0 + math.exp(min(700.0, k * (rating - r)))) for rating, _, w in games)

    lo, hi = min(g[0] for g in games) - per, max(g[0] for g in games) + per
    while slope(lo) < 0:
        lo -= 4 * per
    while slope(hi) > 0:
        hi += 4 * per
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if slope(mid) > 0 else (lo, mid)
        if hi - lo < 1e-10:
            break
    return (lo + hi) / 2


def rating_interval(questions: Sequence[Sequence[tuple[float, float, float]]], rounds: int, per: float = 400.0,
                    base: float = 10.0, seed: int = 0) -> tuple[float | None, float | None, int]:
    """(low, high, unbounded rounds): percentiles 2.5 and 97.5 of the rating refitted on `rounds` resamples of
    the questions (each a list of games); a resample with no finite rating is counted, not used. (None, None, n)
    when fewer than half the rounds had a finite rating."""
    rng = random.Random(seed)
    fits: list[float] = []
    unbounded = 0
    for _ in range(rounds):
        drawn = [g for _ in questions for g in questions[rng.randrange(len(questions))]]
        r = fit_rating(drawn, per, base)
        if r is None:
            unbounded += 1
        else:
            fits.append(r)
    if not fits or len(fits) * 2 < rounds:
        return None, None, unbounded
    fits.sort()
    return _percentile(fits, 2.5), _percentile(fits, 97.5), unbounded


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default percentile)."""
    pos = (len(sorted_values) - 1) * q / 100
    i = int(math.floor(pos))
    j = min(i + 1, len(sorted_values) - 1)
    return sorted_values[i] + (sorted_values[j] - sorted_values[i]) * (pos - i)
