"""A try-out: a run whose every model is a mock reads the spec's packaged sample (`data.sample`) instead of
its downloads.

Why: mock models make the numbers meaningless by design; what a try-out shows is that every stage of a spec
runs (prompts render, verdicts parse, scores and reports are written), and that must work from an installed
wheel, offline, with nothing beside it. A spec whose data is a download ships a small sample of its own in the
same format, and a pairwise one the baseline's answers to it. The real data is never replaced silently: only
when every model the run calls is a mock, never with `data.path=` (the user's file wins) nor with
`answers=` / `from_run=` (those replies answer the real questions); the run says so in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rubric_engine.errors import RubricEngineError
from rubric_engine.models.mock import is_mock
from rubric_engine.run.plan import plan_run

if TYPE_CHECKING:
    from rubric_engine.run.settings import RunSettings
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["tryout_spec"]


def _with_sample(spec: "BenchmarkSpec") -> "BenchmarkSpec":
    """The spec reading its sample: the data, with its per-turn references in its rows (no references file),
    and the sample's baseline answers when it has some; paths resolved against the file that declared them
    and confined as data.path is."""
    from rubric_engine.spec.schema import AnswerFile, Baseline, BaselineAnswers

    sample = spec.data.sample
    assert sample is not None
    path = spec.declared_file("data.sample.path", sample.path).resolve()
    data = spec.data.model_copy(update={"url": None, "sha256": None, "references": None, "sample": None,
                                        "path": str(path)})
    update: dict[str, Any] = {"data": data}
    if sample.baseline_answers is not None:
        answers = spec.declared_file("data.sample.baseline_answers", sample.baseline_answers).resolve()
        files = {"all": AnswerFile(path=str(answers), model=answers.stem)}
        update["baseline"] = Baseline(answers=BaselineAnswers(id=spec.data.fields.id, files=files))
    return spec.model_copy(update=update)


def _all_mock(settings: "RunSettings", spec: "BenchmarkSpec") -> bool:
    try:
        plan = plan_run(settings, spec)
    except RubricEngineError:  # the run's own plan says what is wrong, in its words
        return False
    models = plan.models()  # the candidate among them: a run scoring rollouts it did not write keeps the real data
    return plan.candidate is not None and plan.candidate in models and all(is_mock(m.model) for m in models)


def tryout_spec(settings: "RunSettings", spec: "BenchmarkSpec") -> tuple["BenchmarkSpec", str | None]:
    """(the spec the run reads, the line saying it reads the sample; None when it reads the spec's own data)."""
    sample = spec.data.sample
    if sample is None or not spec.data.url or settings.data_path is not None or settings.answers \
            or settings.from_run or not _all_mock(settings, spec):
        return spec, None
    tried = _with_sample(spec)
    return tried, (f"try-out: every model is a mock, so this run reads the spec's packaged sample "
                   f"{tried.data.path} instead of {spec.data.url} (pass data.path=FILE for other data)")
