"""Reply bodies capped while they arrive (models/bodycap.py), through the console script against the fake server: a
server flooding one reply costs the process a bounded amount of memory, and that question gets a recorded
error that is not retried, while the other questions are scored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from test_adversarial import assert_clean, run, samples, script

pytestmark = pytest.mark.slow

FLOOD_MB = 600  # far past the 16 MiB default cap, and past what the process may hold at its peak
PEAK_LIMIT_MB = 450  # the same run without a flood peaks at ~300 MB (LiteLLM loaded); buffering would be > 1 GB

# Runs the console script as its only child and prints the child's peak RSS (KiB) after it exits.
PEAK = "import resource, subprocess, sys; subprocess.run(sys.argv[1:]); " \
       "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"


def _peak_run(srv: FakeServer, tmp: Path, *extra: str, env_extra: dict[str, str] | None = None
              ) -> tuple[subprocess.CompletedProcess, float]:
    """`run` (test_adversarial) under a wrapper that measures the console script's peak RSS in MiB."""
    import test_adversarial as adv

    real = adv.subprocess.run

    def measured(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
        out = real([sys.executable, "-c", PEAK.replace("subprocess.run(sys.argv[1:])",
                                                        "subprocess.run(sys.argv[1:], stdout=2)"), *cmd], **kw)
        return out

    adv.subprocess.run = measured  # type: ignore[assignment]
    try:
        proc = run(srv, tmp, *extra, env_extra=env_extra)
    finally:
        adv.subprocess.run = real  # type: ignore[assignment]
    return proc, int(proc.stdout.strip().splitlines()[-1]) / 1024


@pytest.mark.parametrize("declared, gzip", [(True, False), (False, False), (False, True)],
                         ids=["content-length", "until-close", "gzip-bomb"])
def test_a_flooding_server_is_cut_off_and_the_question_recorded(tmp_path: Path, declared: bool, gzip: bool) -> None:
    calls = {"n": 0}

    def candidate(body: dict[str, Any]) -> Reply | str:
        calls["n"] += 1
        return Reply(flood_mb=FLOOD_MB, flood_length=declared, flood_gzip=gzip) if calls["n"] == 1 else "A fine reply."

    with FakeServer(script(candidate=candidate)) as srv:
        proc, peak = _peak_run(srv, tmp_path, "concurrency=1", "max_retries=2")
        encodings = {h.get("accept-encoding") for h in srv.headers}
    assert peak < PEAK_LIMIT_MB, f"peak RSS {peak:.0f} MiB: the body was buffered"
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert encodings == {"identity"}  # a compressed flood would be decoded (and capped) as it arrives
    recs = samples(tmp_path)
    (failed,) = [r for r in recs if r["candidate_error"]]
    assert "reply body passed the 16 MiB limit" in failed["candidate_error"], failed["candidate_error"]
    assert "RUBRIC_ENGINE_MAX_REPLY_MB" in failed["candidate_error"]
    assert sum(r["score"] is not None for r in recs) == 2
    assert calls["n"] == 3  # retries allowed, yet the flood was asked for once
    assert_clean(proc, tmp_path)


def test_the_cap_is_overridable_and_a_bad_value_is_one_line(tmp_path: Path) -> None:
    def candidate(body: dict[str, Any]) -> Reply | str:
        return Reply(flood_mb=1.5)  # the judge prompt stays under its 2,000,000-character limit

    with FakeServer(script(candidate=candidate)) as srv:
        small = run(srv, tmp_path, "limit=1", env_extra={"RUBRIC_ENGINE_MAX_REPLY_MB": "1"}, run_dir="small")
        big = run(srv, tmp_path, "limit=1", env_extra={"RUBRIC_ENGINE_MAX_REPLY_MB": "2"}, run_dir="big")
        bad = run(srv, tmp_path, "limit=1", env_extra={"RUBRIC_ENGINE_MAX_REPLY_MB": "lots"}, run_dir="bad")
        asked = len(srv.requests)
    assert "passed the 1 MiB limit" in samples(tmp_path, "small")[0]["candidate_error"], small.stderr
    (rec,) = samples(tmp_path, "big")
    assert rec["candidate_error"] is None and len(rec["response"]) == 1.5 * 2**20, big.stderr[-2000:]
    assert bad.returncode == 2 and "RUBRIC_ENGINE_MAX_REPLY_MB='lots'" in bad.stderr and "Traceback" not in bad.stderr
    assert asked == 3  # the cut-off candidate call (no judge call follows), candidate + judge; none refused
    assert not (tmp_path / "bad").exists()  # refused before the run began


def test_a_sweep_with_a_bad_cap_starts_no_job(tmp_path: Path) -> None:
    with FakeServer(script()) as srv:
        proc = run(srv, tmp_path, "-m", "limit=1,2", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                   env_extra={"RUBRIC_ENGINE_MAX_REPLY_MB": "0"})
        assert srv.requests == []
    assert proc.returncode == 2 and "RUBRIC_ENGINE_MAX_REPLY_MB='0'" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "sweep").exists()
