"""Throughput benchmark of ModelClient against the fake server (a script, not a test).

Why: a 296-question run makes ~600 calls; at concurrency C and per-call latency L the ideal wall
time of a stage is N*L/C. This measures how close ModelClient (LiteLLM over HTTP, semaphore,
cache writes) gets, then times a cached re-score in a fresh process (which must not import LiteLLM).

    PYTHONPATH=. python bench/bench_calls.py --n 296 --latency 1.0 --concurrency 32

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

from rubric_engine.cache import ResultCache  # noqa: E402
from rubric_engine.models import ModelClient, ModelSpec  # noqa: E402

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


def _serve(latency: float, conn: Any) -> None:
    """Child process: run the fake server, report its url and request stats over `conn`."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fakeserver import FakeServer  # noqa: PLC0415

    with FakeServer(fake_reply, latency=latency) as srv:
        conn.send(srv.url)
        while conn.recv() == "stats":
            conn.send((len(srv.requests), srv.max_in_flight))


class _ServerProcess:
    """FakeServer in a spawned process, with the attributes main() reads (url, requests, max_in_flight)."""

    def __init__(self, latency: float) -> None:
        import multiprocessing  # noqa: PLC0415

        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(latency, child), daemon=True)

    def __enter__(self) -> "_ServerProcess":
        self._proc.start()
        self.url: str = self._conn.recv()
        return self

    def _stats(self) -> tuple[int, int]:
        self._conn.send("stats")
        return self._conn.recv()

    @property
    def requests(self) -> list[None]:
        return [None] * self._stats()[0]

    @property
    def max_in_flight(self) -> int:
        return self._stats()[1]

    def __exit__(self, *exc: Any) -> None:
        self._conn.send("stop")
        self._proc.join(10)


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
    ap.add_argument("--cached-rescore", metavar="CACHE_DIR", help=argparse.SUPPRESS)
    ap.add_argument("--api-base", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cached_rescore:
        print(json.dumps(cached_rescore(args.cached_rescore, args.api_base, args.n, args.concurrency)))
        return 0

    sys.path.insert(0, str(ROOT / "tests"))
    from fakeserver import FakeServer  # noqa: PLC0415

    os.environ[KEY_ENV] = "sk-bench"
    from rubric_engine.litellm_runtime import RUNTIME  # noqa: PLC0415

    t0 = time.perf_counter()
    RUNTIME.module()  # paid once per process; excluded from the stage timings, reported on its own
    print(f"litellm import: {time.perf_counter() - t0:.2f}s (excluded from stage times)")
    server_cm = _ServerProcess(args.latency) if args.server_process else FakeServer(fake_reply, latency=args.latency)
    with server_cm as srv, tempfile.TemporaryDirectory() as tmp:
        with ResultCache(Path(tmp) / "cache") as cache:
            res = asyncio.run(run_stages(srv.url, cache, args.n, args.concurrency, warm_up=True))
        print(f"first LiteLLM call (lazy provider imports + one latency): {res['warm_up']:.2f}s (excluded)")
        for stage in ("candidate", "judge"):
            print(_line(stage, res[stage]["wall"], args.n, args.latency, args.concurrency, res[stage]["cached"]))
        print(f"server: {len(srv.requests)} requests, max in flight {srv.max_in_flight}")
        seen = len(srv.requests)
        wall, stdout = time_subprocess(rescore_command(str(Path(tmp) / "cache"), srv.url, args.n, args.concurrency))
        sub = json.loads(stdout.strip().splitlines()[-1])
        print(f"cached re-score (fresh process, incl. start-up): wall={wall:.2f}s  "
              f"candidate cached={sub['candidate']['cached']}/{args.n}  judge cached={sub['judge']['cached']}/{args.n}  "
              f"litellm imported={sub['litellm_imported']}  new requests={len(srv.requests) - seen}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
