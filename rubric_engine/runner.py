"""One benchmark run from Python: load, generate, judge, score, write the run directory.

Why here and not in the CLI: the engine must be usable without Hydra (notebooks, other tools),
so the CLI only turns its config into `RunSettings` and calls `run_benchmark`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from . import rundir, runstream
from .aggregate import ScoredQuestion
from .cache import ResultCache, default_cache_dir
from .dataset import Question, load_dataset, select
from .errors import ConfigError, FatalModelError, ModelCallError
from .journal import JournalWriter, run_fingerprint
from .judge import JudgeResult
from .judge_noise import panel_sections, print_panel
from .jury import Panel, check_panel
from .mockmodel import is_mock
from .models import ModelClient, ModelSpec
from .prompts import candidate_messages, check_templates
from .redact import redact
from .report import ProgressBoard, print_summary
from .run_report import write_run_report
from .sampling import check_samples, compact, merge_record, print_sampling, summary_sections
from .scores import question_score, record_fields, score_summary
from .scoring import QuestionScore
from .spec import BenchmarkSpec, benchmark_search_path, load_spec
from .speccheck import check_breakdowns_against_data

__all__ = ["RunSettings", "run_benchmark", "check_api_keys", "declared_judge"]

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
    progress: str = "auto"
    trust_code: bool = False  # allow a spec's module:function scoring formula to be imported (formulas.py)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Outcome:
    """What happened to one question across both stages."""

    question: Question
    response: str | None = None
    candidate_error: str | None = None
    cand_tokens: tuple[int, int] = (0, 0)
    cand_cost: float | None = None
    cand_cached: int = 0
    truncated: bool = False  # the candidate's reply was cut off (finish_reason "length")
    judge: JudgeResult | None = None
    score: QuestionScore | None = None
    samples: list["_Outcome"] = field(default_factory=list)  # candidate.samples > 1: one outcome per sample


class EmptyReply(ModelCallError):
    """The candidate answered with no text (often a content filter): recorded, never cached."""

    def __str__(self) -> str:  # the plain sentence: no model prefix or attempt count for a reply that came
        return "the candidate returned an empty reply"


def _accept_candidate(text: str) -> None:
    if not text.strip():
        raise EmptyReply("candidate", "the candidate returned an empty reply", attempts=1)


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    """The first real exception in a (nested) group: the CLI reports it in one line."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def check_api_keys(*specs: ModelSpec | None) -> None:
    """Fail before any work when a model's key is missing: one line naming the variable."""
    for spec in specs:
        if spec is not None and spec.api_key_env and not os.environ.get(spec.api_key_env):
            raise ConfigError(f"{spec.name} ({spec.model}) needs an API key: export {spec.api_key_env}=... "
                              f"(or point it elsewhere with api_key_env=<VAR>)")


def _load(settings: RunSettings) -> tuple[BenchmarkSpec, Any, list[Question]]:
    if settings.stage not in STAGES:
        raise ConfigError(f"stage={settings.stage!r} is not a stage; use one of {', '.join(STAGES)}")
    spec = load_spec(settings.benchmark, benchmark_search_path(settings.benchmark_dirs), settings.trust_code)
    dataset = load_dataset(spec, settings.data_path, Path(settings.data_cache_dir) if settings.data_cache_dir else None)
    check_breakdowns_against_data(spec, dataset.questions)
    questions = select(dataset.questions, subset=settings.subset, limit=settings.limit, ids=settings.ids)
    if not questions:
        raise ConfigError("the selection holds no question; check subset= / ids= / limit=")
    check_templates(spec, questions)  # template errors before any paid call
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
    so `rubric-engine ... > result.txt` keeps results apart from progress.
    """
    console = console or Console(stderr=True)
    results = results or Console()
    _start_litellm_early(settings)
    spec, dataset, questions = _load(settings)
    for warning in dataset.warnings:
        console.print(f"[yellow]data warning:[/] {warning}", highlight=False, soft_wrap=True)
    if not _shipped(spec):
        console.print(f"spec: {spec.dir} (not the shipped {spec.name})" if _shipped_name(spec.name) else
                      f"spec: {spec.dir}", highlight=False, soft_wrap=True)
    given = _given_answers(settings, spec, [q.id for q in dataset.questions])
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
        console.print(f"[yellow]warning:[/] {', '.join(mocks)}: offline mock model(s); replies and verdicts are "
                      "deterministic placeholders and the scores mean nothing", highlight=False, soft_wrap=True)
    check_api_keys(settings.candidate if need_candidate else None, *(judges if settings.stage != "generate" else ()))

    out = Path(settings.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    journaled = settings.stage != "generate"  # stage=generate keeps its answers in memory (no samples.jsonl)
    digest = _spec_hash(spec)
    identity = _identity(settings, spec, digest, judges)
    manifest = rundir.begin_run(out, identity)  # refuses another run's directory before anything is read
    fp = run_fingerprint(identity)  # the journal header carries the manifest's identity, hashed
    totals = runstream.Totals()
    done: set[str] = set()
    # Repeats and juries need every question's votes for their noise / jury sections, which the journal
    # does not keep: such a run starts its journal afresh and resumes from the call cache (nothing re-paid
    # while the cache is there), so those sections always cover every scored question.
    panel_mode = settings.stage != "generate" and (len(judges) > 1 or _repeats(settings, spec) > 1 or k_samples > 1)
    panel_results: list[tuple[Question, Any]] = []
    nested_records: dict[str, dict[str, Any]] = {}  # compact records for the hierarchical interval (sampling.py)
    if journaled and panel_mode:
        (out / rundir.SAMPLES_FILE).unlink(missing_ok=True)
    elif journaled:  # read what an interrupted run of this same command left, before writing anything
        state = runstream.resume(out, fp, totals.add)
        done = state.done
        if state.repaired:
            console.print(state.repaired, highlight=False, soft_wrap=True)
        if done:
            console.print(f"resuming: {len(done)} of {len(questions)} questions already in {rundir.SAMPLES_FILE}; "
                          f"running the other {len(questions) - len(done)}", highlight=False, soft_wrap=True)
    rundir.write_json(out / rundir.SPEC_FILE, spec.resolved())
    cache = ResultCache(settings.cache_dir or default_cache_dir()) if settings.cache_enabled else None
    todo = [q for q in questions if q.id not in done]
    responses: dict[str, str | None] = {}
    writer = JournalWriter(out / rundir.SAMPLES_FILE, fp, header={"questions": len(questions)}) if journaled and todo else None
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
        if panel_mode:
            panel_results.extend((x.question, x.judge) for x in o.samples or [o])
            nested_records[o.question.id] = compact(rec)
        if writer is not None:
            writer.append(rec)
        else:
            responses[o.question.id] = o.response  # stage=generate: answers.jsonl is written at the end
        totals.add(rec)

    try:
        calls = asyncio.run(_run_async(settings, spec, todo, given, judges, cache, console, stages, finished))
    finally:
        if writer is not None:
            writer.close()
        if cache is not None:
            cache.close()
    timing = {name: round(bar.elapsed, 3) if bar is not None else None for name, bar in stages.items()}
    timing["total"] = round(time.monotonic() - t0, 3)

    summary = _summary(settings, spec, dataset, judge_spec, totals,
                       totals.scored_in_order(questions) if journaled else [], calls, totals.compact_in_order(questions))
    summary.update(spec_hash=digest, run_id=manifest["run_id"])
    if settings.stage != "generate" and (len(judges) > 1 or _repeats(settings, spec) > 1):
        summary["judge"] = {"name": "+".join(j.name for j in judges), "model": ",".join(j.model for j in judges)}
        order = {q.id: i for i, q in enumerate(questions)}  # question order, not completion order: deterministic
        panel_results.sort(key=lambda pair: order[pair[0].id])
        summary.update(panel_sections(spec, panel_results, [j.name for j in judges],
                                      _repeats(settings, spec), settings.jury_rule, settings.tie or spec.judge.tie))
    if settings.stage != "generate" and (_repeats(settings, spec) > 1 or k_samples > 1):
        by_id = {q.id: q for q in questions}
        summary.update(summary_sections(spec, [nested_records[q.id] for q in questions if q.id in nested_records],
                                        lambda rec: list(by_id[str(rec["id"])].criteria), samples=k_samples,
                                        repeats=_repeats(settings, spec), rule=settings.jury_rule,
                                        tie=settings.tie or spec.judge.tie))
    summary["wall_seconds"] = timing  # per stage, from its first call to its last result; total = whole run
    rundir.write_json(out / rundir.SUMMARY_FILE, summary)
    if journaled:  # the journal becomes the question-ordered samples.jsonl; answers.jsonl is read from it
        runstream.finish_files(out, questions, spec.data.fields.id)
    else:
        rundir.write_jsonl(out / rundir.ANSWERS_FILE, rundir.answer_rows(questions, responses, spec.data.fields.id))
    rundir.finish_run(out, manifest)
    write_run_report(out, console)  # report.html beside the results; a failure is one warning, never the run's
    c = summary["counts"]
    log.info("end: %d of %d scored, %d candidate errors, %d judge errors, %.1f s", c["scored"], c["questions"],
             c["candidate_errors"], c["judge_errors"], timing["total"])
    if settings.stage != "generate" and settings.progress != "none":
        print_summary(summary, spec.resolved(), results)
        print_panel(summary, results)
        print_sampling(summary, results)
    results.print(f"outputs: {out}", highlight=False, soft_wrap=True)
    return summary


def _shipped_dir() -> Path | None:
    from .specfile import _packaged_dir

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


def _identity(settings: RunSettings, spec: BenchmarkSpec, digest: str, judges: list[ModelSpec]) -> dict[str, Any]:
    """What makes a run the same run: a directory is resumed only by a run with this same identity."""
    cand, judge = settings.candidate, judges[0]
    panel = {"jury": [[j.name, j.model, j.api_base, j.revision] for j in judges], "jury_rule": settings.jury_rule,
             "repeats": _repeats(settings, spec), "tie": settings.tie or spec.judge.tie} \
        if len(judges) > 1 or _repeats(settings, spec) > 1 else {}  # a single grading keeps its old identity
    if settings.samples > 1:
        panel["samples"] = settings.samples
    return {**panel, "benchmark": spec.name, "spec_hash": digest, "stage": settings.stage,
            "candidate": [cand.name, cand.model, cand.api_base, cand.revision] if cand else None,
            "answers": str(settings.answers or settings.from_run or "") or None,
            "judge": [judge.name, judge.model, judge.api_base, judge.revision] if settings.stage != "generate" else None,
            "selection": {"subset": settings.subset, "limit": settings.limit,
                          "ids": [str(i) for i in settings.ids] if settings.ids else None}}


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


async def _run_async(settings: RunSettings, spec: BenchmarkSpec, questions: list[Question],
                     given: dict[str, str | None] | None, judges: list[ModelSpec],
                     cache: ResultCache | None, console: Console,
                     stages: dict[str, Any], finished: Callable[[_Outcome], None]) -> dict[str, dict[str, int]]:
    """Each question flows generate -> judge on its own, so judging starts with the first answer; a fixed
    pool of 2 x concurrency workers takes the next question when one is `finished`, so what is in flight
    (and in memory) does not grow with the number of questions.
    `stages` receives the per-stage progress counters (their clocks give the wall time per stage)."""
    limits = dict(cache=cache, concurrency=settings.concurrency, rpm=settings.rpm, max_retries=settings.max_retries)
    cand = ModelClient(settings.candidate, role="candidate", **limits) if given is None and settings.candidate else None
    clients = [ModelClient(j, role="judge", **limits) for j in judges] if settings.stage != "generate" else []
    judge = Panel(clients, [j.name for j in judges], spec, _repeats(settings, spec), settings.jury_rule,
                  settings.tie or spec.judge.tie) if clients else None
    with ProgressBoard(settings.progress, console) as board:
        k = max(1, settings.samples)
        gen_bar = board.stage("generate", k * len(questions)) if cand else None
        judge_bar = board.stage("judge", k * len(questions)) if judge else None
        stages.update({"generate": gen_bar, "judge": judge_bar})

        def notify(text: str) -> None:
            board.note(text)
            log.info(text)

        for client in (cand, *clients):
            if client is not None:
                client.notify = notify

        async def one(o: _Outcome, s: int = 0) -> None:
            """One reply of a question (sample s: its own candidate cache key, its own judge repeat keys)."""
            q = o.question
            if cand is not None:
                assert gen_bar is not None
                gen_bar.start()
                try:
                    res = await cand.complete(candidate_messages(spec, q), accept=_accept_candidate, repeat=s)
                    o.cand_tokens, o.cand_cost, o.cand_cached = (res.prompt_tokens, res.completion_tokens), res.cost, int(res.cached)
                    o.response, o.truncated = res.text, res.finish_reason == "length"
                except EmptyReply as exc:
                    got = getattr(exc, "call_result", None)
                    reason = getattr(got, "finish_reason", None)
                    o.candidate_error = str(exc) + (f" (finish_reason: {reason})" if reason else "")
                except FatalModelError as exc:
                    if exc.stops_run:
                        raise
                    o.candidate_error = redact(str(exc))
                except ModelCallError as exc:
                    o.candidate_error = redact(str(exc))
                if o.candidate_error:
                    log.info("candidate error on %s: %s", q.id, o.candidate_error)
                gen_bar.advance(cached=bool(o.cand_cached), error=o.candidate_error is not None,
                                tokens=sum(o.cand_tokens), cost=o.cand_cost)
            else:
                o.response = (given or {}).get(q.id)
                if o.response is None:
                    o.candidate_error = "no answer for this question in the answers file"
            if judge is None:
                return
            assert judge_bar is not None
            if o.response is not None:
                judge_bar.start()
                o.judge = await judge.judge(q, o.response, first_repeat=s * judge.repeats)
            jr = o.judge
            if jr is not None and jr.error:
                log.info("judge error on %s: %s", q.id, jr.error)
            judge_bar.advance(cached=bool(jr and jr.cache_hits and jr.attempts == jr.cache_hits),
                              error=bool(jr and jr.error),
                              tokens=(jr.prompt_tokens + jr.completion_tokens) if jr else 0, cost=jr.cost if jr else None)

        pending = iter(questions)

        async def worker() -> None:
            for q in pending:  # shared: each question is taken by exactly one worker
                o = _Outcome(q)
                if k > 1:  # candidate.samples: K replies, started together, merged into one record
                    o.samples = [_Outcome(q) for _ in range(k)]
                    await asyncio.gather(*(one(x, s) for s, x in enumerate(o.samples)))
                else:
                    await one(o)
                finished(o)

        try:
            async with asyncio.TaskGroup() as tg:
                for _ in range(min(len(questions), 2 * max(1, settings.concurrency))):
                    tg.create_task(worker())
        except* BaseException as group:  # one line from the CLI, never an ExceptionGroup traceback
            raise _first_leaf(group) from None
        finally:
            for client in (cand, *clients):
                if client is not None:
                    await client.aclose()
    # "made": requests for results this invocation did not have; cache hits are counted apart
    calls = {role: {"made": sum(c.stats.calls - c.stats.cache_hits for c in cs),
                    "cache_hits": sum(c.stats.cache_hits for c in cs), "retries": sum(c.stats.retries for c in cs)}
             for role, cs in (("candidate", [cand] if cand else []), ("judge", clients))}
    return calls


def _sample(spec: BenchmarkSpec, o: _Outcome) -> dict[str, Any]:
    """One samples.jsonl record: everything needed to audit or re-aggregate this question."""
    q, jr = o.question, o.judge
    rec: dict[str, Any] = {"id": q.id, "subset": q.subset, "scenario": q.scenario, "response": o.response,
                           "candidate_error": o.candidate_error, "judge_error": None, "criteria": [],
                           "abilities": {}, "score": None, "failed_rules": [], "catastrophic": False}
    verdicts = {v.index: v for v in (jr.verdicts or [])} if jr else {}
    if q.tags:
        rec["tags"] = list(q.tags)
    for c in q.criteria:
        v = verdicts.get(c.index)
        rec["criteria"].append({"index": c.index, "label": c.label, "ability": c.ability, "rule": c.rule,
                                "weight": c.weight, "text": c.text,
                                "reasoning": v.reasoning if v else None, "hit": v.hit if v else None,
                                **_votes(jr, c.index),
                                **({"tags": list(c.tags)} if c.tags else {})})
    if jr is not None and jr.error:
        rec["judge_error"], rec["judge_raw"] = redact(jr.error), [redact(_clip(r)) for r in jr.raw_replies]
    elif o.score is not None:
        rec.update(record_fields(o.score))  # the same record fields `rescore` writes (scores.py)
    rec["tokens"] = {"candidate": {"prompt": o.cand_tokens[0], "completion": o.cand_tokens[1]},
                     "judge": {"prompt": jr.prompt_tokens if jr else 0, "completion": jr.completion_tokens if jr else 0}}
    rec["cost"] = {"candidate": o.cand_cost, "judge": jr.cost if jr else None}
    rec["cache_hits"] = {"candidate": o.cand_cached, "judge": jr.cache_hits if jr else 0}
    rec["truncated"] = o.truncated
    return rec


def _votes(jr: JudgeResult | None, index: int) -> dict[str, Any]:
    """Every repeat's verdict of every judge on one criterion ({} for a single grading)."""
    votes = getattr(jr, "votes", None)
    if not votes:
        return {}
    return {"votes": {name: [next((v.hit for v in rep or [] if v.index == index), None) for rep in reps]
                      for name, reps in votes.items()}}


def _clip(text: str, limit: int = 20_000) -> str:
    """A raw reply kept for audit, bounded: a 1 MB reply must not make samples.jsonl unreadable."""
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text) - limit} more characters not kept]"




def _summary(settings: RunSettings, spec: BenchmarkSpec, dataset: Any, judge_spec: ModelSpec,
             totals: runstream.Totals, scored: Sequence[ScoredQuestion],
             calls: Mapping[str, Any], compact: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    judged = settings.stage != "generate"
    cand = settings.candidate
    return {
        "schema_version": rundir.SUMMARY_SCHEMA_VERSION,
        "benchmark": spec.name, "benchmark_version": spec.version, "data_sha256": dataset.sha256,
        "data_trust": dataset.trust,
        "candidate": {"name": cand.name, "model": cand.model, "family": cand.family} if cand else _answers_candidate(settings),
        "judge": {"name": judge_spec.name, "model": judge_spec.model, "family": judge_spec.family} if judged else None,
        # the same path `rescore` takes from samples.jsonl (scores.py): one aggregation, never two; the
        # journal's compact per-question values stand in for the records
        **score_summary(spec, compact, scored_stage=judged, scored=scored),
        "tokens": totals.tokens,
        "cost": totals.costs(),
        "calls": dict(calls),
        "selection": {"subset": settings.subset, "limit": settings.limit, "ids": list(settings.ids) if settings.ids else None},
        "stage": settings.stage,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _answers_candidate(settings: RunSettings) -> dict[str, Any]:
    """Score-only runs: from_run keeps the earlier run's candidate (name, model, family), so several
    judges re-grading one run's replies stay attributable to the same candidate; else the file's name."""
    if settings.from_run:
        try:
            prior = rundir.read_summary(Path(settings.from_run)).get("candidate")
        except (OSError, ValueError):
            prior = None
        if isinstance(prior, dict) and prior.get("name"):
            return {"name": str(prior["name"]), "model": prior.get("model"), "family": prior.get("family")}
    return {"name": _answers_name(settings), "model": None, "family": None}


def _answers_name(settings: RunSettings) -> str:
    src = settings.from_run or settings.answers or "answers"
    return Path(src).stem if settings.answers else Path(src).name
