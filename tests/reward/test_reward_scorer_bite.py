"""The reward's scorer (reward/scorer.py; docs/rewards.md), in-process against the fake judge over HTTP.

Every number is a hand computation (tests/rewardjudge.py: the reply says which items the judge finds met;
mq01aa's score is the share of its 5 abilities passed): the reward as the question score clipped to [0, 1],
the rule's zero, an unscorable question's None, duplicates judged once, the counts of a batch (calls with
re-asks and retries, cache hits, failures, tokens, cost), the shadow judge's gap, one bad rollout failing only
itself with its reason word for word, a refused key stopping the batch as one error, and each refusal of the
constructor.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakeserver import FakeServer
from rewardjudge import judge_reply, judge_spec, reward_settings, variant_spec
from rubric_engine.errors import ConfigError, FatalModelError
from rubric_engine.judge.prompts import MAX_OUTPUT_CHARS
from rubric_engine.reward.scorer import RewardCounts, RewardScorer, RolloutScore, rollout_problem, shadow_picked

Q, Q2 = "mq01aa", "mq02bb"
PRICED = "openai/gpt-4o-2024-11-20"  # $2.50 / $10 per million prompt / completion tokens
CALL_COST = 100 * 2.5e-6 + 50 * 10e-6  # one verdict: 100 prompt and 50 completion tokens


@pytest.fixture(scope="module")
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        server.handler = judge_reply
        yield server


@pytest.fixture()
def scorer(srv: FakeServer, tmp_path: Path, fake_key: str) -> Iterator[RewardScorer]:
    s = RewardScorer(reward_settings(srv.url, tmp_path))
    yield s
    s.close()


def requests_for(srv: FakeServer, model: str = "judge") -> int:
    return sum(1 for body in srv.requests if body["model"] == model)


# -- the reward of one rollout -------------------------------------------------------------------------------

def test_rewards_hand_computed(scorer: RewardScorer) -> None:
    out, counts = scorer.run([(Q, "MET=1,2"), (Q, "MET=1,2,3,4"), (Q, "MET=5"), (Q, "MET=1,6"), (Q2, "MET=1,2,3")])
    assert [r.reward for r in out] == [pytest.approx(0.6), 1.0, 0.0, 0.0, 1.0]  # mq02bb: 4/4 abilities passed
    assert [r.score for r in out] == [pytest.approx(0.6), 1.0, 0.0, 0.0, 1.0]
    rule = out[3]
    assert rule.failed_rules == ("role_confusion",) and rule.catastrophic and rule.error is None
    assert out[0].failed_rules == () and not out[0].catastrophic
    assert out[0].verdicts == ((1, True, "理由 1"), (2, True, "理由 2"), (3, False, "理由 3"), (4, False, "理由 4"),
                               (5, False, "理由 5"), (6, False, "理由 6"))
    assert [r.qid for r in out] == [Q, Q, Q, Q, Q2] and not any(r.duplicate for r in out)
    assert counts.as_dict() == {**counts.as_dict(), "rollouts": 5, "judged": 5, "copies": 0, "calls": 5,
                                "cache_hits": 0, "failures": 0, "unscored": 0, "prompt_tokens": 500,
                                "completion_tokens": 250, "cost": None, "shadow": None}


def test_the_reward_is_the_score_clipped_and_an_unscorable_question_is_none(srv: FakeServer, tmp_path: Path,
                                                                         fake_key: str) -> None:
    spec = variant_spec(tmp_path / "v")
    s = RewardScorer(reward_settings(srv.url, tmp_path, benchmark=str(spec), data_path=str(spec / "data.jsonl"),
                                     trust_code=True))
    try:
        out, counts = s.run([(Q, "MET=1,2"), (Q, "MET=5"), ("neg", "MET=1"), (Q, "MET=1,3,5")])
    finally:
        s.close()
    assert [r.score for r in out] == [pytest.approx(1.2), pytest.approx(-0.6), None, pytest.approx(0.4)]
    assert [r.reward for r in out] == [1.0, 0.0, None, pytest.approx(0.4)]
    assert out[2].error is None and (counts.unscored, counts.failures) == (1, 0)


def test_identical_completions_of_a_question_are_judged_once(scorer: RewardScorer, srv: FakeServer) -> None:
    before = requests_for(srv)
    out, counts = scorer.run([(Q, "MET=1"), (Q, "MET=2"), (Q, "MET=1"), (Q2, "MET=1"), (Q, "MET=1"), (Q, "MET=2")])
    assert requests_for(srv) - before == 3  # (Q, MET=1), (Q, MET=2), (Q2, MET=1): the same text elsewhere is judged
    assert [r.duplicate for r in out] == [False, False, True, False, True, True]
    # mq02bb: item 1 met and its -10 item not met pass 2 of its 4 abilities
    assert [r.reward for r in out] == [pytest.approx(0.4)] * 3 + [pytest.approx(0.5), pytest.approx(0.4),
                                                                  pytest.approx(0.4)]
    assert (counts.rollouts, counts.judged, counts.copies, counts.calls) == (6, 3, 3, 3)
    assert (counts.prompt_tokens, counts.completion_tokens) == (300, 150)


def test_judge_failures_are_none_counted_and_redacted(scorer: RewardScorer) -> None:
    out, counts = scorer.run([(Q, "FAIL-ME"), (Q, "GARBLE-ME"), (Q, "ECHO-ERR"), (Q, "ECHO-KEY MET=1"),
                              (Q, "MET=1"), (Q, "FAIL-ME")])
    assert [r.reward for r in out] == [None, None, None, pytest.approx(0.4), pytest.approx(0.4), None]
    assert [r.score for r in out[:3]] == [None, None, None]
    assert out[0].error == ("judge call failed: openai/judge [HTTP 500]: judge model 'judge': InternalServerError: "
                            "OpenAIException - The server had an error while processing your request; check the "
                            "provider's status, or raise max_retries / lower concurrency or rpm (after 1 attempt)")
    assert out[1].error == "invalid verdict after 3 replies: the reply contains no JSON object"
    assert "bad gateway for" in (out[2].error or "") and "sk-test" not in (out[2].error or "")
    assert out[3].verdicts[0][2] == "the key was Bearer ***"  # a reasoning echoing the key: redacted too
    assert out[0].verdicts == () and out[5].duplicate and out[5].error == out[0].error
    assert [r.qid for r in out] == [Q] * 6
    # calls: one each for the 500s, 3 for the unusable verdict (2 re-asks), 1 each for the two verdicts
    assert (counts.rollouts, counts.judged, counts.calls, counts.failures, counts.unscored) == (6, 5, 7, 4, 0)
    assert (counts.prompt_tokens, counts.completion_tokens) == (2 * 100 + 3 * 10, 2 * 50 + 3 * 5)


def test_retries_are_calls(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    s = RewardScorer(reward_settings(srv.url, tmp_path, max_retries=1))
    try:
        before = requests_for(srv)
        out, counts = s.run([(Q, "FAIL-ME")])
    finally:
        s.close()
    assert requests_for(srv) - before == 2 and counts.calls == 1 and out[0].error is not None
    assert "(after 2 attempts)" in out[0].error


def test_repeats_and_a_jury_call_each_judge(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    s = RewardScorer(reward_settings(srv.url, tmp_path, repeats=3))
    try:
        out, counts = s.run([(Q, "MET=1,2")])
        assert counts.calls == 3 and out[0].reward == pytest.approx(0.6) and s.judges == ["judge"]
    finally:
        s.close()
    jury = [judge_spec(srv.url, "judge"), judge_spec(srv.url, "j2", "openai/judge")]
    s = RewardScorer(reward_settings(srv.url, tmp_path, judge=None, jury=jury))
    try:
        out, counts = s.run([(Q, "MET=1,2")])
        assert counts.calls == 2 and out[0].reward == pytest.approx(0.6) and s.judges == ["judge", "j2"]
    finally:
        s.close()


def test_adaptive_repeats_grade_as_a_run_does(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    """judge.repeats=auto without a prior: a second grading, and no more where the two agree (judge/adaptive.py);
    never the cap's fixed repeats."""
    s = RewardScorer(reward_settings(srv.url, tmp_path, repeats="auto"))
    try:
        out, counts = s.run([(Q, "MET=1,2")])
        assert counts.calls == 2 and out[0].reward == pytest.approx(0.6)
    finally:
        s.close()


def test_usage_and_cost_of_a_priced_judge(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    s = RewardScorer(reward_settings(srv.url, tmp_path, judge=judge_spec(srv.url, "judge", PRICED)))
    try:
        out, counts = s.run([(Q, "MET=1"), (Q, "MET=2"), (Q, "MET=2"), (Q, "\ud800")])
    finally:
        s.close()
    assert counts.cost == pytest.approx(2 * CALL_COST) and out[3].error is not None  # a rollout not judged costs 0
    assert (counts.calls, counts.prompt_tokens, counts.completion_tokens) == (2, 200, 100)


def test_the_durable_cache_answers_the_second_time(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    settings = reward_settings(srv.url, tmp_path, cache_enabled=True)
    first = RewardScorer(settings)
    try:
        _, counts = first.run([(Q, "MET=1"), (Q, "MET=3")])
        assert (counts.calls, counts.cache_hits) == (2, 0)
    finally:
        first.close()
    assert first.cache is None and any((tmp_path / "cache").iterdir())  # closed; the cache lives where it was told
    before = requests_for(srv)
    again = RewardScorer(settings)
    try:
        out, counts = again.run([(Q, "MET=1"), (Q, "MET=3"), (Q, "MET=4")])
    finally:
        again.close()
    assert requests_for(srv) - before == 1
    assert (counts.calls, counts.cache_hits) == (1, 2) and [r.reward for r in out] == [pytest.approx(0.4)] * 3


def test_run_async_from_another_loop(scorer: RewardScorer) -> None:
    out, counts = asyncio.run(scorer.run_async([(Q, "MET=1,2,3")]))
    assert out[0].reward == pytest.approx(0.8) and counts.rollouts == 1


def test_seconds_is_the_batch_duration(scorer: RewardScorer) -> None:
    t0 = time.perf_counter()
    _, counts = scorer.run([(Q, "MET=1")])
    assert 0 < counts.seconds <= time.perf_counter() - t0


# -- one bad rollout -----------------------------------------------------------------------------------------

def test_rollout_problems_word_for_word() -> None:
    assert rollout_problem("fine", 10) is None
    assert rollout_problem("a\ud800b\udfff", 100) == (
        "the completion holds 2 unpaired UTF-16 surrogate(s) (\\ud800-\\udfff), which is not valid Unicode; it is "
        "not judged")
    assert rollout_problem("x" * MAX_OUTPUT_CHARS, 2**30) is None
    assert rollout_problem("x" * (MAX_OUTPUT_CHARS + 1), 2**30) == (
        f"the completion is {MAX_OUTPUT_CHARS + 1} characters, over the {MAX_OUTPUT_CHARS}-character limit of a "
        "judge prompt; it is not judged")
    assert rollout_problem("éé", 4) is None  # 4 bytes, at the cap
    assert rollout_problem("ééé", 4) == ("the completion is 6 bytes, over the reply limit of 3.8147e-06 MiB "
                                         "($RUBRIC_ENGINE_MAX_REPLY_MB); it is not judged")
    assert rollout_problem("x" * 3 * 2**19, 2**20) == ("the completion is 1572864 bytes, over the reply limit of 1 MiB "
                                                      "($RUBRIC_ENGINE_MAX_REPLY_MB); it is not judged")


def test_one_bad_rollout_fails_only_itself(srv: FakeServer, tmp_path: Path, fake_key: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUBRIC_ENGINE_MAX_REPLY_MB", "2")
    s = RewardScorer(reward_settings(srv.url, tmp_path))
    try:
        assert s.reply_cap == 2**21
        before = requests_for(srv)
        out, counts = s.run([(Q, "MET=1"), (Q, "lone \ud800"), (Q, "é" * 2**20 + "x"), (Q, "x" * MAX_OUTPUT_CHARS),
                             (Q, "MET=2")])
    finally:
        s.close()
    assert requests_for(srv) - before == 2
    assert [r.reward for r in out] == [pytest.approx(0.4), None, None, None, pytest.approx(0.4)]
    assert "1 unpaired UTF-16 surrogate(s)" in (out[1].error or "")
    assert (out[2].error or "").startswith("the completion is 2097153 bytes, over the reply limit of 2 MiB")
    # a completion within the limits whose judge prompt is not: that rollout's error too
    assert (out[3].error or "").startswith("the judge prompt could not be made for this question: question mq01aa: "
                                           "its dialogue, reply and reference come to 2000")
    assert (counts.failures, counts.calls, counts.judged) == (3, 2, 5)


def test_a_refused_key_stops_the_batch_as_one_error(scorer: RewardScorer) -> None:
    with pytest.raises(FatalModelError) as e:
        scorer.run([(Q, "MET=1"), (Q, "DENY-ME"), (Q, "MET=2")])
    assert "401" in str(e.value)


def test_an_unknown_question_is_refused_before_any_call(scorer: RewardScorer, srv: FakeServer) -> None:
    before = len(srv.requests)
    with pytest.raises(ConfigError) as e:
        scorer.run([(Q, "MET=1"), ("nope", "MET=1")])
    assert str(e.value) == ("question id 'nope' is not in the benchmark's data (12 questions loaded); check the id "
                            "column, data.path= and subset= / ids= / limit=")
    assert len(srv.requests) == before
    assert scorer.question(Q).id == Q and len(scorer.questions) == 12


def test_the_selection_limits_the_questions(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    s = RewardScorer(reward_settings(srv.url, tmp_path, limit=2))
    try:
        assert sorted(s.questions) == [Q, Q2]
        with pytest.raises(ConfigError, match=r"\(2 questions loaded\)"):
            s.question("mq03cc")
    finally:
        s.close()


# -- the shadow judge ----------------------------------------------------------------------------------------

def test_shadow_picked_is_a_fixed_hash() -> None:
    assert not shadow_picked("q", "text", 0.0) and not shadow_picked("q", "text", -1.0)
    assert shadow_picked("q", "text", 1.0)
    h = zlib.crc32(b"q\0text") / 2**32
    assert shadow_picked("q", "text", h + 1e-9) and not shadow_picked("q", "text", h)
    h2 = zlib.crc32("q\0a\ud800".encode("utf-8", "surrogatepass")) / 2**32
    assert shadow_picked("q", "a\ud800", h2 + 1e-9) and not shadow_picked("q", "a\ud800", h2)
    picked = sum(shadow_picked("q", str(i), 0.25) for i in range(4000))
    assert 800 < picked < 1200  # a quarter on average


def test_the_shadow_gap_hand_computed(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    s = RewardScorer(reward_settings(srv.url, tmp_path), shadow=judge_spec(srv.url, "shadow"), shadow_fraction=1.0)
    try:
        before = requests_for(srv, "shadow")
        out, counts = s.run([(Q, "MET=1 SH=1,2,3,4"), (Q, "MET=1,2,3,4 SH=5"), (Q, "MET=1 SH=1,2,3,4"),
                             (Q, "FAIL-ME"), (Q2, "MET=1,2,3 SH="), (Q, "MET=2 SH-FAIL")])
        assert requests_for(srv, "shadow") - before == 5  # distinct rollouts only
    finally:
        s.close()
    # rewards 0.4, 1.0, (copy), failed, 1.0, 0.4; the shadow's 1.0, 0.0, (copy), failed, 0.25, failed
    assert [r.shadow_reward for r in out] == [1.0, 0.0, 1.0, None, pytest.approx(0.25), None]
    assert [r.reward for r in out] == [pytest.approx(0.4), 1.0, pytest.approx(0.4), None, 1.0, pytest.approx(0.4)]
    assert out[3].shadow_error is not None and out[5].shadow_error is not None and out[0].shadow_error is None
    assert out[5].error is None
    shadow = counts.shadow
    assert shadow is not None
    gaps = [1.0 - 0.4, 0.0 - 1.0, 0.25 - 1.0]
    assert shadow == {"judged": 5, "failures": 2, "compared": 3, "gap_mean": pytest.approx(sum(gaps) / 3),
                      "gap_abs_mean": pytest.approx(sum(abs(g) for g in gaps) / 3), "calls": 5, "cache_hits": 0,
                      "prompt_tokens": 300, "completion_tokens": 150, "cost": None}
    assert (counts.calls, counts.prompt_tokens) == (5, 400)  # the main judge's own


def test_a_shadow_of_nothing_compared_has_no_gap(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    s = RewardScorer(reward_settings(srv.url, tmp_path), shadow=judge_spec(srv.url, "shadow"), shadow_fraction=1.0)
    try:
        _, counts = s.run([(Q, "FAIL-ME")])
    finally:
        s.close()
    assert counts.shadow is not None
    assert (counts.shadow["judged"], counts.shadow["failures"], counts.shadow["compared"]) == (1, 1, 0)
    assert counts.shadow["gap_mean"] is None and counts.shadow["gap_abs_mean"] is None


def test_a_shadow_with_fraction_zero_is_not_built(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    unset = judge_spec(srv.url, "shadow").__class__(name="shadow", model="openai/shadow", api_base=srv.url,
                                                    api_key_env="NO_SUCH_KEY_FOR_TESTS")
    s = RewardScorer(reward_settings(srv.url, tmp_path), shadow=unset, shadow_fraction=0.0)  # its key is not checked
    try:
        assert s.shadow is None and s.shadow_fraction == 0.0 and len(s.clients) == 1
        out, counts = s.run([(Q, "MET=1")])
        assert counts.shadow is None and out[0].shadow_reward is None
    finally:
        s.close()
    with pytest.raises(ConfigError, match="NO_SUCH_KEY_FOR_TESTS"):
        RewardScorer(reward_settings(srv.url, tmp_path), shadow=unset, shadow_fraction=0.5)


@pytest.mark.parametrize("fraction", [-0.1, 1.5, True])
def test_shadow_fraction_out_of_range(srv: FakeServer, tmp_path: Path, fake_key: str, fraction: Any) -> None:
    with pytest.raises(ConfigError) as e:
        RewardScorer(reward_settings(srv.url, tmp_path), shadow=judge_spec(srv.url, "shadow"), shadow_fraction=fraction)
    assert str(e.value) == f"shadow_fraction={fraction} is not valid; give a fraction in [0, 1]"


def test_a_shadow_fraction_needs_a_shadow(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    with pytest.raises(ConfigError) as e:
        RewardScorer(reward_settings(srv.url, tmp_path), shadow_fraction=0.5)
    assert str(e.value) == "shadow_fraction=0.5 needs a shadow judge: give shadow=<judge entry>"


def test_a_judge_without_its_key_is_refused_when_built(srv: FakeServer, tmp_path: Path) -> None:
    nokey = judge_spec(srv.url).__class__(name="judge", model="openai/judge", api_base=srv.url,
                                          api_key_env="NO_SUCH_KEY_FOR_TESTS")
    with pytest.raises(ConfigError, match="NO_SUCH_KEY_FOR_TESTS"):
        RewardScorer(reward_settings(srv.url, tmp_path, judge=nokey))


def test_the_clients_get_the_runs_limits(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    s = RewardScorer(reward_settings(srv.url, tmp_path, concurrency=3, rpm=600.0, max_retries=2, tpm=90000.0,
                                     cache_enabled=True), shadow=judge_spec(srv.url, "shadow"), shadow_fraction=0.5)
    try:
        assert len(s.clients) == 2 and s.pool == 6
        for c in s.clients:
            assert (c.concurrency, c.rpm, c.max_retries, c.role) == (3, 600.0, 2, "judge")
            assert c.cache is s.cache and c.cache is not None
        assert [c.spec.name for c in s.clients] == ["judge", "shadow"]
    finally:
        s.close()


# -- counts ----------------------------------------------------------------------------------------------------

def test_counts_add_up_and_an_unknown_cost_stays_unknown() -> None:
    total = RewardCounts()
    one = RewardCounts(rollouts=2, judged=1, copies=1, calls=3, cache_hits=4, failures=5, unscored=6, prompt_tokens=7,
                       completion_tokens=8, cost=0.5, seconds=1.5, shadow={"judged": 1})
    total.add(one)
    total.add(one)
    assert total.as_dict() == {"rollouts": 4, "judged": 2, "copies": 2, "calls": 6, "cache_hits": 8, "failures": 10,
                               "unscored": 12, "prompt_tokens": 14, "completion_tokens": 16, "cost": 1.0,
                               "seconds": 3.0, "shadow": None}
    total.add(RewardCounts(cost=None))
    assert total.cost is None
    total.add(one)
    assert total.cost is None and total.rollouts == 6
    later = RewardCounts()
    later.add(RewardCounts(cost=None))
    assert later.cost is None


def test_a_rollout_score_defaults() -> None:
    r = RolloutScore("q", 0.5, 0.5)
    assert (r.error, r.failed_rules, r.catastrophic, r.verdicts, r.duplicate, r.shadow_reward, r.shadow_error) == (
        None, (), False, (), False, None, None)


def test_an_empty_completion_is_judged(scorer: RewardScorer, srv: FakeServer) -> None:
    """A policy that learns to say nothing is scored for it: mq01aa with no item met passes only its -3 item."""
    before = requests_for(srv)
    out, counts = scorer.run([(Q, "")])
    assert requests_for(srv) - before == 1 and counts.calls == 1
    assert out[0].reward == pytest.approx(0.2) and out[0].error is None


def test_the_settings_are_kept_and_no_shadow_means_fraction_zero(srv: FakeServer, tmp_path: Path,
                                                                fake_key: str) -> None:
    settings = reward_settings(srv.url, tmp_path)
    s = RewardScorer(settings)
    try:
        assert s.settings is settings and s.shadow is None and s.shadow_fraction == 0.0
    finally:
        s.close()


@pytest.mark.parametrize(("key", "value"), [("tpm", 0.0), ("rpm", -1.0), ("max_retries", -1)])
def test_the_clients_refuse_a_limit_out_of_range(srv: FakeServer, tmp_path: Path, fake_key: str, key: str,
                                                 value: Any) -> None:
    with pytest.raises(ConfigError, match=f"judge: {key} must be "):
        RewardScorer(reward_settings(srv.url, tmp_path, **{key: value}))


def test_a_prompt_cache_setting_reaches_the_judges(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    for wanted in (True, False):
        s = RewardScorer(reward_settings(srv.url, tmp_path, prompt_cache=wanted))
        try:
            assert [c.prompt_cache for c in s.clients] == [wanted]
        finally:
            s.close()


@pytest.mark.parametrize(("rule", "tie", "reward"), [
    ("any", None, 0.6),  # items 1 and 2 each met by one of the two judges
    ("majority", None, 0.2),  # one vote of two is a tie: not met by default
    ("majority", "met", 0.6),
    ("all", None, 0.2),
])
def test_a_jury_votes_by_its_rule_and_tie(srv: FakeServer, tmp_path: Path, fake_key: str, rule: str,
                                          tie: str | None, reward: float) -> None:
    jury = [judge_spec(srv.url, "judge"), judge_spec(srv.url, "jshadow")]  # the second reads SH=
    s = RewardScorer(reward_settings(srv.url, tmp_path, judge=None, jury=jury, jury_rule=rule, tie=tie))
    try:
        out, _ = s.run([(Q, "MET=1 SH=2")])
    finally:
        s.close()
    assert out[0].reward == pytest.approx(reward)


def test_close_releases_the_judge_clients(srv: FakeServer, tmp_path: Path, fake_key: str) -> None:
    s = RewardScorer(reward_settings(srv.url, tmp_path), shadow=judge_spec(srv.url, "shadow"), shadow_fraction=1.0)
    s.run([(Q, "MET=1")])
    assert all(c._loops for c in s.clients)  # noqa: SLF001 - each client holds the reward loop's HTTP clients
    s.close()
    assert not any(c._loops for c in s.clients)  # noqa: SLF001 - released before the loop ended
    s.close()  # again: nothing happens


def test_a_shadow_fraction_grades_only_the_rollouts_its_hash_picks(srv: FakeServer, tmp_path: Path,
                                                                 fake_key: str) -> None:
    rollouts = [(Q, f"MET=1 SH=1,2,3,4 #{i}") for i in range(12)]
    picked = [zlib.crc32(f"{q}\0{t}".encode()) < 0.5 * 2**32 for q, t in rollouts]
    assert 0 < sum(picked) < len(picked)
    s = RewardScorer(reward_settings(srv.url, tmp_path), shadow=judge_spec(srv.url, "shadow"), shadow_fraction=0.5)
    try:
        before = requests_for(srv, "shadow")
        out, counts = s.run(rollouts)
        assert requests_for(srv, "shadow") - before == sum(picked)
    finally:
        s.close()
    assert [r.shadow_reward for r in out] == [1.0 if p else None for p in picked]
    assert counts.shadow is not None and counts.shadow["judged"] == counts.shadow["compared"] == sum(picked)
    assert counts.shadow["gap_mean"] == pytest.approx(0.6)
