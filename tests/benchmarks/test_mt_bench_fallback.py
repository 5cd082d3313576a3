"""MT-Bench reads a rating as FastChat's single-answer grading does: `[[k]]` first and, when the reply has
none, the single-bracket `[k]` (fastchat/llm_judge/common.py, `one_score_pattern` then
`one_score_pattern_backup`). Through the console script and the shipped spec, the judge played by the fake
server: a `[7]` reply is scored 7 with no re-ask (the server counts the requests), and when both forms appear
the double-bracket rating wins, as FastChat's order has it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, clean_env, model_args
from fakeserver import FakeServer, Reply

ROWS = [{"question_id": 1, "category": "writing", "turns": ["Describe a kettle in two lines.", "Now in one line."]},
        {"question_id": 2, "category": "stem", "turns": ["Why does ice float?", "And why do lakes freeze from the top?"]}]


def _run(tmp: Path, judge_text: str) -> tuple[dict[str, Any], int]:
    """One mt_bench run whose judge always says `judge_text`: (summary, judge requests the server saw)."""
    data = tmp / "q.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))

    def reply(body: dict[str, Any]) -> Reply:
        return Reply(text=judge_text if body["model"] == "judge" else "A reply written for this test.")

    with FakeServer(reply) as srv:
        proc = subprocess.run([EXE, "benchmark=mt_bench", f"data.path={data}", *model_args(srv.url),
                               f"hydra.run.dir={tmp / 'out'}", "progress=plain"], env=clean_env(tmp),
                              capture_output=True, text=True, timeout=600, cwd=tmp)
        judged = sum(1 for b in srv.requests if b["model"] == "judge")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((tmp / "out" / "summary.json").read_text()), judged


@pytest.mark.parametrize(("text", "score"), [("The reply is clear. Rating: [7]", 7.0),
                                             ("Rating: [[8]]. (A [7] would undersell it.)", 8.0)])
def test_single_bracket_rating_is_read_without_a_reask(tmp_path: Path, text: str, score: float) -> None:
    summary, judged = _run(tmp_path, text)
    assert judged == 4  # 2 questions x 2 turns, none re-asked
    assert summary["counts"]["turn_errors"] == 0 and summary["counts"]["judge_errors"] == 0
    assert summary["turns"]["1"]["mean"] == summary["turns"]["2"]["mean"] == summary["overall"] == score
