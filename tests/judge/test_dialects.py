"""Structured verdicts in each server family's dialect, the plain-text fallback and the path each verdict took.

Through the console script against tests/fakeserver.py playing one server family (tests/fakedialects.py): it takes
its own structured field and refuses every other family's with that server's error shape. What each test names:
one well-formed request per verdict in the server's own dialect; a refusal (or an empty structured reply) answered
by one plain request; almost-right free text read without a judge error; summary.json's count of each path.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, edited_spec, model_args
from fakedialects import DIALECTS, structured_field
from fakeserver import FakeServer, Reply
from rubric_engine.models.dialects import REFUSAL, ask_structured_in, structured_kwargs
from rubric_engine.judge.probability import expected_score, json_value, met_probabilities, pattern_prefix
from test_cli import run_cli
from test_jury import EN, EN_ITEMS, REPLY, answers

N = len(EN_ITEMS)
OWN_FIELD = {"openai": "json_schema", "sglang": "json_schema", "llamacpp": "json_object",
             "vllm": "structured_outputs", "ollama": "format"}


def verdict_json(body: dict[str, Any]) -> str:
    text = "\n".join(str(m.get("content", "")) for m in body["messages"])
    qid = REPLY.search(text).group(1)  # type: ignore[union-attr]
    return json.dumps({"criteria": [{"id": i, "reasoning": "r", "met": i % 2 == 1}
                                    for i in range(1, EN_ITEMS[qid] + 1)]})


def run(tmp_path: Path, env: dict[str, str], srv: FakeServer, *extra: str,
        model: str = "openai/solo") -> tuple[Any, dict[str, Any], list[dict]]:
    out = tmp_path / "run"
    res = run_cli(["benchmark=heartbench_en", f"data.path={EN}", "stage=score", "progress=none",
                   f"answers={answers(tmp_path, list(EN_ITEMS), 'question_id')}", f"hydra.run.dir={out}",
                   "judge=openai_compatible", f"judge.model={model}", "judge.name=solo",
                   f"judge.api_base={srv.url}", "judge.api_key_env=FAKE_KEY", *extra], env)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()] \
        if (out / "samples.jsonl").exists() else []
    return res, summary, samples


def schema_of(body: dict[str, Any], dialect: str) -> Any:
    """The JSON schema the request carries, where its dialect puts it."""
    if dialect in ("openai", "sglang"):
        return body["response_format"]["json_schema"]["schema"]
    if dialect == "llamacpp":
        return body["response_format"]["schema"]
    if dialect == "vllm":
        return body["structured_outputs"]["json"]
    return body["format"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_one_well_formed_request_per_verdict_in_the_servers_own_dialect(tmp_path: Path, env: dict[str, str],
                                                                        dialect: str) -> None:
    with FakeServer(verdict_json, dialect=dialect) as srv:
        res, summary, samples = run(tmp_path, env, srv, f"judge.server={dialect}")
    assert res.returncode == 0, res.stderr
    assert len(srv.requests) == N  # one verdict per question (the whole rubric in one call), nothing refused
    for body in srv.requests:
        assert structured_field(body) == OWN_FIELD[dialect]
        schema = schema_of(body, dialect)
        assert schema["type"] == "object" and schema["required"] == ["criteria"]
        assert set(body) & {"structured_outputs", "format", "guided_json", "response_format"} == \
            {"response_format" if dialect in ("openai", "sglang", "llamacpp") else OWN_FIELD[dialect]}
    assert summary["counts"]["judge_errors"] == 0
    assert summary["verdict_paths"] == {"solo": {"structured": N}}
    assert all(s["verdict_paths"] == {"solo": {"structured": 1}} for s in samples)


def test_a_grammar_server_is_held_to_one_verdict_per_criterion_with_its_id(tmp_path: Path, env: dict[str, str]) -> None:
    """llama.cpp turns the schema into a grammar: with the count and the ids in it, a small model cannot stop after
    the first criterion (SmolLM2-135M did, on every HeartBench question), and with the reasoning bounded it cannot
    loop inside a string until max_tokens cuts its JSON (it did that too); other families get the neutral schema."""
    with FakeServer(verdict_json, dialect="llamacpp") as srv:
        res, summary, _ = run(tmp_path, env, srv, "judge.server=llamacpp")
    assert res.returncode == 0 and summary["counts"]["judge_errors"] == 0, res.stderr
    for body in srv.requests:
        n = EN_ITEMS[REPLY.search(body["messages"][-1]["content"]).group(1)]  # type: ignore[union-attr]
        array = schema_of(body, "llamacpp")["properties"]["criteria"]
        assert (array["minItems"], array["maxItems"], array["items"]) == (n, n, False)
        assert [item["properties"]["id"] for item in array["prefixItems"]] == [{"const": i} for i in range(1, n + 1)]
        assert all(item["required"] == ["id", "reasoning", "met"] for item in array["prefixItems"])
        assert all(item["properties"]["reasoning"]["maxLength"] == 400 for item in array["prefixItems"])
    (tmp_path / "o").mkdir()
    with FakeServer(verdict_json, dialect="openai") as srv:
        run(tmp_path / "o", env, srv, "judge.server=openai")
    assert len(srv.requests) == len(EN_ITEMS)
    assert all("minItems" not in json.dumps(schema_of(b, "openai")) for b in srv.requests)  # strict mode: as planned


def test_the_family_is_read_from_the_litellm_id_when_not_declared(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(verdict_json, dialect="vllm") as srv:
        res, summary, _ = run(tmp_path, env, srv, model="hosted_vllm/solo")
    assert res.returncode == 0, res.stderr
    assert [structured_field(b) for b in srv.requests] == ["structured_outputs"] * N
    assert summary["verdict_paths"] == {"solo": {"structured": N}}


@pytest.mark.parametrize("dialect", ["llamacpp", "vllm", "sglang", "ollama"])
def test_a_refused_dialect_is_asked_once_more_in_plain_text_then_never_again(tmp_path: Path, env: dict[str, str],
                                                                             dialect: str) -> None:
    asked = "openai" if dialect != "openai" else "vllm"
    if dialect == "sglang":
        asked = "vllm"
    with FakeServer(verdict_json, dialect=dialect) as srv:
        res, summary, _ = run(tmp_path, env, srv, f"judge.server={asked}", "concurrency=1")
    assert res.returncode == 0, res.stderr
    # each verdict: one plain request; before it, a structured one only for the first question and any request
    # already waiting for a slot when the refusal (the server's own 400/422) came back
    fields = [structured_field(b) for b in srv.requests]
    assert fields[0] == OWN_FIELD[asked] and fields.count(None) == N
    assert set(fields) == {OWN_FIELD[asked], None} and fields.count(OWN_FIELD[asked]) <= 2
    assert summary["counts"]["judge_errors"] == 0
    assert summary["verdict_paths"] == {"solo": {"plain": N}}


def test_an_empty_structured_reply_is_asked_again_in_plain_text(tmp_path: Path, env: dict[str, str]) -> None:
    def handler(body: dict[str, Any]) -> Reply:
        return Reply(text="" if structured_field(body) else verdict_json(body))
    with FakeServer(handler, dialect="vllm") as srv:
        res, summary, _ = run(tmp_path, env, srv, "judge.server=vllm")
    assert res.returncode == 0, res.stderr
    assert len(srv.requests) == 2 * N  # each verdict: the empty structured reply, then one plain request
    assert sorted(structured_field(b) or "plain" for b in srv.requests) == ["plain"] * N + ["structured_outputs"] * N
    assert summary["verdict_paths"] == {"solo": {"plain": N}}


ALMOST = [  # how small open-weight judges write a verdict when nothing constrains them
    lambda v: f"Sure! Here is my verdict:\n```json\n{v}\n```\nHope this helps.",
    lambda v: v.replace("}]", "},]").replace("]}", "],}"),  # trailing commas
    lambda v: v.replace("true", '"yes"').replace("false", "no"),  # met: yes / no
    lambda v: "Verdict: " + v.replace('"met"', "met").replace('"reasoning"', "reasoning") + " (final)",  # bare keys
]


def test_almost_right_free_text_is_never_a_judge_error(tmp_path: Path, env: dict[str, str]) -> None:
    def handler(body: dict[str, Any]) -> Reply:
        text = verdict_json(body)
        for bend in ALMOST:  # every bend at once: fenced, prose around it, trailing commas, yes/no, bare keys
            text = bend(text)
        return Reply(text=text)
    with FakeServer(handler, dialect="llamacpp") as srv:  # refuses the json_schema it is first asked for
        res, summary, samples = run(tmp_path, env, srv, "concurrency=1")
    assert res.returncode == 0, res.stderr
    assert summary["counts"]["judge_errors"] == 0 and [structured_field(b) for b in srv.requests].count(None) == N
    assert summary["verdict_paths"] == {"solo": {"plain": N}}
    assert [c["hit"] for s in samples for c in s["criteria"]] == \
        [i % 2 == 1 for q in EN_ITEMS.values() for i in range(1, q + 1)]


def test_text_that_holds_no_decision_is_reasked_and_counted(tmp_path: Path, env: dict[str, str]) -> None:
    seen: dict[str, int] = {}

    def handler(body: dict[str, Any]) -> Reply:
        first = len(body["messages"]) <= 2
        return Reply(text="I think it is fine overall." if first else verdict_json(body))
    with FakeServer(handler) as srv:
        res, summary, _ = run(tmp_path, env, srv)
    assert res.returncode == 0, res.stderr and seen == {}
    assert len(srv.requests) == 2 * N and summary["verdict_paths"] == {"solo": {"reasked": N}}


# -- verdict probabilities from top_logprobs ----------------------------------------------------------------------
TOKEN = re.compile(r'true|false|\d+|"[^"]*"|\s+|.')
P_TRUE, P_FALSE, P_OTHER = 0.6, 0.3, 0.05  # at each `met` value: P(met) = 0.6 / (0.6 + 0.3) = 2/3 by hand


def with_logprobs(text: str, sure: float | None = None) -> Reply:
    """The reply token by token; at each `met` value the alternatives true/false/maybe (chosen one as written);
    `sure`: instead, the value written has this probability and the other one the rest."""
    tokens = TOKEN.findall(text)
    out, seen = [], ""
    for tok in tokens:
        if tok in ("true", "false") and seen.rstrip().endswith('"met":'):
            top = [("true", math.log(P_TRUE)), ("false", math.log(P_FALSE)), ("maybe", math.log(P_OTHER))]
            if sure is not None:
                top = [(tok, math.log(sure)), ("false" if tok == "true" else "true", math.log(1 - sure))]
            out.append((tok, top[0][1] if sure is not None else math.log(P_TRUE if tok == "true" else P_FALSE), top))
        else:
            out.append((tok, 0.0, [(tok, 0.0)]))
        seen += tok
    return Reply(text=text, logprobs=out)


def test_p_met_from_top_logprobs_equals_the_hand_computation() -> None:
    tokens = [[t, [[a, lp] for a, lp in top]] for t, _, top in with_logprobs(
        '{"criteria": [{"id": 2, "reasoning": "r", "met": false}, {"id": 1, "reasoning": "r", "met": true}]}'
    ).logprobs]
    assert met_probabilities(tokens, "met") == pytest.approx([2 / 3, 2 / 3])
    # a score's expected value over the scale's numbers (G-Eval): 4 x .5 + 5 x .3 + 3 x .1 over .9; "x" left out
    score = [['{"score": ', [['{"score": ', 0.0]]],
             ["4", [["4", math.log(0.5)], ["5", math.log(0.3)], ["3", math.log(0.1)], ["x", math.log(0.1)]]]]
    assert expected_score(score, json_value("score"), [1, 2, 3, 4, 5]) == pytest.approx((4 * .5 + 5 * .3 + 3 * .1) / .9)
    assert expected_score(score, json_value("score"), [1, 2]) is None  # no number of the scale among the alternatives
    assert pattern_prefix([r"\[\[(\d+\.?\d*)\]\]", r"\[(\d+)\]"]) == r"\[\["
    assert met_probabilities([["{}", [["{}", 0.0]]]], "met") == []


@pytest.mark.parametrize("workers", [1, 2])  # 2: the calls run in worker processes, which hand the logprobs back
def test_each_verdict_gets_p_met_beside_it_when_the_server_sends_logprobs(tmp_path: Path, env: dict[str, str],
                                                                          workers: int) -> None:
    with FakeServer(lambda body: with_logprobs(verdict_json(body)) if body.get("logprobs") else verdict_json(body),
                    dialect="openai") as srv:
        res, summary, samples = run(tmp_path, env, srv, "+judge.params.logprobs=true", "+judge.params.top_logprobs=5",
                                    f"workers={workers}")
        assert res.returncode == 0, res.stderr
        assert all(b.get("logprobs") is True and b.get("top_logprobs") == 5 for b in srv.requests)
        assert [c["p_met"] for s in samples for c in s["criteria"]] == pytest.approx([2 / 3] * sum(EN_ITEMS.values()))
        srv.reset()
        (tmp_path / "without").mkdir()
        res, _, plain = run(tmp_path / "without", env, srv)  # a server without them: no p_met anywhere
    assert res.returncode == 0 and not any("p_met" in c for s in plain for c in s["criteria"])


@pytest.mark.parametrize("sure, gradings", [(0.99, 1), (2 / 3, 2)])
def test_adaptive_repeats_grade_again_only_what_the_log_probabilities_leave_unsure(
        tmp_path: Path, env: dict[str, str], sure: float, gradings: int) -> None:
    """judge.repeats=auto with no prior reads how sure the judge was from P(met) of the decision it wrote: at 0.99
    every request stops after one grading (the default confidence is 0.9), at 2/3 each is graded a second time
    (and stops there: the two agree)."""
    with FakeServer(lambda body: with_logprobs(verdict_json(body), sure), dialect="openai") as srv:
        res, summary, samples = run(tmp_path, env, srv, "+judge.params.logprobs=true", "+judge.params.top_logprobs=5",
                                    "judge.repeats=auto")
        assert res.returncode == 0, res.stderr
        assert len(srv.requests) == gradings * N and summary["counts"]["judge_errors"] == 0
    assert summary["noise"]["adaptive"]["calls"] == gradings * N


MT_MINI = REPO / "tests" / "data" / "mt_bench_mini.jsonl"
RATING = {"7": 0.5, "8": 0.3, "6": 0.1, "x": 0.1}  # at the rating's token; E = (7 x .5 + 8 x .3 + 6 x .1) / .9
EXPECTED = (7 * .5 + 8 * .3 + 6 * .1) / .9


def rating(body: dict[str, Any]) -> Reply:
    if body["model"] != "judge":
        return Reply(text="an answer")
    tokens = ["Explanation: fine. Rating: [[", "7", "]]"]
    top = [(t, math.log(p)) for t, p in RATING.items()]
    return Reply(text="".join(tokens), logprobs=[(tokens[0], 0.0, [(tokens[0], 0.0)]), ("7", math.log(.5), top),
                                                 (tokens[2], 0.0, [(tokens[2], 0.0)])])


@pytest.mark.parametrize("use", ["verdict", "probability"])
def test_a_score_is_its_expected_value_over_the_score_tokens_with_use_probability(tmp_path: Path, env: dict[str, str],
                                                                                  use: str) -> None:
    spec = edited_spec(REPO / "benchmarks" / "mt_bench", tmp_path / "spec", "    kind: score\n",
                       f"    kind: score\n    use: {use}\n")
    out = tmp_path / "run"
    with FakeServer(rating) as srv:
        res = run_cli([f"benchmark={spec}", f"data.path={MT_MINI}", *model_args(srv.url), f"hydra.run.dir={out}",
                       "progress=none", "+judge.params.logprobs=true", "+judge.params.top_logprobs=4"], env)
    assert res.returncode == 0, res.stderr
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    turns = [t for s in samples for t in s["turns"]]
    assert turns and all(t["expected"] == pytest.approx(EXPECTED) for t in turns)
    assert all(t["score"] == (pytest.approx(EXPECTED) if use == "probability" else 7) for t in turns)


def test_an_unknown_server_family_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(verdict_json) as srv:
        res, _, _ = run(tmp_path, env, srv, "judge.server=tgi")
    assert res.returncode == 2 and not srv.requests
    assert "server must be one of openai, anthropic, vllm, sglang, llamacpp, ollama (got 'tgi')" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_an_entrys_own_extra_body_is_kept_beside_the_structured_field() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "v", "schema": {"type": "object"}, "strict": True}}
    kwargs: dict[str, Any] = {"model": "openai/x", "extra_body": {"top_k": 20}}
    ask_structured_in(kwargs, "vllm", fmt)
    assert kwargs["extra_body"] == {"top_k": 20, "structured_outputs": {"json": {"type": "object"}}}
    assert structured_kwargs("ollama", "ollama_chat/x", fmt) == {"response_format": fmt}  # LiteLLM writes `format`
    assert structured_kwargs("ollama", "openai/x", fmt) == {"extra_body": {"format": {"type": "object"}}}


@pytest.mark.parametrize("words, refusal", [
    ("Unrecognized request argument supplied: format", True), ("{'loc': ['body', 'format']}", True),
    ("response_format.type: Input should be 'text' or 'json_object'", True), ("structured_outputs: no", True),
    ("invalid format of messages", False), ("temperature too high", False),
])
def test_a_refusal_is_recognised_by_the_parameter_it_names(words: str, refusal: bool) -> None:
    assert bool(REFUSAL.search(words)) is refusal
