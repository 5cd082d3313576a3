"""Long scripted conversations: time and peak memory against the number of turns (a script, not a test).

One question whose conversation has T scripted user turns, run through the real console script against the fake
server (its own process, no latency), with a fresh cache and the whole pipeline: every candidate turn, the judge
once on the whole session, the transcripts, samples.jsonl and report.html. Each T runs in its own process, so
its peak RSS is its own (os.wait4). Beside each figure is the linear ideal: the smallest T's figure scaled by
T / T_smallest (time and memory above the process's fixed start-up, which does not grow with T).
Goal: linear growth; 3,000 turns under 60 s and 500 MB. CPU is the engine process's own (user + sys, with the
children it waited for): the wall time also holds the fake server's work, which grows with the bytes sent.

Measured on the 2-core development machine while heavily shared (load average 16; the fixed cost of a 1-turn run
was 30.4 s against ~10 s on a quiet machine), before the CPU column was added:

     turns  wall s  ideal s  ratio  peak MB  ideal MB  ratio  calls.jsonl MB  samples MB  report MB
       100    35.7     35.7   1.00      266       266   1.00            0.06        0.02       0.16
      1000   157.2     84.1   1.87      270       272   1.00            0.65        0.20       0.24
      3000   610.0    191.7   3.18      286       285   1.00            1.96        0.59       0.24

Memory and every file are linear (before: 1,500 turns took 2 GB, a 243 MB report.html and 102 MB of
transcripts; 800 turns here took 652 MB, 42 MB of transcripts and a 73 MB report.html). The time is not yet:
each request still carries the whole conversation, and LiteLLM walks every message of every request (base64
truncation for its logging payload, thought-signature removal, JSON encoding): 15-30 us of CPU per message per
request (under the profiler, 400 turns), which makes 3,000 turns' 9 million message visits minutes of CPU. The
engine's own per-turn work is linear (the engine process's CPU went from 13.3 s at 400 turns to 16.9 s at 800).

    python bench/bench_turns.py [--turns 100,1000,3000]

The candidate's request at turn k necessarily holds the k - 1 turns before it (a chat API is stateless), so the
bytes sent grow as T^2 / 2: that part is the protocol's, and is printed (MB sent) so a run can be read against
it. Everything the engine keeps or writes (transcripts, the record, report.html) must grow linearly.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EXE, KEY_ENV, ServerProcess, options, run_engine  # noqa: E402

SPEC = """name: bench_turns
data:
  path: rows.jsonl
  fields: {id: id, turns: turns, rubric: checks, item_label: null, item_text: text, item_weight: points}
  roles: {user: user, assistant: assistant}
conversation: {mode: scripted}
aggregation: {question: all_items, overall: mean_over_questions}
scoring: {formula: met_over_positive}
candidate: {system: system.j2}
judge:
  model: {name: judge, model: openai/judge, api_base: "http://127.0.0.1:9/v1"}  # replaced on the command line
  template: judge.j2
"""
JUDGE = """Grade the conversation.
<c-{{ tag }}>
{% for t in transcript %}[{{ t.role }}] {{ t.content }}
{% endfor %}</c-{{ tag }}>
{% for c in criteria %}{{ c.index }}. {{ c.text }}
{% endfor %}Reply {"criteria": [{"id": 1, "reasoning": "...", "met": true}]}
"""


def _reply(body: dict[str, Any]) -> Any:
    """The judge meets every check; the candidate answers each turn with a line naming it."""
    from fakeserver import Reply  # noqa: PLC0415 - tests/ is on sys.path in the server process

    if body["model"] == "judge":
        return Reply(text=json.dumps({"criteria": [{"id": 1, "reasoning": "fine", "met": True}]}))
    k = sum(m["role"] == "user" for m in body["messages"])
    return Reply(text=f"Reply {k}: that is a fair point, and here is a short answer to it.", usage=(20, 15))


def write_spec(root: Path, turns: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "benchmark.yaml").write_text(SPEC, encoding="utf-8")
    (root / "system.j2").write_text("You are a helpful assistant. Answer briefly.\n", encoding="utf-8")
    (root / "judge.j2").write_text(JUDGE, encoding="utf-8")
    row = {"id": "long", "turns": [f"Message {i}: please tell me one more thing about the topic." for i in range(turns)],
           "checks": [{"text": "Answers every message.", "points": 1}]}
    (root / "rows.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    return root


def measure(turns: int, url: str, tmp: Path) -> dict[str, float]:
    spec = write_spec(tmp / f"spec{turns}", turns)
    run_dir = tmp / f"run{turns}"
    cmd = [EXE, f"benchmark={spec}", f"hydra.run.dir={run_dir}", f"cache.dir={tmp / f'cache{turns}'}",
           "progress=none", "max_retries=0", "candidate=openai_compatible", "candidate.model=openai/cand",
           f"candidate.api_base={url}", f"candidate.api_key_env={KEY_ENV}", "judge=openai_compatible",
           "judge.model=openai/judge", f"judge.api_base={url}", f"judge.api_key_env={KEY_ENV}"]
    got = run_engine(cmd)
    sizes = {name: sum(f.stat().st_size for f in run_dir.rglob(name)) / 1e6
             for name in ("calls.jsonl", "samples.jsonl", "report.html")}
    return {**got, **{f"{k}_mb": v for k, v in sizes.items()}}


def main(argv: list[str] | None = None) -> None:
    args = options(__doc__, argv, turns="100,1000,3000")
    counts = sorted(int(t) for t in args.turns.split(","))
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(0.0, _reply) as srv:
        base = measure(1, srv.url, Path(tmp))  # the fixed cost of a run: start-up, imports, one call
        rows = [(t, measure(t, srv.url, Path(tmp))) for t in counts]
    t0, m0 = counts[0], rows[0][1]
    grow_wall, grow_rss = (m0["wall"] - base["wall"]) / t0, (m0["rss_mb"] - base["rss_mb"]) / t0
    print(f"fixed cost (1 turn): {base['wall']:.1f} s, {base['rss_mb']:.0f} MB; linear ideal = fixed + T x "
          f"(the {t0}-turn run's growth per turn)")
    grow_cpu = (m0["cpu"] - base["cpu"]) / t0
    print(f"{'turns':>6} {'wall s':>8} {'ideal s':>8} {'ratio':>6} {'CPU s':>7} {'ideal':>7} {'ratio':>6} "
          f"{'peak MB':>8} {'ideal MB':>9} {'ratio':>6} {'calls.jsonl MB':>15} {'samples MB':>11} {'report MB':>10}")
    for t, m in rows:
        iw = base["wall"] + grow_wall * t
        ic = base["cpu"] + grow_cpu * t
        im = base["rss_mb"] + max(grow_rss, 0.0) * t
        print(f"{t:>6} {m['wall']:>8.1f} {iw:>8.1f} {m['wall'] / iw:>6.2f} {m['cpu']:>7.1f} {ic:>7.1f} "
              f"{m['cpu'] / ic:>6.2f} {m['rss_mb']:>8.0f} {im:>9.0f} {m['rss_mb'] / im:>6.2f} "
              f"{m['calls.jsonl_mb']:>15.2f} {m['samples.jsonl_mb']:>11.2f} {m['report.html_mb']:>10.2f}")
    worst = rows[-1][1]
    print(f"goal for 3,000 turns: under 60 s and 500 MB; the largest run here: {counts[-1]} turns, "
          f"{worst['wall']:.1f} s, {worst['rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
