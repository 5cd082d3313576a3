"""Throughput benchmark of ModelClient against the fake server (a script, not a test).

Why: a 296-question run makes ~600 calls; at concurrency C and per-call latency L the ideal wall
time of a stage is N*L/C. This measures how close ModelClient (LiteLLM over HTTP, semaphore,
cache writes) gets, then times a cached re-score in a fresh process (which must not import LiteLLM).

    PYTHONPATH=. python bench/bench_calls.py --n 296 --latency 1.0 --concurrency 32
    PYTHONPATH=. python bench/bench_calls.py --profile --n 1000 --latency 0 --concurrency 64

`cached_rescore()` is the in-process re-score; `rescore_command()` builds the command the subprocess
timing runs — swap it for the real CLI invocation once that exists.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))
from _common import ServerProcess  # noqa: E402
from rubric_engine.models.cache import ResultCache  # noqa: E402
from rubric_engine.models.client import ModelClient  # noqa: E402
from rubric_engine.models.entries import ModelSpec  # noqa: E402

__all__ = ["run_stages", "cached_rescore", "rescore_command", "time_subprocess", "main"]

KEY_ENV = "BENCH_FAKE_KEY"
VERDICT_FORMAT = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": {
    "type": "object", "properties": {"criteria": {"type": "array"}}, "required": ["criteria"]}}}


def candidate_messages(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Question {i}: my friend ignored my message for two days. 我该怎么办?"}]


def judge_messages(i: int, answer: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You grade a response against numbered rubric items."},
            {"role": "user", "content": f"Question {i}\nResponse:\n{answer}\nItems:\n1. empathises\n2. asks"}]


def accept_verdict(text: str) -> None:
    """Stand-in for the judge's validation: raising rejects (and does not cache) the reply."""
    if not isinstance(json.loads(text).get("criteria"), list):
        raise ValueError("no criteria list")


def fake_reply(body: dict[str, Any]) -> Any:
    from fakeserver import Reply  # tests/ is on sys.path in main()

    if body.get("response_format"):
        return Reply(text=json.dumps({"criteria": [{"id": 1, "reasoning": "ok", "met": True},
                                                   {"id": 2, "reasoning": "no", "met": False}]}), usage=(400, 60))
    return Reply(text="I hear you; that sounds hard. " * 8, usage=(60, 120))


def specs(api_base: str) -> tuple[ModelSpec, ModelSpec]:
    cand = ModelSpec(name="cand", model="openai/fake-candidate", api_base=api_base, api_key_env=KEY_ENV)
    judge = ModelSpec(name="judge", model="openai/fake-judge", api_base=api_base, api_key_env=KEY_ENV)
    return cand, judge


async def run_stages(api_base: str, cache: ResultCache, n: int, concurrency: int,
                     warm_up: bool = False) -> dict[str, Any]:
    """Candidate stage then judge stage; returns per-stage wall times and counts."""
    cand_spec, judge_spec = specs(api_base)
    out: dict[str, Any] = {}
    async with ModelClient(cand_spec, cache=cache, concurrency=concurrency, role="candidate") as cand, \
            ModelClient(judge_spec, cache=cache, concurrency=concurrency, role="judge") as judge:
        if warm_up:  # LiteLLM's first call lazily imports provider modules (~0.8 s): a one-off, timed apart
            t0 = time.perf_counter()
            async with ModelClient(cand_spec, cache=None, role="warm-up") as first:
                await first.complete(candidate_messages(-1))
            out["warm_up"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        answers = await asyncio.gather(*(cand.complete(candidate_messages(i)) for i in range(n)))
        out["candidate"] = {"wall": time.perf_counter() - t0, "cached": sum(a.cached for a in answers)}
        t0 = time.perf_counter()
        verdicts = await asyncio.gather(*(judge.complete(judge_messages(i, a.text), response_format=VERDICT_FORMAT,
                                                         accept=accept_verdict) for i, a in enumerate(answers)))
        out["judge"] = {"wall": time.perf_counter() - t0, "cached": sum(v.cached for v in verdicts)}
        out["stats"] = {"candidate": cand.stats.as_dict(), "judge": judge.stats.as_dict()}
    return out


def cached_rescore(cache_dir: str, api_base: str, n: int, concurrency: int) -> dict[str, Any]:
    """Re-run both stages from the warm cache; reports whether LiteLLM got imported."""
    with ResultCache(cache_dir) as cache:
        out = asyncio.run(run_stages(api_base, cache, n, concurrency))
    out["litellm_imported"] = "litellm" in sys.modules
    return out


def rescore_command(cache_dir: str, api_base: str, n: int, concurrency: int) -> list[str]:
    """The fresh-process re-score to time (replace with the real CLI's score-only command later)."""
    return [sys.executable, str(Path(__file__).resolve()), "--cached-rescore", cache_dir, "--api-base", api_base,
            "--n", str(n), "--concurrency", str(concurrency)]


def time_subprocess(cmd: list[str]) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop(KEY_ENV, None)  # a cached re-score needs no API key
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"cached re-score failed ({proc.returncode}):\n{proc.stderr}")
    return wall, proc.stdout


_BUCKETS = (("rubric_engine", "/rubric_engine/"), ("litellm", "/litellm/"), ("openai SDK", "/openai/"),
            ("HTTP (httpx, aiohttp)", ("/httpx/", "/httpcore/", "/aiohttp/", "/anyio/", "/h11/", "/yarl/",
                                       "/multidict/")),
            ("pydantic", "/pydantic"), ("cache (diskcache, sqlite)", ("/diskcache/", "sqlite3")))


def _bucket(func: tuple[str, int, str]) -> str | None:
    where = f"{func[0]}:{func[2]}"
    for name, marks in _BUCKETS:
        if any(m in where for m in ((marks,) if isinstance(marks, str) else marks)):
            return name
    return None


def _bare_client_cpu(api_base: str, calls: int, concurrency: int) -> float:
    """CPU seconds of `calls` requests through the OpenAI SDK alone (what any async client pays)."""
    from openai import AsyncOpenAI  # noqa: PLC0415

    async def main() -> None:
        client = AsyncOpenAI(base_url=api_base, api_key="sk-bench", max_retries=0, timeout=120)
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with sem:
                await client.chat.completions.create(model="bare", messages=candidate_messages(i))
        await one(-1)
        c0 = time.process_time()
        await asyncio.gather(*(one(i) for i in range(calls)))
        out.append(time.process_time() - c0)
        await client.close()

    out: list[float] = []
    asyncio.run(main())
    return out[0]


def profile_breakdown(api_base: str, n: int, concurrency: int) -> None:
    """CPU per call by where the code lives, at zero latency: an unprofiled run gives the CPU per call,
    a cProfile run of the same size the shares. A builtin or stdlib function's own time goes to the
    package that called it (asyncio's loop, json, ssl... that no package called stay 'stdlib / loop')."""
    import cProfile  # noqa: PLC0415
    import pstats  # noqa: PLC0415

    def one(profiler: Any = None) -> float:
        with tempfile.TemporaryDirectory() as tmp, ResultCache(Path(tmp) / "cache") as cache:
            c0 = time.process_time()
            if profiler is not None:
                profiler.enable()
            asyncio.run(run_stages(api_base, cache, n, concurrency))
            if profiler is not None:
                profiler.disable()
            return time.process_time() - c0

    with tempfile.TemporaryDirectory() as tmp, ResultCache(Path(tmp) / "cache") as cache:
        asyncio.run(run_stages(api_base, cache, 4, concurrency, warm_up=True))  # lazy imports, one-offs
    plain = one()
    prof = cProfile.Profile()
    one(prof)
    totals: dict[str, float] = {}
    for func, (_cc, _nc, tt, _ct, callers) in pstats.Stats(prof).stats.items():  # type: ignore[attr-defined]
        own = _bucket(func)
        if own is not None or not callers:
            totals[own or "stdlib / loop"] = totals.get(own or "stdlib / loop", 0.0) + tt
            continue
        share = sum(c[2] for c in callers.values()) or 1.0
        for caller, stats in callers.items():
            name = _bucket(caller) or "stdlib / loop"
            totals[name] = totals.get(name, 0.0) + tt * stats[2] / share
    whole = sum(totals.values()) or 1.0
    calls = 2 * n
    bare = _bare_client_cpu(api_base, calls, concurrency)
    print(f"a bare AsyncOpenAI client, same server, same number of calls: {1000 * bare / calls:.2f} ms CPU per call")
    print(f"CPU per call at zero latency (unprofiled): {1000 * plain / calls:.2f} ms over {calls} calls; "
          f"shares from a cProfile run:")
    for name, secs in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<28} {100 * secs / whole:5.1f}%  ~{1000 * plain / calls * secs / whole:5.2f} ms/call")


def _line(stage: str, wall: float, n: int, latency: float, concurrency: int, cached: int) -> str:
    """Ratio to N*L/C, and to ceil(N/C)*L (the true floor: calls run in whole rounds of L)."""
    ideal, floor = n * latency / concurrency, -(-n // concurrency) * latency
    return (f"{stage:<10} n={n:<5} wall={wall:7.2f}s  ideal N*L/C={ideal:6.2f}s  ratio={wall / ideal:5.3f}  "
            f"(floor ceil(N/C)*L={floor:.2f}s, ratio {wall / floor:5.3f})  cached={cached}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=296)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--server-process", action=argparse.BooleanOptionalAction, default=True,
                    help="run the fake server in its own process (default; like a remote provider, it then "
                         "does not compete with the client for the GIL)")
    ap.add_argument("--profile", action="store_true",
                    help="instead: CPU per call split by package (ours, LiteLLM, the OpenAI SDK, HTTP, ...); "
                         "use --latency 0")
    ap.add_argument("--cached-rescore", metavar="CACHE_DIR", help=argparse.SUPPRESS)
    ap.add_argument("--api-base", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cached_rescore:
        print(json.dumps(cached_rescore(args.cached_rescore, args.api_base, args.n, args.concurrency)))
        return 0

    sys.path.insert(0, str(ROOT / "tests"))
    from fakeserver import FakeServer  # noqa: PLC0415

    os.environ[KEY_ENV] = "sk-bench"
    from rubric_engine.models.litellm_runtime import RUNTIME  # noqa: PLC0415

    t0 = time.perf_counter()
    RUNTIME.module()  # paid once per process; excluded from the stage timings, reported on its own
    print(f"litellm import: {time.perf_counter() - t0:.2f}s (excluded from stage times)")
    server_cm = ServerProcess(args.latency, fake_reply) if args.server_process \
        else FakeServer(fake_reply, latency=args.latency)
    with server_cm as srv, tempfile.TemporaryDirectory() as tmp:
        def stats() -> tuple[int, int]:
            return srv.stats() if isinstance(srv, ServerProcess) else (len(srv.requests), srv.max_in_flight)

        if args.profile:
            profile_breakdown(srv.url, args.n, args.concurrency)
            return 0
        with ResultCache(Path(tmp) / "cache") as cache:
            res = asyncio.run(run_stages(srv.url, cache, args.n, args.concurrency, warm_up=True))
        print(f"first LiteLLM call (lazy provider imports + one latency): {res['warm_up']:.2f}s (excluded)")
        for stage in ("candidate", "judge"):
            print(_line(stage, res[stage]["wall"], args.n, args.latency, args.concurrency, res[stage]["cached"]))
        print(f"server: {stats()[0]} requests, max in flight {stats()[1]}")
        seen = stats()[0]
        wall, stdout = time_subprocess(rescore_command(str(Path(tmp) / "cache"), srv.url, args.n, args.concurrency))
        sub = json.loads(stdout.strip().splitlines()[-1])
        print(f"cached re-score (fresh process, incl. start-up): wall={wall:.2f}s  "
              f"candidate cached={sub['candidate']['cached']}/{args.n}  judge cached={sub['judge']['cached']}/{args.n}  "
              f"litellm imported={sub['litellm_imported']}  new requests={stats()[0] - seen}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
