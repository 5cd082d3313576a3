"""`item_model=FILE` on a run: ask only the item model's anchor questions, then estimate the full score.

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


def anchored(item_model: Any, settings: Any) -> Any:
    """The run's settings with ids= the model's anchors, once the model is found to fit the run's spec."""
    from rubric_engine.run.identity import spec_digest
    from rubric_engine.run.runner import load_inputs
    from rubric_engine.run.settings import judges_of
    from rubric_engine.validity.estimate import check_model, read_model

    if settings.ids:
        raise ConfigError("item_model= chooses the questions (its anchors): drop ids=, or drop item_model= and "
                          "estimate afterwards with `rubric-engine estimate score`")
    model, _ = read_model(Path(str(item_model)).expanduser())
    chosen = replace(settings, ids=[str(q) for q in model.get("anchors") or []])
    if not chosen.ids:
        raise ConfigError(f"item_model={item_model} names no anchor question; fit it again with anchors=N")
    spec, _, _ = load_inputs(chosen)
    judges = judges_of(chosen, spec)
    check_model(model, Path(str(item_model)), spec.name, str(spec.version), spec_digest(spec),
                judges[0].name if judges else "none", "this run")
    return chosen


def estimate_after(run_dir: Path, item_model: Any) -> None:
    """Estimate the finished run's full score, write RUN_DIR/estimate.json and print one line."""
    from rubric_engine.store.layout import write_json
    from rubric_engine.validity.estimate import score_command

    result, record = score_command([run_dir], Path(str(item_model)).expanduser())
    write_json(run_dir / "estimate.json", record)
    print(shown(f"estimated full score {record['estimate']:.1f} (95% interval {record['interval'][0]:.1f} to "
                f"{record['interval'][1]:.1f}) from {len(result.estimate.asked)} of {result.total} questions "
                f"(item model {item_model}; estimate.json)", markup=False))
