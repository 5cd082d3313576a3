"""A leaderboard's style-controlled ranking (`style_control=true`) and length-adjusted scores
(`length_control=true`), each beside the raw numbers, with intervals from resampling questions.

Why apart from the rows and the raw Bradley-Terry section: both need every run's replies (the records'
`response`, and for pairwise runs the judgment's `baseline_response`), which the compact per-question scores
do not hold, so they read the runs' records again only when asked. The models are stats/style.py's; a
question whose reply is not in the record is left out of the controlled fit and counted in a warning.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rubric_engine.results.bradley_terry import BASELINE_PLAYER
from rubric_engine.scoring.aggregate import ScoredQuestion
from rubric_engine.stats.bradley_terry import (ANCHOR, SCALE, Game, covariate_design, fit_design, fit_with_covariates,
                                               to_ratings)
from rubric_engine.stats.style import STYLE_FEATURES, length_adjusted, style_counts, style_matrix
from rubric_engine.store.runs import RunRecord

__all__ = ["style_section", "length_section", "LENGTH_UNIT"]

LENGTH_UNIT = 1000  # the length slope is reported per this many characters

Entry = tuple[str, RunRecord, Sequence[ScoredQuestion]]  # (row label, its run, its scored questions)


def _replies(run: RunRecord) -> dict[str, tuple[str | None, str | None]]:
    """(candidate reply, baseline reply) per question id, read through the record codec."""
    return {str(rec.id): (rec.response, getattr(rec.judgment, "baseline_response", None))
            for rec in run.iter_records()}


def _interval(values: Sequence[float], alpha: float) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return float(np.quantile(values, alpha / 2)), float(np.quantile(values, 1 - alpha / 2))


def style_section(entries: Sequence[Entry], bradley_terry: Mapping[str, Any] | None, *, n_boot: int, seed: int,
                  alpha: float, warnings: list[str]) -> dict[str, Any] | None:
    """leaderboard.json's `style_control`: the Bradley-Terry ratings refitted with the style covariates, beside
    the raw ratings (`bradley_terry`, which must exist: pairwise runs against one baseline)."""
    if bradley_terry is None:
        warnings.append("style_control=true: no style-controlled ranking; it needs pairwise runs against one "
                        "baseline (judge.verdict.kind: pairwise)")
        return None
    per_question: dict[str, list[tuple[Game, dict[str, int], dict[str, int]]]] = {}
    left_out = 0
    for label, run, scored in entries:
        replies = _replies(run)
        for q in scored:
            reply, base = replies.get(q.id, (None, None))
            if not isinstance(reply, str) or not isinstance(base, str):
                left_out += 1
                continue
            game = Game(label, BASELINE_PLAYER, q.score * q.weight, (1 - q.score) * q.weight)
            per_question.setdefault(q.id, []).append((game, style_counts(reply), style_counts(base)))
    if left_out:
        warnings.append(f"style_control: {left_out} scored question(s) without both replies in the record are left "
                        "out of the style-controlled fit")
    ids = sorted(per_question)
    flat = [x for q in ids for x in per_question[q]]
    z, features = style_matrix([(a, b) for _, a, b in flat])
    fit = fit_with_covariates([g for g, _, _ in flat], z, BASELINE_PLAYER) if flat else None
    if fit is None:
        warnings.append("style_control: a model won or lost every game: no finite style-controlled rating")
        return None
    rows_of: dict[str, list[int]] = {qid: [] for qid in ids}  # each question's rows in `flat` / `z`
    for n, qid in enumerate(qid for qid in ids for _ in per_question[qid]):
        rows_of[qid].append(n)
    draws, coefs, failed = _bootstrap(flat, z, rows_of, n_boot, seed)
    if failed:
        warnings.append(f"style_control: {failed} of {n_boot} resamples had a model win or lose every game and are "
                        "left out of the intervals")
    raw = {x["label"]: x["rating"] for x in bradley_terry["ratings"]}
    baseline = str(bradley_terry["baseline"])
    ratings: list[dict[str, Any]] = [{"label": label, "rating": fit[0].get(label), **dict(zip(("lo", "hi"), _interval(draws.get(label, []),
               alpha))), "raw_rating": raw.get(label), "baseline": False} for label, _, _ in entries]
    ratings.append({"label": baseline, "rating": ANCHOR, "lo": ANCHOR, "hi": ANCHOR, "raw_rating": ANCHOR,
                    "baseline": True})
    ratings.sort(key=lambda x: (x["rating"] is None, -(x["rating"] or 0.0), x["label"]))
    coefficients = [{"feature": f, "coef": fit[1][i], **dict(zip(("lo", "hi"), _interval([c[i] for c in coefs],
                     alpha)))} for i, f in enumerate(features)]
    return {"baseline": baseline, "anchor": ANCHOR, "scale": SCALE, "features": features,
            "dropped_features": [f for f in STYLE_FEATURES if f not in features], "games": len(flat),
            "left_out": left_out, "ratings": ratings, "coefficients": coefficients,
            "method": "Bradley-Terry logistic regression (no intercept, no penalty) with one column per style "
                      "feature: (candidate - baseline) / (candidate + baseline + 1) of reply characters, markdown "
                      "headers, list items and bold spans (code blocks removed), standardised over the games; "
                      "ratings at the games' average style, coefficients in log-odds per standard deviation; "
                      "intervals: questions resampled"}


def _bootstrap(flat: Sequence[tuple[Game, Any, Any]], z: np.ndarray, rows_of: Mapping[str, list[int]], n: int,
               seed: int) -> tuple[dict[str, list[float]], list[list[float]], int]:
    """Refit on questions drawn with replacement (every game of a drawn question comes with it; the standardised
    features are kept as fitted, as Arena-Hard resamples its design rows). The design is built once; a player
    absent from a draw has no rating in it, a draw without a finite maximum is counted and left out."""
    free = sorted(({g.a for g, _, _ in flat} | {g.b for g, _, _ in flat}) - {BASELINE_PLAYER})
    x, wins, total = covariate_design([g for g, _, _ in flat], z, free)
    ids = sorted(rows_of)
    rng = random.Random(seed)
    draws: dict[str, list[float]] = {}
    coefs: list[list[float]] = []
    failed = 0
    for _ in range(n):
        rows = [r for q in (rng.choice(ids) for _ in ids) for r in rows_of[q]]
        xr = x[rows]
        present = [i for i in range(len(free)) if np.any(xr[:, i])]
        beta = fit_design(xr[:, present + list(range(len(free), x.shape[1]))], wins[rows], total[rows])
        if beta is None:
            failed += 1
            continue
        ratings, coef = to_ratings(beta, [free[i] for i in present], BASELINE_PLAYER)
        for p in (free[i] for i in present):
            draws.setdefault(p, []).append(float(ratings[p]))  # type: ignore[arg-type]
        coefs.append(coef)
    return draws, coefs, failed


def length_section(entries: Sequence[Entry], *, scale: float, n_boot: int, seed: int, alpha: float,
                   warnings: list[str]) -> dict[str, Any] | None:
    """leaderboard.json's `length_control`: each run's mean question score adjusted to the common mean reply
    length (one slope across the runs), beside its raw mean, with the slope per LENGTH_UNIT characters."""
    points: list[dict[str, tuple[float, float, float]]] = []
    left_out = 0
    for _, run, scored in entries:
        replies = _replies(run)
        mine: dict[str, tuple[float, float, float]] = {}
        for q in scored:
            reply = replies.get(q.id, (None, None))[0]
            if isinstance(reply, str):
                mine[q.id] = (len(reply) / LENGTH_UNIT, q.score, q.weight)
            else:
                left_out += 1
        points.append(mine)
    if left_out:
        warnings.append(f"length_control: {left_out} scored question(s) without a reply in the record are left out "
                        "of the length-adjusted scores")
    fit = length_adjusted([list(p.values()) for p in points])
    if fit is None:
        warnings.append("length_control: reply lengths do not vary within any run: no length-adjusted score")
        return None
    ids = sorted({q for p in points for q in p})
    rng = random.Random(seed)
    boot: list[tuple[list[float], float]] = []
    for _ in range(n_boot):
        drawn = [rng.choice(ids) for _ in ids]
        again = length_adjusted([[p[q] for q in drawn if q in p] for p in points])
        if again is not None:
            boot.append(again[:2])
    adjusted, slope, mean_len = fit
    rows: list[dict[str, Any]] = []
    for i, ((label, _, _), p) in enumerate(zip(entries, points)):
        w = sum(v[2] for v in p.values())
        lo, hi = _interval([b[0][i] * scale for b in boot], alpha)
        rows.append({"label": label, "adjusted": adjusted[i] * scale, "lo": lo, "hi": hi,
                     "raw": sum(v[1] * v[2] for v in p.values()) / w * scale,
                     "mean_length": sum(v[0] * v[2] for v in p.values()) / w * LENGTH_UNIT, "questions": len(p)})
    rows.sort(key=lambda x: (-x["adjusted"], x["label"]))
    s_lo, s_hi = _interval([b[1] * scale for b in boot], alpha)
    if len(boot) < n_boot:
        warnings.append(f"length_control: {n_boot - len(boot)} of {n_boot} resamples had no length spread and are "
                        "left out of the intervals")
    return {"rows": rows, "slope": slope * scale, "slope_lo": s_lo, "slope_hi": s_hi, "slope_per": LENGTH_UNIT,
            "mean_length": mean_len * LENGTH_UNIT, "left_out": left_out,
            "method": "weighted least squares of question score (on the leaderboard's scale) on reply characters "
                      "across the runs: "
                      "one intercept per run, one common slope, length centred on the mean over every run's "
                      f"questions; adjusted = the run's score at that mean length; slope per {LENGTH_UNIT} "
                      "characters; intervals: questions resampled"}
