"""A Hydra multirun over three scripted candidates: the leaderboard at the end of the sweep.

The judge's verdicts depend on which candidate wrote the reply (named in the reply), so the
three models have a known order: good > middling > poor.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from test_cli import BY_ID, DATA, Script, run_cli

QUALITY = {"good": 2, "middling": 1, "poor": 0}


class SweepScript(Script):
    def __call__(self, body: dict[str, Any]) -> Reply:
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        if body["model"] != "judge":
            reply = super().__call__(body)
            return Reply(text=f"{reply.text} MODEL[{body['model']}]", usage=reply.usage)
        qid = re.search(r"REPLY\[(\w{6})\]", text).group(1)  # type: ignore[union-attr]
        level = QUALITY[re.search(r"MODEL\[(\w+)\]", text).group(1)]  # type: ignore[union-attr]
        items = []
        for i, it in enumerate(BY_ID[qid]["rubric"], 1):
            w = it["score"]
            if w is None or it["dimension"] == "其他":
                met = False
            elif w > 0:
                met = level == 2 or (level == 1 and i % 2 == 0)
            else:
                met = level == 0
            items.append({"id": i, "reasoning": "scripted", "met": met})
        return Reply(text=json.dumps({"criteria": items}), usage=(100, 50))


def test_sweep_three_candidates_builds_leaderboard(tmp_path: Path, env: dict[str, str]) -> None:
    sweep = tmp_path / "sweep"
    with FakeServer(SweepScript()) as srv:
        res = run_cli(["-m", "benchmark=heartbench", f"data.path={DATA}", "limit=8", "progress=none",
                       "bootstrap.samples=200", f"hydra.sweep.dir={sweep}",
                       "candidate=openai_compatible", "candidate.model=openai/poor,openai/good,openai/middling",
                       f"candidate.api_base={srv.url}", "candidate.api_key_env=FAKE_KEY",
                       "judge=openai_compatible", "judge.model=openai/judge", f"judge.api_base={srv.url}",
                       "judge.name=judge", "judge.api_key_env=FAKE_KEY"], env, timeout=600)
        assert res.returncode == 0, res.stderr
    summaries = {s["candidate"]["name"]: s for s in
                 (json.loads(p.read_text()) for p in sweep.glob("*/summary.json"))}
    assert set(summaries) == {"poor", "good", "middling"}
    lb = json.loads((sweep / "leaderboard.json").read_text())
    rows = lb["rows"]
    assert [r["candidate"] for r in rows] == ["good", "middling", "poor"]
    for r in rows:
        s = summaries[r["candidate"]]
        assert r["overall"] == pytest.approx(s["overall"], abs=1e-9)
        assert r["ci_lo"] <= r["overall"] <= r["ci_hi"]
        for dim, val in s["dimensions"].items():
            assert r["dimensions"][dim] == pytest.approx(val, abs=1e-9)
    assert summaries["good"]["overall"] == pytest.approx(100.0)  # every positive item met, no penalty
    for name in ("leaderboard.csv", "leaderboard.md", "radar.png", "radar.svg", "subsets.png", "report.html"):
        assert (sweep / name).is_file(), name
    html = (sweep / "report.html").read_text(encoding="utf-8")
    assert all(name in html for name in ("good", "middling", "poor"))
    # rebuilding from the stored directories alone gives the same numbers
    out = tmp_path / "rebuilt"
    res = run_cli(["leaderboard", str(sweep), "--out", str(out), "--n-boot", "200"], env, timeout=300)
    assert res.returncode == 0, res.stderr
    again = json.loads((out / "leaderboard.json").read_text())
    assert [(r["candidate"], r["overall"], r["ci_lo"], r["ci_hi"]) for r in again["rows"]] == \
        [(r["candidate"], r["overall"], r["ci_lo"], r["ci_hi"]) for r in rows]
