"""`Reward`: one rubric reward behind the three interfaces RL frameworks call.

- TRL (GRPOTrainer `reward_funcs`): the object itself is the sync function, `reward.async_reward` the async one;
  both take `prompts=`, `completions=` (strings or chat messages), `completion_ids=` and every dataset column as
  a keyword list, and return one float or None per completion (TRL turns None into NaN and leaves it out).
- verl (`custom_reward_function`): `compute_score(data_source, solution_str, ground_truth, extra_info)` and the
  batch form `compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos)` (its batch reward
  manager), each rollout answered with a dict: `score` plus numeric flags verl logs as reward_extra_info.
- OpenRLHF (`--remote_rm_url`): `openrlhf(body)` answers `{"query", "prompts", "labels"}` with
  `{"rewards", "scores", "extra_logs"}`; reward/server.py serves it over HTTP.

verl and OpenRLHF put each reward into a float tensor, where None fails and NaN spreads to the whole group's
advantage. So there a judge failure is `failure_score` (0.0 unless given) *flagged*: `judge_failed` = 1 in the
rollout's extras, counted in `last_counts.failures`, and kept out of nothing silently. TRL gets None.
"""

from __future__ import annotations

import json
import math
import re
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError
from rubric_engine.models.entries import ModelSpec
from rubric_engine.reward.inputs import completion_text, openrlhf_rollouts, column_ids, verl_id
from rubric_engine.reward.scorer import RewardCounts, RewardScorer, RolloutScore
from rubric_engine.run.settings import RunSettings

__all__ = ["Reward", "rollout_logs"]

_NOT_COLUMNS = ("trainer_state", "completion_ids", "log_extra", "log_metric")


def rollout_logs(results: Sequence[RolloutScore]) -> dict[str, list[Any]]:
    """The per-rollout extra logs (one list per key, aligned with the rollouts): score, error, rules, and the
    verdicts with the judge's reasoning as a JSON text per rollout."""
    return {
        "qid": [r.qid for r in results], "reward": [r.reward for r in results],
        "question_score": [r.score for r in results], "judge_error": [r.error for r in results],
        "failed_rules": [",".join(r.failed_rules) for r in results], "duplicate": [r.duplicate for r in results],
        "verdicts": [json.dumps([{"index": i, "met": hit, "reasoning": why} for i, hit, why in r.verdicts],
                                ensure_ascii=False) for r in results],
        "shadow_reward": [r.shadow_reward for r in results],
    }


class Reward:
    """A reward over `RunSettings` (the command line's `RubricReward` builds them from key=value overrides).

    `id_column`: the dataset column (TRL), `extra_info` key (verl) holding the question id; default the spec's
    id field. `shadow` / `shadow_fraction`: a second judge grading that share of distinct rollouts.
    `counts_path`: a JSON Lines file that gets one line of counts per call. After each call `last_counts`,
    `last_logs` (rollout_logs) and the running `totals` are set. `scorer`: what judges the batches when not this
    process's own `RewardScorer` (a pool of them on Ray actors, cluster/rewardpool.py, built from the same
    settings and shadow): anything with its `run`, `run_async`, `close`, `spec`, `settings`, `questions` and
    `judges`."""

    def __init__(self, settings: RunSettings, *, id_column: str | None = None, shadow: ModelSpec | None = None,
                 shadow_fraction: float = 0.0, failure_score: float = 0.0,
                 counts_path: str | Path | None = None, scorer: Any = None) -> None:
        if isinstance(failure_score, bool) or not isinstance(failure_score, (int, float)) \
                or not math.isfinite(failure_score):
            raise ConfigError(f"failure_score={failure_score!r} is not valid; give a finite number (verl and OpenRLHF "
                              "need a float for a failed judgment; it is flagged judge_failed=1)")
        self.scorer = scorer if scorer is not None else RewardScorer(settings, shadow=shadow,
                                                                     shadow_fraction=shadow_fraction)
        # closed when dropped or at exit if nobody called close(): LiteLLM's clients before their loop ends
        self._finalizer = weakref.finalize(self, self.scorer.close)
        self.id_column = id_column or self.scorer.spec.data.fields.id
        self.failure_score = float(failure_score)
        self.counts_path = Path(counts_path) if counts_path else None
        self.__name__ = "rubric_" + re.sub(r"\W+", "_", Path(str(settings.benchmark)).name).strip("_")
        self.last_counts: RewardCounts | None = None
        self.last_logs: dict[str, list[Any]] = {}
        self.totals = RewardCounts()

        async def async_reward(prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                               **columns: Any) -> list[float | None]:
            items = self._trl_items(completions, columns)
            results, counts = await self.scorer.run_async(items)
            return self._trl_result(results, counts, columns)

        async_reward.__name__ = async_reward.__qualname__ = self.__name__
        self.async_reward = async_reward

    # -- TRL ------------------------------------------------------------------------------------------
    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 **columns: Any) -> list[float | None]:
        """TRL's sync reward function: one reward (or None) per completion."""
        results, counts = self.scorer.run(self._trl_items(completions, columns))
        return self._trl_result(results, counts, columns)

    def _trl_items(self, completions: Sequence[Any] | None, columns: Mapping[str, Any]) -> list[tuple[str, str]]:
        if completions is None or isinstance(completions, (str, bytes)):
            raise ConfigError("completions= must be a list (one completion per rollout)")
        texts = [completion_text(c, f"completions[{i}]") for i, c in enumerate(completions)]
        data = {k: v for k, v in columns.items() if k not in _NOT_COLUMNS}
        return list(zip(column_ids(data, self.id_column, len(texts)), texts))

    def _trl_result(self, results: list[RolloutScore], counts: RewardCounts,
                    columns: Mapping[str, Any]) -> list[float | None]:
        self._record(results, counts)
        log_extra, log_metric = columns.get("log_extra"), columns.get("log_metric")
        if callable(log_extra):  # a caller that hands the reward logging callbacks gets the extra logs there too
            for key in ("question_score", "judge_error", "verdicts"):
                log_extra(f"{self.__name__}/{key}", self.last_logs[key])
        if callable(log_metric):
            for key in ("calls", "cache_hits", "failures", "copies"):
                log_metric(f"{self.__name__}/{key}", float(getattr(counts, key)))
        return [r.reward for r in results]

    # -- verl -----------------------------------------------------------------------------------------
    def compute_score(self, data_source: Any = None, solution_str: str | None = None, ground_truth: Any = None,
                      extra_info: Any = None, **kwargs: Any) -> dict[str, float]:
        """verl's per-rollout custom reward function."""
        return self.compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info])[0]

    def compute_score_batch(self, data_sources: Sequence[Any] | None = None, solution_strs: Sequence[Any] | None = None,
                            ground_truths: Sequence[Any] | None = None, extra_infos: Sequence[Any] | None = None,
                            **kwargs: Any) -> list[dict[str, float]]:
        """verl's batch form (reward_model.reward_manager=batch): one dict per rollout, the same keys in each."""
        if solution_strs is None or isinstance(solution_strs, (str, bytes)):
            raise ConfigError("solution_strs= must be a list (one decoded response per rollout)")
        n = len(solution_strs)
        truths = list(ground_truths) if ground_truths is not None else [None] * n
        extras = list(extra_infos) if extra_infos is not None else [None] * n
        if len(truths) != n or len(extras) != n:
            raise ConfigError(f"ground_truths and extra_infos must hold {n} values, one per solution_str")
        items = [(verl_id(g, e, self.id_column), completion_text(s, f"solution_strs[{i}]"))
                 for i, (s, g, e) in enumerate(zip(solution_strs, truths, extras))]
        results, counts = self.scorer.run(items)
        self._record(results, counts)
        return [{"score": self._float(r), "judge_failed": float(r.error is not None),
                 "unscored": float(r.reward is None and r.error is None)} for r in results]

    # -- OpenRLHF -------------------------------------------------------------------------------------
    def openrlhf(self, body: Any) -> dict[str, Any]:
        """The remote reward model's answer to one request body (reward/server.py serves it)."""
        results, counts = self.scorer.run(openrlhf_rollouts(body, self.id_column))
        self._record(results, counts)
        rewards = [self._float(r) for r in results]
        return {"rewards": rewards, "scores": rewards,
                "extra_logs": {"judge_failed": [float(r.error is not None) for r in results],
                               "unscored": [float(r.reward is None and r.error is None) for r in results],
                               "duplicate": [float(r.duplicate) for r in results],
                               "catastrophic": [float(r.catastrophic) for r in results]},
                "details": [{k: v[i] for k, v in self.last_logs.items()} for i in range(len(results))],
                "counts": counts.as_dict()}

    # -- plain Python -----------------------------------------------------------------------------------
    def score(self, column_ids: Sequence[str], replies: Sequence[str]) -> list[RolloutScore]:
        """Typed outcomes for (question id, reply) pairs."""
        results, counts = self.scorer.run([(str(q), completion_text(r)) for q, r in zip(column_ids, replies)])
        self._record(results, counts)
        return results

    def close(self) -> None:
        """Close the judge clients, their loop thread and the cache (`with` does it; so does the exit)."""
        self._finalizer()

    def __enter__(self) -> "Reward":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _float(self, r: RolloutScore) -> float:
        return self.failure_score if r.reward is None else r.reward

    def _record(self, results: list[RolloutScore], counts: RewardCounts) -> None:
        self.last_counts, self.last_logs = counts, rollout_logs(results)
        self.totals.add(counts)
        if self.counts_path is not None:
            with self.counts_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(counts.as_dict()) + "\n")
