"""Four clients side by side on one local fake server: CPU per call and wall time (a script, not a test).

Each client is a whole process (start-up and imports included) sending the same number of calls with
unique prompts at concurrency C to one fake server (tests/fakeserver.py in its own process) at latency L:
  engine workers=1 / workers=2   rubric-engine stage=generate through the console script, fresh cache
  bare LiteLLM                   a loop of litellm.acompletion (the engine's import settings)
  bare OpenAI                    a loop of AsyncOpenAI.chat.completions.create (the baseline)
  inspect_ai                     its generate solver on an OpenAI-compatible provider, samples logged
                                 (when importable by --inspect-python; "not installed" otherwise)
then a per-criterion run (HealthBench-shaped: E examples x K criteria, one judge call per criterion plus
one candidate call per example): the engine (stage=full) against the bare clients making the same calls.

CPU is user+sys of the whole process tree (os.wait4: the process and the children it reaped, i.e. worker
processes and the report worker), the figure a busy machine distorts least; wall is start to exit. Each
client runs --runs times, interleaved; the range is printed. The server's request count per client is
printed too: a client that failed early never passes for a fast one.

    python bench/bench_clients.py [--calls 3000] [--concurrency 64] [--latency 0] [--runs 2]
                                  [--examples 300] [--criteria 10] [--inspect-python PATH]
Goals (issue "cost at scale"): engine CPU per call <= 1.25x bare OpenAI's, engine wall <= 1.25x.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EXE, KEY_ENV, ServerProcess, engine_args, run_engine, write_synthetic  # noqa: E402

GOAL = 1.25

# Each bare client: argv = url, requests file (JSON lines: {"first": messages, "then": [messages, ...]}),
# concurrency. "then" calls start once "first" answered (a candidate reply, then its criteria).
_LOOP = r'''
import asyncio, json, sys
async def main(url, path, c):
    jobs = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
    sem = asyncio.Semaphore(c)
    async def one(messages, fmt):
        async with sem:
            text = await CALL(url, messages, fmt)
        assert text
    async def job(j):
        await one(j["first"], None)
        await asyncio.gather(*(one(m, {"type": "json_object"}) for m in j["then"]))
    await asyncio.gather(*(job(j) for j in jobs))
    await CLOSE()
asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
'''
BARE_OPENAI = r'''
import os
from openai import AsyncOpenAI
_client = None
async def CALL(url, messages, fmt):
    global _client
    if _client is None:
        _client = AsyncOpenAI(base_url=url, api_key=os.environ["%s"], max_retries=0, timeout=120)
    extra = {"response_format": fmt} if fmt else {}
    r = await _client.chat.completions.create(model="cand", messages=messages, **extra)
    return r.choices[0].message.content
async def CLOSE():
    await _client.close()
''' % KEY_ENV + _LOOP
BARE_LITELLM = r'''
import os
os.environ.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_MODE="PRODUCTION")
import litellm
async def CALL(url, messages, fmt):
    extra = {"response_format": fmt} if fmt else {}
    r = await litellm.acompletion(model="openai/cand", api_base=url, api_key=os.environ["%s"], messages=messages,
                                  timeout=120, num_retries=0, max_retries=0, **extra)
    return r.choices[0].message.content
async def CLOSE():
    pass
''' % KEY_ENV + _LOOP
INSPECT = r'''
import json, os, sys, tempfile
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.solver import generate
url, path, c = sys.argv[1], sys.argv[2], int(sys.argv[3])
jobs = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
os.environ["FAKE_API_KEY"] = os.environ["%s"]
os.environ["FAKE_BASE_URL"] = url
samples = [Sample(input=j["first"][-1]["content"], id=i) for i, j in enumerate(jobs)]
with tempfile.TemporaryDirectory() as logs:
    logs_ = inspect_eval(Task(dataset=samples, solver=generate()), model="openai-api/fake/cand", max_connections=c,
                         log_dir=logs, display="none", max_retries=0)
assert logs_[0].status == "success", logs_[0].status
''' % KEY_ENV


def _reply(body: dict[str, Any]) -> Any:
    """A candidate reply, or (asked for JSON) a per-criterion verdict."""
    from fakeserver import Reply  # noqa: PLC0415 - tests/ is on sys.path in the server process

    if body.get("response_format"):
        met = len(json.dumps(body)) % 2 == 0
        return Reply(text=json.dumps({"explanation": "The response covers it.", "criteria_met": met}), usage=(700, 30))
    return Reply(text="Rest, drink fluids, and see a doctor if it gets worse or lasts more than three days. " * 3,
                 usage=(300, 120))


def write_healthbench(examples: int, criteria: int, path: Path) -> Path:
    """HealthBench-shaped rows (the published file's field names), every prompt unique."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(examples):
            row = {"prompt_id": f"hb{i:05d}", "example_tags": [f"theme:t{i % 7}"],
                   "prompt": [{"role": "user", "content": f"Example {i}: I have had a headache for two days. "
                                                          "What should I do?"}],
                   "rubrics": [{"criterion": f"Criterion {j} of example {i}: advises seeing a doctor if worse.",
                                "points": -3 if j % 4 == 0 else 5, "tags": ["axis:accuracy", "level:example"]}
                               for j in range(1, criteria + 1)]}
            fh.write(json.dumps(row) + "\n")
    return path


def _jobs_generate(rows: Path, out: Path) -> Path:
    with out.open("w", encoding="utf-8") as fh:
        for line in rows.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            text = "\n".join(t["content"] for t in row["dialogue"])
            fh.write(json.dumps({"first": [{"role": "user", "content": text}], "then": []}, ensure_ascii=False) + "\n")
    return out


def _jobs_per_criterion(rows: Path, out: Path) -> Path:
    with out.open("w", encoding="utf-8") as fh:
        for line in rows.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            convo = row["prompt"]
            reply = "Rest, drink fluids, and see a doctor if it gets worse. " * 3
            judges = [[{"role": "user", "content": f"Conversation:\n{convo[-1]['content']}\nResponse:\n{reply}\n"
                                                   f"Criterion:\n{r['criterion']}\nAnswer in JSON."}]
                      for r in row["rubrics"]]
            fh.write(json.dumps({"first": convo, "then": judges}) + "\n")
    return out


def _importable(python: str, module: str) -> bool:
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def _measure(srv: ServerProcess, cmd: list[str]) -> dict[str, float]:
    before = srv.stats()[0]
    res = run_engine(cmd)
    res["requests"] = srv.stats()[0] - before
    return res


def _span(values: list[float], fmt: str = "{:.2f}") -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if abs(hi - lo) < 1e-9 else f"{fmt.format(lo)}-{fmt.format(hi)}"


def _table(title: str, calls: int, results: dict[str, list[dict[str, float]]], skipped: dict[str, str]) -> None:
    base = results.get("bare OpenAI")
    mid = (lambda rs, k: statistics.median(r[k] for r in rs))
    print(f"\n{title} ({calls:,} calls each)")
    print(f"  {'client':<22} {'wall s':>12} {'CPU ms/call':>13} {'wall x':>8} {'CPU x':>8} {'requests seen':>15}")
    for name, rs in results.items():
        wx = cx = ""
        if base and rs:
            wx = f"{mid(rs, 'wall') / mid(base, 'wall'):.2f}"
            cx = f"{mid(rs, 'cpu') / mid(base, 'cpu'):.2f}"
        print(f"  {name:<22} {_span([r['wall'] for r in rs]):>12} "
              f"{_span([1000 * r['cpu'] / calls for r in rs]):>13} {wx:>8} {cx:>8} "
              f"{_span([r['requests'] for r in rs], '{:.0f}'):>15}")
    for name, why in skipped.items():
        print(f"  {name:<22} {why}")
    print(f"  (ratios: medians against bare OpenAI; goal for the engine: <= {GOAL}x in wall and CPU)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--examples", type=int, default=300)
    ap.add_argument("--criteria", type=int, default=10)
    ap.add_argument("--inspect-python", default=sys.executable, help="a Python that can import inspect_ai")
    ap.add_argument("--skip-per-criterion", action="store_true")
    ap.add_argument("--clients", default="", help="comma-separated client names to run (default: all); an engine "
                    "without workers= (another version's) runs as 'engine'")
    args = ap.parse_args(argv)
    c = args.concurrency
    os.environ[KEY_ENV] = "sk-bench"
    with tempfile.TemporaryDirectory() as tmp_s, ServerProcess(args.latency, _reply) as srv:
        tmp = Path(tmp_s)
        rows = write_synthetic(args.calls, tmp / "rows.jsonl", unique=True)
        gen_jobs = _jobs_generate(rows, tmp / "gen.jsonl")
        clients: dict[str, Any] = {
            "engine": lambda r: engine_args(srv.url, rows, tmp / f"g0-{r}", tmp / f"c0-{r}", c, "generate"),
            "engine workers=1": lambda r: engine_args(srv.url, rows, tmp / f"g1-{r}", tmp / f"c1-{r}", c, "generate")
            + ["workers=1"],
            "engine workers=2": lambda r: engine_args(srv.url, rows, tmp / f"g2-{r}", tmp / f"c2-{r}", c, "generate")
            + ["workers=2"],
            "bare LiteLLM": lambda r: [sys.executable, "-c", BARE_LITELLM, srv.url, str(gen_jobs), str(c)],
            "bare OpenAI": lambda r: [sys.executable, "-c", BARE_OPENAI, srv.url, str(gen_jobs), str(c)],
            "inspect_ai": lambda r: [args.inspect_python, "-c", INSPECT, srv.url, str(gen_jobs), str(c)],
        }
        skipped = {} if _importable(args.inspect_python, "inspect_ai") else \
            {"inspect_ai": f"not installed (for {args.inspect_python}; pass --inspect-python)"}
        wanted = [x.strip() for x in args.clients.split(",") if x.strip()] or [k for k in clients if k != "engine"]
        results: dict[str, list[dict[str, float]]] = {k: [] for k in clients if k not in skipped and k in wanted}
        for r in range(args.runs):
            for name in results:
                results[name].append(_measure(srv, clients[name](r)))
        _table(f"stage=generate, L={args.latency}s, C={c}", args.calls, results, skipped)

        if not args.skip_per_criterion:
            hb = write_healthbench(args.examples, args.criteria, tmp / "hb.jsonl")
            pc_jobs = _jobs_per_criterion(hb, tmp / "pc.jsonl")
            calls = args.examples * (args.criteria + 1)

            def engine(workers: int, r: int) -> list[str]:
                cmd = engine_args(srv.url, hb, tmp / f"p{workers}-{r}", tmp / f"pc{workers}-{r}", c, "full")
                return [x if x != "benchmark=heartbench" else "benchmark=healthbench" for x in cmd] + \
                    [f"workers={workers}"]

            per: dict[str, Any] = {
                "engine workers=1": lambda r: engine(1, r), "engine workers=2": lambda r: engine(2, r),
                "bare LiteLLM": lambda r: [sys.executable, "-c", BARE_LITELLM, srv.url, str(pc_jobs), str(c)],
                "bare OpenAI": lambda r: [sys.executable, "-c", BARE_OPENAI, srv.url, str(pc_jobs), str(c)]}
            pres: dict[str, list[dict[str, float]]] = {k: [] for k in per}
            for r in range(args.runs):
                for name in per:
                    pres[name].append(_measure(srv, per[name](r)))
            _table(f"per-criterion (HealthBench-shaped, {args.examples} x {args.criteria} criteria + 1 candidate "
                   f"call each), L={args.latency}s, C={c}", calls, pres, {})
        load = os.getloadavg()
        print(f"\nload average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores (the machine is "
              f"shared: wall times stretch with it, CPU per call much less); engine: {EXE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
