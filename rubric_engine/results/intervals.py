"""The leaderboard's intervals for runs with candidate samples or repeated gradings (hierarchical bootstrap).

Why apart from results/leaderboard.py: the values a hierarchical bootstrap needs (each sample scored under every
multiset of its gradings) are rebuilt from the stored records with the run's own spec (`sampling.nested_of`,
the function the run itself used), which needs the spec as a BenchmarkSpec; results/leaderboard.py stays a reader of
summaries. A run made with one reply graded once keeps the plain question bootstrap (stats/bootstrap.py).

Judge-noise-only component of a paired difference: the same paired bootstrap with questions and samples held
at the observed ones and only the gradings resampled; a gap is "within judge noise" when that interval
includes 0 and has some width (docs/judge-noise.md).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

from rubric_engine.errors import DataError
from rubric_engine.stats.nested import LEVELS, Nested, nested_stats, paired_nested
from rubric_engine.stats.sampling import compact, nested_of
from rubric_engine.stats.scores import criteria_from_record
from rubric_engine.store.layout import SAMPLES_FILE, SPEC_FILE

__all__ = ["params_of", "is_nested", "row_interval", "pair_difference", "note"]

_BUILT: dict[int, Nested] = {}  # id(run) -> values: one build per loaded run, dropped with the run


def params_of(summary: Mapping[str, Any]) -> dict[str, Any]:
    """samples, repeats, rule, tie of a run: from its interval's `nested` block (runs made with this
    version), else from its noise / jury sections (repeated runs made before it), else one of each."""
    nested = (summary.get("interval") or {}).get("nested")
    if nested:
        return {"samples": int(nested["candidate_samples"]), "repeats": int(nested["repeats"]),
                "rule": nested["rule"], "tie": nested["tie"], "rules": bool(nested.get("failure_rules", True))}
    jury = summary.get("jury") or {}
    repeats = (summary.get("noise") or {}).get("repeats")  # "auto": a varying number, votes combined in `hit`
    return {"samples": 1, "repeats": repeats if isinstance(repeats, int) else 1,
            "rule": jury.get("rule", "majority"), "tie": jury.get("tie", "not_met"), "rules": True}


def is_nested(run: Any) -> bool:
    p = params_of(run.summary)
    return p["samples"] > 1 or p["repeats"] > 1


def _nested(run: Any) -> Nested:
    got = _BUILT.get(id(run))
    if got is not None:
        return got
    from rubric_engine.spec.load import load_resolved

    spec = load_resolved(run.spec, str(run.dir / SPEC_FILE), run.trust_code)  # the formula resolved as the run did
    p = params_of(run.summary)
    records: list[dict[str, Any]] = []  # streamed once; only verdicts, votes and scores are kept (no texts)
    criteria: dict[str, list[Any]] = {}
    try:
        for rec in run.iter_records():
            if rec.score is not None:
                criteria[str(rec.id)] = criteria_from_record(rec)
            records.append(compact(rec))
        values = nested_of(spec, records, lambda rec: criteria[str(rec["id"])], p["repeats"], p["rule"], p["tie"],
                           p["rules"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise DataError(str(run.dir / SAMPLES_FILE), f"cannot rebuild its samples and gradings ({exc})",
                        fix="re-score the run") from None
    _BUILT[id(run)] = values
    weakref.finalize(run, _BUILT.pop, id(run), None)  # a later object with the same id never sees these values
    return values


def note(runs: Any) -> str:
    """The sentence the leaderboard adds when some of its runs have samples or repeated gradings ('' if none)."""
    if not any(r is not None and is_nested(r) for r in runs):
        return ""
    return ("Runs with candidate samples or repeated gradings: hierarchical bootstrap (questions, then each "
            "question's samples, then each sample's gradings); a gap is marked as judge noise when the interval "
            "of the difference with only the gradings resampled includes 0.")


def _levels(*values: Nested) -> list[str]:
    return [lv for lv in LEVELS if lv == "questions" or (lv == "samples" and any(v.samples > 1 for v in values))
            or (lv == "repeats" and any(v.repeats > 1 for v in values))]


def row_interval(run: Any, n_boot: int, seed: int, alpha: float, scale: float) -> tuple[float, float, float]:
    """(point, lo, hi) of a sampled or repeated run, resampling questions, samples and gradings."""
    values = _nested(run)
    st = nested_stats(values, n_boot, seed, alpha, scale=scale, levels=_levels(values))
    return st["point"], st["lo"], st["hi"]


def pair_difference(run_a: Any, run_b: Any, n_boot: int, seed: int, alpha: float, scale: float) -> dict[str, Any]:
    """The paired hierarchical difference and its judge-noise-only component (None when neither run was
    graded more than once: the judge noise is then unmeasured and nothing is marked)."""
    a, b = _nested(run_a), _nested(run_b)
    d = paired_nested(a, b, n_boot, seed, alpha, scale=scale, levels=_levels(a, b))
    d.update(noise=None, noise_lo=None, noise_hi=None, within_noise=False)
    if max(a.repeats, b.repeats) > 1:
        only = paired_nested(a, b, n_boot, seed, alpha, scale=scale, levels=("repeats",))
        d.update(noise=only["std"], noise_lo=only["lo"], noise_hi=only["hi"],
                 within_noise=only["lo"] <= 0.0 <= only["hi"] and only["hi"] > only["lo"])
    return d
