"""Scores on a scale, the numbers a reader takes from them, pinned by hand: a question's score and weight from
its valid turns only (a failed turn is in neither), the pooled mean over every valid judgment, the per-turn
table's means and counts, and jurors that fail on one turn (that turn fails, the others keep their scores).

In-process (bench/mutation.py sees these): scoring/scalar.py and stats/turns.py directly, judge/scores.py
through the real ModelClient and LiteLLM to tests/fakeserver.py with the shipped mt_bench spec (scope
each_turn, a `[[rating]]` pattern). Hand-computed numbers are in the comments.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import statistics
from typing import Any, Callable

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.datatypes import Question
from rubric_engine.judge.scores import ScoreResult, TurnScore, combine_scores, judge_scores
from rubric_engine.models.client import ModelClient
from rubric_engine.models.entries import ModelSpec
from rubric_engine.scoring.aggregate import scored_from_samples
from rubric_engine.scoring.scalar import scalar_fields, valid_turn_scores
from rubric_engine.spec.load import load_spec
from rubric_engine.stats.scores import score_summary
from rubric_engine.stats.turns import score_sections, turn_pairs

from conftest import REPO


@pytest.fixture(scope="module")
def mt() -> Any:
    return load_spec(REPO / "benchmarks" / "mt_bench")


@pytest.fixture(scope="module")
def likert() -> Any:
    return load_spec(REPO / "tests" / "data" / "likert_mini")


def t(turn: int, score: float | None, error: str | None = None) -> dict[str, Any]:
    return {"turn": turn, "score": score, "reasoning": "r", "error": error}


def rec(qid: str, turns: list[dict[str, Any]], score: float | None, scenario: str = "") -> dict[str, Any]:
    """A minimal samples.jsonl record of a score verdict."""
    return {"id": qid, "subset": "", "scenario": scenario, "example_tags": [], "abilities": {}, "score": score,
            "catastrophic": False, "turns": turns}


# -- a question's score and weight: valid turns only ------------------------------------------------------

def test_a_failed_turn_counts_in_neither_the_score_nor_the_weight() -> None:
    # turns 8, failed, 6: score (8 + 6) / 2 = 7 over 2 valid judgments (never (8 + 0 + 6) / 3, never weight 3)
    assert scalar_fields([t(1, 8), t(2, None, "invalid"), t(3, 6)]) == {
        "abilities": {}, "score": 7.0, "weight": 2.0, "failed_rules": [], "catastrophic": False}
    assert valid_turn_scores([t(1, 8), t(2, None, "invalid"), t(3, 6)]) == [8.0, 6.0]


def test_a_turn_with_an_error_is_failed_even_if_it_holds_a_number() -> None:
    assert valid_turn_scores([t(1, 9, "judge b: invalid"), {"turn": 2, "score": 3}]) == [3.0]
    assert scalar_fields([t(1, 9, "x"), t(2, 3)]) == {"abilities": {}, "score": 3.0, "failed_rules": [],
                                                     "catastrophic": False}  # one valid: no weight written


def test_no_valid_turn_is_no_score() -> None:
    assert scalar_fields([t(1, None, "a"), t(2, None, "b")]) == {} and scalar_fields([]) == {}
    assert valid_turn_scores([{"turn": 1, "score": 0}]) == [0.0]  # a zero is a score, not a missing one
    assert scalar_fields([t(1, 0)])["score"] == 0.0


def _records() -> list[dict[str, Any]]:
    """q1: 8, failed, 6 -> 7, weight 2; q2: 3 -> 3, weight 1; q3: every turn failed -> judge error;
    q4: 10, 4 -> 7, weight 2."""
    rows = [("q1", "math", [t(1, 8), t(2, None, "bad"), t(3, 6)]), ("q2", "math", [t(1, 3)]),
            ("q3", "writing", [t(1, None, "bad"), t(2, None, "bad")]), ("q4", "writing", [t(1, 10), t(2, 4)])]
    out = []
    for qid, cat, turns in rows:
        rec: dict[str, Any] = {"id": qid, "subset": "", "scenario": cat, "turns": turns, "response": "r",
                               "judge_error": None, "candidate_error": None}
        fields = scalar_fields(turns)
        rec.update(fields or {"score": None, "judge_error": "every turn failed"})
        out.append(rec)
    return out


def test_the_pooled_mean_is_over_valid_judgments_only(mt: Any) -> None:
    """Overall: (8 + 6 + 3 + 10 + 4) / 5 = 6.2 (the valid judgments pooled; a mean of question means would be
    (7 + 3 + 7) / 3 = 5.667, counting failed turns as weight (7x3 + 3 + 7x2) / 6 = 6.333)."""
    summary = score_summary(mt, _records())
    assert summary["overall"] == pytest.approx(6.2)
    # per category: math (8 + 6 + 3) / 3 = 5.667; writing (10 + 4) / 2 = 7 (q3 has no score)
    assert summary["scenarios"] == pytest.approx({"math": 17 / 3, "writing": 7.0})
    assert summary["counts"]["scored"] == 3 and summary["counts"]["judge_errors"] == 1
    assert summary["counts"]["turn_errors"] == 3  # q1's turn 2, q3's turns 1 and 2


def test_per_turn_table_hand_computed(mt: Any) -> None:
    """Turn 1: q1 8, q2 3, q4 10 -> mean 7, 3 judgments, 1 error (q3); turn 2: q4 4 -> 4, 1 judgment, 2 errors
    (q1, q3); turn 3: q1 6 -> 6, 1 judgment."""
    turns = score_sections(mt, _records(), scored_from_samples(_records()), n=200, seed=3)["turns"]
    assert {k: (v["mean"], v["judgments"], v["errors"]) for k, v in turns.items()} == {
        "1": (pytest.approx(7.0), 3, 1), "2": (4.0, 1, 2), "3": (6.0, 1, 0)}
    assert list(turns) == ["1", "2", "3"]
    # one judgment: every resample is that value, so the interval is the point and its std 0
    assert (turns["2"]["lo"], turns["2"]["hi"], turns["2"]["std"]) == (4.0, 4.0, 0.0)
    assert turns["1"]["lo"] < 7.0 < turns["1"]["hi"]


def test_a_turn_with_only_errors_has_no_mean_and_no_interval(mt: Any) -> None:
    recs = [rec("q1", [t(1, 5), t(2, None, "bad")], 5.0), rec("q2", [t(1, 7), t(2, None, "x")], 7.0)]
    turns = score_sections(mt, recs, scored_from_samples(recs), n=50)["turns"]
    assert turns["2"] == {"mean": None, "judgments": 0, "errors": 2}
    assert turns["1"]["mean"] == 6.0 and turns["1"]["judgments"] == 2


def test_turn_interval_resamples_questions_as_an_independent_bootstrap(mt: Any) -> None:
    """80 questions, one turn each: the turn's bootstrap std is the textbook standard error sd / sqrt(n) and its
    95% interval the normal one, mean +- 1.96 se (within a quarter of its half-width: 2000 resamples)."""
    rng = random.Random(11)
    values = [rng.choice([1, 2, 3, 5, 8, 9, 10]) for _ in range(80)]
    recs = [rec(f"q{i}", [t(1, v)], float(v)) for i, v in enumerate(values)]
    row = score_sections(mt, recs, scored_from_samples(recs), n=2000, seed=0)["turns"]["1"]
    mean = sum(values) / len(values)
    se = statistics.pstdev(values) / len(values) ** 0.5
    assert row["mean"] == pytest.approx(mean)
    assert row["std"] == pytest.approx(se, rel=0.1)
    assert row["lo"] == pytest.approx(mean - 1.96 * se, abs=0.25 * se * 1.96)
    assert row["hi"] == pytest.approx(mean + 1.96 * se, abs=0.25 * se * 1.96)


def test_group_intervals_one_per_group(likert: Any) -> None:
    recs = [rec(f"q{i}", [t(1, s)], float(s), c) for i, (c, s) in enumerate([("a", 2), ("a", 4), ("b", 5)])]
    sections = score_sections(likert, recs, scored_from_samples(recs), n=100)
    groups = sections["group_intervals"]["scenarios"]
    assert set(groups) == {"a", "b"} and groups["a"]["questions"] == 2 and groups["b"]["questions"] == 1
    assert (groups["b"]["lo"], groups["b"]["hi"]) == (5.0, 5.0)
    assert 2.0 <= groups["a"]["lo"] <= groups["a"]["hi"] <= 4.0
    assert sections["scale"] == {"min": 1.0, "max": 5.0, "scope": "conversation"}
    assert sections["turn_errors"] == 0


def test_turn_pairs() -> None:
    assert turn_pairs([t(1, 4), t(2, 9, "bad"), {"turn": "3", "score": 2}]) == [[1, 4], [2, None], [3, 2]]
    assert turn_pairs([[1, 4], (2, None)]) == [[1, 4], [2, None]]


# -- jurors and repeats that fail on one turn ---------------------------------------------------------------

def _result(*turns: TurnScore) -> ScoreResult:
    return ScoreResult(verdicts=None, error=None, turns=list(turns), attempts=len(turns), prompt_tokens=10)


def test_a_juror_failing_on_one_turn_fails_that_turn_only() -> None:
    """Jurors a and b, 1 repeat: turn 1 a 8, b 6 -> 7; turn 2 a 5, b failed -> failed (never 5 alone)."""
    a = _result(TurnScore(1, 8.0, "a1"), TurnScore(2, 5.0, "a2"))
    b = _result(TurnScore(1, 6.0, "b1"), TurnScore(2, None, None, "invalid score after 3 replies"))
    out = combine_scores([a, b], ["a", "b"], 1)
    assert [(x.turn, x.score, x.error) for x in out.turns] == [
        (1, 7.0, None), (2, None, "judge b: invalid score after 3 replies")]
    assert out.turns[0].reasoning == "a1" and out.error is None
    assert out.score_votes == {"a": [[8.0, 5.0]], "b": [[6.0, None]]}
    assert (out.attempts, out.prompt_tokens) == (4, 20)
    fields = scalar_fields([x.record() for x in out.turns])
    assert fields["score"] == 7.0 and "weight" not in fields  # one valid judgment


def test_repeats_and_jurors_in_order() -> None:
    """2 jurors x 2 repeats: results are [a r1, a r2, b r1, b r2]; turn 1 mean (1 + 2 + 3 + 6) / 4 = 3."""
    rs = [_result(TurnScore(1, v)) for v in (1.0, 2.0, 3.0, 6.0)]
    out = combine_scores(rs, ["a", "b"], 2)
    assert out.score_votes == {"a": [[1.0], [2.0]], "b": [[3.0], [6.0]]} and out.turns[0].score == 3.0


def test_every_turn_failing_is_the_question_error() -> None:
    a = _result(TurnScore(1, None, None, "e1"), TurnScore(2, None, None, "e2"))
    b = _result(TurnScore(1, None, None, "f1"), TurnScore(2, 3.0))
    out = combine_scores([a, b], ["a", "b"], 1)
    assert out.error == "turn 1: judge a: e1 (+1 more failed calls) (+1 more turns failed)"
    single = combine_scores([_result(TurnScore(1, None, None, "e1"))], ["a"], 1)
    assert single.error == "judge a: e1"  # one judgment: its error alone, no turn number


# -- judge_scores through the real client: a judge that fails on turn 2 only -------------------------------

def _talk() -> list[dict[str, str]]:
    return [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "REPLY-ONE"},
            {"role": "user", "content": "u2"}, {"role": "assistant", "content": "REPLY-TWO"}]


def _graded(body: dict[str, Any]) -> int:
    """Which candidate turn a judge request grades: the last reply it shows."""
    text = json.dumps(body["messages"])
    return 2 if "REPLY-TWO" in text else 1


def _judge(spec: Any, handler: Callable[[dict[str, Any]], Reply]) -> tuple[ScoreResult, FakeServer]:
    q = Question(id="81", dialogue=(), criteria=(), turns=("u1", "u2"), references=())
    with FakeServer(handler) as srv:
        async def go() -> ScoreResult:
            client = ModelClient(ModelSpec(name="j", model="openai/j", api_base=srv.url, api_key_env="FAKE_KEY"),
                                 cache=None, backoff_base=0.01, max_retries=1, role="judge")
            try:
                return await judge_scores(client, spec, q, "REPLY-TWO", _talk())
            finally:
                await client.aclose()
        return asyncio.run(go()), srv


def test_judge_failing_on_turn_two_keeps_turn_one(mt: Any, fake_key: str) -> None:
    res, srv = _judge(mt, lambda b: Reply(text="Rating: [[7]]" if _graded(b) == 1 else "no rating, sorry",
                                          usage=(10, 2)))
    assert [(x.turn, x.score) for x in res.turns] == [(1, 7.0), (2, None)]
    assert res.turns[1].error is not None and res.error is None
    assert res.attempts == 1 + (mt.judge.max_reasks + 1) == len(srv.requests)
    assert (res.prompt_tokens, res.completion_tokens) == (10 * res.attempts, 2 * res.attempts)
    assert res.raw_replies == ["no rating, sorry"] * (mt.judge.max_reasks + 1)  # the failed turn's replies only
    fields = scalar_fields([x.record() for x in res.turns])
    assert fields["score"] == 7.0 and "weight" not in fields


def test_judge_scoring_both_turns(mt: Any, fake_key: str) -> None:
    res, _ = _judge(mt, lambda b: Reply(text=f"ok [[{9 if _graded(b) == 1 else 4}]]"))
    assert [(x.turn, x.score) for x in res.turns] == [(1, 9.0), (2, 4.0)] and res.raw_replies == []
    assert scalar_fields([x.record() for x in res.turns])["weight"] == 2.0


def test_judge_failing_on_every_turn(mt: Any, fake_key: str) -> None:
    res, _ = _judge(mt, lambda b: Reply(text="[[11]]"))  # off the 1-10 scale every time
    assert res.error is not None and res.error.startswith("turn 1: ") and res.error.endswith(" (+1 more turns failed)")
    assert re.search(r"outside the scale 1 to 10", res.turns[0].error or "")


def test_turn_scope_on_a_short_session_is_an_error_without_a_call(mt: Any, fake_key: str) -> None:
    spec = mt.model_copy(update={"judge": mt.judge.model_copy(update={"scope": "turn", "turn": 3})})
    res, srv = _judge(spec, lambda b: Reply(text="[[5]]"))
    assert srv.requests == [] and res.error == "judge.turn 3: the conversation has only 2 candidate turn(s)"
    assert [(x.turn, x.score, x.error) for x in res.turns] == [(3, None, res.error)]


# -- written against the survivors of `python bench/mutation.py stats.turns` --------------------------------

def _varied() -> list[dict[str, Any]]:
    rng = random.Random(2)
    return [dict(rec(f"q{i}", [t(1, v := rng.choice([1, 3, 4, 7, 9])), t(2, w := rng.choice([2, 5, 8]))],
                     (v + w) / 2, rng.choice(["a", "b"])), weight=2.0,
                 tags=[rng.choice(["tone:warm", "tone:cold"]), "other:x"]) for i in range(40)]


def _intervals(sections: dict[str, Any]) -> list[Any]:
    return [(k, v.get("lo"), v.get("hi")) for k, v in sections["turns"].items()] + [
        (name, g, v["lo"], v["hi"]) for name, table in sections["group_intervals"].items() for g, v in table.items()]


def test_every_interval_uses_the_seed_and_the_defaults_are_1000_and_0(likert: Any) -> None:
    recs = _varied()
    scored = scored_from_samples(recs)
    default = _intervals(score_sections(likert, recs, scored))
    assert default == _intervals(score_sections(likert, recs, scored, n=1000, seed=0))
    assert default != _intervals(score_sections(likert, recs, scored, n=999, seed=0))
    other = _intervals(score_sections(likert, recs, scored, n=1000, seed=4))
    assert all(a != b for a, b in zip(default, other)), (default, other)  # each table follows the seed


def test_turn_means_and_intervals_on_the_declared_scale(mt: Any) -> None:
    """scoring.scale 10: the turn-1 mean of 8, 3 and 10 is 7 x 10 = 70, its one-judgment turns 40 and 60."""
    scaled = mt.model_copy(update={"scoring": mt.scoring.model_copy(update={"scale": 10.0})})
    turns = score_sections(scaled, _records(), scored_from_samples(_records()), n=100, seed=0)["turns"]
    assert turns["1"]["mean"] == pytest.approx(70.0) and (turns["2"]["mean"], turns["3"]["mean"]) == (40.0, 60.0)
    assert (turns["2"]["lo"], turns["2"]["hi"]) == (40.0, 40.0) and 30.0 <= turns["1"]["lo"] < 70.0 < turns["1"]["hi"]


def test_no_scenario_field_no_scenario_table(likert: Any) -> None:
    fields = likert.data.fields.model_copy(update={"scenario": None})
    plain = likert.model_copy(update={"data": likert.data.model_copy(update={"fields": fields})})
    recs = _varied()
    assert set(score_sections(plain, recs, scored_from_samples(recs), n=20)["group_intervals"]) == {"tone"}
    assert set(score_sections(likert, recs, scored_from_samples(recs), n=20)["group_intervals"]) == {"scenarios", "tone"}


def test_breakdown_groups_follow_their_prefix(likert: Any) -> None:
    """likert_mini's `tone` breakdown reads example tags with the prefix tone:, so other:x is no group."""
    recs = _varied()
    tables = score_sections(likert, recs, scored_from_samples(recs), n=20)["group_intervals"]
    assert set(tables["tone"]) == {"tone:warm", "tone:cold"}
    assert sum(g["questions"] for g in tables["tone"].values()) == 40
    assert set(tables["scenarios"]) == {"a", "b"}


# -- written against the survivors of `python bench/mutation.py judge.scores` -------------------------------

def test_the_json_schema_sent_for_a_score() -> None:
    from rubric_engine.judge.scores import ScoreShape
    shape = ScoreShape(1, 5, "rating", "why")
    assert shape.response_format() == {"type": "json_schema", "json_schema": {"name": "score", "strict": True, "schema": {
        "type": "object", "additionalProperties": False, "required": ["why", "rating"],
        "properties": {"why": {"type": "string"}, "rating": {"type": "number"}}}}}
    assert ScoreShape(1, 10, pattern=r"\[\[(\d+)\]\]").response_format() is None


def test_the_reask_words_of_both_forms() -> None:
    from rubric_engine.judge.scores import ScoreShape
    assert ScoreShape(1, 5, "rating", "why").reask("bad") == (
        'Your previous reply could not be used: bad. Reply again with only one JSON object of the form '
        '{"why": "...", "rating": 5}: "rating" a number from 1 to 5. No other text.')
    assert ScoreShape(0.5, 10, pattern=r"\[\[(\d+)\]\]").reask("bad") == (
        "Your previous reply could not be used: bad. Reply again: your explanation, then exactly one rating, a "
        "number from 0.5 to 10, in the required format (e.g. [[10]]).")


def test_parse_words_and_bounds() -> None:
    from rubric_engine.judge.scores import ScoreShape
    from rubric_engine.judge.verdicts import VerdictError
    js = ScoreShape(1, 5, "rating", "why")
    assert js.parse('{"why": "ok", "rating": 5}').score == 5.0 and js.parse('{"rating": 1}').reasoning == ""
    for text, words in (('{"why": "ok", "rating": 5.5}', "the score 5.5 is outside the scale 1 to 5"),
                        ('{"why": "ok", "rating": true}', '"rating" must be a number (got True)'),
                        ('{"why": 3, "rating": 2}', '"why" must be a string (got 3)'),
                        ('{"why": "ok"}', 'the JSON must be one object with a "rating" number')):
        with pytest.raises(VerdictError) as err:
            js.parse(text)
        assert str(err.value) == words, str(err.value)
    pat = ScoreShape(1, 10, pattern=r"\[\[([^\]]*)\]\]")
    assert pat.parse("good [[7]] yes [[7]]").score == 7.0 and pat.parse("[[7]]").reasoning == "[[7]]"
    for text, words in (("no rating", r"the reply has no rating in the required format (pattern \[\[([^\]]*)\]\])"),
                        ("[[seven]]", "the rating 'seven' is not a number"),
                        ("[[3]] or [[4]]", "the reply gives 2 different ratings (3, 4); give exactly one"),
                        ("[[nan]]", "the rating 'nan' is not a number")):
        with pytest.raises(VerdictError) as err:
            pat.parse(text)
        assert str(err.value) == words, str(err.value)


def test_the_score_answer_description_and_the_mock_that_reads_it() -> None:
    """A score request says what a valid answer is (models/request.Number); the mock answers from that alone."""
    from rubric_engine.judge.scores import ScoreShape
    from rubric_engine.models.mock import mock_reply
    from rubric_engine.models.request import Request
    js = ScoreShape(1, 3, "rating", "why").answer()
    assert (js.values, js.field, js.reasoning) == ((1, 2, 3), "rating", "why")
    assert ScoreShape(0.2, 0.8, "s", "r").answer().values == (0.2,)  # no whole number: the low end
    asked = [Request([{"role": "user", "content": f"q{i}"}], answer=js) for i in range(30)]
    data = [json.loads(mock_reply("mock/j", r)) for r in asked]
    assert all(list(d) == ["why", "rating"] for d in data) and {d["rating"] for d in data} == {1, 2, 3}
    pat = ScoreShape(1, 3, pattern=r"\[\[(\d+)\]\]")
    assert pat.answer().field is None
    replies = {mock_reply("mock/j", Request([{"role": "user", "content": f"q{i}"}], answer=pat.answer()))
               for i in range(30)}
    assert sorted(pat.parse(r).score for r in replies) == [1.0, 2.0, 3.0]
    assert all(re.search(r"\[\[[123]\]\]$", r) for r in replies)


def test_turn_score_record() -> None:
    assert TurnScore(2, 4.5, "why").record() == {"turn": 2, "score": 4.5, "reasoning": "why", "error": None}
    assert TurnScore(1, None, None, "bad").record() == {"turn": 1, "score": None, "reasoning": None, "error": "bad"}


def test_turn_units_of_the_turn_scope_and_of_a_single_reply(mt: Any) -> None:
    from rubric_engine.judge.scores import turn_units
    q = Question(id="1", dialogue=(), criteria=(), references=("r1", "r2"), turns=("u1", "u2"), reference="whole")
    for k, reply, shown in ((1, "REPLY-ONE", 2), (2, "REPLY-TWO", 4)):
        spec = mt.model_copy(update={"judge": mt.judge.model_copy(update={"scope": "turn", "turn": k})})
        assert [(u[0], u[1], len(u[2]), u[3]) for u in turn_units(spec, q, "REPLY-TWO", _talk())] == [
            (k, reply, shown, {"turn": k, "references": ["r1", "r2"], "reference": f"r{k}"})]
    whole = mt.model_copy(update={"judge": mt.judge.model_copy(update={"scope": "conversation"})})
    assert turn_units(whole, q, "just one", None) == [(1, "just one", [], {"turn": 1, "references": ["r1", "r2"]})]
    last = mt.model_copy(update={"judge": mt.judge.model_copy(update={"scope": "last_turn"})})
    three = _talk() + [{"role": "user", "content": "u3"}, {"role": "assistant", "content": "a3"}]
    assert turn_units(last, q, "a3", three)[0][3] == {"turn": 3, "references": ["r1", "r2"], "reference": "whole"}


def test_a_json_score_judge_through_the_real_client(likert: Any, fake_key: str) -> None:
    res, srv = _judge(likert, lambda b: Reply(text=json.dumps({"why": "fine", "rating": 4})))
    assert [(x.turn, x.score, x.reasoning) for x in res.turns] == [(2, 4.0, "fine")]
    fmt = srv.requests[0]["response_format"]
    assert fmt["json_schema"]["schema"]["required"] == ["why", "rating"]


def test_a_pattern_judgment_keeps_the_whole_reply_as_reasoning(mt: Any, fake_key: str) -> None:
    res, _ = _judge(mt, lambda b: Reply(text=f"fine work [[{8 if _graded(b) == 1 else 6}]]"))
    assert [x.reasoning for x in res.turns] == ["fine work [[8]]", "fine work [[6]]"]
    bad, _ = _judge(mt, lambda b: Reply(text="no") if _graded(b) == 2 else Reply(status=500))
    assert bad.turns[0].error is not None and bad.turns[0].error.startswith("judge call failed: "), bad.turns[0].error
    assert bad.turns[1].error is not None and bad.turns[1].error.startswith("invalid score after 3 replies"), \
        bad.turns[1].error
