"""Pairwise judging (2 games per question, both orders) against the fake server: do the games pipeline? (a script)

Why: under judge.verdict.kind: pairwise every question costs two judge calls (baseline first, candidate
first), started together (judge/pairwise.judge_pair) through one judge client with concurrency C. With
latency L and N questions the ideal wall time is N * 2 * L / C. This runs the real path (the shipped
arena_hard spec, judge_pair -> ask_structured -> ModelClient -> LiteLLM -> HTTP, the durable cache) with
the baseline's answers given, and prints measured time, the ideal, their ratio and the requests the server saw.

    python bench/bench_pairwise.py --n 600 --latency 1.0 --concurrency 32

Measured on the shared 2-core machine on 2026-11-25 (load average 5.6-6.0 from other work), same arguments:
1200 requests seen, 32 in flight at most, 41.0 s vs ideal 37.5 s (1.09x, goal 1.3x); 4.6 ms of CPU per call.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import KEY_ENV, ROOT, drive_clients, options, print_call_rate  # noqa: E402

sys.path.insert(0, str(ROOT))
from rubric_engine.dataset.load import load_dataset  # noqa: E402
from rubric_engine.judge.pairwise import BaselineReply, judge_pair  # noqa: E402
from rubric_engine.models.client import ModelClient  # noqa: E402
from rubric_engine.models.entries import ModelSpec  # noqa: E402
from rubric_engine.spec.load import load_spec  # noqa: E402

LABELS = ["A>>B", "A>B", "A=B", "B>A", "B>>A"]


def _reply(body: dict[str, Any]) -> Any:
    from fakeserver import Reply

    text = json.dumps(body["messages"])
    label = LABELS[len(text) % len(LABELS)]
    return Reply(text=f"Weighing both replies against my own answer.\n\nMy final verdict is [[{label}]].",
                 usage=(1500, 400))


def pairwise_work(n: int, concurrency: int, data_dir: Path) -> Any:
    """`work` for drive_clients: N questions, each judged in both orders, all questions started together."""
    spec = load_spec(ROOT / "benchmarks" / "arena_hard")
    rng = random.Random(0)
    path = data_dir / "questions.jsonl"
    path.write_text("".join(json.dumps({"uid": f"q{i}", "category": rng.choice(["hard_prompt", "creative_writing"]),
                                        "subcategory": "s", "prompt": f"Prompt {i}: explain topic {i} briefly."}) + "\n"
                            for i in range(n)))
    questions = list(load_dataset(spec, path).questions)

    async def work(url: str, cache: Any) -> tuple[float, int]:
        judge = ModelClient(ModelSpec(name="judge", model="openai/judge-x", api_base=url, api_key_env=KEY_ENV),
                            cache=cache, concurrency=concurrency, role="judge")
        t0 = time.perf_counter()
        results = await asyncio.gather(*(judge_pair(judge, spec, q, f"Candidate reply {q.id}.",
                                                    BaselineReply(f"Baseline reply {q.id}.")) for q in questions))
        wall = time.perf_counter() - t0
        await judge.aclose()
        return wall, sum(1 for r in results if r.error)
    return work


def main() -> None:
    a = options(__doc__, n=600, latency=1.0, concurrency=32)
    with tempfile.TemporaryDirectory() as tmp:
        wall, errors, requests, max_in_flight, cpu = drive_clients(a.latency, _reply,
                                                              pairwise_work(a.n, a.concurrency, Path(tmp)))
    calls = a.n * 2
    ideal = a.n * 2 * a.latency / a.concurrency
    print(f"pairwise: {a.n} questions x 2 games = {calls} calls, latency {a.latency}s, C={a.concurrency}")
    print(f"  requests seen {requests}, max in flight {max_in_flight} (ideal {a.concurrency}), judge errors {errors}")
    print_call_rate(wall, ideal, calls, cpu, a.concurrency, a.latency)


if __name__ == "__main__":
    main()
