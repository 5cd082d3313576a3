"""A scripted judge for the reward's in-process tests (tests/reward/test_reward_*_bite.py), and the reward they build.

Why scripted by the reply: a reward test must know each number before the reward computes it. Here the reply
itself says which rubric items the judge finds met (`MET=1,3`; the shadow judge reads `SH=2`), so every reward
is a hand computation. HeartBench's mini data (tests/data/mini_heartbench.jsonl) has one item per ability in
each question, every ability scored by the log-normalised formula, so a question's score is the share of its
abilities "passed": a positive item met, a negative item not met (mq01aa: 3, 3, 2, 2 and -3 points, then the
role-confusion rule as item 6: `MET=1,2` passes abilities 1, 2 and 5 of 5, 3/5 = 0.6; item 6 met zeroes it).
A reply holding FAIL-ME gets HTTP 500, ECHO-ERR a 500 whose error echoes the key, DENY-ME a 401, GARBLE-ME a
verdict that is not JSON (10 prompt and 5 completion tokens each time it is asked), ECHO-KEY a reasoning that
echoes the key the judge was sent; SH-FAIL fails the shadow judge only. Every verdict reports 100 prompt and 50 completion tokens.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from conftest import MINI, QuestionScript, REPO, Reply, edited_spec
from rubric_engine.models.entries import ModelSpec
from rubric_engine.run.settings import RunSettings

__all__ = ["judge_reply", "judge_spec", "reward_settings", "variant_spec", "over_one"]

ITEM_RE = re.compile(r"^(\d+)\. \[", re.MULTILINE)


def judge_reply(body: dict[str, Any]) -> Reply:
    """The fake server's handler: the verdict each reply asks for (module docstring)."""
    text = QuestionScript.text(body)
    n = max(int(x) for x in ITEM_RE.findall(text))
    if "FAIL-ME" in text:
        return Reply(status=500)
    if "DENY-ME" in text:
        return Reply(status=401)
    if "ECHO-ERR" in text:  # a server that echoes the key it was sent
        return Reply(status=500, error="bad gateway for {authorization}")
    if "GARBLE-ME" in text:
        return Reply(text="I think it is mostly fine.")
    shadow = str(body["model"]).endswith("shadow")
    if shadow and "SH-FAIL" in text:
        return Reply(status=500)
    tag = "SH" if shadow else "MET"
    found = re.search(rf"{tag}=([\d,]*)", text)
    met = {int(x) for x in found.group(1).split(",") if x} if found else set()
    why = (lambda i: "the key was {authorization}") if "ECHO-KEY" in text else (lambda i: f"理由 {i}")
    return QuestionScript.verdict(n, lambda i: i in met, why)


def judge_spec(url: str, name: str = "judge", model: str | None = None) -> ModelSpec:
    """A judge entry on the fake server (key from $FAKE_KEY)."""
    return ModelSpec(name=name, model=model or f"openai/{name}", api_base=url, api_key_env="FAKE_KEY")


def reward_settings(url: str, tmp: Path, **kw: Any) -> RunSettings:
    """HeartBench on the mini data, judged on the fake server, no retries, the cache off unless asked."""
    kw = {"benchmark": "heartbench", "judge": judge_spec(url), "data_path": str(MINI), "max_retries": 0,
          "cache_enabled": False, "cache_dir": str(tmp / "cache"), **kw}
    return RunSettings(out_dir=tmp / "out", **kw)


def over_one(raw: float, lo: float, hi: float, params: Any) -> float:
    """A formula whose question score leaves [0, 1] both ways: twice points over positive points."""
    return 2 * raw / hi


def variant_spec(dest: Path) -> Path:
    """HeartBench scored over all items by `over_one`, unclipped, a question without positive points excluded;
    with one extra question `neg` holding only a -2 item and the rule (data file beside it: `data.jsonl`).
    mq01aa under it: `MET=1,2` is 2 x 6 / 10 = 1.2, `MET=5` is 2 x -3 / 10 = -0.6."""
    spec = edited_spec(REPO / "benchmarks" / "heartbench", dest,
                       "scoring:\n  formula: log_normalised      # paper eq. 1: ln(raw - min + 1) / ln(max - min + 1)",
                       "aggregation: {question: all_items, overall: mean_over_questions, clip: none, "
                       "no_positive_points: exclude}\nscoring:\n  formula: \"rewardjudge:over_one\"")
    rows = MINI.read_text(encoding="utf-8")
    first = rows.splitlines()[0]
    neg = re.sub(r'"rubric": \[.*?\], "dialogue"', '"rubric": [{"dimension": "言语表达", "score": -2, "content": '
                 '"回复开头就列出很多条建议"}, {"dimension": "其他", "score": null, "content": "回复替用户说话"}], '
                 '"dialogue"', first).replace('"mq01aa"', '"neg"')
    (spec / "data.jsonl").write_text(rows + neg + "\n", encoding="utf-8")
    return spec
