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
    res = run_cli(["leaderboard", str(sweep), f"out={out}", "bootstrap.samples=200"], env, timeout=300)
    assert res.returncode == 0, res.stderr
    again = json.loads((out / "leaderboard.json").read_text())
    assert [(r["candidate"], r["overall"], r["ci_lo"], r["ci_hi"]) for r in again["rows"]] == \
        [(r["candidate"], r["overall"], r["ci_lo"], r["ci_hi"]) for r in rows]


def test_sweep_job_names_keep_whole_values_and_ties_share_a_rank(tmp_path: Path, env: dict[str, str]) -> None:
    sweep = tmp_path / "sweep"
    long = "a-rather-long-display-name-" * 4  # pushes the override string past the old 120-character cut
    huge = "x" * 300  # cannot fit at all: replaced by a hash, never cut
    res = run_cli(["-m", "benchmark=heartbench_en", "candidate=mock", "judge=mock", "limit=4,12", "progress=none",
                   f"candidate.name={long}a,{long}b,{huge}", "bootstrap.samples=50", f"hydra.sweep.dir={sweep}"],
                  env, timeout=600)
    assert res.returncode == 0, res.stderr
    names = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    assert len(names) == 6 and len(set(n.split("_", 1)[1] for n in names)) == 6
    for name in names:
        overrides = {line[2:] for line in (sweep / name / ".hydra" / "overrides.yaml").read_text().splitlines()}
        limit = next(o for o in overrides if o.startswith("limit="))
        cand = next(o for o in overrides if o.startswith("candidate.name="))
        assert re.search(rf"(^|,){re.escape(limit)}(,|$)", name.split("_", 1)[1]), name
        assert cand in name or re.search(r"\+\d+-more-[0-9a-f]{8}$", name), name
        assert len(name.encode()) <= 255
    # same mock model, same questions: equal scores, one shared rank
    rows = json.loads((sweep / "leaderboard.json").read_text())["rows"]
    by_limit: dict[int, set[int]] = {}
    for r in rows:
        s = json.loads((Path(r["run_dir"]) / "summary.json").read_text())
        by_limit.setdefault(s["selection"]["limit"], set()).add(r["rank"])
    assert all(len(ranks) == 1 for ranks in by_limit.values()), by_limit
    assert sorted(r["rank"] for r in rows) == [1, 1, 1, 4, 4, 4]
