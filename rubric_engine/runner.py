"""One benchmark run from Python: load, generate, judge, score, write the run directory.

Why here and not in the CLI: the engine must be usable without Hydra (notebooks, other tools),
so the CLI only turns its config into `RunSettings` and calls `run_benchmark`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from . import rundir
from .aggregate import ScoredQuestion, scored_question
from .cache import ResultCache, default_cache_dir
from .dataset import Question, load_dataset, select
from .errors import ConfigError, FatalModelError, ModelCallError
from .judge import JudgeResult, judge_response
from .mockmodel import is_mock
from .models import ModelClient, ModelSpec
from .prompts import candidate_messages, check_templates
from .redact import redact
from .report import ProgressBoard, print_summary
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


class EmptyReply(ModelCallError):
    """The candidate answered with no text (often a content filter): recorded, never cached."""


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
    judge_spec = settings.judge or declared_judge(spec, settings.timeout)
    mocks = [m.name for m in (settings.candidate if need_candidate else None,
                              judge_spec if settings.stage != "generate" else None) if m is not None and is_mock(m.model)]
    if mocks:
        console.print(f"[yellow]warning:[/] {', '.join(mocks)}: offline mock model(s); replies and verdicts are "
                      "deterministic placeholders and the scores mean nothing", highlight=False, soft_wrap=True)
    check_api_keys(settings.candidate if need_candidate else None, judge_spec if settings.stage != "generate" else None)

    out = Path(settings.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    digest = _spec_hash(spec)
    manifest = rundir.begin_run(out, _identity(settings, spec, digest, judge_spec))
    rundir.write_json(out / rundir.SPEC_FILE, spec.resolved())
    cache = ResultCache(settings.cache_dir or default_cache_dir()) if settings.cache_enabled else None
    stages: dict[str, Any] = {}
    t0 = time.monotonic()
    log.info("start: benchmark %s, %d questions, stage %s, candidate %s, judge %s, concurrency %d, rpm %s, "
             "max_retries %d, cache %s", spec.name, len(questions), settings.stage,
             f"{settings.candidate.name} ({settings.candidate.model})" if need_candidate and settings.candidate
             else "answers file", f"{judge_spec.name} ({judge_spec.model})" if settings.stage != "generate" else "none",
             settings.concurrency, settings.rpm, settings.max_retries,
             (settings.cache_dir or "default") if settings.cache_enabled else "off")
    try:
        outcomes, calls = asyncio.run(_run_async(settings, spec, questions, given, judge_spec, cache, console, stages))
    finally:
        if cache is not None:
            cache.close()
    timing = {name: round(bar.elapsed, 3) if bar is not None else None for name, bar in stages.items()}
    timing["total"] = round(time.monotonic() - t0, 3)

    responses = {o.question.id: o.response for o in outcomes}
    rundir.write_jsonl(out / rundir.ANSWERS_FILE, rundir.answer_rows(questions, responses, spec.data.fields.id))
    for o in outcomes:
        if o.judge is not None and o.judge.verdicts is not None:
            o.score = question_score(spec, o.question.criteria, [v.hit for v in o.judge.verdicts])
    samples = [_sample(spec, o) for o in outcomes]
    if settings.stage != "generate":
        rundir.write_jsonl(out / rundir.SAMPLES_FILE, samples)
    typed = (scored_question(o.question, o.score) for o in outcomes if o.score is not None)
    scored = [s for s in typed if s is not None]  # typed results straight from the judge, not re-parsed dicts
    summary = _summary(settings, spec, dataset, judge_spec, samples, scored, calls)
    summary.update(spec_hash=digest, run_id=manifest["run_id"])
    summary["wall_seconds"] = timing  # per stage, from its first call to its last result; total = whole run
    rundir.write_json(out / rundir.SUMMARY_FILE, summary)
    rundir.finish_run(out, manifest)
    c = summary["counts"]
    log.info("end: %d of %d scored, %d candidate errors, %d judge errors, %.1f s", c["scored"], c["questions"],
             c["candidate_errors"], c["judge_errors"], timing["total"])
    if settings.stage != "generate" and settings.progress != "none":
        print_summary(summary, spec.resolved(), results)
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


def _identity(settings: RunSettings, spec: BenchmarkSpec, digest: str, judge: ModelSpec) -> dict[str, Any]:
    """What makes a run the same run: a directory is resumed only by a run with this same identity."""
    cand = settings.candidate
    return {"benchmark": spec.name, "spec_hash": digest, "stage": settings.stage,
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


def declared_judge(spec: BenchmarkSpec, timeout: float | None = None) -> ModelSpec:
    """The judge the benchmark declares, built like every other model entry (its timeout included)."""
    return ModelSpec.from_config(spec.judge.model.model_dump(exclude_none=True), role="judge", timeout=timeout)


async def _run_async(settings: RunSettings, spec: BenchmarkSpec, questions: list[Question],
                     given: dict[str, str | None] | None, judge_spec: ModelSpec,
                     cache: ResultCache | None, console: Console,
                     stages: dict[str, Any]) -> tuple[list[_Outcome], dict[str, dict[str, int]]]:
    """Each question flows generate -> judge on its own, so judging starts with the first answer.
    `stages` receives the per-stage progress counters (their clocks give the wall time per stage)."""
    limits = dict(cache=cache, concurrency=settings.concurrency, rpm=settings.rpm, max_retries=settings.max_retries)
    cand = ModelClient(settings.candidate, role="candidate", **limits) if given is None and settings.candidate else None
    judge = ModelClient(judge_spec, role="judge", **limits) if settings.stage != "generate" else None
    outcomes = [_Outcome(q) for q in questions]
    with ProgressBoard(settings.progress, console) as board:
        gen_bar = board.stage("generate", len(questions)) if cand else None
        judge_bar = board.stage("judge", len(questions)) if judge else None
        stages.update({"generate": gen_bar, "judge": judge_bar})

        def notify(text: str) -> None:
            board.note(text)
            log.info(text)

        for client in (cand, judge):
            if client is not None:
                client.notify = notify

        async def one(o: _Outcome) -> None:
            q = o.question
            if cand is not None:
                assert gen_bar is not None
                gen_bar.start()
                try:
                    res = await cand.complete(candidate_messages(spec, q), accept=_accept_candidate)
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
                o.judge = await judge_response(judge, spec, q, o.response)
            jr = o.judge
            if jr is not None and jr.error:
                log.info("judge error on %s: %s", q.id, jr.error)
            judge_bar.advance(cached=bool(jr and jr.cache_hits and jr.attempts == jr.cache_hits),
                              error=bool(jr and jr.error),
                              tokens=(jr.prompt_tokens + jr.completion_tokens) if jr else 0, cost=jr.cost if jr else None)

        try:
            async with asyncio.TaskGroup() as tg:
                for o in outcomes:
                    tg.create_task(one(o))
        except* BaseException as group:  # one line from the CLI, never an ExceptionGroup traceback
            raise _first_leaf(group) from None
        finally:
            for client in (cand, judge):
                if client is not None:
                    await client.aclose()
    # "made": requests for results this invocation did not have; cache hits are counted apart
    calls = {role: {"made": c.stats.calls - c.stats.cache_hits, "cache_hits": c.stats.cache_hits,
                    "retries": c.stats.retries}
             if c else {"made": 0, "cache_hits": 0, "retries": 0} for role, c in (("candidate", cand), ("judge", judge))}
    return outcomes, calls


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


def _clip(text: str, limit: int = 20_000) -> str:
    """A raw reply kept for audit, bounded: a 1 MB reply must not make samples.jsonl unreadable."""
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text) - limit} more characters not kept]"


def _sum_cost(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _summary(settings: RunSettings, spec: BenchmarkSpec, dataset: Any, judge_spec: ModelSpec,
             samples: Sequence[Mapping[str, Any]], scored: Sequence[ScoredQuestion],
             calls: Mapping[str, Any]) -> dict[str, Any]:
    judged = settings.stage != "generate"
    cand = settings.candidate
    return {
        "schema_version": rundir.SUMMARY_SCHEMA_VERSION,
        "benchmark": spec.name, "benchmark_version": spec.version, "data_sha256": dataset.sha256,
        "data_trust": dataset.trust,
        "candidate": {"name": cand.name, "model": cand.model, "family": cand.family} if cand else _answers_candidate(settings),
        "judge": {"name": judge_spec.name, "model": judge_spec.model, "family": judge_spec.family} if judged else None,
        # the same path `rescore` takes from samples.jsonl (scores.py): one aggregation, never two
        **score_summary(spec, samples, scored_stage=judged, scored=scored),
        "tokens": {r: {k: sum(s["tokens"][r][k] for s in samples) for k in ("prompt", "completion")}
                   for r in ("candidate", "judge")},
        "cost": {r: _sum_cost([s["cost"][r] for s in samples]) for r in ("candidate", "judge")},
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
