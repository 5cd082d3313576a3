"""A K=3 jury (and judge.repeats) against the fake server: do the multiplied calls pipeline? (a script)

Why: `judge=[a,b,c]` and `judge.repeats=K` multiply judge calls; jury.Panel starts every juror's and
every repeat's call of a question together, each juror through its own client (its own concurrency C).
With latency L, N replies, J jurors (each with its own limit C) and K repeats, the ideal wall time is
N*K*L/C: the jurors run side by side. This runs the real path (jury.Panel -> judge.judge_response ->
ModelClient -> LiteLLM -> HTTP, the shipped heartbench_en spec, the durable cache) and prints the ratio.

    python bench/bench_jury.py --n 600 --jurors 3 --repeats 1 --latency 1.0 --concurrency 32

Measured on the shared 2-core machine (load average ~9-10 from other work): N=300, J=3, K=1, C=32:
L=1.0 s: 900 calls in 18.3 s vs ideal 9.4 s (1.95x; 96 in flight = 3 x C); L=3.0 s: 37.9 s vs 28.1 s
(1.35x). All 3 x C calls are in flight at once; the excess is per-call CPU (LiteLLM / the SDK) on a
loaded machine, as for a single judge (bench_calls.py, bench_per_criterion.py), not waiting between jurors.
Again on 2026-11-22 (load average 9-10): L=1.0 s, N=600, J=3, C=32: 41-46 s vs ideal 18.75 s (2.2-2.45x);
the calls took 11.7 s of CPU (6.5 ms each), 63% of a core for the ideal wall time (docs/scaling.md).
On the quiet machine (load 0.5-0.8), same arguments: 21.8 s vs 18.8 s (1.16x), 9.3 s CPU.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import KEY_ENV, ROOT, drive_clients, options, print_call_rate  # noqa: E402

sys.path.insert(0, str(ROOT))
from rubric_engine.dataset.load import load_dataset  # noqa: E402
from rubric_engine.judge.panels import Panel  # noqa: E402
from rubric_engine.models.client import ModelClient  # noqa: E402
from rubric_engine.models.entries import ModelSpec  # noqa: E402
from rubric_engine.spec.load import load_spec  # noqa: E402


def _reply(body: dict[str, Any]) -> Any:
    from fakeserver import Reply

    text = json.dumps(body["messages"])
    found = re.search(r"N_ITEMS=(\d+)", text)
    n = int(found.group(1)) if found else 1  # the warm-up call names no question
    return Reply(text=json.dumps({"criteria": [{"id": i, "reasoning": "r", "met": (i + len(text)) % 3 == 0}
                                               for i in range(1, n + 1)]}), usage=(900, 200))


def jury_work(n: int, jurors: int, repeats: int, concurrency: int) -> Any:
    """`work` for drive_clients: N replies judged by the panel, all questions started together."""
    spec = load_spec(ROOT / "benchmarks" / "heartbench_en")
    qs = load_dataset(spec, ROOT / "data" / "heartbench_en_sample.jsonl").questions
    items = [(qs[i % len(qs)], f"Reply {i}: I hear you. N_ITEMS={len(qs[i % len(qs)].criteria)}") for i in range(n)]

    async def work(url: str, cache: Any) -> tuple[float, int]:
        models = [ModelSpec(name=f"j{j}", model=f"openai/judge-{j}", api_base=url, api_key_env=KEY_ENV)
                  for j in range(jurors)]
        clients = [ModelClient(m, cache=cache, concurrency=concurrency, role="judge") for m in models]
        panel = Panel(clients, [m.name for m in models], spec, repeats)
        t0 = time.perf_counter()
        results = await asyncio.gather(*(panel.judge(q, text) for q, text in items))
        wall = time.perf_counter() - t0
        for c in clients:
            await c.aclose()
        return wall, sum(1 for r in results if r.error)
    return work


def main() -> None:
    a = options(__doc__, n=600, jurors=3, repeats=1, latency=1.0, concurrency=32)
    wall, errors, requests, max_in_flight, cpu = drive_clients(a.latency, _reply,
                                                          jury_work(a.n, a.jurors, a.repeats, a.concurrency))
    calls = a.n * a.jurors * a.repeats
    ideal = a.n * a.repeats * a.latency / a.concurrency
    print(f"jury: {a.n} replies x {a.jurors} jurors x {a.repeats} repeats = {calls} calls, latency {a.latency}s, "
          f"C={a.concurrency} per juror")
    print(f"  requests seen {requests}, max in flight {max_in_flight} (ideal {a.jurors * a.concurrency}), "
          f"judge errors {errors}")
    print_call_rate(wall, ideal, calls, cpu, a.concurrency, a.latency)


if __name__ == "__main__":
    main()
