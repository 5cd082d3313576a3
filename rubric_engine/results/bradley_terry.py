"""A sweep's Bradley-Terry ranking: every pairwise run against the same baseline, fitted together.

Why apart from the leaderboard rows: the rows are each run's own numbers; this section needs all runs at
once (one fit, one bootstrap over the questions they share) and exists only for pairwise runs
(`judge.verdict.kind: pairwise`, summary.json's `pairwise` section) that name one baseline. A question
enters a run's fit as its score x weight won and (1 - score) x weight lost against the baseline, which are
exactly its games' counted outcomes (ties as half), so the fit reads the scores the rows already hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rubric_engine.scoring.aggregate import ScoredQuestion
from rubric_engine.stats.bradley_terry import ANCHOR, SCALE, Game, bootstrap_ratings, fit_ratings

__all__ = ["bradley_terry_section", "baseline_of"]

BASELINE_PLAYER = "\x00baseline"  # the baseline's player key: never a row label, even when a candidate has its name


def baseline_of(summary: Mapping[str, Any] | None) -> str | None:
    """The baseline a run's summary.json names (None: not a pairwise run)."""
    name = (((summary or {}).get("pairwise") or {}).get("baseline") or {}).get("name")
    return str(name) if name is not None else None


def bradley_terry_section(rows: Sequence[tuple[str, str | None, Sequence[ScoredQuestion]]], *, n_boot: int, seed: int,
                          alpha: float, warnings: list[str]) -> dict[str, Any] | None:
    """leaderboard.json's `bradley_terry` from (label, baseline, scored questions) per row; None unless every
    row is a pairwise run against one baseline."""
    names = [base for _, base, _ in rows]
    if not rows or None in names:
        return None
    if len(set(names)) > 1:
        warnings.append(f"pairwise runs against different baselines ({', '.join(sorted(set(map(str, names))))}): "
                        "no Bradley-Terry ranking; rank runs of one baseline together")
        return None
    per_question: dict[str, list[Game]] = {}
    for label, _, scored in rows:
        for q in scored:
            per_question.setdefault(q.id, []).append(Game(label, BASELINE_PLAYER, q.score * q.weight, (1 - q.score) * q.weight))
    games = [g for gs in per_question.values() for g in gs]
    ratings = fit_ratings(games, BASELINE_PLAYER)
    spans = bootstrap_ratings(per_question, BASELINE_PLAYER, n=n_boot, seed=seed, alpha=alpha) if games else {}
    baseline = str(names[0])
    out: list[dict[str, Any]] = [{"label": label, "rating": ratings.get(label), "lo": spans.get(label, (None, None))[0],
            "hi": spans.get(label, (None, None))[1], "baseline": False} for label, _, _ in rows]
    out.append({"label": baseline, "rating": ANCHOR, "lo": ANCHOR, "hi": ANCHOR, "baseline": True})
    out.sort(key=lambda x: (x["rating"] is None, -(x["rating"] or 0.0), x["label"]))
    for x in out:
        if x["rating"] is None:
            warnings.append(f"{x['label']}: won or lost every game against {baseline}: no finite Bradley-Terry rating")
    return {"baseline": baseline, "anchor": ANCHOR, "scale": SCALE, "ratings": out,
            "method": f"logistic regression (Bradley-Terry) on every game against {baseline}, ties as half, strong "
                      f"verdicts counted as in the win rate; {baseline} fixed at {ANCHOR:g}, {SCALE:g} points = 10:1 "
                      "odds; interval: questions resampled"}
