"""What recording transcripts costs per call, and how big they get (a script, not a test).

Why: every call of a run now reports a CallEvent that run/transcripts.py redacts, content-addresses and appends;
that must stay small beside a call's own CPU (LiteLLM's acompletion is ~5-6 ms of CPU per call here), and the
file must stay bounded. This renders N HealthBench-shaped examples x K criteria through the shipped spec's
judge template (the real prompts a per-criterion run sends), feeds one candidate event and K judge events per
example to a TranscriptWriter exactly as a run does (question finished -> flushed), and prints the CPU per call
side by side with the bytes written per call and the raw size of the prompts.

    python bench/bench_transcripts.py [--n 1000] [--criteria 11] [--reply 2000]

Measured on the shared 2-core machine (load average ~9), N=300 x 11: ~75-80 us of CPU per call (about half of
it models/redact.py's scan of the environment, once per call), ~1.1 kB written per call against ~3.8 kB of
prompt and reply (0.28). Whole process (bench_run.py --n 296 --latency 0.2 --concurrency 32, CPU seconds of
the full run, report worker included): 3.81 / 3.92 s before, 3.89 / 4.09 s with transcripts.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, options  # noqa: E402

sys.path.insert(0, str(ROOT))
from rubric_engine.datatypes import Criterion, Question, Turn  # noqa: E402
from rubric_engine.judge.prompts import candidate_messages, judge_messages  # noqa: E402
from rubric_engine.models.events import CallEvent  # noqa: E402
from rubric_engine.run.transcripts import TranscriptWriter  # noqa: E402
from rubric_engine.spec.load import load_spec  # noqa: E402

WORDS = "the pain doctor rest water fever days sleep check dose swelling ice call if worse child weight".split()


def prose(rng: random.Random, chars: int) -> str:
    """About `chars` characters of words (5.5 characters a word on average, with its space)."""
    return " ".join(rng.choices(WORDS, k=max(1, round(chars / 5.5))))


def main() -> None:
    args = options(__doc__, n=1000, criteria=11, reply=2000)
    spec = load_spec(str(ROOT / "benchmarks" / "healthbench"), [])
    rng = random.Random(0)
    events: list[list[CallEvent]] = []
    raw = 0
    for k in range(args.n):
        crits = tuple(Criterion(index=i, label=None, weight=5.0, text=f"[{k}.{i}] " + prose(rng, 150), ability=None,
                                tags=("axis:accuracy",)) for i in range(1, args.criteria + 1))
        q = Question(id=f"q{k}", dialogue=(Turn("user", prose(rng, 500)),), criteria=crits)
        reply = prose(rng, args.reply)
        ctx = {"question": q.id, "sample": 0}
        cand = candidate_messages(spec, q)
        one = [CallEvent("reply", k * 100, "candidate", "cand", "openai/cand", ctx, cand, text=reply, attempts=1,
                         prompt_tokens=300, completion_tokens=500, latency=1.0, time=time.time())]
        for c in crits:
            msgs = judge_messages(spec, q, reply, c.index)
            raw += sum(len(m["content"]) for m in msgs) + 250
            one.append(CallEvent("reply", k * 100 + c.index, "judge", "judge", "openai/judge",
                                 {**ctx, "criterion": c.index}, msgs, text='{"explanation": "' + prose(rng, 200)
                                 + '", "criteria_met": true}', attempts=1, prompt_tokens=900, completion_tokens=80,
                                 latency=1.0, time=time.time()))
        events.append(one)
    calls = sum(len(e) for e in events)
    with tempfile.TemporaryDirectory() as tmp:
        writer = TranscriptWriter(Path(tmp))
        t0, c0 = time.perf_counter(), time.process_time()
        for k, one in enumerate(events):
            for e in one:
                writer.observe(e)
            writer.finished(f"q{k}")
        writer.close()
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        size = (Path(tmp) / "transcripts" / "calls.jsonl").stat().st_size
    print(f"{args.n} examples x {args.criteria} criteria = {calls} calls (reply {args.reply} chars)")
    print(f"  observe + write, CPU per call     {1e6 * cpu / calls:8.1f} us   (wall {1e6 * wall / calls:.1f} us)")
    print(f"  LiteLLM acompletion, CPU per call  ~5800.0 us   (docs: ECOSYSTEM / bench_calls.py --profile)")
    print(f"  bytes written per call            {size / calls:8.0f}      raw prompts + reply per call {raw / calls:.0f}"
          f"  (ratio {size / raw:.2f})")


if __name__ == "__main__":
    main()
