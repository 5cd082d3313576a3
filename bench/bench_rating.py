"""Ratings against a reference (the eq_bench spec) against the fake server: wall time against its ideal (a script).

Why: a rating run makes one candidate call per question and no judge call; the engine's reading and scoring of
each reply must not make the run slower than its calls. With latency L, N questions and concurrency C the ideal
wall time is N * L / C. This runs the real console script (the shipped eq_bench spec on N questions of
EQ-Bench's file shape written here, the fake server in its own process answering every prompt in its rating
format) and prints the span of its calls (from the first request's arrival at the server to the last one's
answer: the engine's throughput, LiteLLM's import and the first call's set-up left out as in the in-process
benches' warm-up), the ideal and their ratio, the run's own wall_seconds.total (which includes that import)
and the whole process's wall and CPU.

    python bench/bench_rating.py --n 400 --latency 1.0 --concurrency 32

Measured on the shared 2-core machine on 2026-11-28 (load average 6.6 from other work), same arguments: 400
requests seen, 32 in flight at most, the calls' span 15.1 s vs ideal 12.5 s (1.21x, goal 1.3x); the run's
wall_seconds.total 23.5 s, about 8 s of it LiteLLM's import and first call at that load (the CPU line is the
whole process's, start-up included).
"""

from __future__ import annotations

import json
import random
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EXE, ROOT, ServerProcess, options, print_call_rate, run_engine, served  # noqa: E402

NAMES = ["Hurt", "Proud", "Relieved", "Bored", "Anxious", "Grateful", "Annoyed", "Jealous", "Calm", "Guilty"]


def _reply(body: dict[str, Any]) -> Any:
    """The prompt's rating format filled in (a number per `<score>`), every fifth one a name short."""
    from fakeserver import Reply  # noqa: PLC0415

    asked = str(body["messages"][-1]["content"])
    text = re.sub(r"<[^<>\n]*>", "fine", re.sub(r"<[^<>\n]*score>", lambda m: str(len(m.group()) % 11), asked))
    if len(asked) % 5 == 0:
        text = text.rsplit("\n", 2)[0]
    return Reply(text=text, usage=(350, 60))


def write_questions(n: int, path: Path) -> Path:
    rng = random.Random(0)
    rows = {}
    for i in range(1, n + 1):
        names = rng.sample(NAMES, 4)
        lines = "\n".join(f"{e}: <score>" for e in names)
        ref: dict[str, Any] = {f"emotion{k}": names[k - 1] for k in range(1, 5)}
        ref.update({f"emotion{k}_score": rng.randint(0, 10) for k in range(1, 5)})
        rows[str(i)] = {"prompt": f"Dialogue {i}. How does Sam feel?\n\nFirst pass scores:\n{lines}\n\n"
                                  f"Critique: <your critique here>\n\nRevised scores:\n{lines}\n",
                        "reference_answer_fullscale": ref}
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def main() -> None:
    a = options(__doc__, n=400, latency=1.0, concurrency=32)
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(a.latency, _reply) as srv:
        out = Path(tmp) / "run"
        args = [EXE, "benchmark=eq_bench", f"data.path={write_questions(a.n, Path(tmp) / 'q.json')}",
                f"hydra.run.dir={out}", f"cache.dir={Path(tmp) / 'cache'}", f"concurrency={a.concurrency}",
                "progress=none", "max_retries=0", *served("candidate", "cand", srv.url)]
        proc = run_engine(args)
        requests, max_in_flight = srv.stats()
        wall = srv.calls_span(a.latency)
        summary = json.loads((out / "summary.json").read_text())
    ideal = a.n * a.latency / a.concurrency
    print(f"rating (eq_bench): {a.n} questions, 1 candidate call each, no judge; latency {a.latency}s, "
          f"C={a.concurrency}")
    print(f"  requests seen {requests}, max in flight {max_in_flight}; rating.benchmark "
          f"{summary['rating']['benchmark']:.2f}, unparseable (revised) {summary['rating']['passes'][1]['unparseable']}")
    print_call_rate(wall, ideal, a.n, proc["cpu"], a.concurrency, a.latency)
    print(f"  the run's wall_seconds.total {summary['wall_seconds']['total']:.1f}s (LiteLLM's import included); the "
          f"whole process {proc['wall']:.1f}s wall, {proc['cpu']:.1f}s CPU (start-up and the report included)")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
