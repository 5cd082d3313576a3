"""Run directories for the review/agree tests, made by the real console script on the shipped
English sample against tests/fakeserver.py; the judge's verdicts are a fixed function of
(candidate, question, item) so tests can compute expected agreement independently."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from fakeserver import FakeServer, Reply

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "heartbench_en_sample.jsonl"
ROWS = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
BY_ID = {r["question_id"]: r for r in ROWS}
EXE = shutil.which("rubric-engine") or str(Path(sys.executable).with_name("rubric-engine"))
REPLY_RE = re.compile(r"REPLY\[(\w+)\|(\w+)\]")
HOSTILE = "</script><script>window.PWNED=1</script><b>bold?</b> & <img src=x onerror=alert(1)>"


CODES = {"cand_a": "ca", "cand_b": "cb", "cand_c": "cc"}  # replies carry a code, not the model's name
NAMES = {v: k for k, v in CODES.items()}


def judge_hit(cand: str, qid: str, index: int) -> bool:
    """The scripted judge's verdict for item `index` (1-based) of question `qid` for candidate `cand`."""
    return (sum(map(ord, qid + cand)) + 3 * index) % 5 < 2


class Script:
    """Candidates name themselves and the question in the reply; the judge answers per item."""

    def __init__(self) -> None:
        self.turns = sorted(((tuple(t["content"] for t in r["dialogue"]), r["question_id"]) for r in ROWS),
                            key=lambda x: -len(x[0]))

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        if body["model"] == "judge":
            code, qid = REPLY_RE.search(text).groups()  # type: ignore[union-attr]
            cand = NAMES[code]
            n = len(BY_ID[qid]["rubric"])
            verdict = {"criteria": [{"id": i, "reasoning": f"JUDGE-REASONING-{qid}-{i}", "met": judge_hit(cand, qid, i)}
                                    for i in range(1, n + 1)]}
            return Reply(text=json.dumps(verdict), usage=(100, 50))
        qid = next(q for turns, q in self.turns if all(t in text for t in turns))
        cand = body["model"]
        extra = HOSTILE if qid == ROWS[0]["question_id"] and cand == "cand_a" else "I hear you. 我在这里。"
        return Reply(text=f"REPLY[{CODES[cand]}|{qid}] {extra}" + " more" * (len(qid) + sum(map(ord, qid + cand)) % 40),
                     usage=(40, 20))


def model_args(url: str, cand: str) -> list[str]:
    return ["candidate=openai_compatible", f"candidate.model=openai/{cand}", f"candidate.api_base={url}",
            f"candidate.name={cand}", "candidate.api_key_env=FAKE_KEY",
            "judge=openai_compatible", "judge.model=openai/judge", f"judge.api_base={url}",
            "judge.name=judge", "judge.api_key_env=FAKE_KEY"]


def make_runs(root: Path, env: dict[str, str], candidates: tuple[str, ...] = ("cand_a",)) -> list[Path]:
    """One run dir per candidate under root, all on the English sample (15 questions)."""
    dirs = []
    with FakeServer(Script()) as srv:
        for cand in candidates:
            run_dir = root / cand
            res = subprocess.run([EXE, "benchmark=heartbench_en", "progress=plain", f"hydra.run.dir={run_dir}",
                                  *model_args(srv.url, cand)], env=env, capture_output=True, text=True, timeout=300)
            assert res.returncode == 0, res.stderr
            dirs.append(run_dir)
    return dirs
