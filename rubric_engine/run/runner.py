"""One benchmark run from Python: load, generate, judge, score, write the run directory.

Why here and not in the CLI: the engine must be usable without Hydra (notebooks, other tools),
so the CLI only turns its config into `RunSettings` and calls `run_benchmark`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, cast

from rich.console import Console

from rubric_engine.record.codec import decode
from rubric_engine.record.types import Record
from rubric_engine.record.summary import Summary
from rubric_engine.dataset.load import load_dataset, select
from rubric_engine.datatypes import Dataset, Question, QuestionRows
from rubric_engine.errors import ConfigError, DataError, DiskFull
from rubric_engine.models import interrupt
from rubric_engine.models.batchapi import check_batchable
from rubric_engine.models.batchjournal import check_no_batches_in_flight
from rubric_engine.models.bodycap import max_reply_bytes
from rubric_engine.models.cache import ResultCache, default_cache_dir
from rubric_engine.models.entries import check_keys
from rubric_engine.models.workers import WorkerPool
from rubric_engine.report.console import (print_anchored, print_pairwise, print_panel, print_sampling,
                                           print_summary)
from rubric_engine.report.run_page import write_run_report
from rubric_engine.run import shards as runshards
from rubric_engine.run import stream as runstream
from rubric_engine.run.adaptive import adaptive_fold
from rubric_engine.run.identity import is_shipped, is_shipped_name, run_identity, spec_digest
from rubric_engine.run.provenance import run_provenance
from rubric_engine.run.journal import JournalWriter, run_fingerprint
from rubric_engine.run.loops import run_sync
from rubric_engine.run.pipeline import run_pipeline
from rubric_engine.run.pairwise import baseline_answers, pairwise_section
from rubric_engine.run.plan import RunPlan, plan_run
from rubric_engine.run.record import Outcome, sample_record
from rubric_engine.run.settings import STAGES, RunSettings
from rubric_engine.run.shards import Spread
from rubric_engine.run.summary import build_summary
from rubric_engine.run.tryout import tryout_spec
from rubric_engine.run.waves import Selector, Waves, add_calls, add_seconds
from rubric_engine.run.transcripts import TranscriptWriter
from rubric_engine.shapes.registry import check_templates
from rubric_engine.spec.checks import check_breakdowns_against_tags
from rubric_engine.spec.files import benchmark_search_path
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import BenchmarkSpec
from rubric_engine.stats.sampling import merge_record
from rubric_engine.stats.scores import zero_fields
from rubric_engine.store import layout as rundir
from rubric_engine.text.terminal import SafeConsole, shown

__all__ = ["run_benchmark", "run_benchmark_async", "load_inputs", "given_answers", "with_run_data", "RunInputs",
           "check_run", "journal_questions"]

log = logging.getLogger("rubric_engine")  # Hydra writes it to <run dir>/rubric-engine.log


def load_inputs(settings: RunSettings, lazy: bool = False) -> tuple[BenchmarkSpec, Dataset, Sequence[Question]]:
    """Spec, data and the selected questions, every row validated. `lazy`: the questions are a
    `QuestionRows` holding only compact refs (each read again from its row when used), so a run's
    memory does not grow with the data; otherwise a list."""
    if settings.stage not in STAGES:
        raise ConfigError(f"stage={settings.stage!r} is not a stage; use one of {', '.join(STAGES)}")
    settings = with_run_data(settings)
    spec = load_spec(settings.benchmark, benchmark_search_path(settings.benchmark_dirs), settings.trust_code)
    spec = spec.with_candidate_errors(settings.candidate_errors)  # part of the resolved spec, so of its hash
    spec, tryout = tryout_spec(settings, spec)  # mock models only: the spec's packaged sample, not its download
    dataset = load_dataset(spec, settings.data_path, Path(settings.data_cache_dir) if settings.data_cache_dir else None,
                           lazy=lazy)
    if tryout:
        dataset.warnings.insert(0, tryout)
    check_breakdowns_against_tags(spec, dataset.item_tags, dataset.example_tags)
    chosen = partial(select, subset=settings.subset, limit=settings.limit, ids=settings.ids)
    rows = dataset.questions
    questions = rows.view(chosen(rows.refs)) if isinstance(rows, QuestionRows) else chosen(rows)
    if not questions:
        raise ConfigError("the selection holds no question; check subset= / ids= / limit=")
    check_templates(spec, list(questions[:3]))  # template errors before any paid call
    return spec, dataset, questions


def with_run_data(settings: RunSettings) -> RunSettings:
    """`from_run=DIR` without `data.path=`: the data file that run used (its summary's `data_path`), so its answers
    are judged against the same rows, never the spec's download; unchanged when the run used the spec's data."""
    if not settings.from_run or settings.data_path is not None:
        return settings
    try:
        used = rundir.read_summary(Path(settings.from_run)).get("data_path")
    except DataError:  # no readable summary: given_answers says what is wrong with that directory
        return settings
    return replace(settings, data_path=used) if isinstance(used, str) and used else settings


def given_answers(settings: RunSettings, spec: BenchmarkSpec, all_ids: Sequence[str]) -> dict[str, str | None] | None:
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
                  results: Console | None = None, warned: set[str] | None = None, *,
                  checked: Callable[[], object] | None = None, selector: Selector | None = None,
                  spread: Spread | None = None) -> Summary:
    """Run the stages the settings ask for and return the summary (also written to out_dir).

    `console` (stderr) gets progress and warnings; `results` (stdout) the final tables and the output path,
    so `rubric-engine ... > result.txt` keeps results apart from progress. `warned`: the warnings already
    shown by earlier runs of the same sweep (each distinct one is shown once; this run adds its own). The run
    holds its directory's lock throughout (rundir.RunLock): a second process into the same directory is refused.
    `checked` is called once the spec, data, plan and keys have passed their checks, before the run directory
    is written (the command line starts its report worker there: cli/startup.report_worker_for).
    `selector`: the questions are chosen while the run runs, one wave after another (run/waves.py: the adaptive
    subset of an item model, validity/adaptiverun.py), among the selected ones.
    `spread`: where the questions run when not in this process (run/shards.py: shards on a Ray cluster, given by
    the command line's `ray=`); None runs them here.
    Runs an event loop of its own (run/loops.run_sync: on a worker thread when one already runs here); code inside
    a loop may await `run_benchmark_async` instead.
    """
    return run_sync(run_benchmark_async(settings, console, results, warned, checked=checked, selector=selector,
                                        spread=spread))


async def run_benchmark_async(settings: RunSettings, console: Console | None = None,
                              results: Console | None = None, warned: set[str] | None = None, *,
                              checked: Callable[[], object] | None = None, selector: Selector | None = None,
                              spread: Spread | None = None) -> Summary:
    """`run_benchmark` on the caller's event loop: the model calls run there (the checks, the loading and the
    files written at the end are plain blocking work between them). The run owns its worker processes
    (workers=N, models/workers.py): started for it, handed to its clients, ended with it; nothing process-wide is
    set, so two runs in one process never see each other's."""
    with rundir.RunLock(Path(settings.out_dir)):
        workers = WorkerPool(settings.workers)
        try:
            return await _run_locked(settings, console, results, set() if warned is None else warned, checked,
                                     workers, selector, spread)
        finally:
            await workers.aclose()


def _warn(console: Console, warned: set[str], text: str, key: str | None = None) -> None:
    """Print a warning line once per `warned` set (a sweep's); `key` when the line names what varies between
    jobs (the mock models) but says the same thing."""
    if (key or text) in warned:
        return
    warned.add(key or text)
    console.print(text, highlight=False, soft_wrap=True)


def _kept(full: DiskFull, cache: ResultCache | None) -> str:
    """What became of the answers that arrived while a full disk stopped the run, said honestly: kept in a call
    cache on another disk, or (cache off, or on the full disk) paid again on resume where not yet journaled."""
    if cache is None:
        return "the call cache is off: answers not yet in the journal are paid again on resume"
    try:
        apart = Path(cache.directory).stat().st_dev != Path(full.path).parent.stat().st_dev
    except OSError:
        apart = False
    if apart:
        return (f"the calls in flight were answered and kept in the call cache ({cache.directory}, another disk): "
                "the resume does not pay for them again")
    return (f"the call cache ({cache.directory}) is on the same disk: an answer it could not store is paid again "
            "on resume (cache.dir= on another disk keeps them)")


@dataclass
class RunInputs:
    """What a run's checks established before its directory is written, the same for the head of a sharded run
    and for each of its shards (run/shardrun.py): settings, spec, data, answers given, plan, baseline, identity."""

    settings: RunSettings
    spec: BenchmarkSpec
    dataset: Dataset
    rows: QuestionRows
    given: dict[str, str | None] | None
    plan: RunPlan
    baseline: Mapping[str, str] | None
    digest: str
    identity: dict[str, Any]

    @property
    def journal(self) -> Path:
        """Every stage journals; stage=generate into a journal of its own that becomes answers.jsonl."""
        return Path(self.settings.out_dir) / (rundir.GENERATE_JOURNAL if self.settings.stage == "generate"
                                              else rundir.SAMPLES_FILE)


def check_run(settings: RunSettings, console: Console, warned: set[str]) -> RunInputs:
    """Load and check everything a run needs before its first call (spec, data, answers, plan, keys, baseline),
    each warning printed once per `warned`; nothing is written."""
    settings = with_run_data(settings)  # from_run=: the run's own data file (summary.json's data_path)
    spec, dataset, rows = load_inputs(settings, lazy=True)
    assert isinstance(rows, QuestionRows) and isinstance(dataset.questions, QuestionRows)
    for warning in dataset.warnings:
        _warn(console, warned, f"[yellow]data warning:[/] {shown(warning)}")
    if not is_shipped(spec):
        _warn(console, warned, f"spec: {shown(spec.dir)} (not the shipped {shown(spec.name)})"
              if is_shipped_name(spec.name) else f"spec: {shown(spec.dir)}")
    given = given_answers(settings, spec, [r.id for r in dataset.questions.refs])
    if settings.stage == "score" and given is None:
        raise ConfigError("stage=score needs answers=FILE or from_run=DIR")
    if given is None and settings.candidate is None:
        raise ConfigError("no candidate model: pass candidate=<name> (see `rubric-engine --help`) or answers=FILE")
    plan = plan_run(settings, spec)  # judges, repeats, samples, jury and tie rules: resolved and checked once
    mocks = [m.name for m in plan.models() if m.offline]
    if mocks:
        _warn(console, warned, f"[yellow]warning:[/] {shown(', '.join(mocks))}: offline mock model(s); replies and "
              "verdicts are deterministic placeholders and the scores mean nothing", key="mock models")
    if spec.judge is None and (settings.judge or settings.jury) and plan.judged:
        _warn(console, warned, "note: this benchmark declares no judge (every item is checked by the engine); "
              "judge= is not used")
    check_keys(*plan.models())  # every model's key, before the first call
    if settings.batch:  # batch=true: every model has a batch API through LiteLLM, before any call (exit 2)
        check_batchable(plan.models(), settings.cache_enabled)
    else:  # batches a batch=true run left in flight here are resumed with batch=true, never paid twice
        check_no_batches_in_flight(Path(settings.out_dir))
    base_warnings: list[str] = []  # pairwise: the baseline's answers, every selected question's, before any call
    base_answers = baseline_answers(settings, spec, plan.baseline, plan.judged, rows.refs, base_warnings)
    for warning in base_warnings:
        _warn(console, warned, f"[yellow]data warning:[/] {shown(warning)}")
    max_reply_bytes()  # and a bad $RUBRIC_ENGINE_MAX_REPLY_MB, before the run directory is written
    digest = spec_digest(spec)
    return RunInputs(settings, spec, dataset, rows, given, plan, base_answers, digest,
                     run_identity(settings, plan, spec, digest, dataset.sha256))


async def _run_locked(settings: RunSettings, console: Console | None, results: Console | None,
                      warned: set[str], checked: Callable[[], object] | None,
                      workers: WorkerPool, selector: Selector | None = None, spread: Spread | None = None) -> Summary:
    console = console or SafeConsole(stderr=True)
    results = results or SafeConsole()
    if settings.retry_errors and selector is not None:
        raise ConfigError("retry_errors=true cannot ask an adaptive run's errored questions again: the waves after "
                          "them were chosen without their answers; start a new run (another hydra.run.dir=)")
    if spread is not None and selector is not None:
        raise ConfigError("item_budget= chooses each wave from the answers of the waves before it, in this process; "
                          "leave ray= unset for an adaptive run")
    inputs = check_run(settings, console, warned)
    if selector is not None:  # which questions it asks is decided by the selector: another one is another run
        inputs.identity["selection"]["adaptive"] = selector.identity()
    settings, spec, dataset, rows, plan = inputs.settings, inputs.spec, inputs.dataset, inputs.rows, inputs.plan
    questions = rows.refs  # compact handles: each question is read again from its row when a worker takes it
    verdict = plan.shape.verdict  # how each reply is judged, scored and summarised (shapes/)
    judges = list(plan.judges)
    _start_litellm_early(settings, workers)  # checked: from here on the run makes its calls
    if checked is not None:
        checked()

    out = Path(settings.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    journal, digest = inputs.journal, inputs.digest
    manifest = rundir.begin_run(out, inputs.identity)  # refuses another run's directory before anything is read
    fp = run_fingerprint(inputs.identity)  # the journal header carries the manifest's identity, hashed
    planned = selector.budget if selector is not None else len(questions)
    header = {"questions": planned}
    runshards.merge_segments(journal, fp, header)  # what the shards of a killed sharded run journalled (run/shards.py)
    totals = runstream.Totals(verdict)
    if settings.retry_errors:  # the questions that ended in errors leave the journal: they run again below
        errored = runstream.drop_errors(journal, fp)
        console.print(f"retry_errors: {errored} of {len(questions)} questions ended in errors; asking them again "
                      "(every other answer is kept)" if errored else
                      "retry_errors: no record holds an error; no answer is asked again", highlight=False,
                      soft_wrap=True)
    # read what an interrupted run of this same command left, before writing anything: every stage, panel runs
    # (repeats, juries, candidate samples) included, since each record keeps every vote their sections need
    state = runstream.resume(journal, fp, totals.add)
    done = state.done
    if state.repaired:
        console.print(state.repaired, highlight=False, soft_wrap=True)
    waves = Waves(selector, questions, done, totals.scored) if selector is not None else None
    if done:
        console.print(f"resuming: {len(done)} of {planned} questions already in {journal.name}; "
                      f"running the other {planned - len(done)}", highlight=False, soft_wrap=True)
    rundir.write_json(out / rundir.SPEC_FILE, spec.resolved())
    todo = rows.view(waves.next() if waves is not None else [r for r in questions if r.id not in done])
    t0 = time.monotonic()
    log.info("start: benchmark %s, %d questions (%d to run), stage %s, candidate %s, judge %s, concurrency %s, rpm %s, "
             "max_retries %d, cache %s", spec.name, len(questions), len(todo), settings.stage,
             f"{settings.candidate.name} ({settings.candidate.model})" if plan.need_candidate and settings.candidate
             else "answers file", f"{judges[0].name} ({judges[0].model})" if plan.judged and judges else "none",
             settings.concurrency, settings.rpm, settings.max_retries,
             (settings.cache_dir or "default") if settings.cache_enabled else "off")
    if spread is not None and todo:  # the shards journal into segments; merged, the journal reads as one run's
        calls, timing = await runshards.spread_run(spread, settings, fp, (digest, dataset.sha256), len(todo),
                                                   lambda line: console.print(line, highlight=False, soft_wrap=True))
        runshards.merge_segments(journal, fp, header)
        totals = runstream.Totals(verdict)
        runstream.resume(journal, fp, totals.add)
    else:
        calls, timing = await journal_questions(inputs, todo, journal, fp, header, console, workers, totals.add)
        while waves is not None and todo and (todo := rows.view(waves.next())):  # a signal raised in the wave before
            more, took = await journal_questions(inputs, todo, journal, fp, header, console, workers, totals.add)
            calls = add_calls(calls, more)
            timing = add_seconds(timing, took)
    if waves is not None:  # the questions it asked, in the data's order: all that is written from here on
        rows = rows.view(waves.chosen(questions))
        questions = rows.refs
    timing["total"] = round(time.monotonic() - t0, 3)

    summary = build_summary(settings, plan, spec, dataset, totals,
                            totals.scored_in_order(questions) if plan.judged else [], calls,
                            totals.compact_in_order(questions))
    summary["spec_hash"], summary["run_id"] = digest, manifest["run_id"]
    summary["provenance"] = run_provenance(plan, out)  # engine, command, models and params (report.html)
    offsets = runstream.index(journal)  # id -> byte offset: the journal is read in question order from here on
    if plan.judged and plan.panel:
        summary["judge"] = {"name": "+".join(j.name for j in judges), "model": ",".join(j.model for j in judges)}
    if plan.judged and (plan.panel or plan.samples > 1) and verdict.criterion_votes:
        # noise / jury / sampling / hierarchical interval: every vote streamed from the journal, question order
        sections = runstream.panel_sections(spec, journal, rows, [j.name for j in judges], repeats=plan.repeats,
                                            samples=plan.samples, rule=plan.rule, tie=plan.tie, offsets=offsets,
                                            adaptive=adaptive_fold(plan.adaptive, judges, spec))
        summary.update(cast(Summary, sections))
    if plan.judged and verdict.compares:  # wins / ties / losses and position consistency (stats/pairwise.py)
        records = (rec for _, rec in runstream.ordered_records(journal, questions, offsets))
        summary["pairwise"] = pairwise_section(settings, spec, plan.baseline, records)
    if plan.judged:  # the verdict's own section, if it has one (shapes/)
        summary.update(cast(Summary, verdict.summary_section(spec, lambda: (rec for _, rec in runstream.ordered_records(
            journal, questions, offsets)))))
    summary["wall_seconds"] = timing  # per stage, from its first call to its last result; total = whole run
    rundir.write_json(out / rundir.SUMMARY_FILE, summary)
    # answers.jsonl is read from the journal, which becomes the question-ordered samples.jsonl (stage=generate:
    # is removed, its answers being the output)
    runstream.finish_files(out, journal, rows, spec.data.fields.id, plan.shape.conversation,
                           samples=settings.stage != "generate", offsets=offsets)
    rundir.finish_run(out, manifest)
    # report.html beside the results (bounded: none past REPORT_MAX_QUESTIONS); a failure is one warning
    write_run_report(out, console, questions=len(questions), trust_code=settings.trust_code)
    c = summary["counts"]
    log.info("end: %d of %d scored, %d candidate errors, %d judge errors, %.1f s", c["scored"], c["questions"],
             c["candidate_errors"], c["judge_errors"], timing["total"])
    if settings.stage != "generate" and not settings.quiet:
        print_summary(summary, spec.resolved(), results)
        print_panel(summary, results)
        print_sampling(summary, results)
        print_pairwise(summary, results)
        print_anchored(summary, results)
    results.print(f"outputs: {out}", highlight=False, soft_wrap=True)
    return summary


async def journal_questions(inputs: RunInputs, todo: Sequence[Question], journal: Path, fp: str,
                            header: Mapping[str, Any], console: Console, workers: WorkerPool,
                            on_record: Callable[[Record], None] | None = None, *,
                            transcripts: Path | None = None) -> tuple[dict[str, dict[str, int]], dict[str, float | None]]:
    """Run the pipeline over `todo`, each finished question scored and appended to the journal at `journal` (the
    run's, or a shard's segment) and handed to `on_record` decoded; returns the calls and seconds per stage.
    Every call is written to `transcripts` (a shard's segment: one writer per file) or, None, the run's
    transcripts/calls.jsonl. A signal or a full disk stops it after the journal is synced (interrupt.check_stopped)."""
    settings, spec, plan = inputs.settings, inputs.spec, inputs.plan
    verdict = plan.shape.verdict
    cache = ResultCache(settings.cache_dir or default_cache_dir()) if settings.cache_enabled else None
    writer = JournalWriter(journal, fp, header=header) if todo else None
    scribe = TranscriptWriter(Path(settings.out_dir), path=transcripts) if todo else None  # docs/outputs.md
    stages: dict[str, Any] = {}

    def finished(o: Outcome) -> None:
        """One question is final: score it, append its record to the journal, keep only compact values."""
        for x in o.samples or [o]:
            if x.judge is not None and x.judge.verdicts is not None:  # a comparison scores in its record
                x.score = verdict.question_score(spec, x.question, x.judge)
        rec = merge_record([sample_record(spec, x) for x in o.samples]) if o.samples else sample_record(spec, o)
        if rec["candidate_error"] and spec.aggregation.candidate_errors == "zero" and settings.stage != "generate":
            rec.update(zero_fields(spec, o.question.criteria))  # scored 0, marked `zeroed`, counted in the summary
        assert writer is not None
        if scribe is not None:
            scribe.finished(o.question.id)  # its calls reach the disk before its journal record
        writer.append(rec)
        if on_record is not None:
            on_record(decode(rec))

    saved = interrupt.handlers()
    calls: dict[str, dict[str, int]] = {}
    try:
        # a task of its own, as asyncio.run gave it: a signal cancels the pipeline (models/interrupt.SignalStop), not
        # the caller's task
        calls = await asyncio.ensure_future(run_pipeline(settings, plan, spec, todo, inputs.given, cache, console,
                                                         stages, finished, baseline=inputs.baseline,
                                                         observer=scribe.observe if scribe is not None else None,
                                                         workers=workers))
    except asyncio.CancelledError:
        if not interrupt.stopped():
            raise
    finally:
        for closing in (writer, scribe):  # synced: every question finished before a signal is in the journal
            try:
                if closing is not None:
                    closing.close()
            except DiskFull as exc:  # reported below, once the cache is closed
                interrupt.disk_filled(exc)
        if cache is not None:
            cache.close()
    try:
        interrupt.check_stopped(saved)  # a signal: Interrupted (exit 130 / 143), the same command resumes
    except DiskFull as exc:
        exc.kept = _kept(exc, cache)
        raise
    return calls, {name: round(bar.elapsed, 3) if bar is not None else None for name, bar in stages.items()}


def _start_litellm_early(settings: RunSettings, workers: WorkerPool) -> None:
    """Start importing LiteLLM (seconds) once the run has passed its checks, when calls are certain: no
    cache, or no cache store yet. With a cache that may hold every answer it is left to the first
    real call, so a fully cached re-score never imports it. Not before the checks: a run refused for
    its spec, data or keys would pay seconds of CPU for an import no call uses. The import is CPU-bound
    Python, so on its own thread it overlaps only the I/O left (the journal read on resume, a slow disk)."""
    if settings.stage == "score" and not (settings.answers or settings.from_run):
        return  # a config error is coming; nothing to preload for
    needs = [settings.candidate if not (settings.answers or settings.from_run) else None,
             settings.judge if settings.stage != "generate" else None]
    if settings.judge is not None or settings.stage == "generate":
        if all(m is None or m.offline for m in needs):
            return  # mock models only: LiteLLM is never needed
    cache_dir = Path(settings.cache_dir) if settings.cache_dir else default_cache_dir()
    if not settings.cache_enabled or not (cache_dir / "cache.db").is_file():
        from rubric_engine.models.client import preload_litellm

        preload_litellm(workers)
