"""`data.expand: assistant_turns`: one question per counsellor turn, aggregated back to dialogues.

Through the console script against the fake server: the candidate's request for turn k holds exactly the gold
history before it; summary.json's per-dialogue and overall numbers equal a hand computation (dialogue = mean of
its turns, overall = mean over dialogues); a dialogue with no assistant turn is one counted data warning; kill -9
mid-run resumes with no journalled turn asked again. In-process: ids, the turn-id clash, and the
dialogue-resampling interval against a restated reference (numpy's percentiles on the same draws)."""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import EXE, REPO, kill_after_lines, model_args, run_cli
from fakeserver import FakeServer, Reply
from rubric_engine.dataset.load import load_dataset
from rubric_engine.datatypes import dialogue_of, turn_id
from rubric_engine.errors import DataError
from rubric_engine.scoring.aggregate import ScoredQuestion
from rubric_engine.spec.load import load_spec
from rubric_engine.stats.dialogues import dialogue_section

SPEC = REPO / "benchmarks" / "counselling_turns"
RUBRIC = [{"text": "reflects the feeling", "weight": 2}, {"text": "invites more", "weight": 1},
          {"text": "gives a directive", "weight": -2}]
DIALOGUES = {
    "d1": [("client", "c1 I cannot sleep"), ("counsellor", "s1 gold one"), ("client", "c2 it is work"),
           ("counsellor", "s2 gold two"), ("client", "c3 thanks")],
    "d2": [("client", "e1 my sister"), ("counsellor", "t1 gold"), ("client", "e2 she shouts"),
           ("counsellor", "t2 gold"), ("client", "e3 always"), ("counsellor", "t3 gold")],
    "d0": [("client", "z1 hello"), ("client", "z2 anyone?")],  # no assistant turn: one counted warning
    "d3": [("client", "f1 my exam"), ("counsellor", "u1 gold")],
}
# the judge's verdict per turn (items +2, +1, -2); score = met points / positive points, clipped to [0, 1]
MET = {"d1.t1": [1, 1, 0], "d1.t2": [1, 0, 0], "d2.t1": [0, 1, 0], "d2.t2": [1, 1, 1], "d2.t3": [0, 0, 0],
       "d3.t1": [1, 0, 1]}
REPLY = re.compile(r"REPLY\[([^\]]+)\]")


def _write_data(path: Path) -> Path:
    rows = [{"id": d, "topic": "work", "dialogue": [{"role": r, "content": c} for r, c in turns], "rubric": RUBRIC}
            for d, turns in DIALOGUES.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _turn_of(messages: list[dict[str, Any]]) -> str:
    """The expanded question a candidate request stands for, from its last message (the gold history's end)."""
    last = messages[-1]["content"]
    for d, turns in DIALOGUES.items():
        for i, (_, content) in enumerate(turns):
            if content == last:
                return turn_id(d, sum(1 for r, _ in turns[: i + 2] if r == "counsellor"))
    raise AssertionError(f"no gold turn ends this request: {last!r}")


def handler(body: dict[str, Any]) -> Reply:
    if body["model"] == "judge":
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        qid = REPLY.search(text).group(1)  # type: ignore[union-attr]
        items = [{"id": i + 1, "reasoning": "r", "met": bool(m)} for i, m in enumerate(MET[qid])]
        return Reply(text=json.dumps({"criteria": items}), usage=(50, 20))
    return Reply(text=f"REPLY[{_turn_of(body['messages'])}] I hear you.", usage=(20, 10))


def _score(met: list[int]) -> float:
    points = sum(item["weight"] for item, m in zip(RUBRIC, met) if m)
    return min(1.0, max(0.0, points / sum(i["weight"] for i in RUBRIC if i["weight"] > 0)))


def _args(url: str, data: Path) -> list[str]:
    return ["benchmark=counselling_turns", f"data.path={data}", "concurrency=1", "progress=plain",
            *model_args(url)]


def test_turns_requests_scores_and_the_empty_dialogue(tmp_path: Path, env: dict[str, str]) -> None:
    data = _write_data(tmp_path / "turns.jsonl")
    with FakeServer(handler) as srv:
        res = run_cli([*_args(srv.url, data), f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        bodies = [b for b in srv.requests if b["model"] == "cand"]
        judged = {REPLY.search(m["content"]).group(1): m["content"] for b in srv.requests if b["model"] == "judge"
                  for m in b["messages"] if REPLY.search(m["content"])}
    # the judge sees the same history, each speaker named, then the reply to grade
    assert "Client: c1 I cannot sleep\nCounsellor: s1 gold one\nClient: c2 it is work\n</history" in judged["d1.t2"]
    # the candidate's request for turn k: the system prompt, then exactly the gold history before turn k
    assert sorted(_turn_of(b["messages"]) for b in bodies) == sorted(MET)
    for b in bodies:
        qid = _turn_of(b["messages"])
        d, k = dialogue_of(qid), int(qid.rsplit(".t", 1)[1])
        cut = [i for i, (r, _) in enumerate(DIALOGUES[d]) if r == "counsellor"][k - 1]
        want = [{"role": "user" if r == "client" else "assistant", "content": c} for r, c in DIALOGUES[d][:cut]]
        assert b["messages"][0]["role"] == "system"
        assert [{"role": m["role"], "content": m["content"]} for m in b["messages"][1:]] == want
    # the dialogue with no assistant turn: one counted line, and the run goes on
    warned = [x for x in res.stderr.splitlines() if "no assistant turn" in x]
    assert len(warned) == 1 and "1 dialogue(s)" in warned[0] and "d0 (line 3)" in warned[0]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    turns = {q: _score(m) for q, m in MET.items()}
    per = {d: [s for q, s in turns.items() if dialogue_of(q) == d] for d in ("d1", "d2", "d3")}
    means = {d: sum(v) / len(v) for d, v in per.items()}
    sec = summary["dialogues"]
    assert sec["by_dialogue"] == {d: {"turns": len(per[d]), "scored": len(per[d]), "score": pytest.approx(100 * m)}
                                  for d, m in means.items()}
    assert summary["overall"] == pytest.approx(100 * (5 / 6 + 2 / 9 + 0) / 3)  # by hand: 35.19
    assert summary["overall"] == pytest.approx(100 * sum(means.values()) / 3)
    assert sec["turn_mean"] == pytest.approx(100 * 7 / 18)  # each turn weighing the same: 38.89
    assert summary["interval"]["unit"] == "dialogues" and summary["counts"]["questions"] == 6
    assert re.search(r"Dialogues scored \(overall: their mean\)\s*│\s*3 of 3; mean over turns 38\.89", res.stdout)


def test_kill9_mid_run_resumes_without_asking_a_journalled_turn_again(tmp_path: Path, env: dict[str, str]) -> None:
    data = _write_data(tmp_path / "turns.jsonl")
    run = tmp_path / "run"
    with FakeServer(handler, latency=0.6) as srv:  # the journal syncs every 2 s
        args = [*_args(srv.url, data), f"hydra.run.dir={run}"]
        lines = kill_after_lines([EXE, *args], run / "samples.jsonl", 3, env, cwd=tmp_path)
        done = {r["id"] for r in lines[1:]}
        assert 2 <= len(done) < 6, "the kill must land midway"
        shutil.rmtree(tmp_path / "cache")  # only the journal can spare the calls now
        srv.reset()
        res = run_cli(args, env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        again = [_turn_of(b["messages"]) for b in srv.requests if b["model"] == "cand"]
    assert not set(again) & done and sorted(again) == sorted(set(MET) - done)  # each left turn asked once
    records = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in records) == sorted(MET)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["overall"] == pytest.approx(100 * (5 / 6 + 2 / 9 + 0) / 3)


def test_expanded_ids_history_and_a_clashing_turn_id(tmp_path: Path) -> None:
    spec = load_spec(SPEC)
    ds = load_dataset(spec, _write_data(tmp_path / "turns.jsonl"))
    assert [q.id for q in ds.questions] == ["d1.t1", "d1.t2", "d2.t1", "d2.t2", "d2.t3", "d3.t1"]
    assert [t.content for t in ds.questions[1].dialogue] == ["c1 I cannot sleep", "s1 gold one", "c2 it is work"]
    lazy = load_dataset(spec, tmp_path / "turns.jsonl", lazy=True).questions
    assert [q.dialogue for q in lazy] == [q.dialogue for q in ds.questions]  # read again from the row: the same
    assert dialogue_of("a.t1.t2") == "a.t1" and dialogue_of("plain") == "plain" and dialogue_of("x.tz") == "x.tz"
    clash = tmp_path / "clash.jsonl"
    clash.write_text(json.dumps({"id": "d1.t1", "dialogue": [{"role": "client", "content": "x"}], "rubric": RUBRIC})
                     + "\n" + (tmp_path / "turns.jsonl").read_text().splitlines()[0] + "\n")
    with pytest.raises(DataError, match=r"turn id 'd1\.t1' .* is also the id of the question at line 1"):
        load_dataset(spec, clash)
    silent = tmp_path / "silent.jsonl"
    silent.write_text(json.dumps({"id": "q", "dialogue": [{"role": "client", "content": "x"}], "rubric": RUBRIC}) + "\n")
    with pytest.raises(DataError, match=r"no assistant turn to ask in any of its 1 dialogue\(s\)"):
        load_dataset(spec, silent)


def test_the_interval_resamples_dialogues_as_a_restated_reference_does() -> None:
    turns = {"a": [1.0, 1.0, 1.0, 1.0], "b": [0.0, 0.0], "c": [0.5], "d": [1.0, 0.0, 1.0]}
    scored = [ScoredQuestion(turn_id(d, k + 1), "", "", {}, s, False) for d, v in turns.items() for k, s in enumerate(v)]
    sec = dialogue_section(scored, [q.id for q in scored], 100.0, n=2000, seed=7)
    means = [sum(v) / len(v) for v in turns.values()]
    rng = random.Random(7)  # the reference: draw 4 dialogues with replacement, mean of their means
    boot = np.array([np.mean([means[i] for i in rng.choices(range(4), k=4)]) for _ in range(2000)])
    assert sec["overall"] == pytest.approx(100 * np.mean(means))
    assert sec["interval"]["lo"] == pytest.approx(100 * np.percentile(boot, 2.5))
    assert sec["interval"]["hi"] == pytest.approx(100 * np.percentile(boot, 97.5))
    assert sec["interval"]["std"] == pytest.approx(100 * boot.std())
    # exact by enumeration: with two dialogues every resample's mean is a, (a+b)/2 or b (1/4, 1/2, 1/4), so the
    # bootstrap mean is the plain mean and the variance (a-b)^2/8
    two = dialogue_section(scored[:6], [q.id for q in scored[:6]], 1.0, n=20000, seed=1)
    assert two["interval"]["lo"] == 0.0 and two["interval"]["hi"] == 1.0
    assert two["interval"]["std"] == pytest.approx((1 / 8) ** 0.5, rel=0.02)


@pytest.mark.parametrize(("old", "new", "words"), [
    ("  roles: {client: user, counsellor: assistant}", "  roles: {client: user, counsellor: other}",
     "needs a data role mapped to assistant"),
    ("candidate:\n", "conversation: {mode: scripted}\ncandidate:\n", "need conversation.mode single"),
    ("expand: assistant_turns", "expand: every_turn", "assistant_turns"),
])
def test_a_spec_that_cannot_expand_is_refused_in_one_line(tmp_path: Path, old: str, new: str, words: str) -> None:
    from conftest import edited_spec  # noqa: PLC0415
    from rubric_engine.errors import SpecError  # noqa: PLC0415

    with pytest.raises(SpecError, match=words):
        load_spec(edited_spec(SPEC, tmp_path / "spec", old, new))


def test_the_leaderboard_ranks_and_pairs_runs_over_dialogues(tmp_path: Path, env: dict[str, str]) -> None:
    sweep = tmp_path / "sweep"
    res = run_cli(["-m", "benchmark=counselling_turns", "candidate=mock/a,mock/b", "judge=mock", "progress=none",
                   f"hydra.sweep.dir={sweep}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    board = json.loads((sweep / "leaderboard.json").read_text())
    assert not board["warnings"]
    means: dict[str, list[float]] = {}
    for row in board["rows"]:
        summary = json.loads((Path(row["run_dir"]) / "summary.json").read_text())
        assert (row["overall"], row["ci_lo"], row["ci_hi"]) == pytest.approx(
            (summary["overall"], summary["interval"]["lo"], summary["interval"]["hi"]))
        per: dict[str, list[float]] = {}
        for line in (Path(row["run_dir"]) / "samples.jsonl").read_text().splitlines():
            rec = json.loads(line)
            per.setdefault(rec["id"].rsplit(".t", 1)[0], []).append(rec["score"])
        means[row["label"]] = [sum(v) / len(v) for v in per.values()]
    (pair,) = board["pairs"]
    run = Path(board["rows"][0]["run_dir"])  # rescore recomputes the dialogues from samples.jsonl alike
    res = run_cli(["rescore", str(run)], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (again,) = run.glob("rescore-*/summary.json")
    assert json.loads(again.read_text())["dialogues"] == json.loads((run / "summary.json").read_text())["dialogues"]
    diffs = [x - y for x, y in zip(means[pair["a"]], means[pair["b"]])]  # one paired value per dialogue
    rng = random.Random(0)  # the same dialogues drawn for both runs
    boot = [100 * np.mean([diffs[i] for i in rng.choices(range(len(diffs)), k=len(diffs))]) for _ in range(1000)]
    assert pair["diff"] == pytest.approx(100 * np.mean(diffs))
    assert (pair["lo"], pair["hi"]) == pytest.approx((np.percentile(boot, 2.5), np.percentile(boot, 97.5)))


def test_ids_select_turns_and_answers_hold_each_turn_with_its_history(tmp_path: Path, env: dict[str, str]) -> None:
    """Keyless: `ids=[d2.t3,d1.t1]` needs no quoting; answers.jsonl repeats each turn's row as its question reads it
    (its own id, the gold history before it), so a score-only run from it scores the same dialogues."""
    res = run_cli(["benchmark=counselling_turns", "candidate=mock", "judge=mock", "ids=[d2.t3,d1.t1]",
                   f"hydra.run.dir={tmp_path / 'run'}"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    answers = [json.loads(x) for x in (tmp_path / "run" / "answers.jsonl").read_text().splitlines()]
    assert [(a["id"], len(a["dialogue"]), a["dialogue"][-1]["role"]) for a in answers] == \
        [("d1.t1", 1, "client"), ("d2.t3", 5, "client")]
    first = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert {d: v["turns"] for d, v in first["dialogues"]["by_dialogue"].items()} == {"d1": 1, "d2": 1}
    res = run_cli(["benchmark=counselling_turns", "judge=mock", "stage=score", "ids=[d2.t3,d1.t1]",
                   f"answers={tmp_path / 'run' / 'answers.jsonl'}", f"hydra.run.dir={tmp_path / 'scored'}"], env,
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    again = json.loads((tmp_path / "scored" / "summary.json").read_text())
    assert again["dialogues"]["by_dialogue"] == first["dialogues"]["by_dialogue"]


def test_validate_says_how_turns_aggregate(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli(["validate", "benchmark=counselling_turns", f"data.path={_write_data(tmp_path / 'turns.jsonl')}"],
                  env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "data.expand: assistant_turns: 6 turns from 3 dialogues; a dialogue scores the mean of its turns, the " \
           "overall is the mean over dialogues (the interval resamples dialogues)" in res.stdout
    assert "1 dialogue(s) with no assistant turn to ask" in res.stdout + res.stderr


def test_an_opening_assistant_turn_has_no_history_and_is_counted_not_asked(tmp_path: Path) -> None:
    rows = tmp_path / "open.jsonl"
    turns = [("counsellor", "o1 welcome"), ("client", "o2 hi"), ("counsellor", "o3 tell me")]
    rows.write_text(json.dumps({"id": "o", "dialogue": [{"role": r, "content": c} for r, c in turns],
                                "rubric": RUBRIC}) + "\n")
    ds = load_dataset(load_spec(SPEC), rows)
    assert [(q.id, [t.content for t in q.dialogue]) for q in ds.questions] == [("o.t2", ["o1 welcome", "o2 hi"])]
    assert [w for w in ds.warnings if "open their dialogue" in w] == [
        f"{rows}: 1 assistant turn(s) open their dialogue (no history before them) and are not asked "
        "(data.expand: assistant_turns)"]
