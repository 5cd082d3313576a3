"""Bootstrap confidence intervals for the leaderboard, resampling questions.

Questions (not rubric items or abilities) are the unit that was sampled, so they are what we
resample, with replacement. Inside each resample the overall is recomputed exactly as
`aggregate.overall` does it under the spec's declared aggregation: a macro average over abilities
present, or a mean over questions (each counted its `weight`, the judgments it pools), clipped where the spec clips the overall (so a
clipped mean over questions gets the interval and the bootstrap std of the clipped mean).
Per-question ability vectors are precomputed so 1000 resamples of ~300 questions take well under a
second, with the standard library only (random.Random(seed) makes results reproducible).
"""

from __future__ import annotations

import math
import random
from typing import Any, Iterator, Mapping, Sequence

from rubric_engine.scoring.aggregate import ScoredQuestion, ability_ids, overall
from rubric_engine.scoring.question import DEFAULT_AGGREGATION, Aggregation

__all__ = ["bootstrap_overall", "bootstrap_stats", "paired_difference", "percentile", "common_resamples"]

_Vector = tuple[tuple[int, float, float], ...]  # (ability index, score 0-1, weight) for each ability of a question


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default), so intervals match numpy-based tools."""
    if not sorted_values:
        raise ValueError("percentile of an empty sequence")
    pos = (len(sorted_values) - 1) * q
    low = math.floor(pos)
    high = min(low + 1, len(sorted_values) - 1)
    frac = pos - low
    a, b = sorted_values[low], sorted_values[high]
    return a if frac == 0 or a == b else a + (b - a) * frac


def _check(n: int, alpha: float) -> None:
    if n < 1:
        raise ValueError(f"bootstrap needs n >= 1 resamples, got {n}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (0.05 for a 95% interval), got {alpha}")


def _vectors(scored: Sequence[ScoredQuestion], dimensions: Mapping[str, Sequence[str]],
             how: Aggregation = DEFAULT_AGGREGATION) -> tuple[list[_Vector], int]:
    """Each question as (ability index, score, weight) triples over the taxonomy's ability order, weight 1;
    under a mean over questions, each question is one triple (0, question score, its weight)."""
    if how.overall == "mean_over_questions":
        return [((0, float(q.score), float(q.weight)),) for q in scored], 1
    ids = ability_ids(dimensions)
    index = {a: i for i, a in enumerate(ids)}
    out: list[_Vector] = []
    for q in scored:
        if not q.abilities:
            raise ValueError(f"question {q.id!r} has no ability scores; it cannot take part in a bootstrap")
        try:
            out.append(tuple((index[a], float(s), 1.0) for a, s in q.abilities.items()))
        except KeyError as exc:
            raise ValueError(f"question {q.id!r} has ability {exc.args[0]!r} that is not in the taxonomy") from None
    return out, len(ids)


def _macro(vectors: Sequence[_Vector], draw: Sequence[int], k: int, clip: bool = False) -> float:
    """aggregate.overall on the questions vectors[draw] (0-1), without building ScoredQuestions.

    With k == 1 and one triple per question this is the weighted mean (the mean-over-questions case)."""
    sums = [0.0] * k
    counts = [0.0] * k
    for i in draw:
        for j, s, w in vectors[i]:
            sums[j] += s * w
            counts[j] += w
    means = [sums[j] / counts[j] for j in range(k) if counts[j]]
    value = sum(means) / len(means)
    return min(1.0, max(0.0, value)) if clip else value


def _draws(m: int, n: int, seed: int) -> Iterator[list[int]]:
    """n resamples (with replacement) of the indices 0..m-1, from random.Random(seed): one stream of draws
    for every interval, so a single and a paired bootstrap with the same seed draw the same questions."""
    rng = random.Random(seed)
    population = range(m)
    for _ in range(n):
        yield rng.choices(population, k=m)


def _interval(values: list[float], alpha: float) -> tuple[float, float]:
    values.sort()
    return percentile(values, alpha / 2), percentile(values, 1 - alpha / 2)


def _by_id(scored: Sequence[ScoredQuestion], what: str) -> dict[str, ScoredQuestion]:
    """Question id -> its scores; a question twice is an error (it would be drawn twice as often)."""
    out: dict[str, ScoredQuestion] = {}
    for q in scored:
        if q.id in out:
            raise ValueError(f"question id {q.id!r} appears twice in {what}")
        out[q.id] = q
    return out


def bootstrap_stats(
    scored: Sequence[ScoredQuestion],
    dimensions: Mapping[str, Sequence[str]],
    n: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    *,
    scale: float = 100.0,
    how: Aggregation = DEFAULT_AGGREGATION,
) -> dict[str, float]:
    """{point, lo, hi, std}: the overall, its percentile interval and the (population) std of the
    resampled overalls, all times `scale`; the std is what simple-evals-style reports print."""
    _check(n, alpha)
    if not scored:
        raise ValueError("bootstrap_overall needs at least one scored question")
    vectors, k = _vectors(scored, dimensions, how)
    point = overall(scored, dimensions, how)
    assert point is not None  # every question has >= 1 ability (checked in _vectors)
    clip = how.clip in ("group", "overall")
    values = [_macro(vectors, draw, k, clip) * scale for draw in _draws(len(vectors), n, seed)]
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    lo, hi = _interval(values, alpha)
    return {"point": point * scale, "lo": lo, "hi": hi, "std": std}


def bootstrap_overall(*args: Any, **kwargs: Any) -> tuple[float, float, float]:
    """(point, lo, hi) of `bootstrap_stats` (same arguments): the overall and its percentile interval."""
    s = bootstrap_stats(*args, **kwargs)
    return s["point"], s["lo"], s["hi"]


def paired_difference(
    scored_a: Sequence[ScoredQuestion],
    scored_b: Sequence[ScoredQuestion],
    dimensions: Mapping[str, Sequence[str]],
    n: int = 1000,
    seed: int = 0,
    *,
    alpha: float = 0.05,
    scale: float = 100.0,
    how: Aggregation = DEFAULT_AGGREGATION,
) -> dict[str, Any]:
    """Overall(a) - overall(b) on the questions scored for both, with a paired bootstrap interval.

    Both models are resampled with the SAME question draws, so question difficulty cancels out
    and the interval is much tighter than two independent intervals would suggest.
    Returns {"diff", "lo", "hi", "excludes_zero", "questions"} (scores times `scale`).
    """
    _check(n, alpha)
    by_id_b = _by_id(scored_b, "the second model's scores")
    seen: set[str] = set()
    common_a: list[ScoredQuestion] = []
    common_b: list[ScoredQuestion] = []
    for q in scored_a:
        if q.id in seen:
            raise ValueError(f"question id {q.id!r} appears twice in the first model's scores")
        seen.add(q.id)
        other = by_id_b.get(q.id)
        if other is None:
            continue
        if set(q.abilities) != set(other.abilities):
            raise ValueError(
                f"question {q.id!r} has different abilities for the two models "
                f"({sorted(q.abilities)} vs {sorted(other.abilities)}); were they scored on the same benchmark version?"
            )
        common_a.append(q)
        common_b.append(other)
    if not common_a:
        raise ValueError("the two models have no scored question in common; nothing to compare")

    vec_a, k = _vectors(common_a, dimensions, how)
    vec_b, _ = _vectors(common_b, dimensions, how)
    point_a, point_b = overall(common_a, dimensions, how), overall(common_b, dimensions, how)
    clip = how.clip in ("group", "overall")
    assert point_a is not None and point_b is not None
    m = len(vec_a)
    values = [(_macro(vec_a, draw, k, clip) - _macro(vec_b, draw, k, clip)) * scale for draw in _draws(m, n, seed)]
    lo, hi = _interval(values, alpha)
    return {
        "diff": (point_a - point_b) * scale,
        "lo": lo,
        "hi": hi,
        "excludes_zero": lo > 0 or hi < 0,
        "questions": m,
    }


def common_resamples(
    groups: Sequence[Sequence[ScoredQuestion]],
    dimensions: Mapping[str, Sequence[str]],
    n: int = 1000,
    seed: int = 0,
    *,
    alpha: float = 0.05,
    scale: float = 100.0,
    how: Aggregation = DEFAULT_AGGREGATION,
) -> tuple[list[float], list[list[float]], int]:
    """(points, resamples, questions): each group's overall on the questions every group scored, and `n` resamples
    of those overalls drawn with the SAME question draws for every group (as paired_difference draws them for
    two), all times `scale`. For statistics over several runs at once (a rank correlation between judges)."""
    _check(n, alpha)
    if not groups:
        raise ValueError("common_resamples needs at least one group of scores")
    by_id = [_by_id(scored, f"group {g + 1}") for g, scored in enumerate(groups)]
    common = [qid for qid in by_id[0] if all(qid in ids for ids in by_id[1:])]
    if not common:
        raise ValueError("the runs have no scored question in common; nothing to compare")
    vectors = [_vectors([ids[qid] for qid in common], dimensions, how) for ids in by_id]
    points = []
    for ids in by_id:
        value = overall([ids[qid] for qid in common], dimensions, how)
        assert value is not None  # every question has >= 1 ability (checked in _vectors)
        points.append(value * scale)
    clip = how.clip in ("group", "overall")
    resamples = [[_macro(vec, draw, k, clip) * scale for vec, k in vectors] for draw in _draws(len(common), n, seed)]
    return points, resamples, len(common)
