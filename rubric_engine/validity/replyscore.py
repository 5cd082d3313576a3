"""A stored run's spec as a function from one reply's verdicts to its question score, for people's labels too.

Why a module of its own: `agree` compares the question scores people's labels give with the judge's, and
`calibrate` corrects the benchmark score with them; both must score a reply exactly as the run did (the
spec's formula, failure rules and declared aggregation), from any list of hits. `contribution` turns
question scores into per-reply values whose plain mean is the run's overall, so a mean estimator (PPI)
estimates the overall itself even when the spec's overall is a macro mean over abilities.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from rubric_engine.datatypes import Criterion
from rubric_engine.scoring.question import (DEFAULT_FIRES_WHEN, DEFAULT_SCALE, Aggregation, QuestionScore,
                                            score_question)
from rubric_engine.spec.facts import stored_verdict_kind

__all__ = ["ReplyScorer", "overall_weights", "contribution"]

_AGGREGATION_KEYS = ("question", "overall", "clip", "no_positive_points")


@dataclass(frozen=True)
class ReplyScorer:
    formula: str
    params: Mapping[str, Any]
    rules: tuple[Any, ...]
    how: Aggregation
    scale: float
    expected_points: bool = False  # judge.verdict.use: probability on criteria: the judge's items count P(met)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> ReplyScorer:
        """The scoring a run's resolved spec declares (spec.resolved.json)."""
        sc = spec.get("scoring") or {}
        rules = tuple(SimpleNamespace(id=r["id"], effect=r.get("effect", "zero_question"),
                                      fires_when=r.get("fires_when", DEFAULT_FIRES_WHEN))
                      for r in spec.get("failure_rules") or [])
        how = Aggregation(**{k: v for k, v in (spec.get("aggregation") or {}).items() if k in _AGGREGATION_KEYS})
        use = ((spec.get("judge") or {}).get("verdict") or {}).get("use")
        return cls(sc.get("formula", "log_normalised"), sc.get("params") or {}, rules, how,
                   float(sc.get("scale", DEFAULT_SCALE)),
                   use == "probability" and stored_verdict_kind(spec) == "criteria")

    def score(self, criteria: Sequence[Criterion], hits: Sequence[bool],
              p_met: Sequence[float | None] | None = None) -> QuestionScore:
        """The question score (0-1) of one reply with these hits (and the judge's P(met), counted as the run counted
        it: `p_met` None for people's labels); ValueError when the spec cannot score them."""
        credits = list(p_met) if p_met is not None and self.expected_points else None
        return score_question(criteria, hits, self.formula, self.params, self.rules, self.how, credits)


def overall_weights(population: Sequence[QuestionScore], how: Aggregation) -> dict[str, float] | None:
    """Per-ability weights making a reply's `contribution` average to the declared overall of `population`
    (0-1 scale); None for mean_over_questions, where a reply contributes its question score.

    macro_over_groups: overall = (1/A) sum_a (1/n_a) sum_{q has a} s_qa, so reply q contributes
    sum_{a in q} w_a s_qa with w_a = Q / (A n_a): n_a the replies holding ability a, A the abilities held by
    any, Q the replies. The structure comes from the criteria, the same whoever gives the hits, so one set of
    weights serves the judge's and the people's scores. A clip of the overall itself (clip: overall / group)
    is not linear and is not applied here."""
    if how.overall == "mean_over_questions":
        return None
    counts: dict[str, int] = {}
    for s in population:
        for a in s.abilities:
            counts[a] = counts.get(a, 0) + 1
    return {a: len(population) / (len(counts) * n) for a, n in counts.items()}


def contribution(score: QuestionScore, weights: Mapping[str, float] | None) -> float:
    """One reply's value (0-1 scale) under `overall_weights`. Linear in the ability scores, so the mean of
    several people's contributions is the contribution of their mean scores."""
    if weights is None:
        return float(score.score)  # type: ignore[arg-type]
    return sum(weights[a] * v.score for a, v in score.abilities.items())
