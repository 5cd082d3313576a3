"""The plan of a run's calls: per role, every request the run will send for its questions (as
shapes/plan.question_calls renders them) and how many calls each stands for, and the dry run's estimate from it:
calls, cached calls, tokens and cost per role, without calling any model.

Why in run/ and not in the command line: the plan needs what a run resolves (its inputs, its RunPlan: roles,
judges, repeats, samples) and the run's cache; the dry run (cli/commands.print_estimate) only prints it. The
requests themselves come from the shapes, the same ones `prompts` prints and the preflight renders.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.datatypes import Question

from rubric_engine.errors import ConfigError
from rubric_engine.models.entries import ModelSpec, destination, replies_per_request, reply_ceiling
from rubric_engine.run.settings import RunSettings
from rubric_engine.shapes.base import Message
from rubric_engine.shapes.plan import question_calls

if TYPE_CHECKING:
    from rubric_engine.run.plan import RunPlan
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["PlannedRequest", "RoleCalls", "role_calls", "estimate_calls"]


@dataclass(frozen=True)
class PlannedRequest:
    """One request of the plan: for question `question`, sample `sample`, grading `repeat` (a judge's), sent
    `calls` times (a conversation's turns); `reply_known` False: the reply it judges is a placeholder."""
    question: str
    sample: int
    messages: list[Message]
    calls: int = 1
    repeat: int = 0
    reply_known: bool = True
    items: int = 0  # a judge's: the rubric items it is shown for the question
    response_format: dict[str, Any] | None = None  # the format it is first asked with (part of its cache key)


@dataclass
class RoleCalls:
    """A role's model and every request the run sends it, in question order (`calls`: their number). `kind`:
    candidate, user, judge or baseline (`role` names a juror: `judge NAME`)."""
    role: str
    kind: str
    model: ModelSpec
    repeats: int
    requests: list[PlannedRequest]

    @property
    def calls(self) -> int:
        return sum(r.calls for r in self.requests)

    @property
    def first(self) -> list[Message] | None:
        """The role's first request, as `prompts` prints it for the first question (None: no request)."""
        return self.requests[0].messages if self.requests else None


def _litellm() -> Any:
    """LiteLLM as every model call gets it (models/litellm_runtime.py: the price map read from the copy it ships,
    never fetched; no `.env` loaded; configured once)."""
    from rubric_engine.models.litellm_runtime import RUNTIME

    return RUNTIME.module()


def _counter() -> Any:
    """LiteLLM's offline token counter (its bundled tokenizers)."""
    return _litellm().token_counter


def role_calls(spec: "BenchmarkSpec", questions: Sequence[Question], plan: "RunPlan", settings: RunSettings,
               given: bool, reply_of: Callable[[str, int], str | None]) -> Iterator[RoleCalls]:
    """Every role's requests for `questions` under the run's `plan`: the candidate's (unless answers are given)
    and a simulated user's, each judge's (every grading: `plan.repeats` per reply and sample) and a baseline
    model's. `reply_of(question id, sample)`: the candidate's reply when known (given or cached), else None:
    the judge's requests then carry an empty reply, and are built only when the roles before them were read
    (the dry run learns the candidate's cached replies from its own requests). stage=generate plans no judge."""
    roles: list[tuple[str, ModelSpec | None, str]] = [] if given else [("candidate", settings.candidate, "candidate")]
    roles += [("user", plan.user, "user")] if plan.user is not None else []
    if settings.stage != "generate":
        roles += [("judge" if len(plan.judges) == 1 else f"judge {j.name}", j, "judge") for j in plan.judges]
        roles += [("baseline", plan.baseline, "baseline")] if plan.baseline is not None else []
    for role, model, kind in roles:
        if model is None:
            raise ConfigError("no candidate model: pass candidate=<name> or answers=FILE")
        requests = []
        for q, s in ((q, s) for q in questions for s in range(plan.samples)):
            reply = reply_of(q.id, s) if kind == "judge" else None
            calls = question_calls(spec, plan.shape, q, reply or "", judged=kind == "judge")
            if kind == "judge":  # each repeat is its own call with its own cache entry
                requests += [PlannedRequest(q.id, s, r.messages, r.calls, s * plan.repeats + k, reply is not None,
                                            calls.items, r.response_format)
                             for k in range(plan.repeats) for r in calls.judge]
            elif kind == "baseline":  # one reply per question, like a candidate
                requests += [PlannedRequest(q.id, s, calls.baseline.messages)] if calls.baseline else []
            else:
                request = calls.candidate if kind == "candidate" else calls.user
                assert request is not None
                requests.append(PlannedRequest(q.id, s, request.messages, request.calls, s))
        yield RoleCalls(role, kind, model, plan.repeats if kind == "judge" else 1, requests)


def estimate_calls(settings: Any, reply_tokens: int = 400, judge_reply_tokens_per_item: int = 60) -> dict[str, Any]:
    """Calls, cached calls and tokens per role of the plan of calls, without calling any model.

    Prompt tokens come from LiteLLM's token counter on the exact messages. A judge call counts as cached
    when the reply it judges is known (a cached candidate reply, or the answers file) and the verdict for
    that reply is in the cache; otherwise its prompt is counted with a placeholder reply of `reply_tokens`.
    """
    from rubric_engine.models.cache import ResultCache, default_cache_dir
    from rubric_engine.models.entries import cache_key
    from rubric_engine.models.promptcache import cacheable_tokens, needs_marker, saving
    from rubric_engine.run.plan import plan_run
    from rubric_engine.run.settings import prompt_cache_of
    from rubric_engine.run.runner import given_answers, load_inputs

    spec, dataset, questions = load_inputs(settings)
    given = given_answers(settings, spec, [q.id for q in dataset.questions])
    plan = plan_run(settings, spec)  # the plan the pipeline executes: the calls counted here are its calls
    cache_dir = Path(settings.cache_dir) if settings.cache_dir else default_cache_dir()
    cache = ResultCache(cache_dir) if settings.cache_enabled and cache_dir.exists() else None
    count = _counter()
    caching = prompt_cache_of(settings, spec)  # the marker for providers that need one (models/promptcache.py)
    per_criterion = spec.judge is not None and spec.judge.verdict.granularity == "per_criterion"
    est: dict[str, Any] = {}
    replies: dict[tuple[str, int], str | None] = {(q, 0): a for q, a in given.items()} if given is not None else {}

    def cached(model: Any, msgs: list[dict[str, Any]], formats: tuple[Any, ...], repeat: int = 0) -> dict[str, Any] | None:
        for fmt in formats:
            hit = cache.get(cache_key(model, msgs, fmt, repeat)) if cache is not None else None
            if hit is not None:
                return hit
        return None

    def reply_of(qid: str, s: int) -> str | None:
        return replies.get((qid, s))

    try:
        for rc in role_calls(spec, list(questions), plan, settings, given is not None, reply_of):
            role, model = rc.role, rc.model
            prompt = completion = n_cached = from_cache = 0  # from_cache: prompt tokens a provider cache may serve
            judging = rc.kind == "judge"
            by_grading: dict[tuple[str, int, int], list[PlannedRequest]] = {}
            for r in rc.requests:
                if not judging:  # a conversation: its first request, times its turns (an estimate)
                    hit = cached(model, r.messages, (None,), r.repeat)  # sample s: its own cache key
                    if role == "candidate":
                        replies[(r.question, r.sample)] = hit.get("text") if hit and r.calls == 1 else None
                    completion += r.calls * (int(hit.get("completion_tokens") or 0) if hit else reply_tokens)
                    n_cached += hit is not None
                    prompt += r.calls * count(model=model.model, messages=r.messages)
                    continue
                by_grading.setdefault((r.question, r.sample, r.repeat), []).append(r)
            for units in by_grading.values():  # one grading of one reply: its calls
                known = units[0].reply_known
                hits = [cached(model, u.messages, (u.response_format, None), u.repeat) if known else None
                        for u in units]
                n_cached += sum(h is not None for h in hits)
                if per_criterion and (caching or not needs_marker(model.model)):
                    from_cache += cacheable_tokens([u.messages for u, h in zip(units, hits) if h is None],
                                                   lambda m: count(model=model.model, messages=m),
                                                   0 if known else reply_tokens)
                if all(h is not None for h in hits):
                    completion += sum(int(h.get("completion_tokens") or 0) for h in hits if h is not None)
                elif plan.shape.verdict.compares:
                    completion += reply_tokens * len(units)
                else:
                    completion += judge_reply_tokens_per_item * units[0].items
                unknown = 0 if known else reply_tokens * (2 if plan.shape.verdict.compares else 1)
                prompt += sum(count(model=model.model, messages=u.messages) + unknown for u in units)
            calls = rc.calls
            # params the entry sends with every request: n replies each (billed n times), each up to max_tokens
            per_request, ceiling = replies_per_request(model.params), reply_ceiling(model.params)
            if ceiling is not None:
                completion = min(completion, ceiling * max(calls, 1))
            completion *= per_request
            est[role] = {"model": model.model, "name": model.name, "calls": calls, "cached": n_cached,
                         "params": dict(model.params),
                         "ceiling_cost": None if ceiling is None else _price(model.model, prompt,
                                                                             ceiling * per_request * calls),
                         "calls_to": destination(model.model, model.api_base, model.api_key_env),
                         "repeats": rc.repeats, "samples": plan.samples,
                         "repeats_auto": rc.kind == "judge" and plan.adaptive is not None,  # `repeats`: auto's cap
                         "prompt_tokens": prompt, "completion_tokens": completion,
                         "cost": _price(model.model, prompt, completion), "cached_prompt_tokens": from_cache,
                         "cache_saved": saving(_litellm(), model.model, from_cache)}
            est[role]["batch_cost"] = _batch_price(model.model, prompt, completion)  # batch=true's price
            if plan.shape.conversation.talks and role in ("candidate", "user"):
                est[role]["conversation"] = plan.shape.conversation.name
    finally:
        if cache is not None:
            cache.close()
    return est


def _price(model: str, prompt: int, completion: int) -> float | None:
    """Price from LiteLLM's bundled price list (never fetched over the network); None if unknown."""
    table = _litellm().model_cost
    info = table.get(model) or table.get(model.split("/", 1)[-1])
    if not info or info.get("input_cost_per_token") is None:
        return None
    return prompt * info["input_cost_per_token"] + completion * (info.get("output_cost_per_token") or 0.0)


def _batch_price(model: str, prompt: int, completion: int) -> float | None:
    """The same tokens at the provider's batch price (batch=true), from LiteLLM's bundled price list."""
    from rubric_engine.models.batchapi import batch_cost, batchable

    return batch_cost(_litellm(), model, prompt, completion) if batchable(model) else None


