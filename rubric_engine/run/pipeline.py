"""The async pipeline: each question flows generate -> judge through a fixed pool of workers.

Why apart from the runner: this is the only part that talks to models; the runner around it
loads, resumes, journals and writes files. Each finished question goes to a callback and is
dropped, so memory does not grow with the number of questions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Console

from rubric_engine.datatypes import Question
from rubric_engine.errors import DiskFull, FatalModelError, ModelCallError
from rubric_engine.judge.checked import Grader
from rubric_engine.models.batches import BatchRun
from rubric_engine.models.cache import ResultCache
from rubric_engine.models.events import Observer, set_call_context
from rubric_engine.models.concurrency import ceiling
from rubric_engine.models.interrupt import SignalStop, stopped
from rubric_engine.models.redact import redact
from rubric_engine.report.console import ProgressBoard
from rubric_engine.run.plan import RunPlan
from rubric_engine.run.dialogue import converse, given_transcripts, within_cap
from rubric_engine.run.record import Outcome
from rubric_engine.run.callnotes import call_notes
from rubric_engine.models.workers import WorkerPool
from rubric_engine.run.settings import RunSettings, client_layers
from rubric_engine.shapes.base import Judging
from rubric_engine.spec.schema import BenchmarkSpec


log = logging.getLogger("rubric_engine")


class EmptyReply(ModelCallError):
    """The candidate answered with no text (often a content filter): recorded, never cached."""

    def __str__(self) -> str:  # the plain sentence: no model prefix or attempt count for a reply that came
        return "the candidate returned an empty reply"


def _accept_candidate(text: str) -> None:
    if not text.strip():
        raise EmptyReply("candidate", "the candidate returned an empty reply", attempts=1)
    within_cap("candidate", text)


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    """The first real exception in a (nested) group: the CLI reports it in one line."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def run_pipeline(settings: RunSettings, plan: RunPlan, spec: BenchmarkSpec, questions: Sequence[Question],
                       given: dict[str, str | None] | None,
                     cache: ResultCache | None, console: Console,
                     stages: dict[str, Any], finished: Callable[[Outcome], None],
                     baseline: Mapping[str, str] | None = None,
                     observer: Observer | None = None,
                     workers: WorkerPool | None = None) -> dict[str, dict[str, int]]:
    """Each question flows generate -> judge on its own, so judging starts with the first answer; a fixed
    pool of 2 x concurrency workers takes the next question when one is `finished`, so what is in flight
    (and in memory) does not grow with the number of questions. With batch=true every question starts at
    once instead, so each wave of calls (generation, judging, re-asks) is one provider batch.
    `stages` receives the per-stage progress counters (their clocks give the wall time per stage).
    The first SIGINT / SIGTERM stops every request not yet sent and every question not yet taken, waits for the
    calls in flight (at most the longest model timeout, a countdown on `console`) so their answers are cached,
    then cancels what is left (models/interrupt.py); the caller sees `interrupt.stopped()`, and
    asyncio.CancelledError when something was still running. A full disk (`DiskFull` from `finished` or the
    transcripts' `observer`) stops the same way; `interrupt.check_stopped` raises it afterwards. `workers`: the
    run's worker processes (workers=N), which its clients call through; None: every call in this process."""
    grace = max((m.timeout for m in plan.models() if m.timeout), default=0.0)
    stop = SignalStop(grace, say=lambda text: console.print(text, highlight=False, markup=False, soft_wrap=True),
                      resume=settings.resume_command).install()
    try:
        return await _pipeline(settings, plan, spec, questions, given, cache, console, stages, finished, baseline,
                               observer, workers, stop.halt)
    finally:
        stop.restore()


async def _pipeline(settings: RunSettings, plan: RunPlan, spec: BenchmarkSpec, questions: Sequence[Question],
                    given: dict[str, str | None] | None,
                    cache: ResultCache | None, console: Console,
                    stages: dict[str, Any], finished: Callable[[Outcome], None],
                    baseline: Mapping[str, str] | None,
                    observer: Observer | None, workers: WorkerPool | None,
                    halt: Callable[[BaseException], None]) -> dict[str, dict[str, int]]:
    shape = plan.shape  # how each reply comes to be and how it is judged (shapes/)
    talk = shape.conversation.talks  # a conversation: many candidate calls per reply (run/dialogue.py)
    said = given_transcripts(settings.answers, settings.from_run, spec.data.fields.id) if talk and given is not None \
        else {}  # a conversation judged again from its answers: the sessions they hold
    with ProgressBoard(settings.progress, console) as board:
        k = plan.samples

        def notify(text: str) -> None:
            board.note(text)
            log.info(text)

        batches = BatchRun(settings.out_dir, poll=settings.batch_poll, max_retries=settings.max_retries,
                           notify=notify, max_wait=settings.batch_max_wait) if settings.batch else None
        # every client's layers, chosen here once (models/compose.py): nothing is attached to a client afterwards
        layers = client_layers(settings, spec, cache, workers).with_(batches=batches, notify=notify, observer=observer)
        base = layers.client(plan.baseline, "baseline") if plan.baseline and plan.judged else None
        cand = layers.client(settings.candidate, "candidate") if given is None and settings.candidate else None
        user = layers.client(plan.user, "user") if cand is not None and plan.user is not None else None
        clients = [layers.client(j, "judge", prompt_cache=True) for j in plan.judges] if plan.judged else []
        panel = shape.verdict.panel(clients, [j.name for j in plan.judges], spec, plan.repeats, plan.rule, plan.tie,
                                    plan.adaptive) \
            if clients else None
        judge = Grader(panel) if plan.judged else None  # checked items by the engine, the rest by the panel
        judging = Judging(spec, judge, clients, base, baseline) if judge is not None else None
        gen_bar = board.stage("generate", k * len(questions)) if cand else None
        judge_bar = board.stage("judge", k * len(questions)) if judge else None
        stages.update({"generate": gen_bar, "judge": judge_bar})

        async def one(o: Outcome, s: int = 0) -> None:
            """One reply of a question (sample s: its own candidate cache key, its own judge repeat keys)."""
            q = o.question
            set_call_context(question=q.id, sample=s)  # this task's calls belong to q (the transcripts say so)
            if cand is not None:
                assert gen_bar is not None
                gen_bar.start()
                try:
                    if talk:
                        await converse(spec, q, o, cand, user, _accept_candidate, repeat=s,
                                       conversation=shape.conversation, verdict=shape.verdict)
                    else:
                        request = shape.conversation.requests(spec, q, "candidate")([])  # the plan's (shapes/)
                        res = await cand.send(request, accept=_accept_candidate, repeat=s)
                        o.cand_tokens, o.cand_cost, o.cand_cached = (res.prompt_tokens, res.completion_tokens), res.cost, int(res.cached)
                        o.response, o.truncated = res.text, res.finish_reason == "length"
                except EmptyReply as exc:
                    got = getattr(exc, "call_result", None)
                    reason = getattr(got, "finish_reason", None)
                    o.candidate_error = _turn(exc) + str(exc) + (f" (finish_reason: {reason})" if reason else "")
                except FatalModelError as exc:
                    if exc.stops_run:
                        raise
                    o.candidate_error = _turn(exc) + redact(str(exc))
                except ModelCallError as exc:
                    o.candidate_error = _turn(exc) + redact(str(exc))
                if o.user_error:
                    log.info("simulated user error on %s: %s", q.id, o.user_error)
                if o.candidate_error:
                    log.info("candidate error on %s: %s", q.id, o.candidate_error)
                gen_bar.advance(cached=bool(o.cand_cached), error=o.candidate_error is not None or bool(o.user_error),
                                tokens=sum(o.cand_tokens), cost=o.cand_cost)
            else:
                o.response = (given or {}).get(q.id)
                if q.id in said:
                    o.transcript = said[q.id]
                if o.response is None:
                    o.candidate_error = "no answer for this question in the answers file"
            if judging is None:
                return
            assert judge_bar is not None
            if o.response is not None and not o.user_error:
                judge_bar.start()
                o.judge, o.checks = await shape.verdict.judge(
                    judging, q, o.response, first_repeat=s * judging.grader.repeats,
                    transcript=_as_dicts(o) if o.transcript is not None else None)
            jr = o.judge
            if jr is not None and jr.error:
                log.info("judge error on %s: %s", q.id, jr.error)
            judge_bar.advance(cached=bool(jr and jr.cache_hits and jr.attempts == jr.cache_hits),
                              error=bool(jr and jr.error),
                              tokens=(jr.prompt_tokens + jr.completion_tokens) if jr else 0, cost=jr.cost if jr else None)

        pending = iter(questions)

        async def worker() -> None:
            for q in pending:  # shared: each question is taken by exactly one worker
                if stopped():  # a signal came and a cancellation was lost somewhere: take nothing more
                    raise asyncio.CancelledError
                o = Outcome(q)
                try:
                    if k > 1:  # candidate.samples: K replies, started together, merged into one record
                        o.samples = [Outcome(q) for _ in range(k)]
                        await asyncio.gather(*(one(x, s) for s, x in enumerate(o.samples)))
                    else:
                        await one(o)
                    finished(o)
                except DiskFull as exc:  # stop as the first Ctrl-C does: the calls in flight still reach the cache
                    halt(exc)
                    return

        try:
            async with asyncio.TaskGroup() as tg:
                # batch=true: every question at once, so each wave of calls is one provider batch
                for _ in range(len(questions) if settings.batch else min(len(questions), 2 * ceiling(settings.concurrency))):
                    tg.create_task(worker())
        except* BaseException as group:  # one line from the CLI, never an ExceptionGroup traceback
            raise _first_leaf(group) from None
        finally:
            if batches is not None:
                await batches.aclose()
            for each in (cand, user, base, *clients):
                if each is not None:
                    await each.aclose()
    # "made": requests for results this invocation did not have; cache hits are counted apart
    calls = {role: {"made": sum(c.stats.calls - c.stats.cache_hits for c in cs),
                    "cache_hits": sum(c.stats.cache_hits for c in cs), "retries": sum(c.stats.retries for c in cs),
                    **call_notes([c for c in cs if c is not None])}  # prompt cache, concurrency=auto (run/callnotes.py)
             for role, cs in (("candidate", [cand] if cand else []), ("judge", clients), ("user", [user] if user else []),
                              ("baseline", [base] if base else []))
             if cs or role in ("candidate", "judge")}
    if batches is not None:  # batch=true: how many of each role's answers came from provider batches
        for role, cs in (("candidate", [cand]), ("judge", clients), ("user", [user]), ("baseline", [base])):
            if role in calls:
                calls[role]["batched"] = sum(c.stats.batched for c in cs if c is not None)
    return calls


def _turn(exc: BaseException) -> str:
    """'turn k: ' for a conversation's failed candidate call (run/dialogue.py sets exc.turn), else ''."""
    turn = getattr(exc, "turn", None)
    return f"turn {turn}: " if turn else ""


def _as_dicts(o: Outcome) -> list[dict[str, Any]]:
    """The transcript as the verdict reads it: each turn's words, and a simulated user's hidden state (`state`)."""
    return [{"role": t.role, "content": t.content, **({"state": t.state} if hasattr(t, "state") else {})}
            for t in o.transcript or ()]

