"""Anchored pairwise (judge.verdict.kind: anchored) against the fake server: wall time against its ideal (a script).

Why: an anchored run makes, per question, one judge call per anchor and order (3 anchors x 2 orders in the shipped
anchored_mini spec), all started together through one judge client with concurrency C; the engine's reading of
the anchor files, the length rule and the games' bookkeeping must not make the run slower than its calls. With
latency L, N questions, A anchors and concurrency C the ideal wall time is N * A * 2 * L / C. This runs the real
console script (a spec extending anchored_mini with N questions and anchor files written here, the candidate's
answers given with stage=score, the fake server in its own process answering every game with a label) and
prints the span of the calls (first request's arrival to the last one's answer: LiteLLM's import and the first
call's set-up left out, as in bench_rating.py), the ideal and their ratio, and the whole process's wall and CPU.

    python bench/bench_anchored.py --n 100 --latency 1.0 --concurrency 32

Measured on the shared 2-core machine on 2026-11-28 (load average 7.9 from other work), same arguments: 600
requests seen, 32 in flight at most, the calls' span 20.5 s vs ideal 18.8 s (1.10x, goal 1.3x); the run's
wall_seconds.total 29.0 s, LiteLLM's import and first call included.
"""

from __future__ import annotations

import json
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EXE, ROOT, ServerProcess, options, print_call_rate, run_engine, served  # noqa: E402

LABELS = ["A>>B", "A>B", "A=B", "B>A", "B>>A"]
ANCHORS = {"strong": 1300, "middle": 1000, "weak": 700}


def _reply(body: dict[str, Any]) -> Any:
    """A label that depends on the prompt (crc32), so the rewards and the rating have work to do."""
    from fakeserver import Reply  # noqa: PLC0415

    label = LABELS[zlib.crc32(json.dumps(body["messages"]).encode()) % len(LABELS)]
    return Reply(text=f"Weighing both replies.\n\nMy final verdict is [[{label}]].", usage=(900, 120))


def write_inputs(n: int, tmp: Path) -> tuple[Path, Path, Path]:
    """(spec dir, questions, candidate answers): N prompts, each anchor's reply and the candidate's, lengths varied."""
    spec = tmp / "spec"
    spec.mkdir()
    ids = [f"q{i:05d}" for i in range(n)]
    for name in ANCHORS:
        (spec / f"{name}.jsonl").write_text("".join(
            json.dumps({"id": q, "response": f"{name} reply to {q}. " + "x" * (i * 37 % 400)}) + "\n"
            for i, q in enumerate(ids)))
    files = "\n".join(f"    {a}: {{path: {a}.jsonl, rating: {r}}}" for a, r in ANCHORS.items())
    (spec / "benchmark.yaml").write_text(f"name: anchored_bench\nextends: anchored_mini\ndata:\n  sha256: null\n"
                                         f"anchors:\n  files:\n{files}\n")
    data = tmp / "questions.jsonl"
    data.write_text("".join(json.dumps({"id": q, "prompt": f"Prompt {q}: explain it briefly."}) + "\n" for q in ids))
    answers = tmp / "answers.jsonl"
    answers.write_text("".join(json.dumps({"id": q, "response": f"Candidate reply to {q}. " + "y" * (i * 53 % 400)})
                               + "\n" for i, q in enumerate(ids)))
    return spec, data, answers


def main() -> None:
    a = options(__doc__, n=100, latency=1.0, concurrency=32)
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(a.latency, _reply) as srv:
        spec, data, answers = write_inputs(a.n, Path(tmp))
        out = Path(tmp) / "run"
        args = [EXE, f"benchmark={spec}", f"data.path={data}", "stage=score", f"answers={answers}",
                f"hydra.run.dir={out}", f"cache.dir={Path(tmp) / 'cache'}", f"concurrency={a.concurrency}",
                "progress=none", "max_retries=0", *served("judge", "judge", srv.url)]
        proc = run_engine(args)
        requests, max_in_flight = srv.stats()
        wall = srv.calls_span(a.latency)
        summary = json.loads((out / "summary.json").read_text())
    calls = a.n * len(ANCHORS) * 2
    ideal = calls * a.latency / a.concurrency
    rating = summary["anchored"]["rating"]
    print(f"anchored (anchored_mini): {a.n} questions x {len(ANCHORS)} anchors x 2 orders = {calls} judge calls; "
          f"latency {a.latency}s, C={a.concurrency}")
    print(f"  requests seen {requests}, max in flight {max_in_flight}; mixture of rewards "
          f"{summary['anchored']['mixture_of_rewards']:.2f}, rating {rating['value']:.0f} "
          f"[{rating['low']:.0f}, {rating['high']:.0f}]")
    print_call_rate(wall, ideal, calls, proc["cpu"], a.concurrency, a.latency)
    print(f"  the run's wall_seconds.total {summary['wall_seconds']['total']:.1f}s (LiteLLM's import included); the "
          f"whole process {proc['wall']:.1f}s wall, {proc['cpu']:.1f}s CPU (start-up and the report included)")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
