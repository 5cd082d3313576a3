"""Per-criterion judging throughput against the fake server (a script, not a test).

Why: a per-criterion benchmark (HealthBench: ~11 criteria per example) makes one judge call per
criterion. Those calls must pipeline under the client's concurrency like any others: at latency L and
concurrency C, N examples x K criteria ideally take N*K*L/C seconds. This runs the real path
(judge.judge_response with the shipped healthbench spec: prompt rendering, json_schema, validation by
the verdict model, the durable cache) and prints calls/s against the ideal.

    python bench/bench_per_criterion.py --n 5000 --criteria 11 --latency 0.5 --concurrency 64

Measured on the 2-core development machine while shared (load average ~8): N=300 x 11 = 3,300 calls,
L=1.0 s, C=64: 120.9 s against the ideal 51.6 s (2.35x, 27 calls/s of 64); bench_calls.py's plain judge
stage at the same C and L on the same machine at the same time: 1.73x. Rendering and parsing a
per-criterion call cost ~0.15 ms of it; the rest is LiteLLM / the OpenAI SDK per call, CPU-bound here.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import KEY_ENV, ROOT, drive_clients, options, print_call_rate  # noqa: E402

sys.path.insert(0, str(ROOT))
from rubric_engine.datatypes import Criterion, Question, Turn  # noqa: E402
from rubric_engine.judge.grading import judge_response  # noqa: E402
from rubric_engine.models.client import ModelClient  # noqa: E402
from rubric_engine.models.entries import ModelSpec  # noqa: E402
from rubric_engine.spec.load import load_spec  # noqa: E402


def _reply(body: dict[str, Any]) -> Any:
    from fakeserver import Reply
    return Reply(text=json.dumps({"explanation": "fine", "criteria_met": len(json.dumps(body)) % 2 == 0}),
                 usage=(300, 30))


def questions(n: int, k: int) -> list[Question]:
    return [Question(id=f"ex{i}", dialogue=(Turn("user", f"Example {i}: I have had a headache for two days."),),
                     criteria=tuple(Criterion(index=j, label="", weight=(-3 if j % 4 == 0 else 5),
                                              text=f"Criterion {j} of example {i}", tags=("axis:accuracy",))
                                    for j in range(1, k + 1)), tags=("theme:x",))
            for i in range(n)]


def per_criterion_work(qs: list[Question], concurrency: int) -> Any:
    """`work` for drive_clients: every example judged criterion by criterion, all started together."""
    spec = load_spec(ROOT / "benchmarks" / "healthbench")

    async def work(url: str, cache: Any) -> tuple[float, int]:
        model = ModelSpec(name="judge", model="openai/fake-judge", api_base=url, api_key_env=KEY_ENV)
        async with ModelClient(model, cache=cache, concurrency=concurrency, role="judge") as client:
            t0 = time.perf_counter()
            results = await asyncio.gather(*(judge_response(client, spec, q, "Rest, fluids, see a doctor if it "
                                                            "gets worse.") for q in qs))
            wall = time.perf_counter() - t0
        return wall, sum(1 for r in results if r.error)
    return work


def main() -> None:
    a = options(__doc__, n=5000, criteria=11, latency=0.5, concurrency=64)
    wall, errors, requests, max_in_flight, cpu = drive_clients(
        a.latency, _reply, per_criterion_work(questions(a.n, a.criteria), a.concurrency))
    calls = a.n * a.criteria
    ideal = calls * a.latency / a.concurrency
    print(f"per-criterion judging: {a.n} examples x {a.criteria} criteria = {calls} calls, latency {a.latency}s, "
          f"C={a.concurrency}")
    print(f"  requests seen {requests}, max in flight {max_in_flight}, judge errors {errors}")
    print_call_rate(wall, ideal, calls, cpu, a.concurrency, a.latency)


if __name__ == "__main__":
    main()
