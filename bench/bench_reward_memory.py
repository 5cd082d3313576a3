"""serve-reward's memory against its request body: peak RSS of the server process per body size, and what the
request limit refuses.

Goal: memory proportional to the body (a few times it, on top of the server's resting size), never the 38x a
51 MB body once took; a body over `max_body_mb` is refused (413) before it is read, and requests beyond
`max_requests` are answered 503 with Retry-After, so the worst case is bounded by max_requests x that.

Each size gets a fresh `rubric-engine serve-reward` (its own process, so its peak RSS, /proc VmHWM, is that
request's), judged by tests/fakeserver.py in another process (bench/_common.py). The body is one OpenRLHF
request of distinct rollouts of `--reply-kb` each (every rollout one judge call).

    python bench/bench_reward_memory.py                         # bodies of 4, 16 and 32 MiB
    python bench/bench_reward_memory.py --sizes 2,8 --reply-kb 4  # quicker
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import EXE, KEY_ENV, ServerProcess, options, write_synthetic  # noqa: E402


def _rss_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _post(url: str, body: bytes) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=3600) as res:  # noqa: S310 - 127.0.0.1
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _body(ids: list[str], mib: float, reply_kb: int, salt: str) -> bytes:
    """One request of distinct rollouts adding up to about `mib` MiB."""
    n = max(1, int(mib * 1024 / reply_kb))
    filler = "It sounds heavy; tell me more about it. " * (reply_kb * 1024 // 40)
    queries = [f"{salt} reply {k}: {filler}" for k in range(n)]
    return json.dumps({"query": queries, "prompts": [""] * n, "labels": [ids[k % len(ids)] for k in range(n)]}).encode()


class Served:
    """`rubric-engine serve-reward` in its own process, its URL read from stdout."""

    def __init__(self, judge_url: str, data: Path, cache: Path, *extra: str) -> None:
        cmd = [EXE, "serve-reward", "benchmark=heartbench", f"data.path={data}", f"cache.dir={cache}", "port=0",
               "judge=openai_compatible", "judge.model=openai/judge", f"judge.api_base={judge_url}",
               f"judge.api_key_env={KEY_ENV}", "max_retries=0", "concurrency=64", *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.url = (self.proc.stdout.readline() if self.proc.stdout else "").strip()
        if not self.url:
            raise SystemExit("serve-reward did not start")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(120)


def main() -> None:
    opts = options(__doc__, sizes="4,16,32", reply_kb=8, questions=64, max_requests=2)
    os.environ[KEY_ENV] = "sk-bench"
    sizes = [float(x) for x in opts.sizes.split(",") if x]
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(0.0) as judge:
        data = write_synthetic(opts.questions, Path(tmp) / "rows.jsonl", unique=True)
        ids = [json.loads(x)["question_id"] for x in data.read_text(encoding="utf-8").splitlines() if x.strip()]
        print(f"serve-reward memory: distinct rollouts of {opts.reply_kb} KB each, one request per fresh server; "
              f"load average {os.getloadavg()[0]:.1f}")
        first: tuple[float, float] | None = None
        for mib in sizes:
            srv = Served(judge.url, data, Path(tmp) / "cache", f"max_body_mb={max(sizes) + 1:g}")
            try:
                _post(srv.url, _body(ids, 0.01, 1, f"warm{mib}"))  # LiteLLM imported, one call made
                rest = _rss_mb(srv.proc.pid, "VmRSS")
                body = _body(ids, mib, opts.reply_kb, f"s{mib}")
                t0 = time.perf_counter()
                status, got = _post(srv.url, body)
                wall = time.perf_counter() - t0
                peak = _rss_mb(srv.proc.pid, "VmHWM")
            finally:
                srv.close()
            body_mb = len(body) / 2**20
            growth = peak - rest
            rollouts = got.get("counts", {}).get("rollouts", "?")
            ratio = f"  growth / body {growth / body_mb:5.1f}x"
            if first is not None:
                ratio += f"  (body x{body_mb / first[0]:.1f} -> growth x{growth / first[1]:.1f})"
            first = first or (body_mb, growth)
            print(f"body {body_mb:6.1f} MiB  {rollouts} rollouts  HTTP {status}  resting {rest:6.0f} MB  peak "
                  f"{peak:6.0f} MB  growth {growth:6.0f} MB{ratio}  {wall:5.1f}s")
        _limits(judge.url, data, Path(tmp) / "cache", ids, opts.max_requests)


def _limits(judge_url: str, data: Path, cache: Path, ids: list[str], max_requests: int) -> None:
    """max_body_mb=1 refuses a 2 MiB body before reading it; max_requests+2 requests at once: the extra ones 503."""
    srv = Served(judge_url, data, cache, "max_body_mb=1", f"max_requests={max_requests}")
    try:
        status, got = _post(srv.url, _body(ids, 2, 8, "big"))
        print(f"max_body_mb=1, a 2 MiB body: HTTP {status} ({got.get('error', '')[:70]})")
        port = int(srv.url.split(":")[2].split("/")[0])
        holders = [socket.create_connection(("127.0.0.1", port)) for _ in range(max_requests)]
        for s in holders:  # each sends its headers and part of its body, then waits: a request in progress
            s.sendall(f"POST /get_reward HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                      "Content-Length: 100\r\n\r\n{".encode())
        time.sleep(1.0)
        codes: list[int] = []
        threads = [threading.Thread(target=lambda: codes.append(_post(srv.url, _body(ids, 0.01, 1, "x"))[0]))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(f"max_requests={max_requests}, {max_requests} in progress, 2 more: HTTP {sorted(codes)}")
        for s in holders:
            s.close()
    finally:
        srv.close()


if __name__ == "__main__":
    main()
