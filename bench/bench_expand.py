"""Per-turn items (`data.expand: assistant_turns`, the counselling_turns spec) against the fake server: wall time
against its ideal (a script, not a test).

Why: a dialogue of T counsellor turns becomes T questions, each one candidate call (the gold history before that
turn, then the candidate's turn) and one judge call; expanding the data, rendering each turn's history and
folding the scores back to dialogues must not make the run slower than its calls. Candidate and judge each have
C calls in flight and a question's judge call follows its candidate call, so with Q = N x T questions at latency
L the pipelined ideal is Q x L / C + L (as bench_run.py's). This runs the real console script on N dialogues of
T counsellor turns written here (each its own words, so no call is a cache hit) and prints the span of the
calls (first request's arrival at the server to the last one's answer), the ideal, their ratio, and the
requests the server saw against the 2 x Q expected, so a run that failed early cannot pass for a fast one.

    python bench/bench_expand.py --n 100 --turns 4 --latency 1.0 --concurrency 32

Measured on the 2-core development machine on 2026-11-28 (load average 1.6, nothing else running), same
arguments: 800 requests seen (800 expected), 64 in flight at most, the calls' span 15.2 s vs ideal 13.5 s
(1.12x, goal 1.3x), 10.2 ms of CPU per call. (At load average 10.9 the same run took 24.4 s: 1.81x.)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EXE, ServerProcess, options, print_call_rate, run_engine, served  # noqa: E402

RUBRIC = [{"text": "Reflects the feeling the client has just expressed.", "weight": 2},
          {"text": "Invites the client to say more, without pushing.", "weight": 1},
          {"text": "Gives a directive the client did not ask for.", "weight": -2}]


def write_dialogues(n: int, turns: int, path: Path) -> Path:
    """N dialogues, each T client lines each followed by a counsellor line (T questions a dialogue)."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            dialogue = []
            for k in range(turns):
                dialogue += [{"role": "client", "content": f"Dialogue {i}, line {k}: I keep worrying about work."},
                             {"role": "counsellor", "content": f"That sounds heavy ({i}.{k}). What worries you most?"}]
            fh.write(json.dumps({"id": f"d{i:04d}", "topic": "work", "dialogue": dialogue, "rubric": RUBRIC}) + "\n")
    return path


def main(argv: list[str] | None = None) -> None:
    a = options(__doc__, argv, n=100, turns=4, latency=1.0, concurrency=32)
    questions = a.n * a.turns
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(a.latency) as srv:
        out = Path(tmp) / "run"
        cmd = [EXE, "benchmark=counselling_turns", f"data.path={write_dialogues(a.n, a.turns, Path(tmp) / 'd.jsonl')}",
               f"hydra.run.dir={out}", f"cache.dir={Path(tmp) / 'cache'}", f"concurrency={a.concurrency}",
               "progress=none", "max_retries=0", *served("candidate", "cand", srv.url), *served("judge", "judge", srv.url)]
        proc = run_engine(cmd)
        requests, in_flight = srv.stats()
        wall = srv.calls_span(a.latency)
        summary = json.loads((out / "summary.json").read_text())
    print(f"per-turn items (counselling_turns): N={a.n} dialogues x T={a.turns} counsellor turns = {questions} "
          f"questions, a candidate and a judge call each; L={a.latency}s, C={a.concurrency}")
    print(f"  requests seen {requests} (expected {2 * questions}), max in flight {in_flight}; scored "
          f"{summary['counts']['scored']} of {questions}")
    print_call_rate(wall, questions * a.latency / a.concurrency + a.latency, 2 * questions, proc["cpu"],
                    a.concurrency, a.latency)
    if requests != 2 * questions:
        raise SystemExit(f"the run made {requests} requests, not {2 * questions}: it is not a valid measurement")


if __name__ == "__main__":
    main()
