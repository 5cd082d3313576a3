"""A proposed hard set: the questions hardest for the strongest models that still separate models (pure).

Why: a benchmark's hard set (a declared "hard" subset) is chosen by
people; `items hard=FRACTION` proposes one from the runs by a rule anyone can re-check, and compares it with a
declared subset. The rule (docs/authoring.md):

1. the strong models are the top half by mean question score (at least one model);
2. a question discriminates when its best-minus-worst model mean score is at least MIN_SPREAD (0.05 on 0-1);
3. among discriminating questions scored by every model, take round(FRACTION x questions) with the lowest
   mean score of the strong models (ties: larger spread first, then question id).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rubric_engine.stats.rubricitems import QuestionStats

__all__ = ["HardSet", "propose_hard", "compare_sets", "decay", "MIN_SPREAD"]

MIN_SPREAD = 0.05


@dataclass
class HardSet:
    ids: list[str]
    fraction: float
    target: int  # round(fraction x eligible questions)
    eligible: int  # questions scored by every model
    discriminating: int  # of which discriminate (spread >= MIN_SPREAD)
    strong_models: list[str]
    strong_scores: dict[str, float]  # question id -> mean score of the strong models (the chosen ones)


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values))


def propose_hard(questions: Sequence[QuestionStats], fraction: float) -> HardSet:
    """The proposal by the rule above; fewer ids than the target when too few questions discriminate."""
    if not 0 < fraction <= 1:
        raise ValueError(f"hard={fraction}: a fraction of the questions, above 0 and at most 1")
    models = sorted({m for q in questions for m in q.per_model})
    overall = {m: _mean([q.per_model[m] for q in questions if m in q.per_model]) for m in models}
    ranked = sorted(models, key=lambda m: (-overall[m], m))
    strong = ranked[:max(1, (len(ranked) + 1) // 2)]
    eligible = [q for q in questions if models and all(m in q.per_model for m in models)]
    pool = [q for q in eligible if q.spread is not None and q.spread >= MIN_SPREAD]
    target = int(round(fraction * len(eligible)))
    strong_score = {q.qid: _mean([q.per_model[m] for m in strong]) for q in pool}
    pool.sort(key=lambda q: (strong_score[q.qid], -(q.spread or 0.0), q.qid))
    chosen = pool[:target]
    return HardSet(ids=[q.qid for q in chosen], fraction=fraction, target=target, eligible=len(eligible),
                   discriminating=len(pool), strong_models=strong,
                   strong_scores={q.qid: strong_score[q.qid] for q in chosen})


def compare_sets(proposed: Collection[str], published: Collection[str]) -> dict[str, float | int]:
    """Overlap and Jaccard index |A & B| / |A | B| of two id sets."""
    a, b = set(proposed), set(published)
    union = a | b
    return {"proposed": len(a), "published": len(b), "overlap": len(a & b),
            "jaccard": len(a & b) / len(union) if union else 0.0}


def decay(means: Mapping[str, Mapping[str, float]], hard: Collection[str], rest: Collection[str],
          base: str = "hard") -> dict[str, float | None]:
    """Per model: (mean score on `rest` - mean on `hard`) / mean on the base set x 100 (base "hard": the
    hard set's mean, as a spec's report.decay may declare; "rest": the other set's); None when a side is empty
    or the base mean is 0."""
    out: dict[str, float | None] = {}
    for m, qs in sorted(means.items()):
        h = [v for q, v in qs.items() if q in hard]
        r = [v for q, v in qs.items() if q in rest]
        if not h or not r:
            out[m] = None
            continue
        mh, mr = _mean(h), _mean(r)
        b = mh if base == "hard" else mr
        out[m] = None if b == 0 else (mr - mh) / b * 100
    return out
