"""`item_model=FILE` on a run: ask only the item model's anchor questions (or, with `item_budget=N`, N questions
chosen wave by wave as the answers come: validity/adaptiverun.py), then estimate the full score.

Why in the command line and not the runner: the runner asks the questions it is given (`ids=`); which ones, and
what to make of the run once it is scored, is `estimate`'s business (validity/estimate.py). The item model is
checked against the run's spec before any call (the same spec hash the run will record), so a model fitted on
another version of the benchmark costs nothing and leaves no run directory.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError
from rubric_engine.text.terminal import shown

__all__ = ["anchored", "estimate_after"]


def anchored(item_model: Any, settings: Any, budget: Any = None, dry: bool = False) -> tuple[Any, Any]:
    """(settings, selector) once the item model is found to fit the run's spec: without `budget`, ids= the model's
    anchors and no selector; with `item_budget=`, the settings unchanged and the adaptive selection
    (validity/adaptiverun.py) the runner asks wave by wave. `dry`: a dry run counts `budget` questions picked at
    the prior's ability (ids=), with no selector."""
    from rubric_engine.models.concurrency import AUTO, AUTO_START
    from rubric_engine.validity.adaptiverun import AdaptiveSelection, budget_of
    from rubric_engine.validity.estimate import read_model

    if budget is not None and not item_model:
        raise ConfigError("item_budget= needs item_model=FILE (an item model from `rubric-engine estimate fit`), "
                          "whose questions it chooses from")
    if not item_model:
        return settings, None
    if settings.ids:
        raise ConfigError("item_model= chooses the questions (its anchors, or item_budget= of them while the run "
                          "runs): drop ids=, or drop item_model= and estimate afterwards with `rubric-engine estimate "
                          "score`")
    path = Path(str(item_model)).expanduser()
    model, bank = read_model(path)
    if budget is None:
        chosen = replace(settings, ids=[str(q) for q in model.get("anchors") or []])
        if not chosen.ids:
            raise ConfigError(f"item_model={item_model} names no anchor question; fit it again with anchors=N")
        _check(model, path, chosen)
        return chosen, None
    wave = AUTO_START if settings.concurrency == AUTO else int(settings.concurrency)
    selector = AdaptiveSelection(bank, model.get("item") != "question", budget_of(budget, len(bank.questions)), wave,
                                 path)
    questions = _check(model, path, settings)
    if dry:
        return replace(settings, ids=selector.planned([q.id for q in questions])), None
    return settings, selector


def _check(model: Any, path: Path, settings: Any) -> Any:
    """The item model fits the run's spec and judge (one line otherwise); returns the run's selected questions."""
    from rubric_engine.run.identity import spec_digest
    from rubric_engine.run.runner import load_inputs
    from rubric_engine.run.settings import judges_of
    from rubric_engine.validity.estimate import check_model

    spec, _, questions = load_inputs(settings)
    judges = judges_of(settings, spec)
    check_model(model, path, spec.name, str(spec.version), spec_digest(spec),
                judges[0].name if judges else "none", "this run")
    return questions


def estimate_after(run_dir: Path, item_model: Any) -> None:
    """Estimate the finished run's full score, write RUN_DIR/estimate.json and print one line."""
    from rubric_engine.store.layout import write_json
    from rubric_engine.validity.estimate import score_command

    result, record = score_command([run_dir], Path(str(item_model)).expanduser())
    write_json(run_dir / "estimate.json", record)
    print(shown(f"estimated full score {record['estimate']:.1f} (95% interval {record['interval'][0]:.1f} to "
                f"{record['interval'][1]:.1f}) from {len(result.estimate.asked)} of {result.total} questions "
                f"(item model {item_model}; estimate.json)", markup=False))
