"""`stage=score from_run=DIR` judges the earlier run's answers against the data that run used.

Why: a run made with `data.path=FILE` and then re-scored from its directory used to fall back to the spec's
pinned download (a network fetch, and for HeartBench another file than the answers belong to). The spec here
is HeartBench's with its download pointed at a local static server, so a fetch would be seen (and no request
leaves this machine either way).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import MINI, REPO, edited_spec, model_args, run_cli
from fakeserver import FakeServer
from test_signals import _Script
from conftest import read_rows

pytestmark = pytest.mark.slow

URL = "https://raw.githubusercontent.com/inclusionAI/HeartBench/6c79c0809c0c2dfe78dc090dd0685bd6ef69f245/data/question_all.jsonl"


def _judge_only(url: str) -> list[str]:
    return [a for a in model_args(url) if a.startswith("judge")]


def test_score_from_run_reuses_the_runs_data_file(tmp_path: Path, env: dict[str, str], static_server) -> None:
    base_url, www, seen = static_server
    (www / "question_all.jsonl").write_bytes(b"{}\n")  # what a download would get (never the run's data)
    spec = edited_spec(REPO / "benchmarks" / "heartbench", tmp_path / "specs" / "hb", URL,
                       f"{base_url}/question_all.jsonl")
    rows, _ = read_rows(MINI)
    tagged = tmp_path / "mini.jsonl"  # the _Script's question tags in the first turn
    for r in rows:
        r["dialogue"][0]["content"] = f"[{r['question_id']}] " + r["dialogue"][0]["content"]
    tagged.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    script = _Script(rows, 0.0)
    with FakeServer(script) as srv:
        first = run_cli([f"benchmark={spec}", f"data.path={tagged}", "limit=3", "progress=none",
                         f"hydra.run.dir={tmp_path / 'first'}", *model_args(srv.url)], env)
        assert first.returncode == 0, first.stderr[-2000:]
        again = run_cli([f"benchmark={spec}", "stage=score", f"from_run={tmp_path / 'first'}", "limit=3",
                         "progress=none", f"hydra.run.dir={tmp_path / 'score'}", *_judge_only(srv.url)], env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert not seen, f"the pinned download was fetched: {seen}"
    one = json.loads((tmp_path / "first" / "summary.json").read_text())
    two = json.loads((tmp_path / "score" / "summary.json").read_text())
    assert two["data_sha256"] == one["data_sha256"] and two["counts"]["scored"] == 3
    assert one["data_path"] == str(tagged) and two["data_path"] == str(tagged)
