"""What makes a run the same run: its identity and spec hash, its judges, and whether its spec is a shipped one.

Why apart from the runner: the identity decides which directory a run may resume (rundir.begin_run)
and which journal is its own (journal.run_fingerprint), so it is kept in one small place that
changes only when what a run *is* changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.dataset.fetch import sha256_file
from rubric_engine.errors import ConfigError
from rubric_engine.judge.panels import check_panel
from rubric_engine.models.client import ModelSpec
from rubric_engine.spec.schema import BenchmarkSpec
from rubric_engine.stats.sampling import check_samples
from rubric_engine.store import layout as rundir

if TYPE_CHECKING:
    from rubric_engine.run.runner import RunSettings

__all__ = ["judges_of", "declared_judge"]


def _shipped_dir() -> Path | None:
    from rubric_engine.spec.files import _packaged_dir

    found = _packaged_dir()
    return found.resolve() if found else None


def _shipped(spec: BenchmarkSpec) -> bool:
    shipped = _shipped_dir()
    return shipped is not None and spec.dir.resolve().parent == shipped


def _shipped_name(name: str) -> bool:
    shipped = _shipped_dir()
    return shipped is not None and (shipped / name / "benchmark.yaml").is_file()


def _spec_hash(spec: BenchmarkSpec) -> str:
    fields = ("candidate.template", "candidate.system", "judge.template", "judge.system")
    texts = {}
    for f in fields:
        section, name = f.split(".")
        if getattr(getattr(spec, section), name, None):
            texts[f] = spec.read_template(f)
    return rundir.spec_hash(spec.resolved(), texts)


def _identity(settings: RunSettings, spec: BenchmarkSpec, digest: str, judges: list[ModelSpec],
              data_sha256: str | None = None) -> dict[str, Any]:
    """What makes a run the same run: a directory is resumed only by a run with this same identity.

    The data's and the answers file's content hashes and each model's sampling params are part of it:
    a run over a changed data file, changed answers or another temperature is another run, never a
    resume that would mix two runs' answers in one directory."""
    cand, judge = settings.candidate, judges[0]
    judged = settings.stage != "generate"
    panel = {"jury": [[j.name, j.model, j.api_base, j.revision] for j in judges], "jury_rule": settings.jury_rule,
             "repeats": _repeats(settings, spec), "tie": settings.tie or spec.judge.tie} \
        if len(judges) > 1 or _repeats(settings, spec) > 1 else {}  # a single grading keeps its old identity
    if settings.samples > 1:
        panel["samples"] = settings.samples
    return {**panel, "benchmark": spec.name, "spec_hash": digest, "stage": settings.stage,
            "data_sha256": data_sha256,
            "candidate": [cand.name, cand.model, cand.api_base, cand.revision] if cand else None,
            "answers": str(settings.answers or settings.from_run or "") or None,
            "answers_sha256": _answers_sha256(settings),
            "judge": [judge.name, judge.model, judge.api_base, judge.revision] if judged else None,
            "params": {"candidate": dict(cand.params) if cand else None,
                       "judge": [dict(j.params) for j in judges] if judged else None},
            "selection": {"subset": settings.subset, "limit": settings.limit,
                          "ids": [str(i) for i in settings.ids] if settings.ids else None}}


def _answers_sha256(settings: RunSettings) -> str | None:
    """The answers file's content hash (answers= or from_run's answers.jsonl), None without one."""
    path = Path(settings.answers) if settings.answers else \
        Path(settings.from_run) / rundir.ANSWERS_FILE if settings.from_run else None
    return sha256_file(path) if path is not None and path.is_file() else None


def _samples(settings: RunSettings, need_candidate: bool) -> int:
    """candidate.samples, checked: K > 1 needs the candidate called (not an answers file) and judging."""
    k = check_samples(settings.samples)
    if k > 1 and not need_candidate:
        raise ConfigError(f"candidate.samples={k} needs the candidate called (an answers file or from_run holds one "
                          "reply per question); drop answers=/from_run= or use candidate.samples=1")
    if k > 1 and settings.stage == "generate":
        raise ConfigError(f"candidate.samples={k} with stage=generate: answers.jsonl holds one reply per question; "
                          "use stage=full (every sample is judged) or candidate.samples=1")
    return k


def _repeats(settings: RunSettings, spec: BenchmarkSpec) -> int:
    return spec.judge.repeats if settings.repeats is None else settings.repeats


def judges_of(settings: RunSettings, spec: BenchmarkSpec) -> list[ModelSpec]:
    """The run's judges (a jury, the judge given, or the one the spec declares), settings checked."""
    if len(settings.jury) == 1:
        raise ConfigError(f"a jury of one judge ({settings.jury[0].name}): give a list of 2+ judges, "
                          f"or use judge={settings.jury[0].name} for a single judge")
    judges = list(settings.jury) or [settings.judge or declared_judge(spec, settings.timeout)]
    names = [j.name for j in judges]
    if len(set(names)) != len(names):
        raise ConfigError(f"judge=[{','.join(names)}]: each juror needs its own name (set name: in each entry)")
    check_panel(len(judges), _repeats(settings, spec), settings.jury_rule, settings.tie or spec.judge.tie)
    return judges


def declared_judge(spec: BenchmarkSpec, timeout: float | None = None) -> ModelSpec:
    """The judge the benchmark declares, built like every other model entry (its timeout included)."""
    return ModelSpec.from_config(spec.judge.model.model_dump(exclude_none=True), role="judge", timeout=timeout)

