"""Long scripted conversations: time and peak memory against the number of turns (a script, not a test).

One question whose conversation has T scripted user turns, run through the real console script against the fake
server (its own process, no latency), with a fresh cache and the whole pipeline: every candidate turn, the judge
once on the whole session, the transcripts, samples.jsonl and report.html. Each T runs in its own process, so
its peak RSS is its own (os.wait4). Beside each figure is the linear ideal: the smallest T's figure scaled by
T / T_smallest (time and memory above the process's fixed start-up, which does not grow with T).
Goal: linear growth; 3,000 turns under 60 s and 500 MB. CPU is the engine process's own (user + sys, with the
children it waited for): the wall time also holds the fake server's work, which grows with the bytes sent.

Measured on the shared 2-core development machine on 2026-11-27 (load average 5-7 throughout: other engineers'
mutation runs; the fixed cost of a 1-turn run was 7.5-10.9 s against ~10 s quiet in earlier rounds), before and
after the per-message work was cut (same machine state, minutes apart; the load column is the 1-minute average
when each run ended, added with this table):

     turns  wall s  CPU s  peak MB  calls.jsonl MB  samples MB  report MB  load
    before: every request's messages redacted whole (each re-reading the environment), keyed whole, LiteLLM's
    logging copy of every message
       100    12.8    5.2      268            0.06        0.02       0.16   ~7
      1000   109.2   47.8      273            0.65        0.20       0.24   ~7
    after (models/redact.py MessageRedactor, models/entries.py MessageTexts, MAX_BASE64_LENGTH_FOR_LOGGING=0)
       100    11.8    4.7      267            0.06        0.02       0.16   ~6
      1000    30.0   15.7      273            0.65        0.20       0.24   ~7
      3000   120.6   70.5      287            1.96        0.59       0.24   ~7

    quiet (load average 1.3-1.4, nothing else running; 2026-11-28, litellm 1.110.2)
       100     3.1     3.9      267            0.06        0.02       0.16   1.4
      3000    65.9    60.5      285            1.96        0.59       0.24   1.3
    quiet (load ~1), 2026-11-28: the client continues the earlier turn's request (models/prefixes.py: its cache
    key's hash and its redacted messages), and the fake server keeps no bodies; before, the same day
      3000    68.7    63.6      286            1.96        0.59       0.24   0.9   (texts looked up one by one)
       100     3.2     4.0      268            0.06        0.02       0.16   0.9
      1000    12.4    12.5      276            0.65        0.20       0.24   1.0
      3000    60.7    56.2      294            1.96        0.59       0.24   1.1   (61.8 s / 56.9 s in a second run)
    another two-core machine (its 1-turn run 3.7 s), 2026-11-28, with LiteLLM's floor (below) beside each
      1000    15.1    15.0      276            0.65        0.20       0.24   1.6   (floor 15.4 s wall, 14.4 s CPU)
      3000    80.8    73.7      294            1.96        0.59       0.24   1.2   (floor 76.7 s wall, 68.5 s CPU)

(An earlier round, at load average 16: 35.7, 157.2 and 610.0 s wall for 100, 1,000 and 3,000 turns.) Memory and
every file are linear (before that round: 1,500 turns took 2 GB, a 243 MB report.html and 102 MB of transcripts).
The time is 1-2 s over the goal: 3,000 turns take 56-57 s of the engine's CPU quiet, ~2 s of it the engine's
own functions (py-spy at 200 Hz), and ~5 s more of wall time while the fake server parses each request.
Turn k's request repeats the k - 1 turns before it, so 3,000 turns make ~9 million message visits, and each still costs ~5.5 us of CPU (the CPU between 1,000 and 3,000 turns, less ~4.3 ms a call), about
half of it LiteLLM's own walks over the messages, which no setting of it turns off (in-process, 2,000 messages
a request, us per message per request; docs/operations.md, "Size limits and long conversations"):

    LiteLLM, per message of every request (litellm 1.110.2)            us
      main._history_without_unanswered_tool_search_calls              0.97  (openai/azure: pydantic per message)
      utils.validate_and_fix_openai_messages                          0.64
      OpenAIGPTConfig._transform_messages (async transform)           0.52
      main._messages_readable_by_model (PDF parts, role alternation)  0.25
      utils._remove_thought_signatures_from_messages (a copy each)    0.23
      logging_utils.truncate_base64_in_messages (now off)        0.66 -> 0
    the request's JSON (OpenAI SDK; the protocol's)                   0.53
    the engine: cache key (continued from the earlier turn's request;
      0.27 with texts looked up one by one, 0.71 before)             0.035
    the engine: outgoing redaction (continued likewise; 0.12 looked
      up, ~15 with the environment re-read per message)              0.054

    python bench/bench_turns.py [--turns 100,1000,3000] [--floor 1]

LiteLLM's floor (`--floor 1`, the default): each T's candidate requests are also sent by a bare
`litellm.acompletion` loop in a process of its own (LiteLLM imported and configured as the engine does it; no
Hydra, no judge, no cache, no files), and its time and CPU are printed beside the engine's whole run. What is
left between the two is the engine's; a floor over the goal says the goal cannot be met while every call goes
through LiteLLM.

The candidate's request at turn k necessarily holds the k - 1 turns before it (a chat API is stateless), so the
bytes sent grow as T^2 / 2: that part is the protocol's. Everything the engine keeps or writes (transcripts, the
record, report.html) must grow linearly.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EXE, KEY_ENV, ServerProcess, options, run_engine, served  # noqa: E402

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


def _turn(i: int) -> str:
    return f"Message {i}: please tell me one more thing about the topic."


def write_spec(root: Path, turns: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "benchmark.yaml").write_text(SPEC, encoding="utf-8")
    (root / "system.j2").write_text("You are a helpful assistant. Answer briefly.\n", encoding="utf-8")
    (root / "judge.j2").write_text(JUDGE, encoding="utf-8")
    row = {"id": "long", "turns": [_turn(i) for i in range(turns)],
           "checks": [{"text": "Answers every message.", "points": 1}]}
    (root / "rows.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    return root


def floor_loop(url: str, turns: int) -> None:
    """The same conversation's candidate requests sent by `litellm.acompletion` alone (LiteLLM imported and
    configured as the engine does it, models/litellm_runtime.py), one after the other, each reply appended:
    what the protocol and LiteLLM cost with no engine around them. Run in a process of its own (`--floor`)."""
    import asyncio  # noqa: PLC0415

    from rubric_engine.models.litellm_runtime import RUNTIME  # noqa: PLC0415

    litellm = RUNTIME.module()

    async def converse() -> None:
        messages = [{"role": "system", "content": "You are a helpful assistant. Answer briefly."}]
        for i in range(turns):
            messages.append({"role": "user", "content": _turn(i)})
            reply = await litellm.acompletion(model="openai/cand", api_base=url, api_key=os.environ[KEY_ENV],
                                              messages=list(messages), max_retries=0)
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})

    asyncio.run(converse())


def measure_floor(turns: int, srv: ServerProcess) -> dict[str, float]:
    """The floor loop's process for `turns` turns; the server must have seen exactly one request a turn."""
    before = srv.stats()[0]
    got = run_engine([sys.executable, __file__, "--floor", srv.url, str(turns)])
    if (seen := srv.stats()[0] - before) != turns:
        raise SystemExit(f"the floor loop sent {seen} requests for {turns} turns")
    return got


def measure(turns: int, url: str, tmp: Path) -> dict[str, float]:
    spec = write_spec(tmp / f"spec{turns}", turns)
    run_dir = tmp / f"run{turns}"
    cmd = [EXE, f"benchmark={spec}", f"hydra.run.dir={run_dir}", f"cache.dir={tmp / f'cache{turns}'}",
           "progress=none", "max_retries=0", *served("candidate", "cand", url), *served("judge", "judge", url)]
    got = run_engine(cmd)
    got["load"] = os.getloadavg()[0]  # the machine is shared: each figure is read beside its load
    sizes = {name: sum(f.stat().st_size for f in run_dir.rglob(name)) / 1e6
             for name in ("calls.jsonl", "samples.jsonl", "report.html")}
    return {**got, **{f"{k}_mb": v for k, v in sizes.items()}}


def main(argv: list[str] | None = None) -> None:
    args = options(__doc__, argv, turns="100,1000,3000", floor=1)
    counts = sorted(int(t) for t in args.turns.split(","))
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(0.0, _reply, keep_bodies=False) as srv:
        base = measure(1, srv.url, Path(tmp))  # the fixed cost of a run: start-up, imports, one call
        rows = [(t, measure(t, srv.url, Path(tmp))) for t in counts]
        floors = {t: measure_floor(t, srv) for t in counts} if args.floor else {}
    t0, m0 = counts[0], rows[0][1]
    grow_wall, grow_rss = (m0["wall"] - base["wall"]) / t0, (m0["rss_mb"] - base["rss_mb"]) / t0
    print(f"fixed cost (1 turn): {base['wall']:.1f} s, {base['cpu']:.1f} s CPU, {base['rss_mb']:.0f} MB; "
          f"linear ideal = fixed + T x "
          f"(the {t0}-turn run's growth per turn)")
    grow_cpu = (m0["cpu"] - base["cpu"]) / t0
    print(f"{'turns':>6} {'wall s':>8} {'ideal s':>8} {'ratio':>6} {'CPU s':>7} {'ideal':>7} {'ratio':>6} "
          f"{'peak MB':>8} {'ideal MB':>9} {'ratio':>6} {'calls.jsonl MB':>15} {'samples MB':>11} {'report MB':>10} "
          f"{'load':>5}")
    for t, m in rows:
        iw = base["wall"] + grow_wall * t
        ic = base["cpu"] + grow_cpu * t
        im = base["rss_mb"] + max(grow_rss, 0.0) * t
        print(f"{t:>6} {m['wall']:>8.1f} {iw:>8.1f} {m['wall'] / iw:>6.2f} {m['cpu']:>7.1f} {ic:>7.1f} "
              f"{m['cpu'] / ic:>6.2f} {m['rss_mb']:>8.0f} {im:>9.0f} {m['rss_mb'] / im:>6.2f} "
              f"{m['calls.jsonl_mb']:>15.2f} {m['samples.jsonl_mb']:>11.2f} {m['report.html_mb']:>10.2f} "
              f"{m['load']:>5.1f}")
    if floors:
        print("LiteLLM's floor: the same candidate requests from a bare litellm.acompletion loop (its own process, "
              "LiteLLM's import included; no judge, no files), beside the engine's whole run")
        print(f"{'turns':>6} {'floor s':>8} {'engine s':>9} {'ratio':>6} {'floor CPU':>10} {'engine CPU':>11} "
              f"{'ratio':>6}")
        for t, m in rows:
            f = floors[t]
            print(f"{t:>6} {f['wall']:>8.1f} {m['wall']:>9.1f} {m['wall'] / f['wall']:>6.2f} {f['cpu']:>10.1f} "
                  f"{m['cpu']:>11.1f} {m['cpu'] / f['cpu']:>6.2f}")
    worst = rows[-1][1]
    print(f"goal for 3,000 turns: under 60 s and 500 MB; the largest run here: {counts[-1]} turns, "
          f"{worst['wall']:.1f} s, {worst['rss_mb']:.0f} MB"
          + (f"; LiteLLM's floor for it: {floors[counts[-1]]['wall']:.1f} s" if floors else ""))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--floor"]:
        floor_loop(sys.argv[2], int(sys.argv[3]))
    else:
        main()
