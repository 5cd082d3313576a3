"""rubric-engine: rubric-based LLM-as-a-judge benchmarks from declarative specs.

The engine is callable from Python without Hydra::

    from rubric_engine import ModelSpec, RunSettings, run_benchmark
    summary = run_benchmark(RunSettings(benchmark="<name or spec dir>", out_dir=Path("out"),
                                        candidate=ModelSpec(name="gpt-4o", model="openai/gpt-4o",
                                                            api_key_env="OPENAI_API_KEY")))

LiteLLM is imported only when a model call is really made; Hydra only by the CLI.
"""

from __future__ import annotations

from .aggregate import ScoredQuestion, aggregate
from .cache import ResultCache
from .dataset import Criterion, Dataset, Question, Turn, load_dataset, select
from .errors import (AnswersError, ConfigError, DataError, FatalModelError, ModelCallError, RubricEngineError,
                     SpecError)
from .judge import JudgeResult, Verdict, judge_response
from .models import CallResult, ModelClient, ModelSpec
from .runner import RunSettings, run_benchmark
from .scoring import FORMULAS, QuestionScore, score_question
from .spec import BenchmarkSpec, load_spec

__version__ = "0.1.0"

__all__ = [
    "run_benchmark", "RunSettings",
    "load_spec", "BenchmarkSpec",
    "load_dataset", "select", "Dataset", "Question", "Criterion", "Turn",
    "ModelSpec", "ModelClient", "CallResult", "ResultCache",
    "judge_response", "JudgeResult", "Verdict",
    "score_question", "QuestionScore", "FORMULAS", "aggregate", "ScoredQuestion",
    "RubricEngineError", "SpecError", "DataError", "ConfigError", "ModelCallError", "FatalModelError",
    "AnswersError",
    "__version__",
]
