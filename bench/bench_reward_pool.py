"""Reward pool throughput: 8,192 rollouts judged by 1 Ray reward actor vs 4, at a fixed per-actor concurrency.

Goal: 4 actors score >= 3.5x the rollouts per second of one actor (issue #40, "Reward pool"). The rollouts are one
training step (1,024 prompts x 8 completions, every completion distinct) sent as one batch, as verl's batch
reward manager or an OpenRLHF request sends it. HeartBench grades a reply in one judge call, so each rollout is
one call. The judge is tests/fakeserver.py in its own process answering after `--latency` seconds; each leg
starts its pool (untimed, with a warm-up batch that makes every actor import LiteLLM and open its clients) on
a cache of its own, so no verdict is shared between legs.

    python bench/bench_reward_pool.py                                    # 8,192 rollouts, C=32 per actor, 1 s
    python bench/bench_reward_pool.py --prompts 256 --concurrency 16     # smaller

Read the ratio with the machine in mind: one actor at C per-actor concurrency is latency-bound (C calls a
second at 1 s), but 4 actors need 4 x C calls a second x ~5-10 ms of LiteLLM's CPU each, plus Ray's own
processes, from the cores the machine has; the last line says how much of them the calls needed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import KEY_ENV, ROOT, ServerProcess, options, write_synthetic  # noqa: E402


def leg(actors: int, srv: ServerProcess, data: Path, cache: Path, ids: list[str], opts: object) -> dict[str, float]:
    """One pool of `actors` judging the step: its wall time, the server's requests, the reward's counts."""
    from rubric_engine import RubricReward  # noqa: PLC0415

    reward = RubricReward(benchmark="heartbench", judge="openai_compatible", pool=actors, ray="local", overrides=[
        f"data.path={data}", f"cache.dir={cache}", f"concurrency={opts.concurrency}", "max_retries=0",
        "judge.model=openai/judge", f"judge.api_base={srv.url}", f"judge.api_key_env={KEY_ENV}"])
    try:
        warm = [ids[0]] * (8 * actors)  # distinct texts: spread over every actor by the hash
        reward(completions=[f"warm-up {k}" for k in range(len(warm))], **{reward.id_column: warm})
        steps = ids[1:opts.prompts + 1]
        qids = [q for q in steps for _ in range(opts.completions)]
        texts = [f"reply {k} to {q}: that sounds hard; tell me more." for q in steps for k in range(opts.completions)]
        before, _ = srv.stats()
        t0 = time.perf_counter()
        rewards = reward(completions=texts, **{reward.id_column: qids})
        wall = time.perf_counter() - t0
        after, _ = srv.stats()
        c = reward.last_counts
        return {"wall": wall, "rollouts": len(texts), "scored": sum(r is not None for r in rewards),
                "failures": c.failures, "calls": c.calls, "requests": after - before, "rewards": rewards}
    finally:
        reward.close()


def main() -> None:
    opts = options(__doc__, prompts=1024, completions=8, concurrency=32, latency=1.0)
    sys.path.insert(0, str(ROOT))
    os.environ[KEY_ENV] = "sk-bench"
    import ray  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp, ServerProcess(opts.latency) as srv:
        data = write_synthetic(opts.prompts + 1, Path(tmp) / "rows.jsonl", unique=True)
        ids = [json.loads(line)["question_id"] for line in data.read_text(encoding="utf-8").splitlines()]
        print(f"reward pool: {opts.prompts} prompts x {opts.completions} completions in one batch, C={opts.concurrency} "
              f"per actor, judge latency {opts.latency}s; {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.1f}")
        legs = {}
        for n in (1, 4):
            legs[n] = leg(n, srv, data, Path(tmp) / f"cache{n}", ids, opts)
            r = legs[n]
            ideal = r["rollouts"] / (n * opts.concurrency / opts.latency)
            print(f"  {n} actor{'s' if n > 1 else ' '}: {r['rollouts']} rollouts in {r['wall']:.1f}s = "
                  f"{r['rollouts'] / r['wall']:.1f} rollouts/s (latency-bound ideal {ideal:.1f}s); {r['scored']} "
                  f"scored, {r['failures']} failures; the server saw {r['requests']} requests for {r['calls']} "
                  f"judge calls; load average {os.getloadavg()[0]:.1f}")
        ray.shutdown()
    one, four = legs[1], legs[4]
    ratio = (four["rollouts"] / four["wall"]) / (one["rollouts"] / one["wall"])
    print(f"  4 actors vs 1: {ratio:.2f}x the throughput (goal >= 3.5x); rewards identical in both legs: "
          f"{one['rewards'] == four['rewards']}")
    calls_per_s = four["calls"] / four["wall"]
    print(f"  the 4-actor leg made {calls_per_s:.0f} judge calls/s: at 5-10 ms of LiteLLM CPU each that is "
          f"{calls_per_s * 0.005:.1f}-{calls_per_s * 0.010:.1f} cores of the {os.cpu_count()} here")


if __name__ == "__main__":
    main()
