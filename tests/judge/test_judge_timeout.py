"""A benchmark's declared judge keeps its own `timeout`, and `timeout=` on the command line reaches it.

Regression test for the judge-timeout bug: the declared judge used to be rebuilt without its timeout, so a
spec's `timeout:` and a CLI `timeout=` were both ignored for it. Real path: console script, LiteLLM, HTTP to
the loopback fake server, whose judge replies arrive after 2.5 s.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from fakeserver import FakeServer, Reply

from conftest import EXE  # noqa: E402 - the console script under test (warm-started: tests/warmstart.py)
from conftest import REPO
SAMPLE = REPO / "data" / "heartbench_en_sample.jsonl"
ROW = json.loads(SAMPLE.read_text(encoding="utf-8").splitlines()[0])
N_ITEMS = len(ROW["rubric"])


def _slow_judge(body: dict) -> Reply:
    verdict = {"criteria": [{"id": i, "reasoning": "r", "met": False} for i in range(1, N_ITEMS + 1)]}
    return Reply(text=json.dumps(verdict), delay=2.5)


def _variant(tmp_path: Path, url: str, timeout: float) -> Path:
    d = tmp_path / "slow_judge"
    d.mkdir()
    (d / "benchmark.yaml").write_text(
        "extends: heartbench_en\nname: slow_judge\n"
        f"judge:\n  model: {{name: slow, model: openai/judge, api_base: '{url}', "
        f"timeout: {timeout}}}\n", encoding="utf-8")
    return d


def _run(tmp_path: Path, env: dict[str, str], spec_dir: Path, *extra: str) -> dict:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({**ROW, "response": "I hear you."}, ensure_ascii=False) + "\n", encoding="utf-8")
    run_dir = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
    res = subprocess.run([EXE, f"benchmark={spec_dir}", "stage=score", f"answers={answers}", "limit=1",
                          "max_retries=0", "progress=none", f"hydra.run.dir={run_dir}", *extra],
                         env=env, capture_output=True, text=True, timeout=120)
    assert (run_dir / "summary.json").is_file(), res.stderr
    return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))


def test_declared_judge_keeps_its_spec_timeout(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(_slow_judge) as srv:
        summary = _run(tmp_path, env, _variant(tmp_path, srv.url, timeout=1))
    assert summary["counts"]["scored"] == 0 and summary["counts"]["judge_errors"] == 1  # timed out at 1 s


def test_cli_timeout_reaches_the_declared_judge(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(_slow_judge) as srv:
        summary = _run(tmp_path, env, _variant(tmp_path, srv.url, timeout=30), "timeout=1")
    assert summary["counts"]["scored"] == 0 and summary["counts"]["judge_errors"] == 1  # the CLI's 1 s won


def test_spec_timeout_long_enough_scores(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(_slow_judge) as srv:
        summary = _run(tmp_path, env, _variant(tmp_path, srv.url, timeout=30))
    assert summary["counts"]["scored"] == 1 and summary["counts"]["judge_errors"] == 0
