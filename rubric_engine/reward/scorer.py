"""Judge a batch of rollouts and score each under the spec: the engine's judge, the one scoring path, counts.

Why one scorer behind every framework: the reward must be the number a normal run of the same reply gives.
So a rollout is graded by the run's own judge panel (judge/panels.py: the judge given, a jury, repeats) through
`ModelClient` (its cache, retries, rate limits and concurrency cap) and scored by `stats.scores.question_score`
(the spec's formula, failure rules and aggregation). What changes for training is only around it: identical
completions of a question in one batch (a GRPO group often holds a few) are judged once; a judge failure is a
missing reward (None), never 0; each batch reports its calls, cache hits, failures, tokens and cost; and an
optional shadow judge grades a declared fraction of the rollouts so the gap between the two judges can be
watched (a policy that learns one judge's blind spots opens it first).

A rollout is untrusted text, and one bad rollout fails only itself: a completion holding an unpaired UTF-16
surrogate, one longer than a judge prompt may be (judge/prompts.py's limit) or over the reply body cap
($RUBRIC_ENGINE_MAX_REPLY_MB, models/bodycap.py), or one whose judge prompt passes that limit, is that rollout's
judge error (None, counted in `failures`), and the rest of the batch is judged. At most 2 x concurrency rollouts
are in the judge's hands at once (a pool, as a run's questions are), so a batch of many short rollouts holds
their prompts a few at a time, not all at once.

The reward is the question score (a fraction, before the spec's display `scale`) clipped to [0, 1]; the score
itself is kept beside it. A fired zeroing rule gives 0, as it does in a run: that is the rubric's verdict, not
a failure. A question the spec cannot score (no positive points, excluded) gives None, like a failure.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from rubric_engine.datatypes import Question
from rubric_engine.errors import ConfigError, DataError
from rubric_engine.judge.grading import JudgeResult
from rubric_engine.judge.checked import Grader
from rubric_engine.judge.prompts import MAX_OUTPUT_CHARS
from rubric_engine.models.bodycap import MAX_REPLY_ENV, max_reply_bytes
from rubric_engine.models.cache import ResultCache, default_cache_dir
from rubric_engine.models.client import preload_litellm
from rubric_engine.models.concurrency import ceiling
from rubric_engine.models.entries import ModelSpec, check_keys
from rubric_engine.models.redact import redact
from rubric_engine.reward.loop import LoopThread
from rubric_engine.run.plan import plan_run
from rubric_engine.run.runner import load_inputs
from rubric_engine.run.settings import RunSettings, client_layers
from rubric_engine.stats.scores import credits, question_score
from rubric_engine.text.surrogates import LONE_SURROGATE

__all__ = ["RolloutScore", "RewardCounts", "RewardInputs", "RewardScorer", "shadow_picked"]


@dataclass(frozen=True)
class RolloutScore:
    """One rollout's outcome. `reward` is None exactly when there is no score: the judge failed (`error` says
    why) or the spec cannot score the question. `verdicts`: (criterion index, met, reasoning) per criterion."""

    qid: str
    reward: float | None
    score: float | None  # the question score as a run records it (0-1 fraction; may leave [0, 1] unclipped)
    error: str | None = None
    failed_rules: tuple[str, ...] = ()
    catastrophic: bool = False
    verdicts: tuple[tuple[int, bool, str], ...] = ()
    duplicate: bool = False  # an identical completion of the same question came earlier in the batch
    shadow_reward: float | None = None  # the shadow judge's reward (None: not picked, or it failed)
    shadow_error: str | None = None


@dataclass
class RewardCounts:
    """What one call of the reward cost. `calls`: judge replies requested from a server (re-asks included,
    cache hits not); `failures`: rollouts whose reward is None because the judge failed; `unscored`: rollouts
    the spec cannot score. `cost` is None when any reply's price is unknown. `shadow`: the shadow judge's own
    counts and the gap (shadow reward - reward) over rollouts both judges scored."""

    rollouts: int = 0
    judged: int = 0  # distinct (question, completion) pairs graded
    copies: int = 0  # rollouts identical to an earlier one of the batch (scored from its verdict)
    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    unscored: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    seconds: float = 0.0
    shadow: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def add(self, other: "RewardCounts") -> None:
        """Running totals over calls (the shadow's gap is per call and is not summed)."""
        for name in ("rollouts", "judged", "copies", "calls", "cache_hits", "failures", "unscored",
                     "prompt_tokens", "completion_tokens", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.cost = None if self.cost is None or other.cost is None else self.cost + other.cost


def shadow_picked(qid: str, text: str, fraction: float) -> bool:
    """Whether the shadow judge grades this rollout: a fixed hash of question and reply, so the same rollout is
    always picked or never, and `fraction` of distinct rollouts are picked on average."""
    if fraction <= 0:
        return False
    return zlib.crc32(f"{qid}\0{text}".encode("utf-8", "surrogatepass")) < fraction * 2 ** 32


def _usage(results: Sequence[JudgeResult]) -> dict[str, Any]:
    costs = [r.cost for r in results]
    return {"calls": sum(r.attempts - r.cache_hits for r in results), "cache_hits": sum(r.cache_hits for r in results),
            "prompt_tokens": sum(r.prompt_tokens for r in results),
            "completion_tokens": sum(r.completion_tokens for r in results),
            "cost": None if None in costs else float(sum(c for c in costs if c is not None))}


def rollout_problem(text: str, reply_cap: int) -> str | None:
    """Why a completion cannot be judged at all (the engine's rules for a reply), or None."""
    if LONE_SURROGATE.search(text):
        return (f"the completion holds {len(LONE_SURROGATE.findall(text))} unpaired UTF-16 surrogate(s) "
                "(\\ud800-\\udfff), which is not valid Unicode; it is not judged")
    if len(text) > MAX_OUTPUT_CHARS:
        return (f"the completion is {len(text)} characters, over the {MAX_OUTPUT_CHARS}-character limit of a "
                "judge prompt; it is not judged")
    size = len(text.encode("utf-8"))
    if size > reply_cap:
        return (f"the completion is {size} bytes, over the reply limit of {reply_cap / 2**20:g} MiB "
                f"(${MAX_REPLY_ENV}); it is not judged")
    return None


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


class RewardInputs:
    """What a reward checks and knows before any judge call: the options, the spec, its questions by id, the
    judges' names and keys. A scorer is one; so is a pool of scorers on other processes (cluster/rewardpool.py),
    which refuses an unknown question id in one line before sending anything."""

    def __init__(self, settings: RunSettings, *, shadow: ModelSpec | None = None, shadow_fraction: float = 0.0) -> None:
        if isinstance(shadow_fraction, bool) or not 0.0 <= shadow_fraction <= 1.0:
            raise ConfigError(f"shadow_fraction={shadow_fraction} is not valid; give a fraction in [0, 1]")
        if shadow_fraction > 0 and shadow is None:
            raise ConfigError(f"shadow_fraction={shadow_fraction} needs a shadow judge: give shadow=<judge entry>")
        self.settings = settings
        self.spec, _, questions = load_inputs(settings)
        self.questions: dict[str, Question] = {q.id: q for q in questions}
        self.plan = plan_run(settings, self.spec)
        self.shadow_fraction = shadow_fraction if shadow is not None else 0.0
        check_keys(*self.plan.judges, shadow if self.shadow_fraction > 0 else None)
        self.judges = [j.name for j in self.plan.judges]

    def question(self, qid: str) -> Question:
        q = self.questions.get(qid)
        if q is None:
            raise ConfigError(f"question id {qid!r} is not in the benchmark's data ({len(self.questions)} questions "
                              f"loaded); check the id column, data.path= and subset= / ids= / limit=")
        return q


class RewardScorer(RewardInputs):
    """The spec, its questions by id, the judge panel (and the shadow's) on one loop thread. See module doc."""

    def __init__(self, settings: RunSettings, *, shadow: ModelSpec | None = None, shadow_fraction: float = 0.0) -> None:
        super().__init__(settings, shadow=shadow, shadow_fraction=shadow_fraction)
        plan = self.plan
        self.cache = ResultCache(settings.cache_dir or default_cache_dir()) if settings.cache_enabled else None
        layers = client_layers(settings, self.spec, self.cache)  # every judge's layers, at construction
        self.clients = [layers.client(j, "judge", prompt_cache=True) for j in plan.judges]
        # checked items (judge/checked.py) are decided by the engine as in a run; the panel grades the rest
        verdict = plan.shape.verdict  # the panel its verdict grades with (a score's asks for numbers)
        self.panel = Grader(verdict.panel(self.clients, [j.name for j in plan.judges], self.spec, plan.repeats,
                                          plan.rule, plan.tie, plan.adaptive) if self.clients else None)
        self.shadow: Grader | None = None
        if shadow is not None and self.shadow_fraction > 0:
            client = layers.client(shadow, "judge")
            self.clients.append(client)
            self.shadow = Grader(verdict.panel([client], [shadow.name], self.spec, 1, plan.rule, plan.tie))
        self.reply_cap = max_reply_bytes()
        self.pool = 2 * ceiling(settings.concurrency)  # rollouts in the judge's hands at once
        if not all(j.offline for j in (*plan.judges, *([shadow] if self.shadow else []))):
            preload_litellm()  # the import takes seconds: begin it now, not at the first batch
        self._loop = LoopThread()

    # -- calling ---------------------------------------------------------------------------------
    def run(self, items: Sequence[tuple[str, str]]) -> tuple[list[RolloutScore], RewardCounts]:
        """Score (question id, reply) pairs, blocking this thread."""
        return self._loop.run(self.score(items))

    async def run_async(self, items: Sequence[tuple[str, str]]) -> tuple[list[RolloutScore], RewardCounts]:
        """Score (question id, reply) pairs from another event loop."""
        return await self._loop.call(self.score(items))

    def close(self) -> None:
        """Close the model clients (on their loop), the loop and the cache. Idempotent."""
        async def close_clients() -> None:
            for c in self.clients:
                await c.aclose()

        self._loop.close(close_clients())
        if self.cache is not None:
            self.cache.close()
            self.cache = None

    # -- one batch ---------------------------------------------------------------------------------
    async def score(self, items: Sequence[tuple[str, str]]) -> tuple[list[RolloutScore], RewardCounts]:
        """Judge each distinct (question id, reply) once, score every rollout from its copy's verdicts."""
        t0 = time.perf_counter()
        for qid, _ in items:
            self.question(qid)  # an unknown id is the caller's error: one line before any call
        first: dict[tuple[str, str], int] = {}
        for i, key in enumerate(items):
            first.setdefault((key[0], key[1]), i)
        unique = list(first)
        shadowed = [k for k in unique if self.shadow is not None and shadow_picked(*k, self.shadow_fraction)]
        jobs = [(self.panel, k) for k in unique] + [(self.shadow, k) for k in shadowed]
        done = await self._judge_all(jobs)
        main, side = done[: len(unique)], done[len(unique):]
        graded = {k: self._outcome(k[0], r) for k, r in zip(unique, main)}
        shadow_graded = {k: self._outcome(k[0], r) for k, r in zip(shadowed, side)}
        out = []
        for i, (qid, text) in enumerate(items):
            got = graded[(qid, text)]
            sh = shadow_graded.get((qid, text))
            out.append(replace(got, duplicate=first[(qid, text)] != i, shadow_reward=sh.reward if sh else None,
                               shadow_error=sh.error if sh else None))
        counts = RewardCounts(rollouts=len(items), judged=len(unique), copies=len(items) - len(unique),
                              failures=sum(1 for r in out if r.error), seconds=time.perf_counter() - t0,
                              unscored=sum(1 for r in out if r.reward is None and not r.error),
                              **_usage(main))
        if self.shadow is not None:
            counts.shadow = self._shadow_counts(graded, shadow_graded, side)
        return out, counts

    async def _judge_all(self, jobs: Sequence[tuple[Any, tuple[str, str]]]) -> list[JudgeResult]:
        """Each (grader, (question id, reply)) judged, in order, by a pool of `self.pool` workers."""
        results: list[JudgeResult | None] = [None] * len(jobs)
        todo = iter(range(len(jobs)))

        async def worker() -> None:
            for i in todo:  # one iterator shared by the workers: each job is taken once
                grader, (qid, text) = jobs[i]
                results[i] = await self._judge_one(grader, qid, text)

        try:
            async with asyncio.TaskGroup() as tg:
                for _ in range(min(self.pool, len(jobs))):
                    tg.create_task(worker())
        except* BaseException as group:  # a key refused (401/403) stops training: one line, not a group
            raise _first_leaf(group) from None
        return [r for r in results if r is not None]

    async def _judge_one(self, grader: Any, qid: str, text: str) -> JudgeResult:
        """One rollout's judgment; a completion the engine refuses (or whose prompt passes the limit) is its own
        error, never the batch's."""
        problem = rollout_problem(text, self.reply_cap)
        if problem is None:
            try:
                return await grader.judge(self.question(qid), text)  # type: ignore[no-any-return]
            except DataError as exc:  # the judge prompt over its limit: this rollout's text is at fault
                problem = f"not judged: {exc}"
        return JudgeResult(None, problem)

    def _outcome(self, qid: str, jr: JudgeResult) -> RolloutScore:
        if jr.error or jr.verdicts is None:
            # redacted as a run's record is: a server may echo the key it was sent
            return RolloutScore(qid, None, None, error=redact(jr.error or "the judge gave no verdicts"))
        q = self.question(qid)
        qs = question_score(self.spec, q.criteria, [v.hit for v in jr.verdicts],  # use: probability: expected points
                            credits(self.spec, [v.p_met for v in jr.verdicts]))
        reward = None if qs.score is None else min(1.0, max(0.0, qs.score))
        return RolloutScore(qid, reward, qs.score, failed_rules=tuple(qs.failed_rules), catastrophic=qs.catastrophic,
                            verdicts=tuple((v.index, v.hit, redact(v.reasoning)) for v in jr.verdicts))

    @staticmethod
    def _shadow_counts(graded: dict[tuple[str, str], RolloutScore], shadow: dict[tuple[str, str], RolloutScore],
                       results: Sequence[JudgeResult]) -> dict[str, Any]:
        gaps = [s.reward - graded[k].reward for k, s in shadow.items()
                if s.reward is not None and graded[k].reward is not None]
        return {"judged": len(shadow), "failures": sum(1 for s in shadow.values() if s.error), "compared": len(gaps),
                "gap_mean": sum(gaps) / len(gaps) if gaps else None,
                "gap_abs_mean": sum(abs(g) for g in gaps) / len(gaps) if gaps else None, **_usage(results)}

