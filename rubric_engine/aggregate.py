"""From per-question scores to the benchmark's headline numbers.

The overall score is a macro average over abilities (each ability = mean over the questions that
contain it), not a mean over questions: rare abilities weigh as much as common ones. The same
function is re-run on each subset and each scenario so that every reported number means the same
thing. An ability with no question is reported as None and left out of every mean; nothing is
filled in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["ScoredQuestion", "NO_SCENARIO", "aggregate", "ability_ids", "overall", "scored_from_samples"]

NO_SCENARIO = "(none)"  # where questions with an empty scenario label are reported


@dataclass(frozen=True)
class ScoredQuestion:
    id: str
    subset: str
    scenario: str
    abilities: Mapping[str, float]  # ability id -> score in [0, 1], after failure rules
    score: float  # question score in [0, 1]
    catastrophic: bool


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def ability_ids(dimensions: Mapping[str, Sequence[str]]) -> list[str]:
    """Every ability of the taxonomy once, in declaration order."""
    return list(dict.fromkeys(a for abilities in dimensions.values() for a in abilities))


def _ability_means(scored: Sequence[ScoredQuestion], ids: Sequence[str]) -> dict[str, float | None]:
    """Mean score per ability over the questions that contain it (0-1); None where none do."""
    known = set(ids)
    sums: dict[str, list[float]] = {a: [] for a in ids}
    for q in scored:
        for ability, value in q.abilities.items():
            if ability not in known:
                raise ValueError(
                    f"question {q.id!r} has ability {ability!r} that is not in the taxonomy; "
                    f"known: {', '.join(ids)}"
                )
            sums[ability].append(value)
    return {a: _mean(v) for a, v in sums.items()}


def _macro(means: Mapping[str, float | None]) -> float | None:
    return _mean([v for v in means.values() if v is not None])


def overall(scored: Sequence[ScoredQuestion], dimensions: Mapping[str, Sequence[str]]) -> float | None:
    """The macro-average overall score (0-1) alone; None when no ability has a question."""
    return _macro(_ability_means(scored, ability_ids(dimensions)))


def _scaled(x: float | None, scale: float) -> float | None:
    return None if x is None else x * scale


def aggregate(
    scored: Sequence[ScoredQuestion],
    dimensions: Mapping[str, Sequence[str]],
    *,
    decay: tuple[str, str, str] | None = None,
    scale: float = 100.0,
) -> dict[str, Any]:
    """Overall, per-ability, per-dimension, per-subset and per-scenario scores (all times `scale`).

    decay = (from, to, base): decay_pct = (subset[from] - subset[to]) / subset[base] * 100; the base
    is reported next to it because the two possible bases give very different percentages.
    """
    ids = ability_ids(dimensions)
    means = _ability_means(scored, ids)
    dims: dict[str, float | None] = {
        d: _scaled(_mean([means[a] for a in abilities if means[a] is not None]), scale)  # type: ignore[misc]
        for d, abilities in dimensions.items()
    }

    subset_names = list(dict.fromkeys(q.subset for q in scored if q.subset))
    subsets: dict[str, Any] = {
        name: _scaled(overall([q for q in scored if q.subset == name], dimensions), scale) for name in subset_names
    }
    if decay is not None:
        src, dst, base = decay
        a, b, c = subsets.get(src), subsets.get(dst), subsets.get(base)
        subsets["decay_pct"] = None if a is None or b is None or not c else (a - b) / c * 100.0
        subsets["decay_base"] = base

    labels = sorted(dict.fromkeys(q.scenario or NO_SCENARIO for q in scored), key=lambda s: (s == NO_SCENARIO, s))
    scenarios = {
        label: _scaled(overall([q for q in scored if (q.scenario or NO_SCENARIO) == label], dimensions), scale)
        for label in labels
    }
    return {
        "overall": _scaled(_macro(means), scale),
        "abilities": {a: _scaled(v, scale) for a, v in means.items()},
        "dimensions": dims,
        "subsets": subsets,
        "scenarios": scenarios,
    }


def _field(record: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in record:
        raise ValueError(
            f"{where}: missing key {key!r}; a samples.jsonl record needs id, subset, scenario, abilities, score, catastrophic"
        )
    return record[key]


def scored_from_samples(samples: Iterable[Mapping[str, Any]]) -> list[ScoredQuestion]:
    """ScoredQuestions from samples.jsonl records; records with score null (errors) are skipped.

    The caller counts the skipped records (candidate / judge errors) so they are never averaged in.
    """
    out: list[ScoredQuestion] = []
    for n, rec in enumerate(samples, 1):
        where = f"sample record {n}"
        score = _field(rec, "score", where)
        if score is None:
            continue
        where = f"sample record {n} (id {rec.get('id')!r})"
        abilities = _field(rec, "abilities", where)
        if not isinstance(abilities, Mapping):
            raise ValueError(f"{where}: 'abilities' must be a mapping of ability id -> {{raw, lo, hi, score}}")
        values: dict[str, float] = {}
        for ability, detail in abilities.items():
            if not isinstance(detail, Mapping) or not isinstance(detail.get("score"), (int, float)):
                raise ValueError(f"{where}: abilities.{ability}.score must be a number, got {detail!r}")
            values[ability] = float(detail["score"])
        out.append(
            ScoredQuestion(
                id=str(_field(rec, "id", where)),
                subset=_field(rec, "subset", where) or "",
                scenario=_field(rec, "scenario", where) or "",
                abilities=values,
                score=float(score),
                catastrophic=bool(_field(rec, "catastrophic", where)),
            )
        )
    return out
