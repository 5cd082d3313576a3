"""A grid of real runs for the audit / rescore / length tests: 4 candidates x 4 judges on heartbench_en.

One Hydra multirun of the installed console script against tests/fakeserver.py; model entries are
YAML files in a temporary config dir named in $RUBRIC_ENGINE_CONFIG_DIRS, so each carries its own family.
Scripted verdicts, all functions of hashes (reproducible, no shared RNG state):
- base: each (question, item, candidate) passes with probability 1/2 (failure-rule items: 0.85);
- every judge starts from the base; judge J flips a verdict with probability NOISE[J];
- a judge with PLANT[J] = p then turns a failed verdict of its OWN family's candidate into a pass
  with probability p. Expected own-minus-other pass rate on items the unbiased judges fail:
  (1 - noise) * p.
Replies of length that varies by question and candidate, so length statistics have something to see.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from conftest import REPO, QuestionScript, clean_env, read_rows, run_cli
from fakeserver import FakeServer, Reply

SAMPLE = REPO / "data" / "heartbench_en_sample.jsonl"
ROWS, BY_ID = read_rows(SAMPLE)
__all__ = ["build_grid", "run_cli", "CANDIDATES", "JUDGES", "ROWS", "BY_ID"]
RULE_LABEL = "其他"  # the failure-rule data label of the HeartBench family of specs (data, not engine code)

CANDIDATES = {"c_oa1": "openai", "c_oa2": "openai", "c_an": "anthropic", "c_go": "google"}
JUDGES = {"ja": "openai", "ja_fair": "openai", "jb": "anthropic", "jc": "google"}
NOISE = {"ja": 0.2, "ja_fair": 0.2, "jb": 0.0, "jc": 0.0}
PLANT = {"ja": 0.5, "ja_fair": 0.0, "jb": 0.0, "jc": 0.0}
LENGTH_JUDGE = "jlen"  # passes an item with probability (reply words / 65): longer replies score higher


def u(*parts: Any) -> float:
    """A reproducible uniform number in [0, 1) from its arguments."""
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:12], 16) / 16 ** 12


def base_pass(qid: str, i: int, cand: str, rule: bool) -> bool:
    return u("base", qid, i, cand) < (0.85 if rule else 0.5)


def words(qid: str, cand: str) -> int:
    return 5 + int(u("len", qid, cand) * 60)


def judge_pass(judge: str, qid: str, i: int, cand: str, rule: bool) -> bool:
    if judge == LENGTH_JUDGE:
        return rule or u("jlen", qid, i, cand) < words(qid, cand) / 65
    ok = base_pass(qid, i, cand, rule) ^ (u("noise", judge, qid, i, cand) < NOISE[judge])
    if not ok and CANDIDATES[cand] == JUDGES[judge] and PLANT[judge]:
        ok = u("plant", judge, qid, i, cand) < PLANT[judge]
    return ok


class GridScript(QuestionScript):
    judges = frozenset({*JUDGES, LENGTH_JUDGE})

    def __init__(self) -> None:
        super().__init__(ROWS)

    def judge(self, model: str, text: str) -> Reply:
        qid = re.search(r"REPLY\[(\w+)\]", text).group(1)  # type: ignore[union-attr]
        cand = re.search(r"MODEL\[(\w+)\]", text).group(1)  # type: ignore[union-attr]
        rubric = BY_ID[qid]["rubric"]

        def met(i: int) -> bool:
            it = rubric[i - 1]
            rule = it["dimension"] == RULE_LABEL
            ok = judge_pass(model, qid, i, cand, rule)
            return ok if (not rule and it["score"] > 0) else not ok

        return self.verdict(len(rubric), met, lambda i: "scripted")

    def candidate(self, model: str, qid: str) -> Reply:
        n = words(qid, model)
        return Reply(text=f"REPLY[{qid}] MODEL[{model}] " + "I hear you. " * n, usage=(40, 3 * n + 4))


def entry(name: str, family: str, url: str) -> str:
    return (f"name: {name}\nmodel: openai/{name}\napi_base: {url}\napi_key_env: FAKE_KEY\n"
            f"params: {{}}\nfamily: {family}\n")


def build_grid(tmp: Path, candidates: dict[str, str] | None = None,
               judges: dict[str, str] | None = None, progress: str = "none",
               script: QuestionScript | None = None) -> dict[str, Any]:
    """Run the sweep (default: 4 x 4 = 16 jobs; `script`: another fake server script than GridScript); returns
    {"sweep", "env", "dirs": {(candidate, judge): run dir}}."""
    candidates, judges = candidates or CANDIDATES, judges or JUDGES
    env = clean_env(tmp)
    conf, sweep = tmp / "conf", tmp / "sweep"
    env["RUBRIC_ENGINE_CONFIG_DIRS"] = str(conf)  # user model entries, as README documents them
    with FakeServer(script or GridScript()) as srv:
        for group, models in (("candidate", candidates), ("judge", judges)):
            (conf / group).mkdir(parents=True, exist_ok=True)
            for name, fam in models.items():
                (conf / group / f"{name}.yaml").write_text(entry(name, fam, srv.url), encoding="utf-8")
        res = run_cli(["-m", "benchmark=heartbench_en", f"progress={progress}", "bootstrap.samples=20",
                       f"hydra.sweep.dir={sweep}",
                       f"candidate={','.join(candidates)}", f"judge={','.join(judges)}"], env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    dirs = {}
    for p in sweep.glob("*/summary.json"):
        s = json.loads(p.read_text(encoding="utf-8"))
        dirs[(s["candidate"]["name"], s["judge"]["name"])] = p.parent
    assert len(dirs) == len(candidates) * len(judges), sorted(dirs)
    return {"sweep": sweep, "env": env, "dirs": dirs, "output": res.stdout + res.stderr}
