"""One benchmark run from Python: load, generate, judge, score, write the run directory.

Why here and not in the CLI: the engine must be usable without Hydra (notebooks, other tools),
so the CLI only turns its config into `RunSettings` and calls `run_benchmark`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from . import interrupt, rundir, runstream
from .bodycap import max_reply_bytes
from .cache import ResultCache, default_cache_dir
from .dataset import load_dataset, select
from .datatypes import Dataset, Question, QuestionRows
from .errors import ConfigError, RubricEngineError
from .journal import JournalWriter, run_fingerprint
from .judge_noise import print_panel
from .mockmodel import is_mock
from .models import ModelSpec
from .modelspec import check_keys
from .prompts import check_templates
from .report import print_summary
from .run_report import write_run_report
from .sampling import merge_record, print_sampling
from .runident import _identity, _repeats, _samples, _shipped, _shipped_name, _spec_hash, declared_judge, judges_of
from .runpipeline import _run_async
from .runrecord import _Outcome, _sample
from .runsummary import _summary
from .scores import question_score, zero_fields
from .spec import BenchmarkSpec, benchmark_search_path, load_spec
from .speccheck import check_breakdowns_against_tags
from .termtext import SafeConsole, shown

__all__ = ["RunSettings", "run_benchmark", "check_run_keys", "models_to_call", "declared_judge", "judges_of"]

STAGES = ("full", "generate", "score")
log = logging.getLogger("rubric_engine")  # Hydra writes it to <run dir>/rubric-engine.log


@dataclass
class RunSettings:
    """Everything one run needs; the CLI builds it from the Hydra config."""

    benchmark: str
    out_dir: Path
    candidate: ModelSpec | None = None
    judge: ModelSpec | None = None  # None: the judge the benchmark declares
    jury: Sequence[ModelSpec] = ()  # judge=[a,b,c]: every judge grades every reply (jury.py)
    jury_rule: str = "majority"  # any | all | majority
    repeats: int | None = None  # judge.repeats override; None: the spec's (default 1)
    tie: str | None = None  # judge.tie override; None: the spec's (default not_met)
    samples: int = 1  # candidate.samples=K: K replies per question, each judged (sampling.py)
    benchmark_dirs: Sequence[str] = ()
    data_path: str | None = None
    data_cache_dir: str | None = None
    subset: str | None = None
    limit: int | None = None
    ids: Sequence[str] | None = None
    stage: str = "full"
    answers: str | None = None
    from_run: str | None = None
    concurrency: int = 16
    rpm: float | None = None
    max_retries: int = 4
    timeout: float | None = None  # run-wide per-request timeout; None: each model's own (default 120 s)
    cache_dir: str | None = None
    cache_enabled: bool = True
    progress: str = "auto"  # the live progress display only (auto | rich | plain | none)
    quiet: bool = False  # no result tables either: stdout is only the 'outputs:' line
    trust_code: bool = False  # allow a spec's module:function scoring formula to be imported (formulas.py)
    candidate_errors: str | None = None  # exclude | zero: overrides the spec's aggregation.candidate_errors
    extra: dict[str, Any] = field(default_factory=dict)


def models_to_call(settings: RunSettings, spec: BenchmarkSpec) -> list[ModelSpec]:
    """Every model this run will call: the candidate unless answers are given, and unless stage=generate
    every judge (a jury's each juror, the judge given, or the spec's declared one)."""
    need_candidate = not (settings.answers or settings.from_run)
    judges = judges_of(settings, spec) if settings.stage != "generate" else []
    return [m for m in (settings.candidate if need_candidate else None, *judges) if m is not None]


def check_run_keys(settings: RunSettings) -> None:
    """The key check of a run before it starts, for a sweep to check each job before the first job runs.
    Any other problem (spec, settings) is left to the run, which reports it in its own words."""
    try:
        models = models_to_call(settings, load_spec(settings.benchmark, benchmark_search_path(settings.benchmark_dirs),
                                                    settings.trust_code))
    except RubricEngineError:
        return
    check_keys(*models)


def _load(settings: RunSettings, lazy: bool = False) -> tuple[BenchmarkSpec, Dataset, Sequence[Question]]:
    """Spec, data and the selected questions, every row validated. `lazy`: the questions are a
    `QuestionRows` holding only compact refs (each read again from its row when used), so a run's
    memory does not grow with the data; otherwise a list."""
    if settings.stage not in STAGES:
        raise ConfigError(f"stage={settings.stage!r} is not a stage; use one of {', '.join(STAGES)}")
    spec = load_spec(settings.benchmark, benchmark_search_path(settings.benchmark_dirs), settings.trust_code)
    spec = spec.with_candidate_errors(settings.candidate_errors)  # part of the resolved spec, so of its hash
    dataset = load_dataset(spec, settings.data_path, Path(settings.data_cache_dir) if settings.data_cache_dir else None,
                           lazy=lazy)
    check_breakdowns_against_tags(spec, dataset.item_tags, dataset.example_tags)
    selection = dict(subset=settings.subset, limit=settings.limit, ids=settings.ids)
    rows = dataset.questions
    questions = rows.view(select(rows.refs, **selection)) if isinstance(rows, QuestionRows) else select(rows, **selection)
    if not questions:
        raise ConfigError("the selection holds no question; check subset= / ids= / limit=")
    check_templates(spec, list(questions[:3]))  # template errors before any paid call
    return spec, dataset, questions


def _given_answers(settings: RunSettings, spec: BenchmarkSpec, all_ids: Sequence[str]) -> dict[str, str | None] | None:
    if settings.answers and settings.from_run:
        raise ConfigError("give either answers=FILE or from_run=DIR, not both")
    if settings.from_run:
        path = Path(settings.from_run) / rundir.ANSWERS_FILE
        if not path.is_file():
            raise ConfigError(f"from_run={settings.from_run}: no {rundir.ANSWERS_FILE} there; is it a run directory?")
        state = (rundir.read_manifest(Path(settings.from_run)) or {"state": "complete"}).get("state")
        if state != "complete":
            raise ConfigError(f"from_run={settings.from_run}: that run is {state}, not complete (killed or still "
                              "running); finish it by re-running its command, or use a complete run")
        return rundir.read_answers(path, spec.data.fields.id, all_ids)
    if settings.answers:
        return rundir.read_answers(Path(settings.answers), spec.data.fields.id, all_ids)
    return None


def run_benchmark(settings: RunSettings, console: Console | None = None,
                  results: Console | None = None) -> dict[str, Any]:
    """Run the stages the settings ask for and return the summary (also written to out_dir).

    `console` (stderr) gets progress and warnings; `results` (stdout) the final tables and the output path,
    so `rubric-engine ... > result.txt` keeps results apart from progress. The run holds its directory's
    lock throughout (rundir.RunLock): a second process into the same directory is refused.
    """
    with rundir.RunLock(Path(settings.out_dir)):
        return _run_locked(settings, console, results)


def _run_locked(settings: RunSettings, console: Console | None, results: Console | None) -> dict[str, Any]:
    console = console or SafeConsole(stderr=True)
    results = results or SafeConsole()
    _start_litellm_early(settings)
    spec, dataset, rows = _load(settings, lazy=True)
    assert isinstance(rows, QuestionRows) and isinstance(dataset.questions, QuestionRows)
    questions = rows.refs  # compact handles: each question is read again from its row when a worker takes it
    for warning in dataset.warnings:
        console.print(f"[yellow]data warning:[/] {shown(warning)}", highlight=False, soft_wrap=True)
    if not _shipped(spec):
        console.print(f"spec: {shown(spec.dir)} (not the shipped {shown(spec.name)})" if _shipped_name(spec.name) else
                      f"spec: {shown(spec.dir)}", highlight=False, soft_wrap=True)
    given = _given_answers(settings, spec, [r.id for r in dataset.questions.refs])
    if settings.stage == "score" and given is None:
        raise ConfigError("stage=score needs answers=FILE or from_run=DIR")
    need_candidate = given is None
    if need_candidate and settings.candidate is None:
        raise ConfigError("no candidate model: pass candidate=<name> (see `rubric-engine --help`) or answers=FILE")
    judges = judges_of(settings, spec)
    judge_spec = judges[0]
    k_samples = _samples(settings, need_candidate)
    mocks = [m.name for m in (settings.candidate if need_candidate else None,
                              *(judges if settings.stage != "generate" else ())) if m is not None and is_mock(m.model)]
    if mocks:
        console.print(f"[yellow]warning:[/] {shown(', '.join(mocks))}: offline mock model(s); replies and verdicts are "
                      "deterministic placeholders and the scores mean nothing", highlight=False, soft_wrap=True)
    check_keys(*models_to_call(settings, spec))  # every model's key, before the first call
    max_reply_bytes()  # and a bad $RUBRIC_ENGINE_MAX_REPLY_MB, before the run directory is written

    out = Path(settings.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # every stage journals; stage=generate into a journal of its own that becomes answers.jsonl (no samples.jsonl)
    journal = out / (runstream.GENERATE_JOURNAL if settings.stage == "generate" else rundir.SAMPLES_FILE)
    digest = _spec_hash(spec)
    identity = _identity(settings, spec, digest, judges, dataset.sha256)
    manifest = rundir.begin_run(out, identity)  # refuses another run's directory before anything is read
    fp = run_fingerprint(identity)  # the journal header carries the manifest's identity, hashed
    totals = runstream.Totals()
    # read what an interrupted run of this same command left, before writing anything: every stage, panel runs
    # (repeats, juries, candidate samples) included, since each record keeps every vote their sections need
    state = runstream.resume(journal, fp, totals.add)
    done = state.done
    if state.repaired:
        console.print(state.repaired, highlight=False, soft_wrap=True)
    if done:
        console.print(f"resuming: {len(done)} of {len(questions)} questions already in {journal.name}; "
                      f"running the other {len(questions) - len(done)}", highlight=False, soft_wrap=True)
    rundir.write_json(out / rundir.SPEC_FILE, spec.resolved())
    cache = ResultCache(settings.cache_dir or default_cache_dir()) if settings.cache_enabled else None
    todo = rows.view([r for r in questions if r.id not in done])
    writer = JournalWriter(journal, fp, header={"questions": len(questions)}) if todo else None
    stages: dict[str, Any] = {}
    t0 = time.monotonic()
    log.info("start: benchmark %s, %d questions (%d to run), stage %s, candidate %s, judge %s, concurrency %d, rpm %s, "
             "max_retries %d, cache %s", spec.name, len(questions), len(todo), settings.stage,
             f"{settings.candidate.name} ({settings.candidate.model})" if need_candidate and settings.candidate
             else "answers file", f"{judge_spec.name} ({judge_spec.model})" if settings.stage != "generate" else "none",
             settings.concurrency, settings.rpm, settings.max_retries,
             (settings.cache_dir or "default") if settings.cache_enabled else "off")

    def finished(o: _Outcome) -> None:
        """One question is final: score it, append its record to the journal, keep only compact values."""
        for x in o.samples or [o]:
            if x.judge is not None and x.judge.verdicts is not None:
                x.score = question_score(spec, x.question.criteria, [v.hit for v in x.judge.verdicts])
        rec = merge_record([_sample(spec, x) for x in o.samples]) if o.samples else _sample(spec, o)
        if rec["candidate_error"] and spec.aggregation.candidate_errors == "zero" and settings.stage != "generate":
            rec.update(zero_fields(spec, o.question.criteria))  # scored 0, marked `zeroed`, counted in the summary
        assert writer is not None
        writer.append(rec)
        totals.add(rec)

    saved = interrupt.handlers()
    try:
        calls = asyncio.run(_run_async(settings, spec, todo, given, judges, cache, console, stages, finished))
    except asyncio.CancelledError:
        if not interrupt.stopped():
            raise
    finally:
        if writer is not None:
            writer.close()  # synced: every question finished before a signal is in the journal
        if cache is not None:
            cache.close()
    interrupt.check_stopped(saved)  # a signal: Interrupted (exit 130 / 143), the same command resumes
    timing = {name: round(bar.elapsed, 3) if bar is not None else None for name, bar in stages.items()}
    timing["total"] = round(time.monotonic() - t0, 3)

    summary = _summary(settings, spec, dataset, judge_spec, totals,
                       totals.scored_in_order(questions) if settings.stage != "generate" else [], calls,
                       totals.compact_in_order(questions))
    summary.update(spec_hash=digest, run_id=manifest["run_id"])
    repeats = _repeats(settings, spec)
    offsets = runstream.index(journal)  # id -> byte offset: the journal is read in question order from here on
    if settings.stage != "generate" and (len(judges) > 1 or repeats > 1):
        summary["judge"] = {"name": "+".join(j.name for j in judges), "model": ",".join(j.model for j in judges)}
    if settings.stage != "generate" and (len(judges) > 1 or repeats > 1 or k_samples > 1):
        # noise / jury / sampling / hierarchical interval: every vote streamed from the journal, question order
        summary.update(runstream.panel_sections(spec, journal, rows, [j.name for j in judges], repeats=repeats,
                                                samples=k_samples, rule=settings.jury_rule,
                                                tie=settings.tie or spec.judge.tie, offsets=offsets))
    summary["wall_seconds"] = timing  # per stage, from its first call to its last result; total = whole run
    rundir.write_json(out / rundir.SUMMARY_FILE, summary)
    # answers.jsonl is read from the journal, which becomes the question-ordered samples.jsonl (stage=generate:
    # is removed, its answers being the output)
    runstream.finish_files(out, journal, rows, spec.data.fields.id, samples=settings.stage != "generate",
                           offsets=offsets)
    rundir.finish_run(out, manifest)
    # report.html beside the results (bounded: none past REPORT_MAX_QUESTIONS); a failure is one warning
    write_run_report(out, console, questions=len(questions))
    c = summary["counts"]
    log.info("end: %d of %d scored, %d candidate errors, %d judge errors, %.1f s", c["scored"], c["questions"],
             c["candidate_errors"], c["judge_errors"], timing["total"])
    if settings.stage != "generate" and not settings.quiet:
        print_summary(summary, spec.resolved(), results)
        print_panel(summary, results)
        print_sampling(summary, results)
    results.print(f"outputs: {out}", highlight=False, soft_wrap=True)
    return summary


def _start_litellm_early(settings: RunSettings) -> None:
    """Start importing LiteLLM (seconds) while the spec and data load, when calls are certain: no
    cache, or no cache store yet. With a cache that may hold every answer it is left to the first
    real call, so a fully cached re-score never imports it. The import is CPU-bound Python, so on
    its own thread it overlaps the I/O of start-up (a data download, a slow disk), not the parsing."""
    if settings.stage == "score" and not (settings.answers or settings.from_run):
        return  # a config error is coming; nothing to preload for
    needs = [settings.candidate if not (settings.answers or settings.from_run) else None,
             settings.judge if settings.stage != "generate" else None]
    if settings.judge is not None or settings.stage == "generate":
        if all(m is None or is_mock(m.model) for m in needs):
            return  # mock models only: LiteLLM is never needed
    cache_dir = Path(settings.cache_dir) if settings.cache_dir else default_cache_dir()
    if not settings.cache_enabled or not (cache_dir / "cache.db").is_file():
        from .models import preload_litellm

        preload_litellm()
