"""What the RL frameworks hand a reward (reward/inputs.py; docs/rewards.md), in-process: every shape read and every
shape refused, word for word where a user reads the line.

TRL: completions as strings or chat messages (the assistant messages' text, joined by a blank line; tool and
user messages left out; OpenAI-style content parts), the id from a dataset column (one value per completion);
verl: `extra_info[id_column]`, else the ground truth; OpenRLHF: query minus its prompt, the id in `labels`.
A wrong guess here is a silent wrong reward, so each refusal is tested.
"""

from __future__ import annotations

from typing import Any

import pytest

from rubric_engine.errors import ConfigError
from rubric_engine.reward.inputs import column_ids, completion_text, openrlhf_rollouts, verl_id


@pytest.mark.parametrize(("completion", "text"), [
    ("plain", "plain"),
    ("", ""),
    ({"role": "assistant", "content": "one message"}, "one message"),
    ({"content": "no role is the assistant"}, "no role is the assistant"),
    ([{"role": "assistant", "content": "first"}, {"role": "tool", "content": "tool output"},
      {"role": "user", "content": "user words"}, {"role": "assistant", "content": "second"}], "first\n\nsecond"),
    ([{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": "x"},
                                         {"text": "b"}, "c", {"type": "text", "text": 5},
                                         {"type": "image_url", "text": "an image's alt text is not the reply"}]}], "abc"),
    ([{"role": "assistant", "content": None}, {"role": "assistant", "content": ""},
      {"role": "assistant", "content": "only"}], "only"),
    ([], ""),
])
def test_completion_text(completion: Any, text: str) -> None:
    assert completion_text(completion) == text


@pytest.mark.parametrize(("completion", "line"), [
    (5, "where: a completion is a string or a list of chat messages, not int"),
    (b"bytes", "where: a completion is a string or a list of chat messages, not bytes"),
    (["text", {"role": "assistant", "content": "x"}], "where: a completion is a string or a list of chat messages "
                                                      "({role, content})"),
    ([{"role": "assistant", "content": 3.5}], "where: a message's content is float; give a string or a list of "
                                              "text parts"),
])
def test_completion_refusals(completion: Any, line: str) -> None:
    with pytest.raises(ConfigError) as e:
        completion_text(completion, "where")
    assert line in str(e.value)


def test_a_refusal_names_the_completions_by_default() -> None:
    with pytest.raises(ConfigError) as e:
        completion_text(5)
    assert str(e.value) == "completions: a completion is a string or a list of chat messages, not int"


def test_the_body_and_query_refusals_word_for_word() -> None:
    with pytest.raises(ConfigError) as e:
        openrlhf_rollouts("text", "qid")
    assert str(e.value) == 'the request body is a JSON object {"query": [...], "prompts": [...], "labels": [...]}'
    with pytest.raises(ConfigError) as e:
        openrlhf_rollouts({"query": None, "labels": []}, "qid")
    assert str(e.value) == "'query' must be a list of strings (prompt + response of each rollout)"


def test_column_ids() -> None:
    assert column_ids({"qid": ["a", 7, "b"], "other": [1, 2, 3]}, "qid", 3) == ["a", "7", "b"]
    assert column_ids({"qid": ("a",)}, "qid", 1) == ["a"]


@pytest.mark.parametrize(("columns", "n", "line"), [
    ({"prompt": [1], "trainer_state": 0, "completion_ids": [1]}, 1,
     "no dataset column 'qid' with the question ids (columns given: prompt); add it to the dataset or name the "
     "column with id_column="),
    ({"trainer_state": 0}, 1, "(columns given: none)"),
    ({"b": [1], "a": [1]}, 1, "(columns given: a, b)"),
    ({"qid": ["a", "b"]}, 3, "column 'qid': expected 3 values, one per completion"),
    ({"qid": "ab"}, 2, "column 'qid': expected 2 values, one per completion"),
    ({"qid": 5}, 1, "column 'qid': expected 1 values, one per completion"),
    ({"qid": ["a", None]}, 2, "column 'qid': None is not a question id; give the benchmark's id (a string or integer)"),
    ({"qid": [True]}, 1, "column 'qid': True is not a question id"),
    ({"qid": [""]}, 1, "column 'qid': '' is not a question id"),
    ({"qid": [1.5]}, 1, "column 'qid': 1.5 is not a question id"),
])
def test_column_id_refusals(columns: dict[str, Any], n: int, line: str) -> None:
    with pytest.raises(ConfigError) as e:
        column_ids(columns, "qid", n)
    assert line in str(e.value)


def test_verl_id_prefers_extra_info_then_the_ground_truth() -> None:
    assert verl_id("gt", {"qid": "x"}, "qid") == "x"
    assert verl_id("gt", {"qid": 4}, "qid") == "4"
    assert verl_id("gt", {"qid": ""}, "qid") == "gt"
    assert verl_id("gt", {"qid": None}, "qid") == "gt"
    assert verl_id("gt", {"other": "x"}, "qid") == "gt"
    assert verl_id(12, None, "qid") == "12"
    assert verl_id({"qid": "from-gt"}, {}, "qid") == "from-gt"
    assert verl_id({"qid": "from-gt"}, {"qid": "from-extra"}, "qid") == "from-extra"
    assert verl_id({"qid": 0}, ["not", "a", "mapping"], "qid") == "0"


@pytest.mark.parametrize(("gt", "extra", "line"), [
    (None, None, "ground_truth (the question id, or put it in extra_info): None is not a question id"),
    ({"qid": ""}, {}, "ground_truth (the question id, or put it in extra_info): {'qid': ''} is not a question id"),
    ("gt", {"qid": [1]}, "extra_info['qid']: [1] is not a question id"),
    ({"qid": 2.5}, None, "ground_truth['qid']: 2.5 is not a question id"),
])
def test_verl_id_refusals(gt: Any, extra: Any, line: str) -> None:
    with pytest.raises(ConfigError) as e:
        verl_id(gt, extra, "qid")
    assert line in str(e.value)


def test_openrlhf_rollouts_cut_each_prompt_from_its_query() -> None:
    body = {"query": ["P1: reply one", "P2 reply two", "reply three"], "prompts": ["P1: ", "P2", ""],
            "labels": ["q1", 2, "q3"]}
    assert openrlhf_rollouts(body, "qid") == [("q1", "reply one"), ("2", " reply two"), ("q3", "reply three")]
    assert openrlhf_rollouts({"query": ["whole"], "labels": ["q"]}, "qid") == [("q", "whole")]  # no prompts: none cut
    assert openrlhf_rollouts({"query": [], "labels": []}, "qid") == []


@pytest.mark.parametrize(("body", "line"), [
    ([1], 'the request body is a JSON object {"query": [...], "prompts": [...], "labels": [...]}'),
    ({"labels": []}, "'query' must be a list of strings (prompt + response of each rollout)"),
    ({"query": ["a", 1], "labels": ["x", "y"]}, "'query' must be a list of strings"),
    ({"query": "a", "labels": ["x"]}, "'query' must be a list of strings"),
    ({"query": ["a", "b"], "labels": ["x"]}, "'labels' must be a list of 2 question ids (OpenRLHF's --label_key "
                                            "column, e.g. qid)"),
    ({"query": ["a"], "labels": "x"}, "'labels' must be a list of 1 question ids"),
    ({"query": ["a"], "labels": ["x"], "prompts": ["a", "b"]}, "'prompts' must be a list of 1 strings, one per query"),
    ({"query": ["a"], "labels": ["x"], "prompts": [None]}, "'prompts' must be a list of 1 strings"),
    ({"query": ["a"], "labels": ["x"], "prompts": "a"}, "'prompts' must be a list of 1 strings"),
    ({"query": ["ok: r", "other r"], "labels": ["x", "y"], "prompts": ["ok: ", "prompt "]},
     "rollout 1: the query does not start with its prompt, so the reply cannot be cut from it; send the prompt "
     "exactly as it opens the query"),
    ({"query": ["a"], "labels": [None]}, "labels[0]: None is not a question id"),
])
def test_openrlhf_refusals(body: Any, line: str) -> None:
    with pytest.raises(ConfigError) as e:
        openrlhf_rollouts(body, "qid")
    assert line in str(e.value)
