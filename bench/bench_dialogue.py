"""Dynamic-dialogue speed: simulated conversations through `rubric-engine` against the fake server (a script, not a test).

N conversations of T simulator turns, each turn one simulator call and one candidate call at latency L, with
concurrency C. Turns are sequential inside a conversation, conversations run side by side, so the ideal is
N x T x 2 calls x L / C (C conversations in flight, each waiting on one call at a time). Goal: within 1.3x.
The run is the real console script (stage=generate: the conversations only, no judge), timed from process
start to exit with a fresh cache, so every call is really made. The simulator never says the stop signal,
so every conversation runs to max_turns; the number of requests the server saw is printed beside the time
(N x T x 2 expected): a run whose calls failed early must not pass for a fast one.

    python bench/bench_dialogue.py [--n 200] [--turns 6] [--latency 1.0] [--concurrency 32]

The worker pool holds 2 x C questions (run/pipeline.py) and each role's client caps its own calls at C, so up
to C simulator calls and C candidate calls are in flight at once: a ratio below 1 means more than C
conversations were moving, which the `max in flight` line shows. A second line compares the time after
start-up with what whole rounds of 2 x C conversations take (a conversation cannot be split across workers).

Measured on the 2-core development machine while shared (load average 5-8), defaults (N=200, T=6, L=1 s, C=32):
61.2 s against the ideal 75.0 s (0.82x; an earlier run 57.0 s, 0.76x); 2,400 requests, 64 in flight at most;
start-up 5.1 s to the first request, the rest 1.17x of the 48 s four whole rounds of 64 conversations take;
CPU 4.1 ms per call.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EXE, ServerProcess, options, run_engine, served  # noqa: E402

SPEC = """name: bench_dialogue
data:
  path: rows.jsonl
  fields: {id: id, rubric: checks, item_label: null, item_text: text, item_weight: points}
  roles: {user: user, assistant: assistant}
conversation:
  mode: simulated
  max_turns: %d
  stop: "[END]"
  simulator: {system: persona.j2}
aggregation: {question: all_items, overall: mean_over_questions}
scoring: {formula: met_over_positive}
candidate: {system: system.j2}
judge:
  model: {name: judge, model: openai/judge, api_base: "http://127.0.0.1:9/v1"}  # never called (stage=generate)
  template: judge.j2
"""


def _reply(body: dict[str, Any]) -> Any:
    """The simulator (model `sim`) speaks a line that names its turn and never stops; the candidate answers."""
    from fakeserver import Reply  # noqa: PLC0415 - tests/ is on sys.path in the server process

    msgs = body["messages"]
    if body["model"] == "sim":
        k = sum(m["role"] == "assistant" for m in msgs) + 1
        return Reply(text=f"{msgs[0]['content'][:40]} turn {k}: I still feel unsure about this.", usage=(200, 20))
    return Reply(text="That sounds hard. What would help you most right now? " * 2, usage=(300, 40))


def write_spec(root: Path, n: int, turns: int) -> Path:
    """A simulated-conversation spec and N persona rows in `root`."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "benchmark.yaml").write_text(SPEC % turns, encoding="utf-8")
    (root / "persona.j2").write_text("You are client {{ row.id }}: {{ row.persona }}. Say {{ stop }} when done.\n")
    (root / "system.j2").write_text("You are a counsellor. Keep replies short.\n")
    (root / "judge.j2").write_text("{{ transcript }} {{ criteria }} {{ tag }}\n")
    with (root / "rows.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"c{i:04d}", "persona": f"a person with worry number {i}",
                                 "checks": [{"text": "Listens.", "points": 1}]}) + "\n")
    return root


def main(argv: list[str] | None = None) -> None:
    args = options(__doc__, argv, n=200, turns=6, latency=1.0, concurrency=32)
    n, t, lat, c = args.n, args.turns, args.latency, args.concurrency
    ideal = n * t * 2 * lat / c
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(lat, _reply) as srv:
        spec = write_spec(Path(tmp) / "spec", n, t)
        cmd = [EXE, f"benchmark={spec}", f"hydra.run.dir={Path(tmp) / 'run'}", f"cache.dir={Path(tmp) / 'cache'}",
               f"concurrency={c}", "progress=none", "stage=generate", "max_retries=0",
               *served("candidate", "cand", srv.url), *served("user", "sim", srv.url)]
        run = run_engine(cmd)
        requests, in_flight = srv.stats()
        times = srv.request_times()
        answers = (Path(tmp) / "run" / "answers.jsonl").read_text(encoding="utf-8").splitlines()
    wall = run["wall"]
    print(f"N={n} conversations x T={t} simulator turns, L={lat}s, C={c} (whole process, fresh cache)")
    print(f"  wall {wall:.1f}s vs ideal N*T*2*L/C = {ideal:.1f}s -> ratio {wall / ideal:.2f}x (goal <= 1.3x)")
    pool = 2 * c  # conversations in flight (run/pipeline.py's worker pool); each takes T x 2 x L when never kept waiting
    rounds = -(-n // pool) * t * 2 * lat
    startup = (min(times) - run["start"]) if times else float("nan")
    print(f"  the pool keeps {pool} conversations in flight: whole rounds of them take ceil(N/{pool})*T*2*L = "
          f"{rounds:.1f}s; wall minus start-up ({startup:.1f}s to the first request) = {wall - startup:.1f}s -> "
          f"{(wall - startup) / rounds:.2f}x of that bound")
    print(f"  server saw {requests} requests (expected {n * t * 2}), max in flight {in_flight}; "
          f"{len(answers)} answers written")
    print(f"  CPU {run['cpu']:.1f}s ({1000 * run['cpu'] / max(requests, 1):.2f} ms per call); load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if requests != n * t * 2:
        raise SystemExit(f"the run made {requests} requests, not {n * t * 2}: it is not a valid measurement")


if __name__ == "__main__":
    main()
