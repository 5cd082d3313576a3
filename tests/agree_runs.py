"""Run directories for the review/agree tests, made by the real console script on the shipped
English sample against tests/fakeserver.py; the judge's verdicts are a fixed function of
(candidate, question, item) so tests can compute expected agreement independently."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import EXE, REPO, QuestionScript, model_args, read_rows, run_cli
from fakeserver import FakeServer, Reply

SAMPLE = REPO / "data" / "heartbench_en_sample.jsonl"
ROWS, BY_ID = read_rows(SAMPLE)
__all__ = ["EXE", "ROWS", "BY_ID", "HOSTILE", "judge_hit", "make_runs"]
REPLY_RE = re.compile(r"REPLY\[(\w+)\|(\w+)\]")
HOSTILE = "</script><script>window.PWNED=1</script><b>bold?</b> & <img src=x onerror=alert(1)>"


CODES = {"cand_a": "ca", "cand_b": "cb", "cand_c": "cc"}  # replies carry a code, not the model's name
NAMES = {v: k for k, v in CODES.items()}


def judge_hit(cand: str, qid: str, index: int) -> bool:
    """The scripted judge's verdict for item `index` (1-based) of question `qid` for candidate `cand`."""
    return (sum(map(ord, qid + cand)) + 3 * index) % 5 < 2


class Script(QuestionScript):
    """Candidates name themselves and the question in the reply; the judge answers per item."""

    def __init__(self) -> None:
        super().__init__(ROWS)

    def judge(self, model: str, text: str) -> Reply:
        code, qid = REPLY_RE.search(text).groups()  # type: ignore[union-attr]
        cand = NAMES[code]
        return self.verdict(len(BY_ID[qid]["rubric"]), lambda i: judge_hit(cand, qid, i),
                            lambda i: f"JUDGE-REASONING-{qid}-{i}")

    def candidate(self, cand: str, qid: str) -> Reply:
        extra = HOSTILE if qid == ROWS[0]["question_id"] and cand == "cand_a" else "I hear you. 我在这里。"
        return Reply(text=f"REPLY[{CODES[cand]}|{qid}] {extra}" + " more" * (len(qid) + sum(map(ord, qid + cand)) % 40),
                     usage=(40, 20))


def make_runs(root: Path, env: dict[str, str], candidates: tuple[str, ...] = ("cand_a",)) -> list[Path]:
    """One run dir per candidate under root, all on the English sample (15 questions)."""
    dirs = []
    with FakeServer(Script()) as srv:
        for cand in candidates:
            run_dir = root / cand
            res = run_cli(["benchmark=heartbench_en", "progress=plain", f"hydra.run.dir={run_dir}",
                           *model_args(srv.url, cand)], env)
            assert res.returncode == 0, res.stderr
            dirs.append(run_dir)
    return dirs
