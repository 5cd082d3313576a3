"""A simulated user with a hidden state (`user_state:`) against the fake server: wall time against its ideal (a
script, not a test).

Why: each user line's state is read, validated and checked against the stop rules before the candidate's turn;
that reading must not make a conversation slower than its calls. N conversations of T simulator turns, each
turn one simulator call and one candidate call at latency L, concurrency C: the ideal is N x T x 2 x L / C, as
bench_dialogue.py's. The simulator writes a state after every line that never meets a stop rule, so every
session runs to max_turns; the scored run (no judge: the final state is the score) is the real console script,
timed over the span of its calls (first request's arrival to the last answer), the server's request count
printed beside it (N x T x 2 expected) so a run that failed early cannot pass for a fast one.

    python bench/bench_user_state.py [--n 200] [--turns 6] [--latency 1.0] [--concurrency 32]

As in bench_dialogue.py, each role's client caps its own calls at C, so up to C simulator and C candidate calls
are in flight at once and the ratio can fall below 1. Measured on the shared 2-core machine on 2026-11-28 (load
average 7.4 from other work), --n 64 --turns 4 --latency 1.0 --concurrency 16: 512 requests seen, 32 in flight at
most, the calls' span 19.4 s vs ideal 32.0 s (0.60x, goal 1.3x), CPU 12.9 ms per call.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EXE, ServerProcess, options, print_call_rate, run_engine, served  # noqa: E402

SPEC = """name: bench_user_state
data:
  path: rows.jsonl
  fields: {id: id, item_label: null}
  roles: {user: user, assistant: assistant}
conversation:
  mode: simulated
  max_turns: %d
  stop: "[END]"
  simulator: {system: persona.j2}
user_state:
  fields: {emotion: {type: number, min: 0, max: 100}, change: {type: number}, reason: {type: text}}
  stop_when: ["emotion <= 0", "emotion >= 100"]
  field: emotion
scoring: {scale: 1}
aggregation: {question: all_items, overall: mean_over_questions, clip: none}
candidate: {system: system.j2}
"""


def _reply(body: dict[str, Any]) -> Any:
    """The simulator (model `sim`) speaks a line and its state (between the bounds: it never stops); the candidate
    answers."""
    from fakeserver import Reply  # noqa: PLC0415 - tests/ is on sys.path in the server process

    msgs = body["messages"]
    if body["model"] == "sim":
        k = sum(m["role"] == "assistant" for m in msgs) + 1
        state = {"emotion": 40 + k, "change": 1, "reason": "a little better"}
        who = msgs[0]["content"].split(".")[0]  # each conversation its own words: no candidate call is a cache hit
        return Reply(text=f"{who}, turn {k}: I still feel unsure about this.\n{json.dumps(state)}", usage=(200, 40))
    return Reply(text="That sounds hard. What would help you most right now? " * 2, usage=(300, 40))


def write_spec(root: Path, n: int, turns: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "benchmark.yaml").write_text(SPEC % turns, encoding="utf-8")
    (root / "persona.j2").write_text("You are {{ row.id }}. After each line write your state as JSON.\n")
    (root / "system.j2").write_text("You are a supportive listener. Keep replies short.\n")
    with (root / "rows.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"c{i:04d}"}) + "\n")
    return root


def main(argv: list[str] | None = None) -> None:
    a = options(__doc__, argv, n=200, turns=6, latency=1.0, concurrency=32)
    calls = a.n * a.turns * 2
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(a.latency, _reply) as srv:
        spec = write_spec(Path(tmp) / "spec", a.n, a.turns)
        cmd = [EXE, f"benchmark={spec}", f"hydra.run.dir={Path(tmp) / 'run'}", f"cache.dir={Path(tmp) / 'cache'}",
               f"concurrency={a.concurrency}", "progress=none", "max_retries=0",
               *served("candidate", "cand", srv.url), *served("user", "sim", srv.url)]
        proc = run_engine(cmd)
        requests, in_flight = srv.stats()
        wall = srv.calls_span(a.latency)
        summary = json.loads((Path(tmp) / "run" / "summary.json").read_text())
    print(f"user_state: N={a.n} conversations x T={a.turns} turns, a state read each user line, no judge; "
          f"L={a.latency}s, C={a.concurrency}")
    print(f"  requests seen {requests} (expected {calls}), max in flight {in_flight}; scored "
          f"{summary['counts']['scored']}, user errors {summary['counts'].get('user_errors')}")
    print_call_rate(wall, calls * a.latency / a.concurrency, calls, proc["cpu"], a.concurrency, a.latency)
    if requests != calls:
        raise SystemExit(f"the run made {requests} requests, not {calls}: it is not a valid measurement")


if __name__ == "__main__":
    main()
