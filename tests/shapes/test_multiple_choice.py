"""Multiple choice (issue #25): through the console script against the fake server, the candidate sees lettered
options, no judge is called (none is declared), the accuracy, its interval and the per-topic table equal an
independent restatement, an unreadable answer is wrong and counted, and a bad answer key is one line."""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, run_cli
from fakeserver import FakeServer, Reply
from rubric_engine.scoring.checks import Choice, read_choice

MINI = REPO / "tests" / "data" / "choice_mini"
ROWS = [json.loads(x) for x in (MINI / "choice_mini.jsonl").read_text(encoding="utf-8").splitlines()]
REPLIES = {  # question -> the candidate's reply
    "Which planet is closest to the Sun?": "B",
    "What is the chemical symbol for sodium?": "The answer is (C).",
    "How many sides does a hexagon have?": "I would say C, six.",  # wrong: the first letter is C ("I" is no option)
    "Which gas do plants take in for photosynthesis?": "C. Carbon dioxide",
    "What is 7 times 8?": "hmm, not sure",  # no option letter at all: wrong, and counted
    "Which is the largest planet of the solar system?": "D",
}


def restated_letter(reply: str, n: int) -> str | None:
    """The documented default, written again with Python's re: the first capital option letter standing alone."""
    options = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:n]
    m = re.search(rf"(?<!\w)([{options}])(?!\w)", reply)
    return m.group(1) if m else None


def key(row: dict[str, Any]) -> str:
    a = row["answer"]
    return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[a] if isinstance(a, int) else a.upper()


def cand_args(url: str, run: Path, bench: Path = MINI) -> list[str]:
    return [f"benchmark={bench}", "progress=none", f"hydra.run.dir={run}",
            "candidate=openai_compatible", "candidate.model=openai/cand", f"candidate.api_base={url}",
            "candidate.name=cand", "candidate.api_key_env=FAKE_KEY"]


def answer(body: dict[str, Any]) -> Reply:
    text = body["messages"][-1]["content"]
    return Reply(text=next(r for q, r in REPLIES.items() if q in text))


def test_accuracy_equals_an_independent_restatement(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(answer) as srv:
        res = run_cli(cand_args(srv.url, tmp_path / "run"), env)
        assert res.returncode == 0, res.stderr
        # no judge declared, none called: one request per question, all to the candidate
        assert [b["model"] for b in srv.requests] == ["cand"] * len(ROWS)
        prompt = next(b["messages"][-1]["content"] for b in srv.requests if "closest to the Sun" in
                      b["messages"][-1]["content"])
    assert "A. Venus\nB. Mercury\nC. Mars\nD. Earth\n" in prompt
    correct, letters = [], []
    for r in ROWS:
        got = restated_letter(REPLIES[r["question"]], len(r["options"]))
        letters.append(got)
        correct.append(got == key(r))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["overall"] == pytest.approx(100 * sum(correct) / len(correct)) == pytest.approx(50.0)
    assert summary["counts"]["no_choice"] == letters.count(None) == 1
    assert summary["judge"]["name"] == "none" and summary["calls"]["judge"]["made"] == 0
    lo, hi = summary["interval"]["lo"], summary["interval"]["hi"]
    assert lo <= summary["overall"] <= hi and lo < hi
    by_topic: dict[str, list[bool]] = {}
    for r, ok in zip(ROWS, correct):
        for t in r["topics"]:
            by_topic.setdefault(t, []).append(ok)
    table = summary["breakdowns"]["topics"]
    for t, oks in by_topic.items():
        assert table[t] == pytest.approx(100 * sum(oks) / len(oks)), t
    recs = {json.loads(x)["id"]: json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()}
    assert [recs[r["id"]]["choice"] for r in ROWS] == letters
    q5 = recs["q5"]["criteria"][0]
    assert q5["hit"] is False and "no option letter could be read" in q5["reasoning"]
    assert q5["check"] == {"type": "choice", "answer": "B", "letters": "ABCDE", "read": "first_letter", "pattern": None}


def test_the_reader_agrees_with_its_restatement_on_random_replies() -> None:
    rng = random.Random(7)
    pieces = ["A", "B", "C", "D", "E", "a", "(B)", "B.", "AB", "Answer:", "I", "is", " ", " ", "\n", "C)", "[D]",
              "xD", "Dx", "_C", "猫A", "A猫", "1", ","]
    check = Choice(answer="A", letters="ABCD")
    for _ in range(3000):
        reply = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        assert read_choice(reply, check) == restated_letter(reply, 4), reply


@pytest.mark.parametrize(("reply", "letter"), [
    ("Answer: C", "C"), ("answer：(d) since", "D"), ("ANSWER: b", "B"), ("The answer is B", None),
    ("A first thought... Answer: B", "B"), ("Answer: E", None), ("Answer: Cat", None),
    ("**Answer:** C", "C"), ("**Answer**: [D]", "D"),
])
def test_the_answer_line_reader(reply: str, letter: str | None) -> None:
    assert read_choice(reply, Choice(answer="A", letters="ABCD", read="answer_line")) == letter


def test_a_declared_pattern_reads_group_one(tmp_path: Path, env: dict[str, str]) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(MINI, bench)
    spec = bench / "benchmark.yaml"
    spec.write_text(spec.read_text().replace("read: first_letter ", 'read: pattern\n  pattern: "<<([A-Z])>>"\n  #'))
    with FakeServer(lambda body: Reply(text="A or B? <<B>>")) as srv:
        res = run_cli(cand_args(srv.url, tmp_path / "run", bench), env)
        assert res.returncode == 0, res.stderr
    recs = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert [r["choice"] for r in recs] == ["B"] * len(ROWS)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["overall"] == pytest.approx(100 * sum(key(r) == "B" for r in ROWS) / len(ROWS))


def test_keyless_with_mock_and_no_judge(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli([f"benchmark={MINI}", "candidate=mock", "progress=none", f"hydra.run.dir={tmp_path / 'run'}"], env)
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"]["scored"] == len(ROWS) and summary["overall"] is not None


@pytest.mark.parametrize(("edit", "words"), [
    (lambda r: {**r, "answer": "E"}, "answer: 'E' is not one of the 4 options; give a letter A-D or a 0-based index below 4"),
    (lambda r: {**r, "answer": 4}, "answer: 4 is not one of the 4 options"),
    (lambda r: {**r, "options": ["only one"]}, "options: expected a list of 2 to 26 non-empty strings"),
    (lambda r: {k: v for k, v in r.items() if k != "answer"}, "missing field 'answer'"),
])
def test_a_bad_row_is_one_line(tmp_path: Path, env: dict[str, str], edit: Any, words: str) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(MINI, bench)
    rows = [edit(r) if i == 2 else r for i, r in enumerate(ROWS)]
    (bench / "choice_mini.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = run_cli(["validate", f"benchmark={bench}"], env)
    assert res.returncode == 2
    assert f"choice_mini.jsonl:3: {words}" in res.stderr.splitlines()[0]


def test_a_spec_with_judged_items_and_no_judge_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(MINI, bench)
    spec = bench / "benchmark.yaml"
    spec.write_text(spec.read_text().replace("    choices: options", "    rubric: options")
                    .replace("    answer: answer ", "    #"))
    res = run_cli(["validate", f"benchmark={bench}"], env)
    assert res.returncode == 2
    line = res.stderr.splitlines()[0]
    assert "benchmark.yaml" in line and "judge: required key is missing" in line and "add a judge: block" in line


def test_candidate_samples_count_every_unreadable_reply(tmp_path: Path, env: dict[str, str]) -> None:
    """candidate.samples=3: each sample's letter is kept under `samples`, and every unreadable one is counted."""
    seen: dict[str, int] = {}

    def replies(body: dict[str, Any]) -> Reply:
        text = body["messages"][-1]["content"]
        q = next(q for q in REPLIES if q in text)
        seen[q] = seen.get(q, 0) + 1
        return Reply(text="no idea" if seen[q] == 2 else REPLIES[q])  # every question's second sample: unreadable

    with FakeServer(replies) as srv:
        res = run_cli([*cand_args(srv.url, tmp_path / "run"), "candidate.samples=3"], env)
        assert res.returncode == 0, res.stderr
    recs = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert all("choice" not in r and [e["choice"] is None for e in r["samples"]].count(True) >= 1 for r in recs)
    unread = sum(e["choice"] is None for r in recs for e in r["samples"])
    assert unread == len(ROWS) + 2  # one "no idea" per question, plus q5's other two samples ("hmm, not sure")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"]["no_choice"] == unread
    res = run_cli(["rescore", str(tmp_path / "run"), f"out={tmp_path / 'again'}"], env)
    assert res.returncode == 0, res.stderr
    again = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert again["counts"]["no_choice"] == unread and again["overall"] == pytest.approx(summary["overall"])


@pytest.mark.parametrize(("mc", "words"), [
    ('read: pattern\n  pattern: "<<[A-Z]>>"', "multiple_choice.pattern: the pattern needs a group"),
    ('read: pattern\n  pattern: "(?<=x)([A-Z])"', "multiple_choice.pattern: RE2 cannot compile"),
    ("read: pattern", "multiple_choice.pattern: read: pattern and a pattern go together"),
    ("read: last_letter", "multiple_choice.read: unknown value"),
])
def test_a_bad_reader_is_one_line(tmp_path: Path, env: dict[str, str], mc: str, words: str) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(MINI, bench)
    spec = bench / "benchmark.yaml"
    spec.write_text(spec.read_text().replace("read: first_letter ", mc + "\n  #"))
    res = run_cli(["validate", f"benchmark={bench}"], env)
    assert res.returncode == 2
    line = res.stderr.splitlines()[0]
    assert "benchmark.yaml:" in line and words in line, line
