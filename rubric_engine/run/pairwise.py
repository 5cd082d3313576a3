"""A pairwise run's baseline: which model or answers, checked before any call, and its summary section.

Why apart from the plan and the runner: under `judge.verdict.kind: pairwise` the run needs a third input
(the `baseline` role: `baseline=ENTRY` / `baseline.answers=FILE` on the command line, else the spec's
`baseline:`), a few shapes it cannot combine with (juries, repeats, candidate samples), and one more
summary section (stats/pairwise.py). Everything the plan and the runner need is one call each here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.dataset.anchors import given_anchor_answers
from rubric_engine.dataset.baseline import command_line_answers, load_baseline_answers
from rubric_engine.errors import ConfigError
from rubric_engine.models.entries import ModelSpec
from rubric_engine.shapes.registry import shape_for
from rubric_engine.stats.pairwise import pairwise_summary

if TYPE_CHECKING:
    from rubric_engine.datatypes import QuestionRef
    from rubric_engine.run.settings import RunSettings
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["plan_baseline", "baseline_answers", "pairwise_section", "baseline_name"]


def plan_baseline(settings: "RunSettings", spec: "BenchmarkSpec", *, panel: bool, samples: int) -> ModelSpec | None:
    """The baseline model to call (None: answers are used, or the spec is not pairwise); one line for a
    pairwise spec without a baseline and for the shapes a pairwise run does not combine with."""
    if not shape_for(spec).verdict.compares:
        if spec.anchors is not None and settings.stage != "generate" and (panel or samples > 1):
            raise ConfigError("judge.verdict.kind: anchored judges each game once with one judge; drop judge=[...], "
                              "judge.repeats and candidate.samples")
        if settings.baseline is not None or (settings.baseline_answers and spec.anchors is None):
            raise ConfigError(f"baseline=...: the benchmark {spec.name} is not pairwise (judge.verdict.kind: "
                              f"{spec.judge.verdict.kind if spec.judge else 'none'}); drop baseline= / baseline.answers=")
        return None
    if settings.stage == "generate":  # no judging: the baseline is not needed (a later stage=score names it)
        return None
    if settings.baseline is not None and settings.baseline_answers:
        raise ConfigError("give either baseline=ENTRY or baseline.answers=FILE, not both")
    if panel or samples > 1:
        raise ConfigError("judge.verdict.kind: pairwise judges each game once with one judge; drop judge=[...], "
                          "judge.repeats and candidate.samples")
    if settings.baseline_answers:
        return None
    if settings.baseline is not None:
        return settings.baseline
    declared = spec.baseline
    if declared is None:
        raise ConfigError(f"{spec.name}: judge.verdict.kind: pairwise needs a baseline: pass baseline=ENTRY (a "
                          "conf/candidate/ entry or a LiteLLM id) or baseline.answers=FILE, or declare baseline: "
                          "(model or answers) in the spec")
    if declared.model is not None:
        from rubric_engine.run.settings import spec_entry

        return spec_entry(spec, "baseline.model", declared.model, "baseline", settings.timeout)
    return None


def baseline_answers(settings: "RunSettings", spec: "BenchmarkSpec", model: ModelSpec | None, judged: bool,
                     questions: Sequence["QuestionRef"], warnings: list[str]) -> Mapping[str, str] | None:
    """Question id -> the baseline's answer when the baseline is answers (a file, or the spec's files);
    every question of the run must have one (DataError naming the file and the first missing ids). Under an
    anchors: block, `baseline.answers=FILE` is the anchors' answers instead (dataset/anchors.AnchorAnswers)."""
    if spec.anchors is not None and settings.baseline_answers and judged:  # anchors' answers: shapes/anchored.py
        return given_anchor_answers(spec, settings.baseline_answers)
    if not shape_for(spec).verdict.compares or model is not None or not judged:
        return None
    if settings.baseline_answers:
        declared, command_line = command_line_answers(spec, settings.baseline_answers), True
    else:
        assert spec.baseline is not None and spec.baseline.answers is not None
        declared, command_line = spec.baseline.answers, False
    return load_baseline_answers(spec, questions, declared, command_line=command_line,
                                 cache_dir=Path(settings.data_cache_dir) if settings.data_cache_dir else None,
                                 warnings=warnings)


def baseline_name(settings: "RunSettings", spec: "BenchmarkSpec", model: ModelSpec | None) -> dict[str, Any]:
    """Who the baseline is, for the summary: the model entry, the file given, or the spec's answers files."""
    if model is not None:
        return {"name": model.name, "model": model.model}
    if settings.baseline_answers:
        return {"name": Path(settings.baseline_answers).stem, "model": None, "answers": settings.baseline_answers}
    answers = spec.baseline.answers if spec.baseline else None
    files = answers.files if answers else {}
    return {"name": "+".join(dict.fromkeys(f.model or g for g, f in files.items())), "model": None,
            "answers": {g: f.model for g, f in files.items()}}


def pairwise_section(settings: "RunSettings", spec: "BenchmarkSpec", model: ModelSpec | None,
                     records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """summary.json's `pairwise` section (stats/pairwise.py) with the baseline named."""
    return {"baseline": baseline_name(settings, spec, model), **pairwise_summary(records, spec)}
