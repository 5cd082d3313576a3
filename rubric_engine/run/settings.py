"""What a run is asked to do: `RunSettings`, and what follows from them and the spec alone (the stage, the
judges, how often each grades, how many replies per question), checked once.

Why apart from the runner: the pipeline, the identity, the summary and the dry-run estimate all read the
settings; here they import them without importing the runner (which imports them all).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError
from rubric_engine.judge.panels import check_panel
from rubric_engine.models.cache import ResultCache
from rubric_engine.models.compose import ClientLayers
from rubric_engine.models.entries import ModelSpec
from rubric_engine.models.limits import LOCAL, LimitSource
from rubric_engine.models.workers import WorkerPool
from rubric_engine.spec.schema import BenchmarkSpec
from rubric_engine.stats.sampling import check_samples

__all__ = ["STAGES", "RunSettings", "judges_of", "declared_judge", "repeats_of", "samples_of", "user_of",
           "prompt_cache_of", "client_layers", "spec_entry"]

STAGES = ("full", "generate", "score")


@dataclass
class RunSettings:
    """Everything one run needs; the CLI builds it from the Hydra config."""

    benchmark: str
    out_dir: Path
    candidate: ModelSpec | None = None
    judge: ModelSpec | None = None  # None: the judge the benchmark declares
    user: ModelSpec | None = None  # the simulated user (conversation.mode simulated); None: the spec's simulator
    jury: Sequence[ModelSpec] = ()  # judge=[a,b,c]: every judge grades every reply (judge/panels.py)
    jury_rule: str = "majority"  # any | all | majority
    repeats: int | str | None = None  # judge.repeats override (a number or auto); None: the spec's (default 1)
    repeats_max: int | None = None  # judge.repeats_max: auto's cap (None: judge/adaptive.DEFAULT_CAP)
    repeats_prior: Sequence[str] = ()  # judge.repeats_prior: earlier run directories of the same judge (auto)
    repeats_confidence: float | None = None  # judge.repeats_confidence: auto's threshold on a judge's probability
    tie: str | None = None  # judge.tie override; None: the spec's (default not_met)
    samples: int = 1  # candidate.samples=K: K replies per question, each judged (stats/sampling.py)
    benchmark_dirs: Sequence[str] = ()
    data_path: str | None = None
    data_cache_dir: str | None = None
    subset: str | None = None
    limit: int | None = None
    ids: Sequence[str] | None = None
    stage: str = "full"
    answers: str | None = None
    from_run: str | None = None
    concurrency: int | str = 16  # or "auto": adaptive, from 429s and rate-limit headers (models/concurrency.py)
    rpm: float | None = None
    tpm: float | None = None  # tokens-per-minute cap per role (models/client._RateLimiter, models/concurrency.py)
    max_retries: int = 4
    workers: int = 1  # processes carrying model calls (models/workers.py); 1: this process
    timeout: float | None = None  # run-wide per-request timeout; None: each model's own (default 120 s)
    prompt_cache: bool | None = None  # mark per-criterion prompts' shared prefix; None: the spec's default (prompt_cache_of)
    cache_dir: str | None = None
    cache_enabled: bool = True
    progress: str = "auto"  # the live progress display only (auto | rich | plain | none)
    quiet: bool = False  # no result tables either: stdout is only the 'outputs:' line
    trust_code: bool = False  # allow a spec's module:function scoring formula to be imported (scoring/formulas.py)
    trust_endpoints: bool = False  # a spec's model entries may name key variables (models/entries.check_spec_keys)
    candidate_errors: str | None = None  # exclude | zero: overrides the spec's aggregation.candidate_errors
    baseline: ModelSpec | None = None  # pairwise: baseline=ENTRY (None: the spec's baseline:)
    baseline_answers: str | None = None  # pairwise: baseline.answers=FILE (the engine's answers format)
    batch: bool = False  # batch=true: calls go through the provider's batch API (models/batches.py)
    batch_poll: float = 30.0  # seconds between polls of a batch in flight
    batch_max_wait: float = 90_000.0  # seconds of polling one batch before the run stops (models/batches.py)
    retry_errors: bool = False  # ask again, in place, the questions whose record holds an error (run/stream.py)
    resume_command: str | None = None  # the command line that resumes this run (a second signal's line names it)
    extra: dict[str, Any] = field(default_factory=dict)
    # limits=: where every client keeps its places in flight and rpm / tpm room (models/limits.py); the CLI (or
    # rubric_engine/cluster/) decides once: this process's own, or one per key across a Ray cluster
    limits: LimitSource = LOCAL


def samples_of(settings: RunSettings, need_candidate: bool) -> int:
    """candidate.samples, checked: K > 1 needs the candidate called (not an answers file) and judging."""
    k = check_samples(settings.samples)
    if k > 1 and not need_candidate:
        raise ConfigError(f"candidate.samples={k} needs the candidate called (an answers file or from_run holds one "
                          "reply per question); drop answers=/from_run= or use candidate.samples=1")
    if k > 1 and settings.stage == "generate":
        raise ConfigError(f"candidate.samples={k} with stage=generate: answers.jsonl holds one reply per question; "
                          "use stage=full (every sample is judged) or candidate.samples=1")
    return k


def repeats_of(settings: RunSettings, spec: BenchmarkSpec) -> int | str:
    """How many times each judge grades each reply (or "auto"): judge.repeats given on the command line, else the
    spec's."""
    if settings.repeats is None:
        return spec.judge.repeats if spec.judge is not None else 1
    return settings.repeats


def judges_of(settings: RunSettings, spec: BenchmarkSpec) -> list[ModelSpec]:
    """The run's judges (a jury, the judge given, or the one the spec declares), settings checked; none when the
    spec declares no judge (every item is checked by the engine, so judge= has nothing to grade)."""
    if spec.judge is None:
        return []
    if len(settings.jury) == 1:
        raise ConfigError(f"a jury of one judge ({settings.jury[0].name}): give a list of 2+ judges, "
                          f"or use judge={settings.jury[0].name} for a single judge")
    judges = list(settings.jury) or [settings.judge or declared_judge(spec, settings.timeout)]
    names = [j.name for j in judges]
    if len(set(names)) != len(names):
        raise ConfigError(f"judge=[{','.join(names)}]: each juror needs its own name (set name: in each entry)")
    check_panel(len(judges), repeats_of(settings, spec), settings.jury_rule, settings.tie or spec.judge.tie)
    return judges


def user_of(settings: RunSettings, spec: BenchmarkSpec, need_candidate: bool, simulated: bool) -> ModelSpec | None:
    """The simulated user of a conversation that simulates one (`simulated`: its strategy says so, shapes/) and
    the candidate is called for: user= given, else the spec's conversation.simulator.model; None for every other run."""
    conv = spec.conversation
    if not simulated or not need_candidate:
        return None
    if settings.user is not None:
        return settings.user
    ref = conv.simulator.model if conv.simulator else None
    if ref is None:
        raise ConfigError(f"benchmark {spec.name} simulates the user but names no simulator model: pass user=ENTRY "
                          "(an entry of conf/user/, e.g. user=mock), or declare conversation.simulator.model in the spec")
    return spec_entry(spec, "conversation.simulator.model", ref, "user", settings.timeout)


def declared_judge(spec: BenchmarkSpec, timeout: float | None = None) -> ModelSpec:
    """The judge the benchmark declares, built like every other model entry (its timeout included)."""
    assert spec.judge is not None, "declared_judge of a spec without a judge"
    return spec_entry(spec, "judge.model", spec.judge.model, "judge", timeout)


def spec_entry(spec: BenchmarkSpec, key: str, ref: Any, role: str, timeout: float | None) -> ModelSpec:
    """The model entry `ref` the spec declares at `key`, built like every other entry and marked with where the
    spec declared it (a spec's entry may not choose a key: models/entries.check_spec_keys, run/plan.py)."""
    origin = spec.origin(key)
    entry = ModelSpec.from_config(ref.model_dump(exclude_none=True), role=role, timeout=timeout)
    where = f"{origin[0]}:{origin[1]}" if origin else str(spec.files[-1] if spec.files else spec.dir)
    return replace(entry, declared_in=where)


def prompt_cache_of(settings: RunSettings, spec: BenchmarkSpec) -> bool:
    """prompt_cache given, else on exactly for per-criterion judging (its calls repeat one prompt prefix)."""
    if settings.prompt_cache is not None:
        return settings.prompt_cache
    return spec.judge is not None and spec.judge.verdict.granularity == "per_criterion"


def client_layers(settings: RunSettings, spec: BenchmarkSpec, cache: ResultCache | None,
                  workers: WorkerPool | None = None) -> ClientLayers:
    """The layers every model client of this run is built with (models/compose.py): the run's cache handle and
    worker pool, its call limits, prompt-cache marks for its judges."""
    return ClientLayers(cache=cache, concurrency=settings.concurrency, rpm=settings.rpm, tpm=settings.tpm,
                        max_retries=settings.max_retries, workers=workers,
                        prompt_cache=prompt_cache_of(settings, spec), limits=settings.limits)
