"""Rubric-reward throughput: 1,024 prompts x 8 completions through RubricReward against the fake judge.

Goal: rollouts scored per second within 1.3x of the judge-call ideal at the configured concurrency, i.e.
wall time <= 1.3 x ceil(judge calls / concurrency) x latency. The reward is called as TRL calls it, one batch
(prompts x completions) per training step; every completion is distinct, so every rollout is one judge call
(identical ones would be judged once: see tests/reward/test_reward.py). The judge is tests/fakeserver.py in its own
process (bench/_common.py) answering after `--latency` seconds, through LiteLLM and the durable cache.

    python bench/bench_reward.py                          # 1,024 x 8, C=32, L=0.5 s
    python bench/bench_reward.py --prompts 256 --latency 0.2   # smaller, on a loaded machine

The CPU line says whether the ideal is reachable at all here: every call costs a few ms of LiteLLM's CPU in
this one process, so when the CPU seconds come near the ideal wall time, the ratio measures the machine.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import KEY_ENV, ROOT, ServerProcess, options, print_call_rate, write_synthetic  # noqa: E402


def main() -> None:
    opts = options(__doc__, prompts=1024, completions=8, batch_prompts=128, concurrency=32, latency=0.5)
    sys.path.insert(0, str(ROOT))
    os.environ[KEY_ENV] = "sk-bench"
    from rubric_engine import RubricReward  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp, ServerProcess(opts.latency) as srv:
        data = write_synthetic(opts.prompts + 1, Path(tmp) / "rows.jsonl", unique=True)
        reward = RubricReward(benchmark="heartbench", judge="openai_compatible", overrides=[
            f"data.path={data}", f"cache.dir={tmp}/cache", f"concurrency={opts.concurrency}", "max_retries=0",
            "judge.model=openai/judge", f"judge.api_base={srv.url}", f"judge.api_key_env={KEY_ENV}"])
        ids = list(reward.scorer.questions)
        warm, ids = ids[0], ids[1:opts.prompts + 1]
        reward(completions=["warm-up"], **{reward.id_column: [warm]})  # LiteLLM's import and first call, untimed
        requests0, _ = srv.stats()
        print(f"reward: {len(ids)} prompts x {opts.completions} completions, batches of {opts.batch_prompts} prompts, "
              f"C={opts.concurrency}, judge latency {opts.latency}s; load average {os.getloadavg()[0]:.1f}")
        cpu0, t0 = time.process_time(), time.perf_counter()
        scored = failures = 0
        for start in range(0, len(ids), opts.batch_prompts):
            group = ids[start:start + opts.batch_prompts]
            qids = [q for q in group for _ in range(opts.completions)]
            texts = [f"reply {k} to {q}: that sounds hard; tell me more." for q in group for k in range(opts.completions)]
            rewards = reward(prompts=[""] * len(qids), completions=texts, **{reward.id_column: qids})
            scored += sum(r is not None for r in rewards)
            failures += reward.last_counts.failures if reward.last_counts else 0
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        requests, max_in_flight = srv.stats()
        reward.close()
    rollouts = len(ids) * opts.completions
    calls = reward.totals.calls - 1  # the warm-up's
    batches = math.ceil(len(ids) / opts.batch_prompts)
    per_batch = opts.batch_prompts * opts.completions
    ideal = batches * math.ceil(per_batch / opts.concurrency) * opts.latency
    print(f"  {rollouts} rollouts in {wall:.1f}s: {rollouts / wall:.1f} rollouts/s vs ideal {rollouts / ideal:.1f} "
          f"rollouts/s -> ratio {wall / ideal:.2f}x (goal <= 1.3x); {scored} scored, {failures} judge failures")
    print_call_rate(wall, ideal, calls, cpu, opts.concurrency, opts.latency)
    print(f"  the judge server saw {requests - requests0} requests for {calls} judge calls "
          f"(max {max_in_flight} in flight; {reward.totals.cache_hits} cache hits)")


if __name__ == "__main__":
    main()
