"""Arena-Hard's numbers, exactly: the engine's win rate (overall and per category) equals a restatement of
Arena-Hard-Auto's show_result.py computed from the verdicts the judge server actually sent.

The judge is tests/fakeserver.py, replying random `[[A>B]]`-style verdicts (seeded per question, game and
attempt, so the order requests arrive in changes nothing), some garbage that is re-asked and then
answered, and for a few games only garbage, so those games fail after the re-asks. Which request is which
game is read from the request body: the prompt names the question, and whether the baseline's reply or
the candidate's comes first names the order. The restatement (written for this test from the published
rules): a question with a game that has no label is dropped; each label maps to scores with weight 3 for
the strong ones, game 2 (A = model) as given and game 1 (A = baseline) as 1 - s; the scores are exploded one
row each and the model's score is their mean.
"""

from __future__ import annotations

import json
import random
import re
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from test_cli import run_cli

LABELS = ["A>>B", "A>B", "A=B", "B>A", "B>>A"]
GARBAGE = ["no idea [[C]]", "maybe [[A>B]] or rather [[B>A]]", "[[A<B]]", "A is better"]
QID = re.compile(r"PROMPT\[(\w+)\]")


def label_to_score(label: str, weight: int = 3) -> list[float]:
    """Arena-Hard's mapping from the model's side when the model is A (game 2)."""
    return {"A>B": [1.0], "A>>B": [1.0] * weight, "A=B": [0.5], "B>A": [0.0], "B>>A": [0.0] * weight}[label]


def show_result(games: dict[str, dict[int, str | None]], category: dict[str, str]) -> tuple[float, dict[str, float]]:
    """(overall, per category) win rate in percent, restated: drop questions with an unlabelled game, explode."""
    rows: list[tuple[str, float]] = []
    for qid, g in games.items():
        if g.get(1) is None or g.get(2) is None:
            continue
        scores = label_to_score(str(g[2])) + [1 - s for s in label_to_score(str(g[1]))]
        rows += [(category[qid], s) for s in scores]
    per = {c: [s for cc, s in rows if cc == c] for c in set(category.values())}
    return (100 * sum(s for _, s in rows) / len(rows),
            {c: 100 * sum(v) / len(v) for c, v in per.items() if v})


class Judge:
    """Random verdicts, a fixed function of (question, game, attempt); what it sent last per game is kept."""

    def __init__(self, hopeless: set[str]) -> None:
        self.sent: dict[str, dict[int, str | None]] = {}
        self.hopeless, self.lock = hopeless, threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        msgs = body["messages"]
        first = next(m["content"] for m in msgs if m["role"] == "user")
        qid = QID.search(first).group(1)  # type: ignore[union-attr]
        game = 1 if first.index("BASE[") < first.index("CAND[") else 2  # game 1: A = baseline
        attempt = sum(1 for m in msgs if m["role"] == "assistant")
        rng = random.Random(zlib.crc32(f"{qid}/{game}/{attempt}".encode()))
        if (qid, game) in self.hopeless or (attempt == 0 and rng.random() < 0.2):
            label, text = None, rng.choice(GARBAGE)
        else:
            label = rng.choice(LABELS)
            text = f"Both replies address the prompt; weighing them.\n\nMy final verdict is [[{label}]]."
        with self.lock:
            self.sent.setdefault(qid, {})[game] = label
        return Reply(text=text)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_win_rate_equals_arena_hard_restatement(tmp_path: Path, env: dict[str, str], seed: int) -> None:
    rng = random.Random(seed)
    ids = [f"q{seed}x{i:02d}" for i in range(36)]
    category = {q: rng.choice(["hard_prompt", "creative_writing"]) for q in ids}
    data = write_jsonl(tmp_path / "questions.jsonl", [{"uid": q, "category": category[q], "subcategory": "s",
                                                        "prompt": f"PROMPT[{q}] please answer"} for q in ids])
    base = write_jsonl(tmp_path / "base.jsonl", [{"uid": q, "response": f"BASE[{q}] the baseline"} for q in ids])
    cand = write_jsonl(tmp_path / "cand.jsonl", [{"uid": q, "response": f"CAND[{q}] the candidate"} for q in ids])
    hopeless = {(q, rng.choice([1, 2])) for q in rng.sample(ids, 4)}
    judge = Judge(hopeless)
    out = tmp_path / "run"
    with FakeServer(judge) as srv:
        res = run_cli(["benchmark=arena_hard", f"data.path={data}", "stage=score", f"answers={cand}",
                       f"baseline.answers={base}", "judge=openai_compatible", "judge.model=openai/judge-x",
                       f"judge.api_base={srv.url}", "judge.api_key_env=FAKE_KEY", "progress=none",
                       f"cache.dir={tmp_path / 'cache'}", f"hydra.run.dir={out}"], env)
        assert res.returncode == 0, res.stderr
        assert not any(r.get("response_format") for r in srv.requests)  # a plain-text verdict
    summary = json.loads((out / "summary.json").read_text())
    samples = {s["id"]: s for s in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    overall, per = show_result(judge.sent, category)
    assert summary["overall"] == pytest.approx(overall, abs=1e-9)
    assert {c: summary["subsets"][c] for c in per} == pytest.approx(per, abs=1e-9)
    failed = {q for q, g in judge.sent.items() if None in g.values()}
    assert failed == {q for q, _ in hopeless}
    assert summary["counts"]["judge_errors"] == len(failed) and summary["counts"]["scored"] == len(ids) - len(failed)
    for q in failed:  # recorded, not scored: the failed game says why, the other game's label is kept
        assert samples[q]["score"] is None and "invalid verdict after 3 replies" in samples[q]["judge_error"]
    for q, s in samples.items():
        assert [g["label"] for g in s["games"]] == [judge.sent[q][1], judge.sent[q][2]]
    res = run_cli(["leaderboard", str(out), f"out={tmp_path / 'lb'}"], env)  # rebuilt from the stored run
    assert res.returncode == 0, res.stderr
    row = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())["rows"][0]
    assert row["overall"] == pytest.approx(overall, abs=1e-9)
    assert {c: row["subsets"][c] for c in per} == pytest.approx(per, abs=1e-9)
