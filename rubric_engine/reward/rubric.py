"""`RubricReward` from Python's words: a benchmark, a judge named as `evaluate` names models, keyword options.

Why here: a reward is a Python object a training script builds, and needs no command line. Its judge is an entry
name (`gpt-4.1`, `mock`), a LiteLLM id, a dict entry or a ModelSpec, resolved without Hydra (models/named.py), and
its options are `evaluate`'s (run/evaluate.py: data_path, cache, cache_dir, concurrency, timeout, max_retries,
rpm, repeats, ...), so a reward and an evaluation of the same words grade alike. The command line's key=value form
(`overrides=[...]`, `serve-reward`) composes the same settings through Hydra in cli/reward.py, on this class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rubric_engine.models.named import model_entry
from rubric_engine.reward.frameworks import Reward
from rubric_engine.run.evaluate import settings_for

__all__ = ["RubricReward"]


class RubricReward(Reward):
    """A rubric reward: `benchmark` (a shipped name or a spec directory), `judge` (None: the one the benchmark
    declares; a list: a jury) and `options` (evaluate's, docs/python-api.md). `shadow`: a judge grading
    `shadow_fraction` of distinct rollouts beside the main one. See reward/frameworks.py for the interfaces."""

    def __init__(self, benchmark: str, judge: Any = None, *, id_column: str | None = None, shadow: Any = None,
                 shadow_fraction: float = 0.0, failure_score: float = 0.0, counts_path: str | Path | None = None,
                 **options: Any) -> None:
        settings = settings_for(benchmark, None, judge, **{"run_dir": ".", **options})
        super().__init__(settings, id_column=id_column, shadow=model_entry(shadow, "judge", settings.timeout),
                         shadow_fraction=shadow_fraction, failure_score=failure_score, counts_path=counts_path)
