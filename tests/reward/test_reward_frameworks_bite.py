"""The three faces of a reward (reward/frameworks.py; docs/rewards.md), in-process against the fake judge.

Each reward here is a hand computation (tests/rewardjudge.py: the reply says which items the judge finds met;
mq01aa's score is the share of its 5 abilities passed). Pinned: TRL's sync and async functions (one float or
None per completion, the function's name, the columns it reads and ignores, the logging callbacks), verl's
dicts (a failed judgment is `failure_score` flagged `judge_failed` = 1, never a silent number; an unscored
question flagged `unscored`), OpenRLHF's answer, the counts per call and in total, the counts file, each
refusal word for word. tests/reward/test_reward.py checks the same faces against a console-script run's scores.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer
from rewardjudge import judge_reply, judge_spec, reward_settings, variant_spec
from rubric_engine.errors import ConfigError
from rubric_engine.reward.frameworks import Reward, rollout_logs
from rubric_engine.reward.scorer import RolloutScore

Q = "mq01aa"


@pytest.fixture(scope="module")
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        server.handler = judge_reply
        yield server


@pytest.fixture()
def reward(srv: FakeServer, tmp_path: Path, fake_key: str) -> Iterator[Reward]:
    with Reward(reward_settings(srv.url, tmp_path)) as r:
        yield r


# -- construction ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [True, "0", float("nan"), float("inf"), -float("inf"), None])
def test_failure_score_must_be_a_finite_number(srv: FakeServer, tmp_path: Path, fake_key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as e:
        Reward(reward_settings(srv.url, tmp_path), failure_score=value)
    assert str(e.value) == (f"failure_score={value!r} is not valid; give a finite number (verl and OpenRLHF need a "
                            "float for a failed judgment; it is flagged judge_failed=1)")


def test_names_and_defaults(reward: Reward) -> None:
    assert reward.__name__ == "rubric_heartbench" == reward.async_reward.__name__ == reward.async_reward.__qualname__
    assert reward.id_column == "question_id"  # the spec's id field
    assert reward.failure_score == 0.0 and type(reward.failure_score) is float
    assert reward.counts_path is None and reward.last_counts is None and reward.last_logs == {}
    assert reward.totals.as_dict() == {**reward.totals.as_dict(), "rollouts": 0, "calls": 0}


def test_the_name_of_a_spec_directory(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    spec = variant_spec(tmp_path / "-my bench.v2 X-")
    settings = reward_settings(srv.url, tmp_path, benchmark=str(spec), data_path=str(spec / "data.jsonl"),
                               trust_code=True)
    with Reward(settings, id_column="qid", failure_score=-1) as r:
        assert r.__name__ == "rubric_my_bench_v2_X" and r.id_column == "qid"
        assert r.failure_score == -1.0 and type(r.failure_score) is float


# -- TRL -----------------------------------------------------------------------------------------------------

def test_trl_sync_rewards_hand_computed(reward: Reward) -> None:
    got = reward(prompts=["p"] * 5, completions=["MET=1,2", [{"role": "assistant", "content": "MET=1,2,3,4"}],
                                                   "MET=6", "FAIL-ME", "MET=5"],
                 completion_ids=[[1]] * 5, trainer_state=object(), question_id=[Q] * 5)
    assert got == [pytest.approx(0.6), 1.0, 0.0, None, 0.0]  # 3/5, 5/5, the rule's zero, a failure, 0/5
    counts = reward.last_counts
    assert counts is not None
    assert (counts.rollouts, counts.judged, counts.calls, counts.failures, counts.unscored) == (5, 5, 5, 1, 0)
    assert reward.last_logs["judge_error"][3].startswith("judge call failed: openai/judge [HTTP 500]")


def test_trl_async_on_another_loop(reward: Reward) -> None:
    got = asyncio.run(reward.async_reward(prompts=["p", "p"], completions=["MET=1", "MET=1,2,3"],
                                          question_id=[Q, Q], trainer_state=None))
    assert got == [pytest.approx(0.4), pytest.approx(0.8)]
    assert reward.last_counts is not None and reward.last_counts.rollouts == 2 and reward.totals.rollouts == 2


@pytest.mark.parametrize("completions", [None, "MET=1", b"MET=1"])
def test_trl_completions_must_be_a_list(reward: Reward, completions: Any) -> None:
    with pytest.raises(ConfigError) as e:
        reward(completions=completions, question_id=[Q])
    assert str(e.value) == "completions= must be a list (one completion per rollout)"
    with pytest.raises(ConfigError) as e:
        asyncio.run(reward.async_reward(completions=completions, question_id=[Q]))
    assert str(e.value) == "completions= must be a list (one completion per rollout)"


def test_trl_a_bad_completion_is_named_by_position(reward: Reward) -> None:
    with pytest.raises(ConfigError) as e:
        reward(completions=["MET=1", 5], question_id=[Q, Q])
    assert str(e.value) == "completions[1]: a completion is a string or a list of chat messages, not int"


def test_trl_reads_only_dataset_columns(reward: Reward) -> None:
    with pytest.raises(ConfigError) as e:
        reward(prompts=["p"], completions=["MET=1"], completion_ids=[[1]], trainer_state=None, log_extra=print,
               log_metric=print, qid=[Q])
    assert "(columns given: qid)" in str(e.value)


def test_trl_logging_callbacks_get_the_extra_logs_and_the_counts(reward: Reward) -> None:
    extra: list[tuple[str, Any]] = []
    metric: list[tuple[str, Any]] = []
    got = reward(completions=["MET=1,2", "MET=1,2", "FAIL-ME"], question_id=[Q] * 3,
                 log_extra=lambda k, v: extra.append((k, v)), log_metric=lambda k, v: metric.append((k, v)))
    assert got == [pytest.approx(0.6), pytest.approx(0.6), None]
    assert [k for k, _ in extra] == ["rubric_heartbench/question_score", "rubric_heartbench/judge_error",
                                     "rubric_heartbench/verdicts"]
    assert extra[0][1] == [pytest.approx(0.6), pytest.approx(0.6), None]
    assert extra[1][1][:2] == [None, None] and "HTTP 500" in extra[1][1][2]
    assert json.loads(extra[2][1][0])[0] == {"index": 1, "met": True, "reasoning": "理由 1"}
    assert metric == [("rubric_heartbench/calls", 2.0), ("rubric_heartbench/cache_hits", 0.0),
                      ("rubric_heartbench/failures", 1.0), ("rubric_heartbench/copies", 1.0)]
    assert all(type(v) is float for _, v in metric)


def test_trl_callbacks_that_are_not_callable_are_dataset_columns(reward: Reward) -> None:
    assert reward(completions=["MET=1"], question_id=[Q], log_extra=[1], log_metric=[2]) == [pytest.approx(0.4)]


# -- verl ----------------------------------------------------------------------------------------------------

def test_verl_compute_score_one_rollout(reward: Reward) -> None:
    got = reward.compute_score(data_source="rubric", solution_str="MET=1,2,3", ground_truth=Q,
                               extra_info={"index": 0})
    assert got == {"score": pytest.approx(0.8), "judge_failed": 0.0, "unscored": 0.0}
    assert reward.compute_score("rubric", "MET=1", None, {"question_id": Q}) == {
        "score": pytest.approx(0.4), "judge_failed": 0.0, "unscored": 0.0}


def test_verl_batch_failures_are_failure_score_flagged(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    with Reward(reward_settings(srv.url, tmp_path), failure_score=-0.5) as r:
        got = r.compute_score_batch(data_sources=["x"] * 4, solution_strs=["MET=4", "FAIL-ME", "GARBLE-ME", "MET=6"],
                                    ground_truths=[Q, Q, None, Q], extra_infos=[None, None, {"question_id": Q}, {}])
        assert got == [{"score": pytest.approx(0.4), "judge_failed": 0.0, "unscored": 0.0},
                       {"score": -0.5, "judge_failed": 1.0, "unscored": 0.0},
                       {"score": -0.5, "judge_failed": 1.0, "unscored": 0.0},
                       {"score": 0.0, "judge_failed": 0.0, "unscored": 0.0}]
        assert r.last_counts is not None and r.last_counts.failures == 2
        assert r.last_logs["reward"] == [pytest.approx(0.4), None, None, 0.0]  # the logs keep the None


def test_verl_an_unscored_question_is_flagged_not_failed(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    spec = variant_spec(tmp_path / "v")
    settings = reward_settings(srv.url, tmp_path, benchmark=str(spec), data_path=str(spec / "data.jsonl"),
                               trust_code=True)
    with Reward(settings, failure_score=0.25) as r:
        got = r.compute_score_batch(solution_strs=["MET=1", "MET=1,2", "MET=5"], ground_truths=["neg", Q, Q])
        assert got == [{"score": 0.25, "judge_failed": 0.0, "unscored": 1.0},
                       {"score": 1.0, "judge_failed": 0.0, "unscored": 0.0},  # 1.2 clipped
                       {"score": 0.0, "judge_failed": 0.0, "unscored": 0.0}]  # -0.6 clipped
        assert r.last_logs["question_score"] == [None, pytest.approx(1.2), pytest.approx(-0.6)]
        assert r.last_counts is not None and (r.last_counts.unscored, r.last_counts.failures) == (1, 0)


@pytest.mark.parametrize("solutions", [None, "MET=1", b"MET=1"])
def test_verl_solution_strs_must_be_a_list(reward: Reward, solutions: Any) -> None:
    with pytest.raises(ConfigError) as e:
        reward.compute_score_batch(solution_strs=solutions, ground_truths=[Q])
    assert str(e.value) == "solution_strs= must be a list (one decoded response per rollout)"


@pytest.mark.parametrize(("truths", "extras"), [([Q], [None, None]), ([Q, Q, Q], None), (None, [{}])])
def test_verl_lists_of_another_length_are_refused(reward: Reward, truths: Any, extras: Any) -> None:
    with pytest.raises(ConfigError) as e:
        reward.compute_score_batch(solution_strs=["a", "b"], ground_truths=truths, extra_infos=extras)
    assert str(e.value) == "ground_truths and extra_infos must hold 2 values, one per solution_str"


def test_verl_without_any_id_is_refused(reward: Reward) -> None:
    with pytest.raises(ConfigError) as e:
        reward.compute_score_batch(solution_strs=["a"])
    assert "ground_truth (the question id, or put it in extra_info)" in str(e.value)
    with pytest.raises(ConfigError) as e:
        reward.compute_score_batch(solution_strs=["a", 7], ground_truths=[Q, Q])
    assert str(e.value) == "solution_strs[1]: a completion is a string or a list of chat messages, not int"


# -- OpenRLHF ------------------------------------------------------------------------------------------------

def test_openrlhf_answer_hand_computed(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    with Reward(reward_settings(srv.url, tmp_path), failure_score=-1.0) as r:
        body = {"query": ["<p>MET=1,2", "<p>MET=1,2", "<q>FAIL-ME", "<p>MET=6"], "prompts": ["<p>", "<p>", "<q>", "<p>"],
                "labels": [Q, Q, Q, Q]}
        got = r.openrlhf(body)
    assert got["rewards"] == got["scores"] == [pytest.approx(0.6), pytest.approx(0.6), -1.0, 0.0]
    assert got["extra_logs"] == {"judge_failed": [0.0, 0.0, 1.0, 0.0], "unscored": [0.0, 0.0, 0.0, 0.0],
                                 "duplicate": [0.0, 1.0, 0.0, 0.0], "catastrophic": [0.0, 0.0, 0.0, 1.0]}
    assert all(type(x) is float for v in got["extra_logs"].values() for x in v)
    details = got["details"]
    assert [d["qid"] for d in details] == [Q] * 4 and details[3]["failed_rules"] == "role_confusion"
    assert details[2]["reward"] is None and "HTTP 500" in details[2]["judge_error"]
    assert details[1]["duplicate"] is True and details[0]["question_score"] == pytest.approx(0.6)
    assert set(details[0]) == {"qid", "reward", "question_score", "judge_error", "failed_rules", "duplicate",
                               "verdicts", "shadow_reward"}
    counts = got["counts"]
    assert (counts["rollouts"], counts["judged"], counts["copies"], counts["calls"], counts["failures"]) == (4, 3, 1, 3, 1)
    json.dumps(got)  # the server sends it as it is


def test_openrlhf_unscored_flag(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    spec = variant_spec(tmp_path / "v")
    settings = reward_settings(srv.url, tmp_path, benchmark=str(spec), data_path=str(spec / "data.jsonl"),
                               trust_code=True)
    with Reward(settings, failure_score=0.5) as r:
        got = r.openrlhf({"query": ["MET=1", "MET=1,2"], "labels": ["neg", Q]})
    assert got["rewards"] == [0.5, 1.0]
    assert got["extra_logs"]["unscored"] == [1.0, 0.0] and got["extra_logs"]["judge_failed"] == [0.0, 0.0]


def test_openrlhf_refusals(reward: Reward) -> None:
    with pytest.raises(ConfigError) as e:
        reward.openrlhf({"query": ["x"], "labels": []})
    assert str(e.value) == "'labels' must be a list of 1 question ids (OpenRLHF's --label_key column, e.g. question_id)"
    with pytest.raises(ConfigError, match="'zzz' is not in the benchmark's data"):
        reward.openrlhf({"query": ["x"], "labels": ["zzz"]})


# -- plain Python, counts and logs ---------------------------------------------------------------------------

def test_score_gives_typed_outcomes(reward: Reward) -> None:
    got = reward.score([Q, Q], ["MET=2", [{"role": "assistant", "content": "MET=2,3"}]])
    assert [type(r) for r in got] == [RolloutScore, RolloutScore]
    assert [r.reward for r in got] == [pytest.approx(0.4), pytest.approx(0.6)] and got[0].qid == Q
    assert reward.last_counts is not None and reward.last_counts.rollouts == 2
    assert reward.last_logs["qid"] == [Q, Q]


def test_counts_per_call_in_total_and_in_the_counts_file(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    path = tmp_path / "counts.jsonl"
    with Reward(reward_settings(srv.url, tmp_path), counts_path=str(path)) as r:
        assert r.counts_path == path
        r(completions=["MET=1", "MET=1", "FAIL-ME"], question_id=[Q] * 3)
        first = r.last_counts
        r.compute_score_batch(solution_strs=["MET=2", "GARBLE-ME"], ground_truths=[Q, Q])
        r.openrlhf({"query": ["MET=3"], "labels": [Q]})
        r.score([Q], ["MET=4"])
        assert first is not None and (first.rollouts, first.judged, first.copies, first.calls, first.failures) == (
            3, 2, 1, 2, 1)
        totals = r.totals
        # calls: 2, then 1 + 3 (a verdict that is not JSON: the first reply and 2 re-asks), then 1 and 1
        assert (totals.rollouts, totals.judged, totals.copies, totals.calls, totals.failures) == (7, 6, 1, 8, 2)
        # tokens: 4 verdicts of 100 + 50, 3 unusable replies of 10 + 5, none for the HTTP 500
        assert totals.prompt_tokens == 4 * 100 + 3 * 10 and totals.completion_tokens == 4 * 50 + 3 * 5
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert [x["rollouts"] for x in lines] == [3, 2, 1, 1] and [x["calls"] for x in lines] == [2, 4, 1, 1]
    assert set(lines[0]) == set(first.as_dict())


def test_rollout_logs_of_no_rollouts_and_of_one() -> None:
    assert rollout_logs([]) == {k: [] for k in ("qid", "reward", "question_score", "judge_error", "failed_rules",
                                                "duplicate", "verdicts", "shadow_reward")}
    one = RolloutScore("q", 0.5, 0.7, None, ("a", "b"), False, ((1, True, "ça"), (2, False, "")), True, 0.25)
    assert rollout_logs([one]) == {"qid": ["q"], "reward": [0.5], "question_score": [0.7], "judge_error": [None],
                                   "failed_rules": ["a,b"], "duplicate": [True],
                                   "verdicts": ['[{"index": 1, "met": true, "reasoning": "ça"}, '
                                                '{"index": 2, "met": false, "reasoning": ""}]'],
                                   "shadow_reward": [0.25]}


def test_a_closed_reward_is_one_line(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    r = Reward(reward_settings(srv.url, tmp_path))
    assert r.__enter__() is r
    r.__exit__(None, None, None)
    with pytest.raises(RuntimeError, match="this reward was closed; build a new one"):
        r(completions=["MET=1"], question_id=[Q])
    r.close()  # again: nothing happens


def test_the_shadow_reaches_the_scorer(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    with Reward(reward_settings(srv.url, tmp_path), shadow=judge_spec(srv.url, "shadow"), shadow_fraction=1.0) as r:
        assert r.scorer.shadow_fraction == 1.0
        got = r.score([Q], ["MET=1 SH=1,2,3,4"])
    assert got[0].reward == pytest.approx(0.4) and got[0].shadow_reward == pytest.approx(1.0)
