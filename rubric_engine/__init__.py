"""rubric-engine: rubric-based LLM-as-a-judge benchmarks from declarative specs.

The engine is callable from Python without Hydra, in a notebook too (docs/python-api.md)::

    from rubric_engine import evaluate
    result = evaluate("<name or spec dir>", "gpt-4o", "openai/gpt-4o-mini", limit=10)  # an EvalResult
    result.overall, result.interval, result.counts, result.run_dir

Public names are resolved lazily (PEP 562), so `import rubric_engine.scoring.aggregate` does not pay for rich,
diskcache, jinja2 or pydantic. LiteLLM is imported only when a model call is really made; Hydra only by
the CLI (and by `RubricReward`, cli/reward.py, which composes a run's key=value overrides as the CLI does;
rubric_engine.reward.rubric.RubricReward takes evaluate's words without it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "evaluate": "run.evaluate", "evaluate_async": "run.evaluate", "EvalOptions": "run.evaluate",
    "EvalResult": "run.result", "run_benchmark": "run.runner", "run_benchmark_async": "run.runner",
    "RunSettings": "run.settings",
    "load_spec": "spec.load", "BenchmarkSpec": "spec.schema",
    "load_dataset": "dataset.load", "select": "dataset.load",
    "Dataset": "datatypes", "Question": "datatypes", "Criterion": "datatypes", "Turn": "datatypes",
    "ModelSpec": "models.entries", "ModelClient": "models.client", "CallResult": "models.client",
    "ResultCache": "models.cache",
    "judge_response": "judge.grading", "JudgeResult": "judge.grading", "Verdict": "judge.verdicts",
    "score_question": "scoring.question", "QuestionScore": "scoring.question", "FORMULAS": "scoring.question",
    "aggregate": "scoring.aggregate", "ScoredQuestion": "scoring.aggregate",
    "RubricReward": "cli.reward", "Reward": "reward.frameworks",
    "RubricEngineError": "errors", "SpecError": "errors", "DataError": "errors", "ConfigError": "errors",
    "ModelCallError": "errors", "FatalModelError": "errors", "AnswersError": "errors", "CacheError": "errors",
    "NothingScored": "errors", "DiskFull": "errors",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rubric_engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # for type checkers and IDEs; never executed
    from rubric_engine.dataset.load import load_dataset, select
    from rubric_engine.cli.reward import RubricReward
    from rubric_engine.datatypes import Criterion, Dataset, Question, Turn
    from rubric_engine.errors import (AnswersError, CacheError, ConfigError, DataError, DiskFull, FatalModelError,
                                      ModelCallError, NothingScored, RubricEngineError, SpecError)
    from rubric_engine.judge.grading import JudgeResult, judge_response
    from rubric_engine.judge.verdicts import Verdict
    from rubric_engine.models.cache import ResultCache
    from rubric_engine.models.client import CallResult, ModelClient
    from rubric_engine.models.entries import ModelSpec
    from rubric_engine.reward.frameworks import Reward
    from rubric_engine.run.evaluate import EvalOptions, evaluate, evaluate_async
    from rubric_engine.run.result import EvalResult
    from rubric_engine.run.runner import run_benchmark, run_benchmark_async
    from rubric_engine.run.settings import RunSettings
    from rubric_engine.scoring.aggregate import ScoredQuestion, aggregate
    from rubric_engine.scoring.question import FORMULAS, QuestionScore, score_question
    from rubric_engine.spec.load import load_spec
    from rubric_engine.spec.schema import BenchmarkSpec
