"""rubric-engine: rubric-based LLM-as-a-judge benchmarks from declarative specs.

The engine is callable from Python without Hydra::

    from rubric_engine import ModelSpec, RunSettings, run_benchmark
    summary = run_benchmark(RunSettings(benchmark="<name or spec dir>", out_dir=Path("out"),
                                        candidate=ModelSpec(name="gpt-4o", model="openai/gpt-4o",
                                                            api_key_env="OPENAI_API_KEY")))

Public names are resolved lazily (PEP 562), so `import rubric_engine.aggregate` does not pay for rich,
diskcache, jinja2 or pydantic. LiteLLM is imported only when a model call is really made; Hydra only by
the CLI.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "run_benchmark": "runner", "RunSettings": "runner",
    "load_spec": "spec", "BenchmarkSpec": "spec",
    "load_dataset": "dataset", "select": "dataset",
    "Dataset": "datatypes", "Question": "datatypes", "Criterion": "datatypes", "Turn": "datatypes",
    "ModelSpec": "modelspec", "ModelClient": "models", "CallResult": "models", "ResultCache": "cache",
    "judge_response": "judge", "JudgeResult": "judge", "Verdict": "judge",
    "score_question": "scoring", "QuestionScore": "scoring", "FORMULAS": "scoring",
    "aggregate": "aggregate", "ScoredQuestion": "aggregate",
    "RubricEngineError": "errors", "SpecError": "errors", "DataError": "errors", "ConfigError": "errors",
    "ModelCallError": "errors", "FatalModelError": "errors", "AnswersError": "errors", "CacheError": "errors",
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
    from .aggregate import ScoredQuestion, aggregate
    from .cache import ResultCache
    from .dataset import load_dataset, select
    from .datatypes import Criterion, Dataset, Question, Turn
    from .errors import (AnswersError, CacheError, ConfigError, DataError, FatalModelError, ModelCallError,
                         RubricEngineError, SpecError)
    from .judge import JudgeResult, Verdict, judge_response
    from .models import CallResult, ModelClient
    from .modelspec import ModelSpec
    from .runner import RunSettings, run_benchmark
    from .scoring import FORMULAS, QuestionScore, score_question
    from .spec import BenchmarkSpec, load_spec
