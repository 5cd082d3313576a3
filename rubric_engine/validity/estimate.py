"""`rubric-engine estimate`: fit an item bank on stored runs of one benchmark, then estimate a new model's full
score from a run that asked only some of the questions.

Why a file between the two steps (item_model.json): the fit is made once on the runs at hand and used for every
later model; it names the benchmark, its spec version and spec hash, so a bank fitted on another version of the
rubric is refused rather than used. The fit writes anchors.ids beside it, the `ids=[...]` override of the anchor
subset (the run asks only those questions); `estimate score` reads that run and prints the estimate, its interval
and the questions used, and with `adaptive=K` the K questions whose answers would shrink the estimate's error most (the next
`ids=` to ask, for adaptive testing one batch at a time). The arithmetic is stats/irt.py and stats/subset.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.stats.irt import ItemFit
from rubric_engine.stats.subset import Bank, Estimate, bank_layout, build_bank, estimate_full, item_values, \
    linear_weights
from rubric_engine.stats.subsetpick import choose_anchors, next_for_estimate
from rubric_engine.store.layout import write_json, write_text
from rubric_engine.store.runs import RunRecord, RunTaxonomy, collect_runs, load_run
from rubric_engine.validity.items_report import ids_override

__all__ = ["MIN_RUNS", "MODEL_KIND", "fit_command", "read_model", "check_model", "score_command", "ScoreResult"]

MIN_RUNS = 5  # fewer training runs than this cannot place items on an ability scale
MODEL_KIND = "rubric-engine item model"
_FIT_FIX = "fit the item model again on runs of this benchmark version: rubric-engine estimate fit RUN_DIR ..."


def _identity(run: RunRecord) -> dict[str, Any]:
    return {"benchmark": run.benchmark, "spec_version": str(run.spec.get("version", "")),
            "spec_hash": str(run.summary.get("spec_hash", "")), "judge": run.judge}


def _taxonomy(run: RunRecord) -> RunTaxonomy:
    return RunTaxonomy.from_spec(run.spec, str(run.dir))


def _items(run: RunRecord, by_group: bool) -> dict[tuple[str, str], float]:
    if run.scored_error:
        raise DataError(str(run.samples_path), run.scored_error, fix="estimate reads runs scored per question")
    items = item_values(run.scored, by_group)
    bad = next((k for k, v in items.items() if not 0.0 <= v <= 1.0), None)
    if bad is not None:
        raise DataError(str(run.samples_path), f"question {bad[0]!r} has the value {items[bad]:g} outside [0, 1]; "
                        "the item model reads scores in [0, 1] (rubric scores clipped per question)",
                        fix="estimate a benchmark whose question values lie in [0, 1]")
    return items


def fit_command(dirs: Sequence[Path], out: Path, anchors: float) -> tuple[dict[str, Any], list[str]]:
    """Fit on the complete runs under `dirs` (one benchmark, one spec hash) and write `out` and anchors.ids beside
    it. `anchors`: a number of questions (>= 1) or a share of them (< 1). Returns the model and the anchor ids."""
    runs = collect_runs(list(dirs))
    if len(runs) < MIN_RUNS:
        raise ConfigError(f"estimate fit: {len(runs)} complete run(s) found, at least {MIN_RUNS} are needed to fit "
                          "item parameters; add runs of other models of the same benchmark version")
    judges = sorted({r.judge for r in runs})
    if len(judges) > 1:
        raise ConfigError(f"estimate fit: these runs were graded by {len(judges)} judges ({', '.join(judges)}); an "
                          "item's difficulty is its judge's as much as the question's: fit on the runs of one judge")
    tax = _taxonomy(runs[0])
    by_group = tax.how.overall != "mean_over_questions"
    weights: dict[str, list[float]] = {}
    for run in runs:
        for q in run.scored:
            weights.setdefault(q.id, []).append(q.weight)
    qweights = {q: float(np.median(w)) for q, w in weights.items()}
    bank = build_bank([_items(r, by_group) for r in runs], by_group, qweights, tax.how.clip in ("group", "overall"))
    k = int(anchors) if anchors >= 1 else max(1, round(anchors * len(bank.questions)))
    anchor_ids = [bank.questions[g] for g in choose_anchors(bank, k)]
    model = {"kind": MODEL_KIND, "format": 1, **_identity(runs[0]), "item": "question ability" if by_group
             else "question", "overall": tax.how.overall, "clip": bank.clip, "scale": tax.scale,
             "question_weights": qweights, "converged": bank.fit.converged, "group_spread": dict(bank.tau),
             "items": [{"question": q, "group": g, "a": float(a), "b": float(b), "resid_sd": float(s)}
                       for (q, g), a, b, s in zip(bank.keys, bank.fit.a, bank.fit.b, bank.fit.resid_sd)],
             "training": [{"run": str(r.dir), "candidate": r.candidate, "theta": float(t)}
                          for r, t in zip(runs, bank.fit.theta)],
             "anchors": anchor_ids}
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, model)
    write_text(out.parent / "anchors.ids", ids_override(anchor_ids) + "\n")
    return model, anchor_ids


def read_model(path: Path) -> tuple[dict[str, Any], Bank]:
    """The item model file and its bank; a file that is not one is one line."""
    try:
        model = json.loads(path.read_text(encoding="utf-8"))
        items = model["items"]
        keys = [(str(i["question"]), str(i["group"])) for i in items]
        fit = ItemFit(a=np.array([float(i["a"]) for i in items]), b=np.array([float(i["b"]) for i in items]),
                      theta=np.array([float(t["theta"]) for t in model["training"]]),
                      resid_sd=np.array([float(i["resid_sd"]) for i in items]), converged=bool(model["converged"]))
        if model.get("kind") != MODEL_KIND or not keys:
            raise KeyError("kind")
    except FileNotFoundError:
        raise ConfigError(f"estimate: model={path} does not exist; fit one first: rubric-engine estimate fit "
                          "RUN_DIR ... out=FILE") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(str(path), f"not an item model written by `estimate fit` ({exc!r})", fix=_FIT_FIX) from None
    by_group = model.get("item") != "question"
    questions, groups = bank_layout(keys)
    tau = {str(g): float(t) for g, t in (model.get("group_spread") or {}).items()}
    bank = Bank(questions, tuple(keys), groups, linear_weights(keys, by_group, model.get("question_weights")), fit,
                bool(model.get("clip")), tau)
    return model, bank


@dataclass(frozen=True)
class ScoreResult:
    estimate: Estimate
    scale: float
    total: int  # questions in the bank
    next_ids: list[str]


def check_model(model: Mapping[str, Any], path: Path, benchmark: str, version: str, spec_hash: str, judge: str,
                what: str) -> None:
    """The item model was fitted on this benchmark and spec version (its spec hash) with this judge, or one line
    saying which differs."""
    if benchmark != model.get("benchmark") or spec_hash != model.get("spec_hash"):
        raise ConfigError(f"estimate: {path} was fitted on {model.get('benchmark')} version "
                          f"{model.get('spec_version')} (spec hash {str(model.get('spec_hash'))[:12]}), {what} is "
                          f"{benchmark} version {version} (spec hash {spec_hash[:12]}); {_FIT_FIX}")
    if judge != model.get("judge"):
        raise ConfigError(f"estimate: {path} was fitted on runs graded by {model.get('judge')}, {what} is graded by "
                          f"{judge}; fit the item model on runs of this judge, or grade with {model.get('judge')}")


def _rounds(runs: Sequence[RunRecord], model: Mapping[str, Any], model_path: Path) -> dict[tuple[str, str], float]:
    """The items of one model's runs (the rounds of an adaptive test), each checked against the item model."""
    if len({r.candidate for r in runs}) > 1:
        raise ConfigError(f"estimate: these runs are of {len({r.candidate for r in runs})} different candidates "
                          f"({', '.join(sorted({r.candidate for r in runs}))}); give the runs of one model")
    items: dict[tuple[str, str], float] = {}
    for run in runs:
        ident = _identity(run)
        check_model(model, model_path, ident["benchmark"], ident["spec_version"], ident["spec_hash"],
                    ident["judge"], f"the run {run.dir}")
        these = _items(run, model.get("item") != "question")
        twice = sorted({q for q, _ in these} & {q for q, _ in items})
        if twice:
            raise ConfigError(f"estimate: question {twice[0]!r} is in two of these runs; give each question's run "
                              "once (a round of an adaptive test asks only the questions not yet asked)")
        items.update(these)
    return items


def score_command(run_dirs: Sequence[Path], model_path: Path, adaptive: int = 0, draws: int = 2000,
                  seed: int = 0) -> tuple[ScoreResult, dict[str, Any]]:
    """The full score estimated from what the runs of one model asked (one run, or the rounds of an adaptive
    test); nothing is written (the caller writes)."""
    model, bank = read_model(model_path)
    runs = [load_run(d) for d in run_dirs]
    items = _rounds(runs, model, model_path)
    known = set(bank.keys)
    stray = sorted({q for q, g in items if (q, g) not in known})
    where = ", ".join(str(d) for d in run_dirs)
    if stray:
        raise ConfigError(f"estimate: the run {where} has {len(stray)} question(s) or group(s) the item model does "
                          f"not know (e.g. {stray[0]!r}); it is not a run of the questions the model was fitted on. "
                          f"{_FIT_FIX}")
    if not items:
        raise ConfigError(f"estimate: the run {where} scored no question of the item model; run the anchors "
                          f"({model_path.parent / 'anchors.ids'}) first")
    est = estimate_full(bank, items, draws=draws, seed=seed)
    tried = {str(r.id) for run in runs for r in run.iter_records()}  # asked, scored or not: never suggested again
    asked = [g for g, q in enumerate(bank.questions) if q in tried]
    next_ids: list[str] = []
    while len(next_ids) < adaptive and (g := next_for_estimate(bank, est.theta, asked)) is not None:
        asked.append(g)
        next_ids.append(bank.questions[g])
    result = ScoreResult(est, float(model.get("scale", 1.0)), len(bank.questions), next_ids)
    return result, {"model": str(model_path), **_identity(runs[0]), "candidate": runs[0].candidate,
                    "runs": [str(d) for d in run_dirs], "scale": result.scale,
                    "estimate": est.point * result.scale, "interval": [est.low * result.scale,
                                                                      est.high * result.scale],
                    "theta": est.theta, "theta_se": est.theta_se, "questions_used": list(est.asked),
                    "questions_total": result.total, "next": next_ids}
