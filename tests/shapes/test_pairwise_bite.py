"""Pairwise comparison, the numbers a reader takes from it and the rules docs/authoring.md states, pinned with
asymmetric fakes: a judge that always prefers position A (an order mistake shows as a win or a loss that
flips with the order), a judge that always prefers the candidate's reply wherever it stands, a baseline whose
reply holds a secret, and every documented bound of `judge.verdict` refused by validation.

In-process (bench/mutation.py can see these): the judge calls go through the real ModelClient and LiteLLM to
tests/fakeserver.py. The console-script checks of the same rules are at the end (marked slow).
Expected numbers are worked out by hand in the comments.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any, Callable

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.datatypes import Question, Turn
from rubric_engine.errors import ConfigError, SpecError
from rubric_engine.judge.pairwise import BaselineReply, Game, PairResult, baseline_reply, judge_pair, pair_fields
from rubric_engine.models.client import ModelClient
from rubric_engine.models.entries import ModelSpec
from rubric_engine.models.redact import register_secret
from rubric_engine.scoring.pairwise import game_scores, label_problem, question_value
from rubric_engine.spec.load import load_spec
from rubric_engine.stats.pairwise import outcome, pairwise_summary

from conftest import DATA
MINI_SPEC = DATA / "pairwise_mini_spec"
MINI = DATA / "pairwise_mini.jsonl"
PATTERNS = [r"\[\[([AB<>=]+)\]\]", r"\[([AB<>=]+)\]"]
LABELS = ["A>>B", "A>B", "A=B", "B>A", "B>>A"]
CAND, BASE = "CANDIDATE-REPLY", "BASELINE-REPLY"


@pytest.fixture(scope="module")
def spec() -> Any:
    return load_spec(MINI_SPEC)


def _variant(tmp_path: Path, extra: str) -> Path:
    d = tmp_path / "spec"
    d.mkdir(exist_ok=True)
    (d / "benchmark.yaml").write_text(f"name: pw_bite\nextends: {MINI_SPEC}\n{extra}")
    return d


def _question(qid: str = "q1") -> Question:
    return Question(id=qid, dialogue=(Turn("user", f"PROMPT[{qid}] compare these"),), criteria=())


def _candidate_is_a(body: dict[str, Any]) -> bool:
    """Whether the judge prompt shows the candidate's reply in position A (before the baseline's)."""
    text = next(m["content"] for m in body["messages"] if CAND in m["content"] and BASE in m["content"])
    return text.index(CAND) < text.index(BASE)


def _judge(srv: FakeServer, tmp_path: Path, spec: Any, base: BaselineReply, qid: str = "q1") -> PairResult:
    async def go() -> PairResult:
        client = ModelClient(ModelSpec(name="j", model="openai/j", api_base=srv.url, api_key_env="FAKE_KEY"),
                             cache=None, backoff_base=0.01, max_retries=1, role="judge")
        try:
            return await judge_pair(client, spec, _question(qid), CAND, base)
        finally:
            await client.aclose()
    return asyncio.run(go())


def _record(spec: Any, jr: PairResult) -> dict[str, Any]:
    return {"score": None, **pair_fields(spec, jr)}


def _run_judge(tmp_path: Path, spec: Any, reply: Callable[[dict[str, Any]], str]) -> tuple[PairResult, FakeServer]:
    with FakeServer(lambda body: Reply(text=reply(body))) as srv:
        jr = _judge(srv, tmp_path, spec, BaselineReply(BASE))
    return jr, srv


# -- the documented bounds of judge.verdict (authoring.md: "strong_weight below 1 ... refused") ---------------

@pytest.mark.parametrize("value", ["0.5", "0.999", "0", "-3"])
def test_strong_weight_below_one_is_refused_by_validation(tmp_path: Path, value: str) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(_variant(tmp_path, f"judge:\n  verdict:\n    strong_weight: {value}\n"))
    line = str(err.value)
    assert "\n" not in line and "judge.verdict.strong_weight" in line and value in line, line
    assert "benchmark.yaml:5" in line  # the file and the line of the key


@pytest.mark.parametrize("value", ["1", "1000"])
def test_strong_weight_at_its_bounds_is_accepted(tmp_path: Path, value: str) -> None:
    assert load_spec(_variant(tmp_path, f"judge:\n  verdict:\n    strong_weight: {value}\n")).judge.verdict.strong_weight \
        == float(value)


@pytest.mark.parametrize("value", ["1001", ".nan", ".inf"])
def test_strong_weight_above_the_bound_or_not_finite_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(SpecError, match=r"judge\.verdict\.strong_weight"):
        load_spec(_variant(tmp_path, f"judge:\n  verdict:\n    strong_weight: {value}\n"))


def test_label_problem_refuses_a_strong_weight_below_one_as_the_spec_check_does() -> None:
    """The cross-field check (spec/checks.py) restates the bound for stored specs read back without the schema."""
    assert label_problem(LABELS, PATTERNS, 1) is None and label_problem(LABELS, PATTERNS, 1000) is None
    assert label_problem(LABELS, PATTERNS, 0.99) == (
        "strong_weight", "0.99 is below 1 (a strong verdict counts at least as much as a plain one)")


def test_label_problem_words() -> None:
    assert label_problem(["A>B", "A>B"], PATTERNS, 3) == ("labels", "a label is declared twice")
    assert label_problem(LABELS, [r"\[\[[AB<>=]+\]\]"], 3) == (
        "pattern", r"'\\[\\[[AB<>=]+\\]\\]' has no group: group 1 must capture the label")
    key, text = label_problem(["A>B", "B>A"], [r"<<(\d)>>"], 3)  # type: ignore[misc]
    assert key == "labels" and text == ("'A>B' cannot be read by judge.verdict.pattern '<<(\\\\d)>>' "
                                        "(its group 1 never captures it)")


def test_labels_and_pattern_refused_by_validation(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(_variant(tmp_path, "judge:\n  verdict:\n    labels: ['A>B', 'A>B']\n"))
    assert "judge.verdict.labels" in str(err.value) and "declared twice" in str(err.value)


# -- game scores: hand-computed -----------------------------------------------------------------------------

def test_game_scores_by_order_hand_computed() -> None:
    # baseline_first: A = baseline, so A>>B is the candidate's strong loss; candidate_first: its strong win
    assert game_scores("A>>B", "baseline_first", 3) == game_scores("B>>A", "candidate_first", 3)
    assert (game_scores("A>>B", "baseline_first", 3).score, game_scores("A>>B", "baseline_first", 3).weight) == (0.0, 3)
    assert (game_scores("A>>B", "candidate_first", 2.5).score, game_scores("A>>B", "candidate_first", 2.5).weight) == (
        1.0, 2.5)
    assert (game_scores("B>A", "baseline_first", 3).score, game_scores("B>A", "baseline_first", 3).weight) == (1.0, 1.0)
    assert (game_scores("A=B", "baseline_first", 3).score, game_scores("A=B", "candidate_first", 3).score) == (0.5, 0.5)
    with pytest.raises(ValueError, match="unknown game order 'both'; known: baseline_first, candidate_first"):
        game_scores("A>B", "both", 3)


def test_question_value_hand_computed() -> None:
    # A>>B then A>B with weight 2: (0 x 2 + 1 x 1) / 3 = 1/3, weight 3
    assert question_value([("baseline_first", "A>>B"), ("candidate_first", "A>B")], 2) == (pytest.approx(1 / 3), 3)
    # one tie, one strong win in game 2: (0.5 x 1 + 1 x 4) / 5 = 0.9, weight 5
    assert question_value([("baseline_first", "A=B"), ("candidate_first", "A>>B")], 4) == (pytest.approx(0.9), 5)


def test_outcome_of_a_tie_is_a_tie() -> None:
    assert [outcome(s) for s in (0.0, 0.5, 1.0, 0.49, 0.51)] == ["loss", "tie", "win", "loss", "win"]


# -- asymmetric judges, through the real client -------------------------------------------------------------

def test_judge_that_always_prefers_position_a(tmp_path: Path, spec: Any, fake_key: str) -> None:
    """Position A wins every game: the candidate loses the game where the baseline is shown first and wins the
    other. Counts: 1 win, 0 ties, 1 loss; both orders judged and they disagree: inconsistency 1/1."""
    jr, srv = _run_judge(tmp_path, spec, lambda body: "A is better. [[A>B]]")
    assert jr.error is None and [(g.order, g.label) for g in jr.games] == [("baseline_first", "A>B"),
                                                                            ("candidate_first", "A>B")]
    # the first request shows the baseline first, the second the candidate first (gathered: any arrival order)
    assert sorted(_candidate_is_a(b) for b in srv.requests) == [False, True]
    rec = _record(spec, jr)
    assert (rec["score"], rec["weight"]) == (0.5, 2)  # (0 + 1) / 2
    summary = pairwise_summary([rec], spec)
    assert summary["games"] == {"wins": 1, "ties": 0, "losses": 1}
    assert summary["position"] == {"questions": 1, "inconsistent": 1, "inconsistency": 1.0}
    assert summary["labels"] == {"A>>B": 0, "A>B": 2, "A=B": 0, "B>A": 0, "B>>A": 0}


def test_judge_that_always_prefers_the_candidate_wherever_it_stands(tmp_path: Path, spec: Any, fake_key: str) -> None:
    """The raw labels differ by order (B>>A when the candidate is B, A>>B when it is A), yet both games are the
    candidate's wins: no position inconsistency, 2 wins, score 1, weight 3 + 3 = 6."""
    jr, _ = _run_judge(tmp_path, spec, lambda body: "[[A>>B]]" if _candidate_is_a(body) else "[[B>>A]]")
    rec = _record(spec, jr)
    assert [g["label"] for g in rec["games"]] == ["B>>A", "A>>B"]
    assert (rec["score"], rec["weight"]) == (1.0, 6.0)
    summary = pairwise_summary([rec], spec)
    assert summary["games"] == {"wins": 2, "ties": 0, "losses": 0}
    assert summary["position"] == {"questions": 1, "inconsistent": 0, "inconsistency": 0.0}


def test_a_strong_and_a_plain_win_agree(tmp_path: Path, spec: Any, fake_key: str) -> None:
    jr, _ = _run_judge(tmp_path, spec, lambda body: "[[A>B]]" if _candidate_is_a(body) else "[[B>>A]]")
    rec = _record(spec, jr)
    assert (rec["score"], rec["weight"]) == (1.0, 4.0)  # 3 + 1 counted wins
    assert pairwise_summary([rec], spec)["position"]["inconsistent"] == 0


def test_ties_are_counted_as_ties(tmp_path: Path, spec: Any, fake_key: str) -> None:
    jr, _ = _run_judge(tmp_path, spec, lambda body: "[[A=B]]")
    rec = _record(spec, jr)
    assert (rec["score"], rec["weight"]) == (0.5, 2)
    summary = pairwise_summary([rec], spec)
    assert summary["games"] == {"wins": 0, "ties": 2, "losses": 0}
    assert summary["position"]["inconsistent"] == 0


def test_counts_over_several_questions_hand_computed(spec: Any) -> None:
    """Four questions: [A>B, A>B] (loss, win: inconsistent), [B>A, A>B] (win, win), [A=B, B>A] (tie, loss:
    inconsistent), a judge error (not counted) and a question judged in one order only (not in `position`).
    Games: wins 3, ties 1, losses 3 (the one-order question's A>>B with the baseline first is a loss);
    position: 2 of 3."""
    def rec(*games: tuple[str, str], score: float | None = 0.5) -> dict[str, Any]:
        return {"score": score, "games": [{"order": o, "label": lab} for o, lab in games]}
    records = [rec(("baseline_first", "A>B"), ("candidate_first", "A>B")),
               rec(("baseline_first", "B>A"), ("candidate_first", "A>B")),
               rec(("baseline_first", "A=B"), ("candidate_first", "B>A")),
               rec(("baseline_first", "B>>A"), ("candidate_first", "A>B"), score=None),  # a judge error
               rec(("baseline_first", "A>>B"))]
    summary = pairwise_summary(records, spec)
    assert summary["games"] == {"wins": 3, "ties": 1, "losses": 3}
    assert summary["labels"] == {"A>>B": 1, "A>B": 3, "A=B": 1, "B>A": 2, "B>>A": 0}
    assert summary["position"] == {"questions": 3, "inconsistent": 2, "inconsistency": pytest.approx(2 / 3)}
    assert (summary["strong_weight"], summary["swap"]) == (3.0, True)
    empty = pairwise_summary([rec(), rec(("baseline_first", "A>B"), score=None)], spec)
    assert empty["games"] == {"wins": 0, "ties": 0, "losses": 0}
    assert empty["position"] == {"questions": 0, "inconsistent": 0, "inconsistency": None}


def test_one_failed_game_is_a_judge_error_and_nothing_is_scored(tmp_path: Path, spec: Any, fake_key: str) -> None:
    """The game with the candidate first never gets a label: the question has no score, its other game's label
    is kept but not counted, and the error names the game and its order."""
    jr, _ = _run_judge(tmp_path, spec, lambda body: "no verdict at all" if _candidate_is_a(body) else "[[A>B]]")
    assert jr.verdicts is None and jr.error is not None
    assert jr.error.startswith("game 2 (candidate_first): "), jr.error
    assert jr.attempts == 1 + (spec.judge.max_reasks + 1)
    rec = _record(spec, jr)
    assert rec["score"] is None and "weight" not in rec
    assert rec["games"][0] == {"order": "baseline_first", "label": "A>B", "reasoning": "[[A>B]]", "error": None}
    assert rec["games"][1]["label"] is None and rec["games"][1]["reasoning"] is None and rec["games"][1]["error"]
    assert pairwise_summary([rec], spec)["games"] == {"wins": 0, "ties": 0, "losses": 0}


def test_both_games_failing_names_the_first_and_counts_the_other(tmp_path: Path, spec: Any, fake_key: str) -> None:
    jr, _ = _run_judge(tmp_path, spec, lambda body: "nothing")
    assert jr.error is not None and jr.error.startswith("game 1 (baseline_first): ")
    assert jr.error.endswith(" (+1 more failed games)")


def test_usage_is_summed_over_both_games(tmp_path: Path, spec: Any, fake_key: str) -> None:
    with FakeServer(lambda body: Reply(text="[[A>B]]", usage=(7, 2) if _candidate_is_a(body) else (5, 1))) as srv:
        jr = _judge(srv, tmp_path, spec, BaselineReply(BASE))
    assert (jr.prompt_tokens, jr.completion_tokens, jr.attempts, jr.cache_hits) == (12, 3, 2, 0)
    assert jr.raw_replies == ["[[A>B]]", "[[A>B]]"]


def test_swap_false_judges_the_baseline_first_order_only(tmp_path: Path, fake_key: str) -> None:
    one = load_spec(_variant(tmp_path, "judge:\n  verdict:\n    swap: false\n"))
    jr, srv = _run_judge(tmp_path, one, lambda body: "[[A>B]]")
    assert len(srv.requests) == 1 and not _candidate_is_a(srv.requests[0])
    rec = _record(one, jr)
    assert [g["order"] for g in rec["games"]] == ["baseline_first"] and (rec["score"], rec["weight"]) == (0.0, 1)
    summary = pairwise_summary([rec], one)
    assert summary["swap"] is False and summary["position"]["questions"] == 0


def test_a_failed_baseline_is_the_judge_error_and_no_judge_call(tmp_path: Path, spec: Any, fake_key: str) -> None:
    with FakeServer(lambda body: Reply(text="[[A>B]]")) as srv:
        jr = _judge(srv, tmp_path, spec, BaselineReply(None, "no baseline answer for this question"))
        assert srv.requests == []
    assert jr.error == "baseline: no baseline answer for this question" and jr.games == []
    rec = _record(spec, jr)
    assert rec["score"] is None and rec["baseline_response"] is None and rec["games"] == []


# -- the baseline's reply is redacted like every other reply -------------------------------------------------

SECRET = "sk-bite-4f9c2a7e1d"


def test_the_baseline_reply_is_redacted_in_the_record(spec: Any) -> None:
    register_secret("hunter2-registered-key")
    text = f"Here is my reply. Authorization: Bearer abcdef123456 {SECRET} and hunter2-registered-key."
    jr = PairResult(verdicts=[], error=None, baseline=BaselineReply(text),
                    games=[Game("baseline_first", "A>B", f"judge says {SECRET} [[A>B]]", None),
                           Game("candidate_first", "B>A", None, f"bad {SECRET}")])
    rec = pair_fields(spec, jr)
    dumped = json.dumps(rec)
    assert SECRET not in dumped and "abcdef123456" not in dumped and "hunter2-registered-key" not in dumped
    assert rec["baseline_response"].startswith("Here is my reply.") and "***" in rec["baseline_response"]
    assert rec["games"][0]["reasoning"] == "judge says sk-*** [[A>B]]" and rec["games"][1]["error"] == "bad sk-***"


def test_a_baseline_model_reply_holding_the_key_is_redacted(tmp_path: Path, spec: Any, fake_key: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The baseline echoes the key it was sent (FAKE_KEY's value): the record holds *** in its place."""
    monkeypatch.setenv("FAKE_KEY", "echoed-key-9a8b7c6d")
    with FakeServer(lambda body: Reply(text="baseline: my key is echoed-key-9a8b7c6d, ok")) as srv:
        async def go() -> BaselineReply:
            client = ModelClient(ModelSpec(name="b", model="openai/b", api_base=srv.url, api_key_env="FAKE_KEY"),
                                 cache=None, backoff_base=0.01, max_retries=1, role="baseline")
            try:
                return await baseline_reply(client, None, spec, _question())
            finally:
                await client.aclose()
        base = asyncio.run(go())
    assert base.text is not None and base.error is None
    rec = pair_fields(spec, PairResult(verdicts=None, error="x", baseline=base))
    assert rec["baseline_response"] == "baseline: my key is ***, ok"


def test_baseline_from_answers(spec: Any) -> None:
    async def go(answers: dict[str, str] | None) -> BaselineReply:
        return await baseline_reply(None, answers, spec, _question("q1"))
    assert asyncio.run(go({"q1": "the answer"})) == BaselineReply("the answer", None)
    assert asyncio.run(go({"q2": "other"})) == BaselineReply(None, "no baseline answer for this question")
    assert asyncio.run(go(None)).error == "no baseline answer for this question"


# -- console script: the same rules on the real path ---------------------------------------------------------

def _cli_run(tmp_path: Path, env: dict[str, str], srv: FakeServer, *extra: str) -> tuple[dict[str, Any], list[dict]]:
    from test_cli import run_cli
    out = tmp_path / "run"
    res = run_cli(["benchmark=arena_hard", f"data.path={MINI}", "candidate=mock", "judge=openai_compatible",
                   "judge.model=openai/judge-x", f"judge.api_base={srv.url}", "judge.api_key_env=FAKE_KEY",
                   "progress=none", f"hydra.run.dir={out}", *extra], env)
    assert res.returncode == 0, res.stderr
    return (json.loads((out / "summary.json").read_text()),
            [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()])


@pytest.mark.slow
def test_cli_position_a_judge_counts_and_inconsistency(tmp_path: Path, env: dict[str, str]) -> None:
    """Six questions, a judge that always says [[A>B]]: 6 wins, 6 losses, every question inconsistent, and the
    win rate 50%."""
    with FakeServer(lambda body: Reply(text="[[A>B]]")) as srv:
        summary, samples = _cli_run(tmp_path, env, srv, f"baseline.answers={DATA / 'pairwise_mini_baseline.jsonl'}")
    p = summary["pairwise"]
    assert p["games"] == {"wins": 6, "ties": 0, "losses": 6}
    assert p["position"] == {"questions": 6, "inconsistent": 6, "inconsistency": 1.0}
    assert summary["overall"] == pytest.approx(50.0) and all(s["weight"] == 2 for s in samples)


@pytest.mark.slow
def test_cli_baseline_reply_with_a_secret_is_redacted_everywhere(tmp_path: Path, env: dict[str, str]) -> None:
    """A baseline model whose replies hold its own key and an sk- token: neither reaches samples.jsonl,
    answers.jsonl or the report."""
    key = "baseline-key-5e6f7a8b9c"
    env = dict(env, BASE_KEY=key)

    def reply(body: dict[str, Any]) -> Reply:
        if body["model"] == "base-x":
            return Reply(text=f"The baseline answers; its key is {key} and {SECRET}.")
        return Reply(text="[[B>A]]")
    with FakeServer(reply) as srv:
        summary, samples = _cli_run(tmp_path, env, srv, "baseline=openai/base-x", f"baseline.api_base={srv.url}",
                                    "baseline.api_key_env=BASE_KEY")
    assert all(s["baseline_response"] == "The baseline answers; its key is *** and sk-***." for s in samples)
    for f in (tmp_path / "run").rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert key.encode() not in data and SECRET.encode() not in data, f
    assert summary["pairwise"]["games"] == {"wins": 6, "ties": 0, "losses": 6}  # B>A: the candidate wins game 1


# -- run/pairwise.py: which baseline, refused combinations, what validate and the summary say ------------------

def _settings(tmp_path: Path, **kw: Any) -> Any:
    from rubric_engine.run.settings import RunSettings
    return RunSettings(benchmark="x", out_dir=tmp_path, **kw)


def test_plan_baseline_refusals_one_line_each(tmp_path: Path, spec: Any) -> None:
    from rubric_engine.run.pairwise import plan_baseline
    mock = ModelSpec(name="mock", model="mock/base")
    crit = load_spec("reference_qa")
    with pytest.raises(ConfigError, match=r"the benchmark reference_qa is not pairwise \(judge\.verdict\.kind: "
                                          r"criteria\); drop baseline= / baseline\.answers="):
        plan_baseline(_settings(tmp_path, baseline_answers="x.jsonl"), crit, panel=False, samples=1)
    with pytest.raises(ConfigError, match="not pairwise"):
        plan_baseline(_settings(tmp_path, baseline=mock), crit, panel=False, samples=1)
    assert plan_baseline(_settings(tmp_path), crit, panel=False, samples=1) is None
    with pytest.raises(ConfigError, match="either baseline=ENTRY or baseline.answers=FILE, not both"):
        plan_baseline(_settings(tmp_path, baseline=mock, baseline_answers="x.jsonl"), spec, panel=False, samples=1)
    for panel, samples in ((True, 1), (False, 2)):
        with pytest.raises(ConfigError, match=r"judges each game once with one judge; drop judge=\[\.\.\.\], "
                                              "judge.repeats and candidate.samples"):
            plan_baseline(_settings(tmp_path), spec, panel=panel, samples=samples)
    # stage=generate needs no baseline, even where a later judging stage would refuse the shape
    assert plan_baseline(_settings(tmp_path, stage="generate"), spec, panel=True, samples=2) is None
    assert plan_baseline(_settings(tmp_path, baseline=mock), spec, panel=False, samples=1) is mock
    assert plan_baseline(_settings(tmp_path, baseline_answers="x.jsonl"), spec, panel=False, samples=1) is None
    assert plan_baseline(_settings(tmp_path), spec, panel=False, samples=1) is None  # the spec's answers files
    none = load_spec(_variant(tmp_path, "baseline: null\n"))
    with pytest.raises(ConfigError, match=r"pw_bite: judge\.verdict\.kind: pairwise needs a baseline: pass "
                                          r"baseline=ENTRY"):
        plan_baseline(_settings(tmp_path), none, panel=False, samples=1)


def test_plan_baseline_from_the_spec_model(tmp_path: Path) -> None:
    from rubric_engine.run.pairwise import baseline_name, plan_baseline
    from rubric_engine.shapes.pairwise import Pairwise
    describe_pairwise = Pairwise().described
    declared = load_spec(_variant(tmp_path, "baseline:\n  answers: null\n  model: {name: gpt-x, model: openai/gpt-4o}\n"))
    got = plan_baseline(_settings(tmp_path, timeout=7.0), declared, panel=False, samples=1)
    assert got is not None and (got.name, got.model, got.role, got.timeout) == ("gpt-x", "openai/gpt-4o", "baseline", 7.0)
    assert baseline_name(_settings(tmp_path), declared, got) == {"name": "gpt-x", "model": "openai/gpt-4o"}
    line = describe_pairwise(declared)
    assert line.startswith("pairwise: labels A>>B, A>B, A=B, B>A, B>>A (strong ones count 3x), both orders; "
                           "baseline model gpt-x (openai/gpt-4o) calls "), line


def test_baseline_name_and_describe(tmp_path: Path, spec: Any) -> None:
    from rubric_engine.run.pairwise import baseline_name, pairwise_section
    from rubric_engine.shapes.pairwise import Pairwise
    describe_pairwise = Pairwise().described
    assert baseline_name(_settings(tmp_path, baseline_answers="runs/answers-of-x.jsonl"), spec, None) == {
        "name": "answers-of-x", "model": None, "answers": "runs/answers-of-x.jsonl"}
    assert baseline_name(_settings(tmp_path), spec, None) == {
        "name": "base-hard+base-creative", "model": None,
        "answers": {"hard_prompt": "base-hard", "creative_writing": "base-creative"}}
    assert describe_pairwise(spec) == (
        "pairwise: labels A>>B, A>B, A=B, B>A, B>>A (strong ones count 3x), both orders; baseline answers per "
        "subset: hard_prompt: base-hard (baseline_hard.jsonl), creative_writing: base-creative "
        "(baseline_creative.jsonl)")
    one = load_spec(_variant(tmp_path, "judge:\n  verdict:\n    swap: false\n    strong_weight: 2.5\nbaseline: null\n"))
    assert describe_pairwise(one) == ("pairwise: labels A>>B, A>B, A=B, B>A, B>>A (strong ones count 2.5x), baseline "
                                      "first only; no baseline declared: pass baseline=ENTRY or baseline.answers=FILE")
    section = pairwise_section(_settings(tmp_path), spec, None, [])
    assert section["baseline"]["name"] == "base-hard+base-creative" and section["games"]["wins"] == 0


def test_a_stored_label_the_spec_no_longer_declares_is_still_counted(spec: Any) -> None:
    """A record written under other labels (read back by rescore): its label gets its own count, from 0."""
    rec = {"score": 1.0, "games": [{"order": "baseline_first", "label": "A<B"}, {"order": "candidate_first",
                                                                                 "label": "A<B"}]}
    summary = pairwise_summary([rec], spec)
    assert summary["labels"]["A<B"] == 2 and summary["games"] == {"wins": 1, "ties": 0, "losses": 1}


# -- written against the survivors of `python bench/mutation.py run.pairwise` -------------------------------

def test_refusal_texts_word_for_word(tmp_path: Path, spec: Any) -> None:
    from rubric_engine.run.pairwise import plan_baseline
    nojudge = load_spec(DATA / "choice_mini")  # multiple choice: no judge at all
    with pytest.raises(ConfigError) as err:
        plan_baseline(_settings(tmp_path, baseline_answers="x.jsonl"), nojudge, panel=False, samples=1)
    assert str(err.value) == ("baseline=...: the benchmark choice_mini is not pairwise (judge.verdict.kind: none); "
                              "drop baseline= / baseline.answers=")
    with pytest.raises(ConfigError) as err:
        plan_baseline(_settings(tmp_path, baseline=ModelSpec(name="m", model="mock/m"), baseline_answers="x.jsonl"),
                      spec, panel=False, samples=1)
    assert str(err.value) == "give either baseline=ENTRY or baseline.answers=FILE, not both"
    with pytest.raises(ConfigError) as err:
        plan_baseline(_settings(tmp_path), load_spec(_variant(tmp_path, "baseline: null\n")), panel=False, samples=1)
    assert str(err.value) == ("pw_bite: judge.verdict.kind: pairwise needs a baseline: pass baseline=ENTRY (a "
                              "conf/candidate/ entry or a LiteLLM id) or baseline.answers=FILE, or declare baseline: "
                              "(model or answers) in the spec")


def test_baseline_answers_from_the_command_line_and_from_the_spec(tmp_path: Path, spec: Any) -> None:
    from rubric_engine.dataset.load import load_dataset
    from rubric_engine.run.pairwise import baseline_answers
    questions = load_dataset(spec, MINI).questions
    warnings: list[str] = []
    got = baseline_answers(_settings(tmp_path, baseline_answers=str(DATA / "pairwise_mini_baseline.jsonl")), spec,
                           None, True, questions, warnings)
    assert got is not None and set(got) == {q.id for q in questions}
    assert all(t.startswith("A baseline reply written") for t in got.values())
    own = baseline_answers(_settings(tmp_path), spec, None, True, questions, warnings)
    assert own is not None and [own[q.id].split()[0] for q in questions] == ["base-hard"] * 4 + ["base-creative"] * 2
    model = ModelSpec(name="m", model="mock/m")
    assert baseline_answers(_settings(tmp_path), spec, model, True, questions, warnings) is None  # a model instead
    assert baseline_answers(_settings(tmp_path), spec, None, False, questions, warnings) is None  # nothing judged
    crit = load_spec("reference_qa")
    assert baseline_answers(_settings(tmp_path), crit, None, True, questions, warnings) is None  # not pairwise


def test_command_line_answers_are_the_users_own_path(tmp_path: Path, spec: Any) -> None:
    """A file given on the command line is read wherever it is (a spec's own answers files stay inside the
    spec's directory): an absolute path outside every spec directory is read."""
    from rubric_engine.dataset.load import load_dataset
    from rubric_engine.run.pairwise import baseline_answers
    outside = tmp_path / "elsewhere" / "answers.jsonl"
    outside.parent.mkdir()
    outside.write_text((DATA / "pairwise_mini_baseline.jsonl").read_text())
    questions = load_dataset(spec, MINI).questions
    got = baseline_answers(_settings(tmp_path, baseline_answers=str(outside)), spec, None, True, questions, [])
    assert got is not None and len(got) == 6
    short = tmp_path / "short.jsonl"
    short.write_text("".join(x + "\n" for x in outside.read_text().splitlines()[1:]))
    from rubric_engine.errors import DataError
    with pytest.raises(DataError, match="pw-h1"):
        baseline_answers(_settings(tmp_path, baseline_answers=str(short)), spec, None, True, questions, [])


def test_baseline_name_of_a_spec_without_answers(tmp_path: Path) -> None:
    from rubric_engine.run.pairwise import baseline_name, pairwise_section
    none = load_spec(_variant(tmp_path, "baseline: null\n"))
    assert baseline_name(_settings(tmp_path), none, None) == {"name": "", "model": None, "answers": {}}
    model = ModelSpec(name="gpt-x", model="openai/gpt-x")
    assert pairwise_section(_settings(tmp_path), none, model, [])["baseline"] == {"name": "gpt-x",
                                                                                  "model": "openai/gpt-x"}


def test_describe_a_declared_model_with_its_endpoint_and_key(tmp_path: Path) -> None:
    from rubric_engine.shapes.pairwise import Pairwise
    describe_pairwise = Pairwise().described
    declared = load_spec(_variant(tmp_path, "baseline:\n  answers: null\n  model: {name: b, model: openai/b, "
                                            "api_base: 'http://127.0.0.1:9/v1', api_key_env: MY_BASE_KEY}\n"))
    assert describe_pairwise(declared).endswith(  # a key the spec chose for its own endpoint: a run refuses it
        "baseline model b (openai/b) calls endpoint http://127.0.0.1:9/v1, key from $MY_BASE_KEY (a run refuses "
        "this: the spec would send $MY_BASE_KEY to http://127.0.0.1:9/v1; allow it with trust_endpoints=true if you "
        "trust the spec)")


def test_describe_answers_without_a_model_name(tmp_path: Path) -> None:
    from rubric_engine.shapes.pairwise import Pairwise
    describe_pairwise = Pairwise().described
    one = load_spec(_variant(tmp_path, "baseline:\n  answers:\n    files:\n      hard_prompt: {model: null}\n"))
    assert describe_pairwise(one).endswith("; baseline answers per subset: hard_prompt: ? (baseline_hard.jsonl), "
                                           "creative_writing: base-creative (baseline_creative.jsonl)")


# -- written against the survivors of `python bench/mutation.py scoring.pairwise` ---------------------------

def test_label_words_and_spellings() -> None:
    from rubric_engine.scoring.pairwise import DEFAULT_PATTERN, label_value, patterns_of, read_label, written_form
    with pytest.raises(ValueError) as err:
        label_value("A>A")
    assert str(err.value) == "'A>A' is not a verdict of the form A>>B, A>B, A=B, B>A or B>>A"
    assert label_value("A==B") == (0.5, False) and label_value("B==A") == (0.5, False)
    assert patterns_of(None) == [DEFAULT_PATTERN] and patterns_of("x(y)") == ["x(y)"]
    assert patterns_of(("a(b)", "c(d)")) == ["a(b)", "c(d)"]
    assert written_form("A>B", PATTERNS) == "[[A>B]]" and written_form("A>B", [r"<<(\d)>>"]) is None
    with pytest.raises(ValueError) as err:
        read_label("[[A>B]] no, [[B>A]]", PATTERNS, LABELS)
    assert str(err.value) == "the reply gives several different verdicts (A>B, B>A); give exactly one"
    with pytest.raises(ValueError) as err:
        read_label("[[A<B]]", PATTERNS, LABELS)
    assert str(err.value) == "'A<B' is not one of the allowed verdicts: A>>B, A>B, A=B, B>A, B>>A"
    with pytest.raises(ValueError) as err:
        read_label("B is better", PATTERNS, LABELS)
    assert str(err.value) == "no verdict found; end the reply with exactly one of: [[A>>B]], [[A>B]], [[A=B]], " \
                             "[[B>A]], [[B>>A]]"
    with pytest.raises(ValueError) as err:
        read_label("nothing", [r"<<([AB<>=]+)>>"], ["A>B", "weird"])  # a label no wrap can produce: as declared
    assert str(err.value) == "no verdict found; end the reply with exactly one of: A>B, weird"


def test_blank_captures_and_tuples_are_no_label() -> None:
    from rubric_engine.scoring.pairwise import read_label
    # the first pattern captures only blanks: nothing found there, so the second pattern decides
    assert read_label("[[ ]] then [A>B]", [r"\[\[(\s*)\]\]", r"\[([AB<>=]+)\]"], LABELS) == "A>B"
    with pytest.raises(ValueError, match="no verdict found"):  # two groups: findall gives tuples, never a label
        read_label("[[A>B]]", [r"(\[\[)([AB<>=]+)\]\]"], LABELS)


def test_label_problem_names_the_bad_label() -> None:
    assert label_problem(["A much better", "A=B"], PATTERNS, 3) == (
        "labels", "'A much better' is not a verdict of the form A>>B, A>B, A=B, B>A or B>>A")


# -- written against the survivors of `python bench/mutation.py judge.pairwise` -----------------------------

def _baseline(srv: FakeServer, spec: Any, cache: Any = None, model: str = "openai/b") -> BaselineReply:
    async def go() -> BaselineReply:
        client = ModelClient(ModelSpec(name="b", model=model, api_base=srv.url, api_key_env="FAKE_KEY"),
                             cache=cache, backoff_base=0.01, max_retries=1, role="baseline")
        try:
            return await baseline_reply(client, None, spec, _question())
        finally:
            await client.aclose()
    return asyncio.run(go())


def test_baseline_reply_usage_and_its_cache(tmp_path: Path, spec: Any, fake_key: str) -> None:
    from rubric_engine.models.cache import ResultCache
    cache = ResultCache(tmp_path / "cache")
    with FakeServer(lambda body: Reply(text="the baseline's answer", usage=(21, 8))) as srv:
        first = _baseline(srv, spec, cache)
        again = _baseline(srv, spec, cache)
        assert len(srv.requests) == 1 and srv.requests[0]["messages"] == [
            {"role": "user", "content": "PROMPT[q1] compare these"}]  # the candidate's own messages
    assert first == BaselineReply("the baseline's answer", None, (21, 8), None, 0)
    assert (again.text, again.tokens, again.cached) == ("the baseline's answer", (21, 8), 1)


def test_a_priced_baseline_reply_keeps_its_cost(tmp_path: Path, spec: Any, fake_key: str) -> None:
    with FakeServer(lambda body: Reply(text="priced", usage=(1000, 100))) as srv:
        base = _baseline(srv, spec, model="openai/gpt-4o-mini")
    assert isinstance(base.cost, float) and base.cost > 0


def test_an_empty_baseline_reply_is_its_error(tmp_path: Path, spec: Any, fake_key: str) -> None:
    with FakeServer(lambda body: Reply(text="   ")) as srv:
        base = _baseline(srv, spec)
    assert base.text is None and base.error is not None
    assert base.error == "baseline: the baseline returned an empty reply (after 1 attempt)"


def test_a_failed_baseline_call_is_its_redacted_error(tmp_path: Path, spec: Any, fake_key: str) -> None:
    with FakeServer(lambda body: Reply(status=500, error=f"upstream broke, key {SECRET}")) as srv:
        base = _baseline(srv, spec)
    assert base.text is None and base.error is not None and SECRET not in base.error and "sk-***" in base.error
    with FakeServer(lambda body: Reply(status=400, error=f"bad request {SECRET}")) as srv:
        bad = _baseline(srv, spec)  # a fatal error that does not stop the run: this question's baseline only
    assert bad.text is None and bad.error is not None and SECRET not in bad.error and "400" in bad.error
    from rubric_engine.errors import FatalModelError
    with FakeServer(lambda body: Reply(status=401)) as srv:
        with pytest.raises(FatalModelError):
            _baseline(srv, spec)


def test_the_reask_names_the_problem_and_the_written_labels(tmp_path: Path, spec: Any, fake_key: str) -> None:
    jr, srv = _run_judge(tmp_path, spec, lambda body: "no idea" if len(body["messages"]) < 4 else "[[A=B]]")
    assert jr.error is None and jr.verdicts == [] and jr.attempts == 4
    reasks = [b["messages"][-1]["content"] for b in srv.requests if len(b["messages"]) >= 4]
    assert reasks == ["Your verdict could not be read: no verdict found; end the reply with exactly one of: [[A>>B]], "
                      "[[A>B]], [[A=B]], [[B>A]], [[B>>A]]. Reply again and end with exactly one of: [[A>>B]], "
                      "[[A>B]], [[A=B]], [[B>A]], [[B>>A]]."] * 2


def test_every_declared_pattern_reads_the_label(tmp_path: Path, spec: Any, fake_key: str) -> None:
    jr, _ = _run_judge(tmp_path, spec, lambda body: "single brackets: [B>A]")  # the spec's second pattern
    assert jr.error is None and [g.label for g in jr.games] == ["B>A", "B>A"]


def test_a_mock_judge_answers_a_declared_label(tmp_path: Path, spec: Any) -> None:
    async def go() -> PairResult:
        client = ModelClient(ModelSpec(name="mock-judge", model="mock/judge"), cache=None, role="judge")
        try:
            return await judge_pair(client, spec, _question(), CAND, BaselineReply(BASE))
        finally:
            await client.aclose()
    jr = asyncio.run(go())
    assert jr.error is None and all(g.label in LABELS for g in jr.games) and jr.attempts == 2


def test_a_failed_game_error_names_what_failed(tmp_path: Path, spec: Any, fake_key: str) -> None:
    jr, _ = _run_judge(tmp_path, spec, lambda body: "[[A>B]]" if not _candidate_is_a(body) else "no verdict")
    assert jr.error is not None and jr.error == f"game 2 (candidate_first): {jr.games[1].error}"
    assert jr.error.startswith("game 2 (candidate_first): invalid verdict after 3 replies"), jr.error
    assert jr.baseline is not None and jr.baseline.text == BASE


def test_judge_usage_cost_and_cache_hits_over_both_games(tmp_path: Path, spec: Any, fake_key: str) -> None:
    from rubric_engine.models.cache import ResultCache
    cache = ResultCache(tmp_path / "cache")

    def judge(srv: FakeServer, model: str) -> PairResult:
        async def go() -> PairResult:
            client = ModelClient(ModelSpec(name="j", model=model, api_base=srv.url, api_key_env="FAKE_KEY"),
                                 cache=cache, backoff_base=0.01, max_retries=1, role="judge")
            try:
                return await judge_pair(client, spec, _question(), CAND, BaselineReply(BASE))
            finally:
                await client.aclose()
        return asyncio.run(go())
    with FakeServer(lambda body: Reply(text="[[A>B]]", usage=(1000, 50))) as srv:
        priced = judge(srv, "openai/gpt-4o-mini")
        again = judge(srv, "openai/gpt-4o-mini")
        unpriced = judge(srv, "openai/j")
    assert isinstance(priced.cost, float) and priced.cost > 0 and priced.cache_hits == 0
    assert again.cache_hits == 2 and again.attempts == 2
    assert unpriced.cost is None  # an unknown price stays unknown, never a partial sum


def test_record_fields_of_a_scored_question(spec: Any) -> None:
    jr = PairResult(verdicts=[], error=None, baseline=BaselineReply("b"),
                    games=[Game("baseline_first", "B>A", "r1", None), Game("candidate_first", "A=B", "r2", None)])
    assert pair_fields(spec, jr) == {
        "baseline_response": "b",
        "games": [{"order": "baseline_first", "label": "B>A", "reasoning": "r1", "error": None},
                  {"order": "candidate_first", "label": "A=B", "reasoning": "r2", "error": None}],
        "abilities": {}, "score": 0.75, "weight": 2.0, "failed_rules": [], "catastrophic": False}
    clipped = pair_fields(spec, jr, clip=lambda text: text[:1])
    assert [g["reasoning"] for g in clipped["games"]] == ["r", "r"]
    none = pair_fields(spec, PairResult(verdicts=None, error="x", baseline=None))
    assert none == {"baseline_response": None, "games": []}


def test_baseline_usage_for_the_record() -> None:
    from rubric_engine.judge.grading import JudgeResult
    from rubric_engine.shapes.pairwise import Pairwise
    baseline_usage = Pairwise().extra_usage
    jr = PairResult(verdicts=[], error=None, baseline=BaselineReply("b", None, (12, 3), 0.5, 1))
    assert baseline_usage(jr) == {"tokens": {"prompt": 12, "completion": 3}, "cost": 0.5, "cache_hits": 1}
    assert baseline_usage(PairResult(verdicts=[], error=None)) is None
    assert baseline_usage(JudgeResult(verdicts=[], error=None)) is None and baseline_usage(None) is None


def test_a_failed_judge_call_is_named_as_the_judges(tmp_path: Path, spec: Any, fake_key: str) -> None:
    with FakeServer(lambda body: Reply(text="[[A>B]]") if not _candidate_is_a(body) else Reply(status=500)) as srv:
        jr = _judge(srv, tmp_path, spec, BaselineReply(BASE))
    assert jr.error is not None and jr.error.startswith("game 2 (candidate_first): judge call failed: "), jr.error
