"""Ratings against a reference (`rating:` specs, EQ-Bench v2; issue #37 item 1): through the console script
against the fake server, every question's pass scores, the summary's per-pass numbers and EQ-Bench's reported
number equal an independent restatement of EQ-Bench's scoring (lib/scoring.py, restated below from its
documented behaviour) on seeded random replies, unparseable ones included, for the v2 fullscale and the v1
normalised distance; the best-pass rule at its 95% boundary; an unparseable reply is a counted per-question
error with one line; a run killed with SIGKILL resumes without asking a finished question again."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, REPO, edited_spec, kill_after_lines, run_cli
from fakeserver import FakeServer, Reply
from rubric_engine.scoring.ratings import choose_pass, pass_number, read_passes

SPEC = REPO / "benchmarks" / "eq_bench"
SAMPLE = REPO / "data" / "eq_bench_sample.json"
EMOTIONS = ["Hurt", "Proud", "Relieved", "Bored", "Anxious", "Grateful", "Annoyed", "Jealous", "Calm", "Guilty"]
FIRST, REVISED = "First pass scores:", "Revised scores:"


# ------------------------------------------------------------------ EQ-Bench's scoring, restated for the tests

def upstream_sections(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """EQ-Bench's reading with revision: the first pass between the two headings, the revised pass after the
    second; in each, every `word: digits` (the separator at least one whitespace), a repeated name's last."""
    def pairs(part: str) -> dict[str, str]:
        found: dict[str, str] = {}
        for m in re.finditer(r"(\w+):\s+(\d+)", part):
            found[m.group(1)] = m.group(2)
        return found
    a, b = text.find(FIRST), text.find(REVISED)
    first = pairs(text[a + len(FIRST):text.find(REVISED, a + len(FIRST))]) if a >= 0 and text.find(
        REVISED, a + len(FIRST)) >= 0 else {}
    revised = pairs(text[b + len(REVISED):]) if b >= 0 else {}
    return first, revised


def upstream_v2(ref: dict[str, Any], user: dict[str, str]) -> float | None:
    names = [ref[f"emotion{i}"] for i in range(1, 5)]
    if len(user) != 4 or sorted(user) != sorted(names):
        return None
    total = 0.0
    for i in range(1, 5):
        d = abs(float(user[ref[f"emotion{i}"]]) - float(ref[f"emotion{i}_score"]))
        total += 0 if d == 0 else (6.5 / (1 + math.e ** (-1.2 * (d - 4))) if d <= 5 else d)
    return 10 - 0.7477 * total


def upstream_v1(ref: dict[str, Any], user: dict[str, str]) -> float | None:
    names = [ref[f"emotion{i}"] for i in range(1, 5)]
    if len(user) != 4 or sorted(user) != sorted(names):
        return None
    s = sum(float(v) for v in user.values())
    if s <= 0:
        return None
    return 10 - sum(abs(float(user[ref[f"emotion{i}"]]) * 10 / s - ref[f"emotion{i}_score"]) for i in range(1, 5))


def upstream_benchmark(scores: list[tuple[float | None, float | None]]) -> dict[str, Any]:
    """calculate_eq_bench_score for one iteration: each pass's 100 x mean / 10, and the pass reported."""
    def one(xs: list[float | None]) -> tuple[float, int]:
        ok = [x for x in xs if x is not None]
        return (100 * (sum(ok) / len(ok) / 10) if ok else 0.0), len(ok)
    (f, fn), (r, rn) = one([a for a, _ in scores]), one([b for _, b in scores])
    revised = r >= f and rn >= 0.95 * fn
    return {"first": (f, fn), "revised": (r, rn), "final": r if revised else f, "used": REVISED if revised else FIRST}


# ------------------------------------------------------------------ data and replies

def questions(n: int, seed: int) -> dict[str, dict[str, Any]]:
    """n questions of EQ-Bench's file shape with random emotions and reference ratings (v2 ones as strings
    now and then, as upstream's file has them; v1 ones summing to 10)."""
    rng = random.Random(seed)
    out = {}
    for i in range(1, n + 1):
        names = rng.sample(EMOTIONS, 4)
        full: dict[str, Any] = {f"emotion{k}": names[k - 1] for k in range(1, 5)}
        full.update({f"emotion{k}_score": rng.choice([rng.randint(0, 10), str(rng.randint(0, 10))])
                     for k in range(1, 5)})
        cuts = sorted(rng.sample(range(11), 3))
        v1 = [cuts[0], cuts[1] - cuts[0], cuts[2] - cuts[1], 10 - cuts[2]]
        norm: dict[str, Any] = {f"emotion{k}": names[k - 1] for k in range(1, 5)}
        norm.update({f"emotion{k}_score": v1[k - 1] for k in range(1, 5)})
        lines = "\n".join(f"{e}: <score>" for e in names)
        out[str(i)] = {"prompt": f"Q[{i}] how does Sam feel?\n{FIRST}\n{lines}\n\n{REVISED}\n{lines}\n",
                       "reference_answer_fullscale": full, "reference_answer": norm}
    return out


def random_reply(names: list[str], rng: random.Random) -> str:
    """A reply in one of the ways models answer: well formed, decimals, a missing or foreign or extra name,
    ratings all zero, no headings, a line break after the colon."""
    def block(kind: str) -> str:
        shown = list(names)
        if kind == "missing":
            shown = shown[:3]
        elif kind == "foreign":
            shown[rng.randrange(4)] = "Ecstatic"
        elif kind == "extra":
            shown = shown + ["Score"]
        sep = "\n" if kind == "newline" else " "
        zero = kind == "zeros"
        return "\n".join(f"{e}:{sep}{0 if zero else rng.randint(0, 10)}" + (".5" if kind == "decimal" else "")
                         for e in shown)
    kinds = ["ok"] * 6 + ["missing", "foreign", "extra", "zeros", "newline", "decimal"]
    first, revised = rng.choice(kinds), rng.choice(kinds)
    if rng.random() < 0.08:
        return "I think they feel mostly " + names[0].lower() + "."
    return f"{FIRST}\n{block(first)}\n\nCritique: thinking it over.\n\n{REVISED}\n{block(revised)}\n"


def write_data(tmp_path: Path, rows: dict[str, dict[str, Any]]) -> Path:
    path = tmp_path / "eq.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def cand_args(url: str, run: Path, data: Path, bench: Path = SPEC) -> list[str]:
    return [f"benchmark={bench}", f"data.path={data}", "progress=none", f"hydra.run.dir={run}",
            "candidate=openai_compatible", "candidate.model=openai/cand", f"candidate.api_base={url}",
            "candidate.name=cand", "candidate.api_key_env=FAKE_KEY"]


def by_question(replies: dict[str, str], delay: float = 0.0):  # noqa: ANN201
    def handler(body: dict[str, Any]) -> Reply:
        qid = re.search(r"Q\[(\d+)\]", body["messages"][-1]["content"]).group(1)  # type: ignore[union-attr]
        return Reply(text=replies[qid], delay=delay)
    return handler


def run_dir(run: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    summary = json.loads((run / "summary.json").read_text())
    recs = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    return summary, {r["id"]: r for r in recs}


# ------------------------------------------------------------------ the tests

@pytest.mark.slow
@pytest.mark.parametrize(("distance", "column", "restated"), [
    ("eq_bench_v2", "reference_answer_fullscale", upstream_v2), ("eq_bench_v1", "reference_answer", upstream_v1)])
def test_scores_equal_eq_bench_restated_on_random_replies(tmp_path: Path, env: dict[str, str], distance: str,
                                                           column: str, restated: Any) -> None:
    rows = questions(60, seed=7)
    rng = random.Random(11)
    replies = {qid: random_reply([r["reference_answer_fullscale"][f"emotion{k}"] for k in range(1, 5)], rng)
               for qid, r in rows.items()}
    bench = edited_spec(SPEC, tmp_path / "spec", "distance: eq_bench_v2",
                        f"distance: {distance}") if distance != "eq_bench_v2" else SPEC
    if column != "reference_answer_fullscale":
        bench = edited_spec(bench, tmp_path / "spec2", "reference: reference_answer_fullscale", f"reference: {column}")
    with FakeServer(by_question(replies)) as srv:
        res = run_cli(cand_args(srv.url, tmp_path / "run", write_data(tmp_path, rows), bench), env)
        assert res.returncode == 0, res.stderr
        assert [b["model"] for b in srv.requests] == ["cand"] * len(rows)  # no judge: one call per question
    summary, recs = run_dir(tmp_path / "run")
    expected = []
    for qid, row in rows.items():
        first, revised = upstream_sections(replies[qid])
        pair = restated(row[column], first), restated(row[column], revised)
        expected.append(pair)
        got = [p["score"] for p in recs[qid]["rating"]["passes"]]
        assert got == [pytest.approx(x) if x is not None else None for x in pair], (qid, replies[qid])
        # the question's score is the revised pass's; unparseable: a counted error with one line, never a score
        assert recs[qid]["score"] == (pytest.approx(pair[1]) if pair[1] is not None else None)
        assert bool(recs[qid]["judge_error"]) == (pair[1] is None)
        if pair[1] is None:
            assert recs[qid]["judge_error"].startswith("unparseable rating ('Revised scores:' pass): ")
            assert "\n" not in recs[qid]["judge_error"]
    want = upstream_benchmark(expected)
    got = summary["rating"]
    assert [(p["benchmark"], p["parseable"]) for p in got["passes"]] == [
        (pytest.approx(want["first"][0]), want["first"][1]), (pytest.approx(want["revised"][0]), want["revised"][1])]
    assert got["benchmark"] == pytest.approx(want["final"]) and got["pass_used"] == want["used"]
    unparseable = sum(1 for _, r in expected if r is None)
    assert 3 <= unparseable < len(rows) and got["passes"][1]["unparseable"] == unparseable
    assert summary["counts"]["judge_errors"] == unparseable and summary["counts"]["scored"] == len(rows) - unparseable
    assert summary["overall"] == pytest.approx(want["revised"][0])  # scale 10: 10 x mean = 100 x mean / 10
    assert summary["calls"]["judge"]["made"] == 0

    # rescore gives the same numbers from the stored passes (no call)
    res = run_cli(["rescore", str(tmp_path / "run"), f"out={tmp_path / 'rs1'}"], env)
    assert res.returncode == 0, res.stderr
    again, recs2 = run_dir(tmp_path / "rs1")
    assert again["overall"] == pytest.approx(summary["overall"]) and again["rating"] == summary["rating"]
    assert {q: r["score"] for q, r in recs2.items()} == {q: r["score"] for q, r in recs.items()}
    if distance != "eq_bench_v2":
        return
    # rescored under another distance (the stored spec edited): every pass and the summary's section again
    resolved = tmp_path / "run" / "spec.resolved.json"
    resolved.write_text(resolved.read_text().replace('"eq_bench_v2"', '"absolute"'))
    res = run_cli(["rescore", str(tmp_path / "run"), f"out={tmp_path / 'rs2'}"], env)
    assert res.returncode == 0, res.stderr
    third, recs3 = run_dir(tmp_path / "rs2")
    plain = [tuple(None if not ok else 10 - sum(abs(float(u[n]) - float(ref[f"emotion{k}_score"]))
                                                for k, n in ((k, ref[f"emotion{k}"]) for k in range(1, 5)))
                   for u, ok in ((u, v is not None) for u, v in zip(upstream_sections(replies[qid]), pair)))
             for (qid, row), pair in zip(rows.items(), expected) for ref in [row[column]]]
    assert [recs3[qid]["score"] for qid in rows] == [pytest.approx(p[1]) if p[1] is not None else None for p in plain]
    want = upstream_benchmark(plain)
    assert third["rating"]["benchmark"] == pytest.approx(want["final"]) and third["rating"]["pass_used"] == want["used"]


def _boundary_replies(rows: dict[str, dict[str, Any]], revised_ok: int) -> dict[str, str]:
    """First pass: every reply parseable and one point off on every name; revised pass: exact (scores 10) for
    the first `revised_ok` questions, a name missing for the others."""
    out = {}
    for n, (qid, r) in enumerate(rows.items()):
        ref = r["reference_answer_fullscale"]
        names = [ref[f"emotion{k}"] for k in range(1, 5)]
        first = "\n".join(f"{e}: {int(ref[f'emotion{k}_score']) ^ 1}" for k, e in enumerate(names, start=1))
        exact = [f"{e}: {int(ref[f'emotion{k}_score'])}" for k, e in enumerate(names, start=1)]
        revised = "\n".join(exact if n < revised_ok else exact[:3])
        out[qid] = f"{FIRST}\n{first}\n\n{REVISED}\n{revised}\n"
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("revised_ok", "used"), [(19, REVISED), (18, FIRST)])
def test_the_revised_pass_is_reported_unless_under_95_percent_of_the_first_pass_parseable(
        tmp_path: Path, env: dict[str, str], revised_ok: int, used: str) -> None:
    """20 questions, all parseable in the first pass: 19 revised ones are exactly 95% (the revised pass, better,
    is reported); 18 are under it (the first pass is reported though the revised one scores higher)."""
    rows = questions(20, seed=3)
    with FakeServer(by_question(_boundary_replies(rows, revised_ok))) as srv:
        res = run_cli(cand_args(srv.url, tmp_path / "run", write_data(tmp_path, rows)), env)
        assert res.returncode == 0, res.stderr
    rating = run_dir(tmp_path / "run")[0]["rating"]
    assert [p["parseable"] for p in rating["passes"]] == [20, revised_ok]
    assert rating["passes"][1]["benchmark"] == pytest.approx(100.0)
    assert rating["passes"][0]["benchmark"] < 100.0
    assert rating["pass_used"] == used
    assert rating["benchmark"] == pytest.approx(rating["passes"][0 if used == FIRST else 1]["benchmark"])


def test_pass_choice_and_reading_at_their_edges() -> None:
    """In-process: the 95% boundary in both directions, a lower revised number, and EQ-Bench's reading quirks
    (a decimal read as its integer part, a line break after the colon, the last of a repeated name)."""
    assert choose_pass([(50.0, 100), (60.0, 95)], "best", 0.95) == 1
    assert choose_pass([(50.0, 100), (60.0, 94)], "best", 0.95) == 0
    assert choose_pass([(50.0, 100), (49.9, 100)], "best", 0.95) == 0
    assert choose_pass([(50.0, 100), (0.0, 0)], "last", 0.95) == 1 and choose_pass([(1.0, 1)], "best", 0.95) == 0
    assert pass_number([None, None]) == (0.0, 0) and pass_number([5.0, None, 7.0]) == (pytest.approx(60.0), 2)
    text = f"{FIRST}\nA: 7.5\nB:\n3\nA: 2\n{REVISED}\nA: 1"
    assert read_passes(text, "lines", [FIRST, REVISED]) == [{"A": "2", "B": "3"}, {"A": "1"}]
    assert read_passes(f"{REVISED}\nA: 1", "lines", [FIRST, REVISED]) == [{}, {"A": "1"}]  # no first heading
    assert read_passes('noise {"A": 3, "B": 4.5} {"C": 1}', "json", []) == [{"A": "3", "B": "4.5"}]


@pytest.mark.slow
def test_keyless_try_out_shows_scores_and_unparseable_replies(tmp_path: Path, env: dict[str, str]) -> None:
    """`candidate=mock`, nothing else: the packaged sample (data.sample) is read, never the download; both
    parseable and unparseable replies, counted, one line each."""
    res = run_cli(["benchmark=eq_bench", "candidate=mock", "progress=none",
                   f"hydra.run.dir={tmp_path / 'run'}"], env)
    assert res.returncode == 0, res.stderr
    summary, recs = run_dir(tmp_path / "run")
    errors = [r["judge_error"] for r in recs.values() if r["judge_error"]]
    assert 0 < len(errors) < len(recs) == 5 and summary["counts"]["judge_errors"] == len(errors)
    assert all(e.startswith("unparseable rating ('Revised scores:' pass): 3 ratings where 4 were asked") for e in errors)
    assert summary["rating"]["passes"][1]["unparseable"] == len(errors)
    head = res.stdout[:res.stdout.index("Reply length")]  # the console's first table shows each pass and the choice
    assert "Revised scores: (unparseable)" in head and f"({len(errors)})" in head and "Reported (best pass)" in head


@pytest.mark.slow
def test_killed_rating_run_resumes_without_asking_finished_questions_again(tmp_path: Path,
                                                                          env: dict[str, str]) -> None:
    rows = questions(12, seed=5)
    replies = {qid: random_reply([r["reference_answer_fullscale"][f"emotion{k}"] for k in range(1, 5)],
                                 random.Random(int(qid))) for qid, r in rows.items()}
    data = write_data(tmp_path, rows)
    with FakeServer(by_question(replies, delay=0.15)) as srv:
        ref = tmp_path / "ref"
        assert run_cli(cand_args(srv.url, ref, data), dict(env, RUBRIC_ENGINE_CACHE=str(tmp_path / "c2"))
                       ).returncode == 0
        srv.reset()
        run = tmp_path / "run"
        args = [*cand_args(srv.url, run, data), "concurrency=1"]
        done = {r["id"] for r in kill_after_lines([EXE, *args], run / "samples.jsonl", 4, env)[1:]}
        assert 3 <= len(done) < 12, "the kill must land midway"
        first_asked = [re.search(r"Q\[(\d+)\]", b["messages"][-1]["content"]).group(1) for b in srv.requests]
        srv.reset()
        res = run_cli(args, env)
        assert res.returncode == 0, res.stderr
        asked = [re.search(r"Q\[(\d+)\]", b["messages"][-1]["content"]).group(1) for b in srv.requests]
    assert not set(asked) & done and len(asked) == len(set(asked))
    assert set(asked) | set(first_asked) == set(rows) and len(set(asked) & set(first_asked)) <= 1  # one in flight
    a, b = run_dir(ref)[0], run_dir(run)[0]
    assert (a["overall"], a["rating"], a["counts"]) == (b["overall"], b["rating"], b["counts"])


@pytest.mark.parametrize(("old", "new", "says"), [
    ("rating:\n", "judge:\n  model: {name: j, model: openai/j}\n  template: j.j2\nrating:\n",
     "rating: a rating verdict is decided by the engine, with no judge"),
    ('  value: "emotion{i}_score"\n', "", "rating.name and rating.value go together"),
    ('["First pass scores:", "Revised scores:"]', '["A:", "A:"]', "each heading non-empty and distinct"),
    ("    item_label: null\n", "    item_label: null\n    item_check: check\n",
     "rating: checked items and multiple choice are rubric items"),
    ("distance: eq_bench_v2", "distance: euclid", "rating.distance")])
def test_a_rating_block_that_cannot_run_is_one_line(tmp_path: Path, old: str, new: str, says: str) -> None:
    from rubric_engine.errors import SpecError
    from rubric_engine.spec.load import load_spec

    bench = edited_spec(SPEC, tmp_path / "spec", old, new)
    (bench / "j.j2").write_text("x")
    with pytest.raises(SpecError) as err:
        load_spec(bench)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_row_without_usable_reference_ratings_is_its_own_error() -> None:
    """The reference column missing, not numeric or not distinct: a reason for that question's counted error."""
    from rubric_engine.datatypes import Question
    from rubric_engine.shapes.rating import reference_of
    from rubric_engine.spec.ratings import Rating

    numbered = Rating(reference="ref", name="emotion{i}", value="emotion{i}_score")
    def q(ref: Any) -> Question:
        return Question(id="1", dialogue=(), criteria=(), extra={} if ref is None else {"ref": ref})
    assert reference_of(numbered, q({"emotion1": "Calm", "emotion1_score": "6", "emotion2": "Hurt",
                                      "emotion2_score": 0}))[0] == {"Calm": 6.0, "Hurt": 0.0}
    assert reference_of(Rating(reference="ref"), q({"Calm": 3}))[0] == {"Calm": 3.0}
    assert "is not an object" in str(reference_of(numbered, q(None))[1])
    assert "not a number" in str(reference_of(numbered, q({"emotion1": "Calm", "emotion1_score": "high"}))[1])
    assert "not distinct" in str(reference_of(numbered, q({"emotion1": "Calm", "emotion1_score": 1, "emotion2": "Calm",
                                                          "emotion2_score": 2}))[1])
    assert "holds no reference" in str(reference_of(numbered, q({"other": 1}))[1])


def test_the_absolute_distance_and_one_reply_per_question() -> None:
    """`absolute`: 10 - the sum of plain differences, no scaling, no normalising; a rating run refuses samples."""
    from rubric_engine.errors import ConfigError
    from rubric_engine.scoring.ratings import DISTANCES
    from rubric_engine.shapes.registry import VERDICTS
    from rubric_engine.spec.load import load_spec

    ref = {"A": 7.0, "B": 0.0}
    assert DISTANCES["absolute"]({"A": 1.0, "B": 3.0}, ref) == pytest.approx(1.0)  # 10 - (6 + 3)
    assert DISTANCES["eq_bench_v1"]({"A": 0.0, "B": 0.0}, ref) is None  # nothing to normalise
    with pytest.raises(ConfigError, match="samples=2 with a rating: block is not supported"):
        VERDICTS["rating"].check_plan(load_spec(SPEC), 2)
