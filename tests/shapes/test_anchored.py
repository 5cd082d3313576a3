"""Anchored pairwise (`judge.verdict.kind: anchored`, issue #37 item 4) through the console script against the
fake server: each reply judged against several anchors' answers, both orders, under a declared length rule.

The numbers are checked against restatements written for this test from the references' published code:
- WildBench (allenai/WildBench, leaderboard/data_dir/_create_tables.py): per baseline, a game is win_much,
  win, tie, lose or lose_much; with K >= 0 a plain win (extent 1) whose winner's output is longer than the
  loser's by more than K characters is a tie (a win by a large margin is never discounted); the reward is
  (win_much - lose_much + (win - lose) / 2) / games, x 100; the mixture is the mean over the baselines.
- The anchored rating (EQ-Bench 3 holds its anchor models at fixed Elo values): the candidate's rating is the
  maximum of the Bradley-Terry likelihood on the Elo scale with every anchor at its declared rating, fitted here
  with scipy's Brent minimiser (a tie half a win, a strong verdict counted strong_weight times).
The judge replies seeded random labels (a function of question, anchor, order and attempt), some garbage that
is re-asked, and only garbage for a few games (those questions are counted judge errors).
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, REPO, kill_after_lines, run_cli
from fakeserver import FakeServer, Reply

LABELS = ["A>>B", "A>B", "A=B", "B>A", "B>>A"]
GARBAGE = ["no verdict here", "[[A>B]] or maybe [[B>A]]", "[[C]]"]
ANCHORS = {"strong": 1300.0, "middle": 1000.0, "weak": 700.0}
QID = re.compile(r"Q\[(\w+)\]")
ANC = re.compile(r"ANC\[(\w+)\]")
SPEC = REPO / "benchmarks" / "anchored_mini"


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def setup(tmp: Path, ids: list[str], rng: random.Random, *, length: str = "{rule: margin, chars: 40}",
          strong_weight: int = 1, drop: dict[str, str] | None = None) -> tuple[Path, Path, Path, dict[str, Any]]:
    """(spec dir, data, candidate answers, lengths): a spec extending anchored_mini with this test's anchor
    files (lengths random, so the margin bites), `drop` leaving one anchor's answer to one question out."""
    spec = tmp / "spec"
    spec.mkdir()
    lengths: dict[str, Any] = {"cand": {}, **{a: {} for a in ANCHORS}}
    cand_rows = []
    for q in ids:
        text = f"CAND[{q}] " + "c" * rng.randrange(0, 120)
        lengths["cand"][q] = len(text)
        cand_rows.append({"id": q, "response": text})
    for a in ANCHORS:
        rows = []
        for q in ids:
            if drop and drop.get(a) == q:
                continue
            text = f"ANC[{a}] " + "a" * rng.randrange(0, 120)
            lengths[a][q] = len(text)
            rows.append({"id": q, "response": text})
        write_jsonl(spec / f"{a}.jsonl", rows)
    files = "\n".join(f"    {a}: {{path: {a}.jsonl, rating: {r}}}" for a, r in ANCHORS.items())
    (spec / "benchmark.yaml").write_text(
        f"name: anchored_test\nextends: anchored_mini\ndata:\n  sha256: null\njudge:\n  verdict:\n    strong_weight: {strong_weight}\n"
        f"anchors:\n  files:\n{files}\n  length: {length}\n  rounds: 50\n")
    data = write_jsonl(tmp / "questions.jsonl", [{"id": q, "prompt": f"Q[{q}] please answer"} for q in ids])
    cand = write_jsonl(tmp / "cand.jsonl", cand_rows)
    return spec, data, cand, lengths


class Judge:
    """Random labels per (question, anchor, order, attempt); the last label sent per game is kept."""

    def __init__(self, hopeless: set[tuple[str, str, int]], delay: float = 0.0, garbage: float = 0.15) -> None:
        self.garbage = garbage
        self.sent: dict[tuple[str, str, int], str | None] = {}
        self.prompts: list[str] = []
        self.hopeless, self.delay, self.lock = hopeless, delay, threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        msgs = body["messages"]
        first = next(m["content"] for m in msgs if m["role"] == "user")
        qid = QID.search(first).group(1)  # type: ignore[union-attr]
        anchor = ANC.search(first).group(1)  # type: ignore[union-attr]
        game = 1 if first.index("ANC[") < first.index("CAND[") else 2  # game 1: A = the anchor
        attempt = sum(1 for m in msgs if m["role"] == "assistant")
        rng = random.Random(zlib.crc32(f"{qid}/{anchor}/{game}/{attempt}".encode()))
        if (qid, anchor, game) in self.hopeless or (attempt == 0 and rng.random() < self.garbage):
            label, text = None, rng.choice(GARBAGE)
        else:
            label = rng.choice(LABELS)
            text = f"Weighing both.\n\nMy final verdict is [[{label}]]."
        with self.lock:
            self.sent[(qid, anchor, game)] = label
            self.prompts.append(first)
        return Reply(text=text, delay=self.delay)


def judge_args(url: str, out: Path, spec: Path, data: Path, cand: Path, cache: Path) -> list[str]:
    return [f"benchmark={spec}", f"data.path={data}", "stage=score", f"answers={cand}", "judge=openai_compatible",
            "judge.model=openai/judge-x", f"judge.api_base={url}", "judge.api_key_env=FAKE_KEY", "progress=none",
            f"cache.dir={cache}", f"hydra.run.dir={out}"]


# -- the restatements ----------------------------------------------------------------------------------------

def candidate_side(label: str, game: int) -> tuple[str, int]:
    """(winner: test / ref / tie, extent 1 or 2) of a label, A being the anchor (ref) in game 1."""
    if label == "A=B":
        return "tie", 0
    a_wins = label in ("A>>B", "A>B")
    extent = 2 if ">>" in label else 1
    a_is_test = game == 2
    return ("test" if a_wins == a_is_test else "ref"), extent


def wildbench_reward(games: list[tuple[str, int, int, int]], k: int) -> float:
    """WildBench's reward x 100 over (label, game, test length, ref length) games, margin K."""
    counts = {"win_much": 0, "win": 0, "tie": 0, "lose": 0, "lose_much": 0}
    for label, game, test_len, ref_len in games:
        winner, extent = candidate_side(label, game)
        if winner == "test":
            counts["win_much" if extent == 2 else
                   ("tie" if k >= 0 and test_len > ref_len + k else "win")] += 1
        elif winner == "ref":
            counts["lose_much" if extent == 2 else
                   ("tie" if k >= 0 and ref_len > test_len + k else "lose")] += 1
        else:
            counts["tie"] += 1
    total = sum(counts.values())
    return 100 * (counts["win"] * 0.5 + counts["win_much"] - counts["lose"] * 0.5 - counts["lose_much"]) / total


def anchored_rating(games: list[tuple[float, float, float]]) -> float:
    """The candidate's Elo with the anchors fixed, by scipy's bounded minimiser of the negative log-likelihood."""
    from scipy.optimize import minimize_scalar

    def nll(r: float) -> float:
        out = 0.0
        for anchor, s, w in games:
            p = 1 / (1 + 10 ** ((anchor - r) / 400))
            out -= w * (s * math.log(p) + (1 - s) * math.log(1 - p))
        return out

    return float(minimize_scalar(nll, bracket=(0, 2000), method="brent", tol=1e-12).x)


def restated(judge: Judge, ids: list[str], lengths: dict[str, Any], k: int, strong_weight: int
             ) -> tuple[dict[str, float], float, float, set[str]]:
    """(reward per anchor, mixture, rating, failed questions) from what the judge sent."""
    failed = {q for (q, _, _), lab in judge.sent.items() if lab is None}
    per: dict[str, list[tuple[str, int, int, int]]] = {a: [] for a in ANCHORS}
    rating_games: list[tuple[float, float, float]] = []
    for (q, a, game), label in sorted(judge.sent.items()):
        if q in failed:
            continue
        assert label is not None
        per[a].append((label, game, lengths["cand"][q], lengths[a][q]))
        winner, extent = candidate_side(label, game)
        test_len, ref_len = lengths["cand"][q], lengths[a][q]
        discounted = extent == 1 and ((winner == "test" and test_len > ref_len + k) or
                                      (winner == "ref" and ref_len > test_len + k))
        s = 0.5 if winner == "tie" or discounted else (1.0 if winner == "test" else 0.0)
        rating_games.append((ANCHORS[a], s, float(strong_weight) if extent == 2 and not discounted else 1.0))
    rewards = {a: wildbench_reward(g, k) for a, g in per.items()}
    return rewards, sum(rewards.values()) / len(rewards), anchored_rating(rating_games), failed


def run_dir(out: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    return (json.loads((out / "summary.json").read_text()),
            {r["id"]: r for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())})


# -- tests -----------------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize(("seed", "strong_weight"), [(1, 1), (2, 3)])
def test_rewards_and_rating_equal_wildbench_and_the_fixed_anchor_fit(tmp_path: Path, env: dict[str, str],
                                                                     seed: int, strong_weight: int) -> None:
    rng = random.Random(seed)
    ids = [f"q{seed}x{i:02d}" for i in range(16)]
    spec, data, cand, lengths = setup(tmp_path, ids, rng, strong_weight=strong_weight)
    hopeless = {(q, rng.choice(list(ANCHORS)), rng.choice([1, 2])) for q in rng.sample(ids, 2)}
    judge = Judge(hopeless)
    with FakeServer(judge) as srv:
        res = run_cli(judge_args(srv.url, tmp_path / "run", spec, data, cand, tmp_path / "cache"), env)
    assert res.returncode == 0, res.stderr
    summary, recs = run_dir(tmp_path / "run")
    rewards, mixture, rating, failed = restated(judge, ids, lengths, 40, strong_weight)
    sec = summary["anchored"]
    assert {a: sec["anchors"][a]["reward"] for a in ANCHORS} == pytest.approx(rewards, abs=1e-9)
    assert sec["mixture_of_rewards"] == pytest.approx(mixture, abs=1e-9)
    assert summary["overall"] == pytest.approx(mixture, abs=1e-9)  # every anchor met equally often: the pooled mean
    assert sec["rating"]["value"] == pytest.approx(rating, abs=1e-4)
    assert sec["rating"]["low"] < sec["rating"]["value"] < sec["rating"]["high"]
    assert sum(r["discounted"] for r in sec["anchors"].values()) > 0  # the margin bit
    assert failed == {q for q, _, _ in hopeless}
    assert summary["counts"]["judge_errors"] == len(failed) and summary["counts"]["scored"] == len(ids) - len(failed)
    for q in failed:  # counted, one line, never scored on the other games
        assert recs[q]["score"] is None and "invalid verdict after 3 replies" in recs[q]["judge_error"]
        assert "\n" not in recs[q]["judge_error"] and recs[q]["judge_error"].startswith("anchor ")
    for q, r in recs.items():  # every game recorded with its anchor and the rule it was played under
        assert [(g["anchor"], g["order"]) for g in r["anchor_games"]] == [
            (a, o) for a in ANCHORS for o in ("baseline_first", "candidate_first")]
        assert all(g["length_rule"] == "margin:40" and g["candidate_chars"] == lengths["cand"][q]
                   for g in r["anchor_games"])


@pytest.mark.slow
@pytest.mark.parametrize(("length", "rule"), [("{rule: truncate, chars: 30}", "truncate:30"),
                                              ("{rule: truncate, chars: null}", "truncate:common")])
def test_truncation_cuts_what_the_judge_sees_and_is_recorded(tmp_path: Path, env: dict[str, str], length: str,
                                                            rule: str) -> None:
    rng = random.Random(7)
    ids = [f"t{i}" for i in range(5)]
    spec, data, cand, lengths = setup(tmp_path, ids, rng, length=length)
    judge = Judge(set())
    with FakeServer(judge) as srv:
        res = run_cli(judge_args(srv.url, tmp_path / "run", spec, data, cand, tmp_path / "cache"), env)
    assert res.returncode == 0, res.stderr
    _, recs = run_dir(tmp_path / "run")
    for q, r in recs.items():
        for g in r["anchor_games"]:
            c, a = lengths["cand"][q], lengths[g["anchor"]][q]
            limit = 30 if rule == "truncate:30" else min(c, a)
            assert g["length_rule"] == rule and g["truncated"] == (max(c, a) > limit)
            shown = [p for p in judge.prompts if f"Q[{q}]" in p and f"ANC[{g['anchor']}]" in p]
            body = re.search(r"CAND\[\w+\] (c*)", shown[0]).group(1)  # type: ignore[union-attr]
            assert len(f"CAND[{q}] ") + len(body) == min(c, limit)
            assert ("[... truncated]" in shown[0]) == g["truncated"]


@pytest.mark.slow
def test_an_anchor_without_an_answer_is_that_questions_counted_error(tmp_path: Path, env: dict[str, str]) -> None:
    ids = [f"m{i}" for i in range(4)]
    spec, data, cand, _ = setup(tmp_path, ids, random.Random(3), drop={"weak": "m2"})
    judge = Judge(set())
    with FakeServer(judge) as srv:
        res = run_cli(judge_args(srv.url, tmp_path / "run", spec, data, cand, tmp_path / "cache"), env)
    assert res.returncode == 0, res.stderr
    summary, recs = run_dir(tmp_path / "run")
    assert recs["m2"]["judge_error"] == "anchor weak: no answer to this question in weak.jsonl"
    assert recs["m2"]["score"] is None and summary["counts"]["judge_errors"] == 1
    assert not any("Q[m2]" in p for p in judge.prompts)  # nothing was asked for it
    assert summary["anchored"]["anchors"]["weak"]["games"] == 6


@pytest.mark.parametrize(("old", "new", "says"), [
    ("  length: {rule: margin, chars: 300}", "  length: {rule: margin}", "anchors.length.rule: margin needs chars"),
    ("  rounds: 200", "  rounds: 200\n  extra: 1", "anchors.extra"),
    ("    weak: {path: ../../data/anchored_mini_weak.jsonl", "    we ak: {path: ../../data/anchored_mini_weak.jsonl",
     "an anchor's name is letters, digits")])
def test_an_anchors_block_that_cannot_run_is_one_line(tmp_path: Path, old: str, new: str, says: str) -> None:
    from conftest import edited_spec
    from rubric_engine.errors import SpecError
    from rubric_engine.spec.load import load_spec

    bench = edited_spec(SPEC, tmp_path / "spec", old, new)
    text = (bench / "benchmark.yaml").read_text().replace("../../data/", str(REPO / "data") + "/")
    (bench / "benchmark.yaml").write_text(text)
    with pytest.raises(SpecError) as err:
        load_spec(bench)
    assert says in str(err.value) and "\n" not in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["missing", "changed"])
def test_a_missing_or_changed_anchor_file_stops_before_any_call(tmp_path: Path, env: dict[str, str],
                                                                fault: str) -> None:
    ids = ["f1", "f2"]
    spec, data, cand, _ = setup(tmp_path, ids, random.Random(4))
    if fault == "missing":
        (spec / "middle.jsonl").unlink()
    else:  # pinned, then edited
        yaml = (spec / "benchmark.yaml").read_text()
        (spec / "benchmark.yaml").write_text(yaml.replace("{path: middle.jsonl,", "{path: middle.jsonl, sha256: "
                                                          + "'" + "0" * 64 + "',"))
    with FakeServer(Judge(set())) as srv:
        res = run_cli(judge_args(srv.url, tmp_path / "run", spec, data, cand, tmp_path / "cache"), env)
        assert not srv.requests
    says = ("anchor middle: answers file not found" if fault == "missing"
            else "anchor middle: the file's sha256 is not the pinned anchors.files.middle.sha256")
    assert res.returncode != 0 and says in res.stderr, res.stderr
    assert [x for x in res.stderr.splitlines() if "error" in x] == [res.stderr.strip().splitlines()[-1]]


@pytest.mark.slow
def test_keyless_try_out_of_the_shipped_sample(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli(["benchmark=anchored_mini", "candidate=mock", "judge=mock", "progress=none",
                   f"hydra.run.dir={tmp_path / 'run'}"], env)
    assert res.returncode == 0, res.stderr
    summary, recs = run_dir(tmp_path / "run")
    assert summary["counts"]["scored"] == 6 and len(recs["a1"]["anchor_games"]) == 6
    sec = summary["anchored"]
    assert set(sec["anchors"]) == {"strong", "middle", "weak"} and sec["length_rule"] == "margin:300"
    assert sec["rating"]["fixed"] == ANCHORS and sec["rating"]["value"] is not None
    r = sec["rating"]  # the console says what summary.json holds: the rating and each anchor's reward
    assert (f"rating on the anchors' scale: {r['value']:.0f} (95% interval {r['low']:.0f}-{r['high']:.0f}; "
            f"anchors fixed at strong 1300, middle 1000, weak 700)") in res.stdout
    assert "length rule: margin:300" in res.stdout
    for name, row in sec["anchors"].items():
        assert f"against {name}: reward {row['reward']:+.1f} over {row['games']} games" in res.stdout


@pytest.mark.slow
def test_killed_anchored_run_resumes_without_asking_anything_twice(tmp_path: Path, env: dict[str, str]) -> None:
    rng = random.Random(11)
    ids = [f"k{i:02d}" for i in range(10)]
    spec, data, cand, _ = setup(tmp_path, ids, rng)
    judge = Judge(set(), delay=0.05, garbage=0)  # a refused reply is never cached: its game would be asked again
    run = tmp_path / "run"
    with FakeServer(judge) as srv:
        args = [*judge_args(srv.url, run, spec, data, cand, tmp_path / "cache"), "concurrency=1"]
        done = {r["id"] for r in kill_after_lines([EXE, *args], run / "samples.jsonl", 4, env)[1:]}
        assert 2 <= len(done) < 10, "the kill must land midway"
        first = [json.dumps(b["messages"]) for b in srv.requests]
        srv.reset()
        res = run_cli(args, env)
        assert res.returncode == 0, res.stderr
        second = [json.dumps(b["messages"]) for b in srv.requests]
    assert len(second) == len(set(second)) and len(set(first) & set(second)) <= 1  # at most the one in flight
    assert not any(f"Q[{q}]" in m for q in done for m in second)
    summary, recs = run_dir(run)
    assert summary["counts"]["scored"] == 10 and len(set(first) | set(second)) == 10 * 6


def test_rating_fit_and_outcomes_at_their_edges() -> None:
    from rubric_engine.scoring.anchored import fit_rating, outcome, shown

    # one anchor: the closed form R + 400 log10(p / (1 - p))
    games = [(1000.0, 1.0, 1.0)] * 3 + [(1000.0, 0.0, 1.0)] + [(1000.0, 0.5, 1.0)]
    p = 3.5 / 5
    assert fit_rating(games) == pytest.approx(1000 + 400 * math.log10(p / (1 - p)), abs=1e-7)
    assert fit_rating([(1000.0, 1.0, 1.0)] * 4) is None and fit_rating([]) is None  # no finite maximum
    # a large-margin win is never discounted; a plain win by the longer reply is, for either side
    assert outcome("B>>A", "baseline_first", 3, "margin", 10, 500, 5).reward == 1.0
    assert outcome("B>A", "baseline_first", 3, "margin", 10, 500, 5).discounted
    assert outcome("B>A", "candidate_first", 3, "margin", 10, 500, 5).reward == -0.5  # the shorter one won
    assert outcome("A>B", "candidate_first", 3, "margin", 10, 16, 5).reward == 0.0
    assert outcome("A>B", "candidate_first", 3, "margin", 11, 16, 5).reward == 0.5  # longer by exactly K: a win
    assert shown("truncate", None, "abcdef", "xy") == ("ab [... truncated]", "xy")
    assert shown("margin", 1, "abcdef", "xy") == ("abcdef", "xy")


@pytest.mark.slow
def test_rescore_counts_a_game_against_an_unknown_anchor_as_that_questions_error(tmp_path: Path,
                                                                               env: dict[str, str]) -> None:
    run = tmp_path / "run"
    res = run_cli(["benchmark=anchored_mini", "candidate=mock", "judge=mock", "progress=none", f"hydra.run.dir={run}"],
                  env)
    assert res.returncode == 0, res.stderr
    lines = (run / "samples.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec["anchor_games"][0]["anchor"] = "ghost"
    other = json.loads(lines[2])
    other["anchor_games"][1]["label"] = "A?B"
    lines[1], lines[2] = json.dumps(rec), json.dumps(other)
    (run / "samples.jsonl").write_text("\n".join(lines) + "\n")
    res = run_cli(["rescore", str(run), f"out={tmp_path / 'rs'}"], env)
    assert res.returncode == 0, res.stderr
    summary, recs = run_dir(tmp_path / "rs")
    assert recs[rec["id"]]["judge_error"] == ("a stored game against anchor 'ghost', which the spec does not declare "
                                              "(declared: strong, middle, weak)")
    assert recs[other["id"]]["judge_error"].startswith("a stored game against anchor strong cannot be scored: 'A?B' is not a verdict")
    assert recs[rec["id"]]["score"] is None and summary["counts"]["judge_errors"] == 2
    assert summary["counts"]["scored"] == 4 and summary["anchored"]["anchors"]["strong"]["games"] == 8


@pytest.mark.slow
def test_baseline_answers_on_the_command_line_replace_anchors_and_an_unknown_one_is_counted(
        tmp_path: Path, env: dict[str, str]) -> None:
    """`baseline.answers=FILE` under an anchored spec: rows {id, anchor, response}; the anchors it holds replace
    their declared files, the others keep theirs; a question it answers for an undeclared anchor is that
    question's counted error, one line; the file is part of the run's identity."""
    ids = [f"g{i}" for i in range(4)]
    spec, data, cand, _ = setup(tmp_path, ids, random.Random(6))
    given = write_jsonl(tmp_path / "given.jsonl", [{"id": q, "anchor": "weak", "response": f"ANC[weak] GIVEN {q}"}
                                                   for q in ids] + [{"id": "g3", "anchor": "ghost",
                                                                     "response": "ANC[ghost] x"}])
    judge = Judge(set())
    with FakeServer(judge) as srv:
        res = run_cli([*judge_args(srv.url, tmp_path / "run", spec, data, cand, tmp_path / "cache"),
                       f"baseline.answers={given}"], env)
    assert res.returncode == 0, res.stderr
    summary, recs = run_dir(tmp_path / "run")
    assert recs["g3"]["judge_error"] == (f"{given} answers this question for anchor 'ghost', which the spec does not "
                                         "declare (declared: strong, middle, weak)")
    assert summary["counts"]["judge_errors"] == 1 and summary["counts"]["scored"] == 3
    weak = [p for p in judge.prompts if "ANC[weak]" in p]
    assert len(weak) == 6 and all("GIVEN" in p for p in weak)  # the given file's replies, not the declared file's
    assert not any("Q[g3]" in p for p in judge.prompts)
    res = run_cli(["benchmark=anchored_mini", "candidate=mock", "judge=mock", "baseline=mock", "progress=none",
                   f"hydra.run.dir={tmp_path / 'refused'}"], env, cwd=tmp_path)  # the shipped spec, not a checkout's
    assert res.returncode == 2 and "baseline=" in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("old", "new", "says"), [
    ("    kind: anchored\n", "    kind: pairwise\n", "anchors: is only read by judge.verdict.kind: anchored"),
    ("\nanchors:\n", "\nanchors_gone:\n", "needs an anchors: block"),
    ("candidate:\n", "conversation: {mode: scripted}\ncandidate:\n", "use conversation.mode: single"),
    ("  overall: mean_over_questions", "  overall: macro_over_groups", "aggregation.overall: mean_over_questions")])
def test_the_kind_and_its_block_go_together_in_one_line(tmp_path: Path, old: str, new: str, says: str) -> None:
    from conftest import edited_spec
    from rubric_engine.errors import SpecError
    from rubric_engine.spec.load import load_spec

    bench = edited_spec(SPEC, tmp_path / "spec", old, new)
    text = (bench / "benchmark.yaml").read_text().replace("../../data/", str(REPO / "data") + "/")
    (bench / "benchmark.yaml").write_text(text.split("\nanchors_gone:\n")[0] + "\n")  # the block dropped
    with pytest.raises(SpecError) as err:
        load_spec(bench)
    assert says in str(err.value) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize("extra", [["judge=[mock,openai/gpt-4o-mini]"], ["judge=mock", "judge.repeats=3"],
                                   ["judge=mock", "candidate.samples=2"]])
def test_juries_repeats_and_samples_are_refused_in_one_line(tmp_path: Path, env: dict[str, str],
                                                             extra: list[str]) -> None:
    res = run_cli(["benchmark=anchored_mini", "candidate=mock", "dry_run=true", "progress=none",
                   *extra, f"hydra.run.dir={tmp_path / 'run'}"], env)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "judge.verdict.kind: anchored judges each game once with one judge" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
