"""The run plan: what one run will do, resolved once from its settings and its spec.

Why one plan: the stage, the judges, how often each grades, how many replies per question and how votes
combine were recomputed from settings and spec in the runner, the pipeline, the identity, the summary
and the dry-run estimate, each with its own spelling of the defaults. `plan_run` resolves and checks them
once; those five read the plan, so the dry run counts the calls of the plan the pipeline executes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rubric_engine.errors import ConfigError, RubricEngineError
from rubric_engine.models.entries import ModelSpec, SpecKeyError, check_keys, check_spec_keys
from rubric_engine.judge.adaptive import AdaptiveRule
from rubric_engine.run.adaptive import adaptive_rule
from rubric_engine.run.pairwise import plan_baseline
from rubric_engine.run.settings import RunSettings, judges_of, repeats_of, samples_of, user_of
from rubric_engine.shapes.base import Shape
from rubric_engine.shapes.registry import shape_for
from rubric_engine.spec.files import benchmark_search_path
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["RunPlan", "plan_run", "check_run_keys"]


@dataclass(frozen=True)
class RunPlan:
    """A run's roles and shape. `judges`: every juror (one for a single judge; resolved for stage=generate too,
    where none is called); `repeats`: gradings per judge and reply; `samples`: candidate replies per question;
    `rule` / `tie`: how a jury's and a judge's repeated votes combine."""

    stage: str
    candidate: ModelSpec | None  # as given (the identity records it even when answers are given)
    need_candidate: bool  # False: the replies come from answers= or from_run=
    judges: tuple[ModelSpec, ...]
    repeats: int
    samples: int
    rule: str
    tie: str
    shape: Shape  # how each reply comes to be and how it is judged (shapes/registry.py), looked up once
    baseline: ModelSpec | None = None  # judge.verdict.kind: pairwise with a baseline model (run/pairwise.py)
    user: ModelSpec | None = None  # the simulated user of a simulated conversation (run/dialogue.py)
    adaptive: AdaptiveRule | None = None  # judge.repeats=auto (judge/adaptive.py); `repeats` is then its cap

    @property
    def judged(self) -> bool:
        """stage=generate calls no judge."""
        return self.stage != "generate"

    @property
    def panel(self) -> bool:
        """More than one grading per reply (a jury, or repeats): votes are kept and combined."""
        return len(self.judges) > 1 or self.repeats > 1

    def models(self) -> list[ModelSpec]:
        """Every model this run will call: the candidate unless answers are given, and unless stage=generate
        every judge (a jury's each juror, the judge given, or the spec's declared one) and a baseline model."""
        called = (self.candidate if self.need_candidate else None, self.user if self.need_candidate else None,
                  *(self.judges if self.judged else ()), self.baseline if self.judged else None)
        return [m for m in called if m is not None]


def plan_run(settings: RunSettings, spec: BenchmarkSpec) -> RunPlan:
    """Resolve and check the run's shape: judges (a jury of one, duplicate names), repeats, the tie and jury
    rules, candidate samples (K > 1 needs the candidate called and judged); one line per setting that cannot run."""
    need_candidate = not (settings.answers or settings.from_run)
    samples = samples_of(settings, need_candidate)
    shape = shape_for(spec)
    shape.verdict.check_plan(spec, samples)  # what a verdict cannot do with several samples (shapes/score.py)
    judges, repeats = tuple(judges_of(settings, spec)), repeats_of(settings, spec)
    if repeats != "auto" and (settings.repeats_max is not None or settings.repeats_prior
                              or settings.repeats_confidence is not None):
        raise ConfigError("judge.repeats_max / judge.repeats_prior / judge.repeats_confidence apply to "
                          "judge.repeats=auto; add judge.repeats=auto or drop them")
    adaptive = adaptive_rule(settings, judges, shape.verdict, samples,
                             spec.judge is not None and spec.judge.verdict.probability is not None) \
        if repeats == "auto" and judges and settings.stage != "generate" else None
    plan = RunPlan(stage=settings.stage, candidate=settings.candidate, need_candidate=need_candidate,
                   judges=judges, repeats=adaptive.cap if adaptive else int(repeats), adaptive=adaptive,
                   samples=samples, rule=settings.jury_rule,
                   tie=settings.tie or (spec.judge.tie if spec.judge is not None else "not_met"), shape=shape,
                   user=user_of(settings, spec, need_candidate, shape.conversation.simulates_user))
    plan = replace(plan, baseline=plan_baseline(settings, spec, panel=plan.panel, samples=plan.samples))
    check_spec_keys(plan.models(), settings.trust_endpoints)  # a spec's entry chooses no key unless trusted
    return plan


def check_run_keys(settings: RunSettings) -> None:
    """The key check of a run before it starts, for a sweep to check each job before the first job runs.
    Any other problem (spec, settings) is left to the run, which reports it in its own words."""
    try:
        plan = plan_run(settings, load_spec(settings.benchmark, benchmark_search_path(settings.benchmark_dirs),
                                            settings.trust_code))
    except SpecKeyError:
        raise  # a key a spec chose: refused before any job runs, as a missing key is
    except RubricEngineError:
        return
    check_keys(*plan.models())
