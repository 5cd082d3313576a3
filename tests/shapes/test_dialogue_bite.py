"""Conversations turn by turn (run/dialogue.py, judge/dialogue.py), in-process so the mutation tool sees them.

The rules docs/authoring.md states ("Shapes: scripted conversations", "Shapes: simulated users"): each scripted
turn carries the earlier replies; a candidate failure at turn k is raised with `turn = k` and keeps the
transcript so far; the simulator sees the roles swapped (its persona, its opening, every candidate line as
`user`, its own lines as `assistant`); its stop signal ends the session (its last words kept, unanswered);
`max_turns` cuts it (`ended: "max_turns"`, counted); a failed or empty simulator reply is the question's
`user_error` naming the turn. The fakes are asymmetric: a candidate or a simulated user that fails on one turn
only. LiteLLM speaks HTTP to the fake server on 127.0.0.1 (the real path); the console-script checks of the
same rules are tests/shapes/test_dialogue_scripted.py and tests/shapes/test_dialogue_simulated.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.dataset.load import load_dataset
from rubric_engine.datatypes import Turn
from rubric_engine.errors import AnswersError, ModelCallError
from rubric_engine.judge.dialogue import SWAP, candidate_view, simulator_view
from rubric_engine.shapes.registry import shape_for
from rubric_engine.models.client import ModelClient
from rubric_engine.models.entries import ModelSpec
from rubric_engine.record.codec import decode
from rubric_engine.run.dialogue import converse, given_transcripts
from rubric_engine.run.stream import Totals
from rubric_engine.run.record import Outcome
from rubric_engine.spec.load import load_spec

from conftest import DATA


def first_request(spec: Any, q: Any, role: str = "candidate") -> Any:
    """The dry run's first request's messages and call count for a role: the spec's conversation's (shapes/)."""
    request = shape_for(spec).conversation.first_request(spec, q, role)
    return request.messages, request.calls


def _spec_and_question(name: str, **conversation: Any) -> tuple[Any, Any]:
    spec = load_spec(DATA / name)
    for key, value in conversation.items():
        setattr(spec.conversation, key, value)
    q = load_dataset(spec, DATA / name / f"{name}.jsonl").questions[0]
    return spec, q


def _client(srv: FakeServer, name: str, cache: Any = None) -> ModelClient:
    spec = ModelSpec.from_config({"name": name, "model": f"openai/{name}", "api_base": srv.url,
                                  "api_key_env": "FAKE_KEY"}, role="candidate")
    return ModelClient(spec, cache=cache, concurrency=1, max_retries=0, role=name)


def _said(body: dict[str, Any], role: str) -> int:
    return sum(1 for m in body["messages"] if m["role"] == role)


def _refuse_empty(text: str) -> None:
    """What the pipeline's accept does for a candidate: an empty reply is a failed call."""
    if not text.strip():
        raise ModelCallError("candidate", "the candidate returned an empty reply", attempts=1)


def _talk(srv: FakeServer, spec: Any, q: Any, user: bool = True, cache: Any = None, sim_client: Any = None,
          **kw: Any) -> tuple[Outcome, BaseException | None]:
    o = Outcome(question=q)

    async def main() -> BaseException | None:
        cand = _client(srv, "cand", cache)
        sim = sim_client if sim_client is not None else (_client(srv, "sim", cache) if user else None)
        try:
            await converse(spec, q, o, cand, sim, accept=_refuse_empty, **kw)
        except ModelCallError as exc:
            return exc
        finally:
            await cand.aclose()
            if sim is not None and sim_client is None:
                await sim.aclose()
        return None

    return o, asyncio.run(main())


def _server(candidate: Callable[[dict[str, Any]], Reply], user: Callable[[dict[str, Any]], Reply] | None = None
            ) -> FakeServer:
    def handler(body: dict[str, Any]) -> Reply:
        return candidate(body) if body["model"] == "cand" else user(body)  # type: ignore[misc]
    return FakeServer(handler)


def _requests(srv: FakeServer, model: str) -> list[list[dict[str, str]]]:
    return [r["messages"] for r in srv.requests if r["model"] == model]


# -- scripted ---------------------------------------------------------------------------------------------

def test_each_scripted_turn_carries_the_earlier_replies(fake_key: str) -> None:
    spec, q = _spec_and_question("scripted_mini")
    with _server(lambda b: Reply(text=f"reply {_said(b, 'user')}", usage=(10, 3))) as srv:
        o, exc = _talk(srv, spec, q, user=False)
    assert exc is None and len(q.turns) == 2
    sent = _requests(srv, "cand")
    assert len(sent) == 2
    assert sent[1][-3:] == [{"role": "user", "content": q.turns[0]}, {"role": "assistant", "content": "reply 1"},
                            {"role": "user", "content": q.turns[1]}]
    assert sent[1][:-3] == sent[0][:-1]  # the same prefix (system messages) every turn
    assert [(t.role, t.content) for t in o.transcript] == [("user", q.turns[0]), ("assistant", "reply 1"),
                                                           ("user", q.turns[1]), ("assistant", "reply 2")]
    assert o.response == "reply 2" and o.cand_calls == 2 and o.cand_tokens == (20, 6)
    assert o.user_tokens is None and o.ended is None and o.user_error is None and not o.truncated


def test_a_candidate_failing_at_turn_two_only_names_that_turn_and_keeps_the_transcript(fake_key: str) -> None:
    spec, q = _spec_and_question("scripted_mini")

    def cand(b: dict[str, Any]) -> Reply:
        return Reply(status=400) if _said(b, "user") == 2 else Reply(text="first reply", usage=(7, 2))
    with _server(cand) as srv:
        o, exc = _talk(srv, spec, q, user=False)
    assert exc is not None and exc.turn == 2  # type: ignore[attr-defined]
    assert o.response is None  # an unfinished conversation has no last reply to judge
    assert [t.role for t in o.transcript] == ["user", "assistant", "user"]
    assert o.cand_calls == 1 and o.cand_tokens == (7, 2)


def test_a_reply_cut_for_length_on_any_turn_marks_the_conversation_truncated(fake_key: str) -> None:
    spec, q = _spec_and_question("scripted_mini")

    def cand(b: dict[str, Any]) -> Reply:
        return Reply(text="cut", finish_reason="length" if _said(b, "user") == 1 else "stop")
    with _server(cand) as srv:
        o, exc = _talk(srv, spec, q, user=False)
    assert exc is None and o.truncated and o.response == "cut"


# -- simulated --------------------------------------------------------------------------------------------

def _user_says(*lines: str) -> Callable[[dict[str, Any]], Reply]:
    """A simulated user that says lines[k] at its turn k+1 (its own earlier lines are its assistant messages)."""
    return lambda b: Reply(text=lines[_said(b, "assistant")], usage=(5, 1))


def test_the_simulator_sees_the_roles_swapped_and_its_stop_ends_the_session(fake_key: str) -> None:
    spec, q = _spec_and_question("simulated_mini")
    stop = spec.conversation.stop
    with _server(lambda b: Reply(text=f"answer {_said(b, 'user')}"),
                 _user_says("hello", "more please", f"thanks, bye {stop} ignored")) as srv:
        o, exc = _talk(srv, spec, q)
    assert exc is None and o.ended == "stop" and o.user_error is None
    assert [(t.role, t.content) for t in o.transcript] == [
        ("user", "hello"), ("assistant", "answer 1"), ("user", "more please"), ("assistant", "answer 2"),
        ("user", "thanks, bye")]  # the last words are kept for the judge, unanswered
    assert o.response == "answer 2" and o.cand_calls == 2 and o.user_calls == 3 and o.user_tokens == (15, 3)
    views = _requests(srv, "sim")
    assert views[0][0]["role"] == "system" and views[0][0]["content"].startswith("PERSONA " + q.source_row["persona"])
    assert views[0][1]["role"] == "user"
    assert views[0][1]["content"].strip() == f"Start the conversation as {q.source_row['name']}."
    assert views[2][2:] == [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "answer 1"},
                            {"role": "assistant", "content": "more please"}, {"role": "user", "content": "answer 2"}]
    assert _requests(srv, "cand")[1][-3:] == [{"role": "user", "content": "hello"},
                                              {"role": "assistant", "content": "answer 1"},
                                              {"role": "user", "content": "more please"}]


def test_a_stop_with_nothing_before_it_adds_no_turn(fake_key: str) -> None:
    spec, q = _spec_and_question("simulated_mini")
    with _server(lambda b: Reply(text="answer"), _user_says("hi", f"  {spec.conversation.stop}")) as srv:
        o, _ = _talk(srv, spec, q)
    assert [t.content for t in o.transcript] == ["hi", "answer"] and o.ended == "stop"


def test_max_turns_cuts_the_session_and_counts_it(fake_key: str) -> None:
    spec, q = _spec_and_question("simulated_mini", max_turns=2)
    with _server(lambda b: Reply(text="answer"), lambda b: Reply(text="go on")) as srv:
        o, exc = _talk(srv, spec, q)
    assert exc is None and o.ended == "max_turns" and o.user_error is None
    assert o.user_calls == 2 and o.cand_calls == 2 and len(o.transcript) == 4


def test_a_simulated_user_failing_at_turn_two_only_is_the_question_s_user_error(fake_key: str) -> None:
    spec, q = _spec_and_question("simulated_mini")

    def user(b: dict[str, Any]) -> Reply:
        return Reply(status=400, error="bad sk-abcdefgh1234") if _said(b, "assistant") == 1 else Reply(text="hi")
    with _server(lambda b: Reply(text="answer"), user) as srv:
        o, exc = _talk(srv, spec, q)
    assert exc is None and o.ended is None
    assert o.user_error is not None and o.user_error.startswith("simulated user, turn 2: ")
    assert "sk-abcdefgh1234" not in o.user_error  # a server's error text is redacted
    assert o.response == "answer" and o.user_calls == 1 and len(o.transcript) == 2


def test_an_empty_simulated_user_reply_is_a_user_error(fake_key: str) -> None:
    spec, q = _spec_and_question("simulated_mini")
    with _server(lambda b: Reply(text="answer"), _user_says("hi", "   ")) as srv:
        o, _ = _talk(srv, spec, q)
    assert o.user_error == "simulated user, turn 2: the simulated user returned an empty reply"


def test_a_session_the_user_ends_before_any_reply_is_a_user_error(fake_key: str) -> None:
    spec, q = _spec_and_question("simulated_mini")
    with _server(lambda b: Reply(text="answer"), _user_says(f"bye {spec.conversation.stop}")) as srv:
        o, _ = _talk(srv, spec, q)
    assert o.user_error == "the simulated user ended the session before the candidate replied"
    assert o.response is None and not _requests(srv, "cand")


def test_a_candidate_that_speaks_first_answers_before_the_user(fake_key: str) -> None:
    spec, q = _spec_and_question("simulated_mini", first="candidate", max_turns=1)
    with _server(lambda b: Reply(text=f"answer {_said(b, 'user')}"), lambda b: Reply(text="ok")) as srv:
        o, _ = _talk(srv, spec, q)
    assert [(t.role, t.content) for t in o.transcript] == [("assistant", "answer 0"), ("user", "ok"),
                                                           ("assistant", "answer 1")]
    assert o.ended == "max_turns" and o.cand_calls == 2 and o.user_calls == 1


# -- the pure parts ---------------------------------------------------------------------------------------

def test_views_and_the_dry_run_s_call_counts() -> None:
    spec, q = _spec_and_question("simulated_mini")
    assert SWAP == {"user": "assistant", "assistant": "user"}
    # the prefix, then the turns' own messages in order: shared, not copied per turn (judge/dialogue.py)
    turn = {"role": "user", "content": "u"}
    view = candidate_view([{"role": "system", "content": "s"}], [turn, {"role": "assistant", "content": "a"}])
    assert view == [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                    {"role": "assistant", "content": "a"}]
    assert view[1] is turn
    msgs, n = first_request(spec, q, role="user")
    assert n == 3 and msgs == simulator_view(spec, q, [])
    msgs, n = first_request(spec, q)
    assert n == 3 and msgs[-1] == {"role": "user", "content": "..."}
    spec.conversation.first = "candidate"
    msgs, n = first_request(spec, q)
    assert n == 4 and msgs[-1]["role"] == "system"
    sspec, sq = _spec_and_question("scripted_mini")
    msgs, n = first_request(sspec, sq)
    assert n == len(sq.turns) and msgs[-1] == {"role": "user", "content": sq.turns[0]}


def test_conversation_counts() -> None:
    """The run's totals count, from each decoded record's session, the simulated users that failed and the
    sessions cut at max_turns (summary.json counts.user_errors / cut_at_max_turns)."""
    rows = [{"user_error": "x", "ended": None}, {"ended": "max_turns"}, {"ended": "max_turns", "user_error": ""},
            {"ended": "stop"}, {}]
    totals = Totals()
    for n, row in enumerate(rows):
        totals.add(decode({"id": f"q{n}", "score": None, **row, "tokens": {"candidate": {"prompt": 0, "completion": 0}},
                           "cost": {"candidate": None}}))
    assert (totals.user_errors, totals.cut_at_max_turns) == (1, 2)


def test_given_transcripts(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    rows = [{"qid": "a", "transcript": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "r"}]},
            {"qid": "b", "response": "no transcript"}, {"qid": 3, "transcript": []}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    got = given_transcripts(str(path), None, "qid")
    assert got == {"a": [Turn("user", "u"), Turn("assistant", "r")], "3": []}
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "answers.jsonl").write_text(path.read_text(), encoding="utf-8")
    assert given_transcripts(None, str(tmp_path / "run"), "qid") == got


@pytest.mark.parametrize("bad", ["text", [{"role": "system", "content": "s"}], [{"role": "user", "content": 1}],
                                 ["user"], [{"content": "c"}]])
def test_a_malformed_transcript_is_refused_naming_the_row(tmp_path: Path, bad: Any) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps({"qid": "a", "response": "r"}) + "\n" + json.dumps({"qid": "b", "transcript": bad})
                    + "\n", encoding="utf-8")
    with pytest.raises(AnswersError) as e:
        given_transcripts(str(path), None, "qid")
    assert str(e.value) == (f"{path}: row 2: 'transcript' must be a list of {{role: user|assistant, content: text}}; "
                            "fix the row or drop its transcript")


def test_templates_are_checked_before_any_call() -> None:
    from rubric_engine.errors import SpecError
    from rubric_engine.shapes.registry import check_templates

    spec, q = _spec_and_question("simulated_mini")
    questions = load_dataset(spec, DATA / "simulated_mini" / "simulated_mini.jsonl").questions
    check_templates(spec, questions)  # the shipped persona and opening render for every row
    spec.conversation.first = "candidate"
    check_templates(spec, questions)  # candidate.system gives the candidate something to answer
    spec.candidate.system = None
    with pytest.raises(SpecError) as e:
        check_templates(spec, questions)
    assert e.value.key_path == "conversation.first" and e.value.value == "candidate"
    assert "the candidate speaks first but has nothing to answer" in str(e.value)
    assert "set candidate.system (or give the data a dialogue), or use first: user" in str(e.value)


def test_a_persona_that_renders_empty_for_a_row_is_one_error_naming_the_question(tmp_path: Path) -> None:
    import shutil

    from rubric_engine.errors import SpecError
    from rubric_engine.shapes.registry import check_templates

    shutil.copytree(DATA / "simulated_mini", tmp_path / "simulated_mini")
    (tmp_path / "simulated_mini" / "persona.j2").write_text("{% if row.id != 'p3' %}PERSONA {{ row.persona }}{% endif %}\n")
    spec = load_spec(tmp_path / "simulated_mini")
    questions = load_dataset(spec, tmp_path / "simulated_mini" / "simulated_mini.jsonl").questions
    check_templates(spec, questions, n=2)  # p3 is the third row: not among the first two checked
    with pytest.raises(SpecError) as e:
        check_templates(spec, questions)
    assert e.value.key_path == "conversation.simulator.system" and str(e.value).startswith(
        str(tmp_path / "simulated_mini" / "persona.j2"))
    assert "rendered an empty message for question p3" in str(e.value)
    assert "the template must write the simulated user's instructions for every row" in str(e.value)


# -- survivors of the mutation run: what each turn counts and passes on -----------------------------------

def test_an_empty_candidate_reply_on_turn_two_is_refused_and_still_counted(fake_key: str) -> None:
    spec, q = _spec_and_question("scripted_mini")

    def cand(b: dict[str, Any]) -> Reply:
        return Reply(text="" if _said(b, "user") == 2 else "first", usage=(4, 1))
    with _server(cand) as srv:
        o, exc = _talk(srv, spec, q, user=False)
    assert exc is not None and exc.turn == 2 and "empty reply" in str(exc)  # type: ignore[attr-defined]
    assert o.cand_calls == 2 and o.cand_tokens == (8, 2)  # the refused reply cost its tokens too


def test_an_empty_user_reply_still_counts_its_tokens(fake_key: str) -> None:
    spec, q = _spec_and_question("simulated_mini")
    with _server(lambda b: Reply(text="answer", usage=(3, 1)), _user_says("hi", "   ")) as srv:
        o, _ = _talk(srv, spec, q)
    assert o.user_calls == 2 and o.user_tokens == (10, 2) and o.cand_tokens == (3, 1)


def test_a_user_failing_before_any_call_counts_no_tokens(fake_key: str) -> None:
    spec, q = _spec_and_question("simulated_mini")
    with _server(lambda b: Reply(text="answer"), lambda b: Reply(status=400)) as srv:
        o, _ = _talk(srv, spec, q)
    assert o.user_tokens == (0, 0) and o.user_calls == 0 and o.user_error.startswith("simulated user, turn 1: ")


def test_a_user_failing_after_the_candidate_opened_names_its_own_first_turn(fake_key: str) -> None:
    spec, q = _spec_and_question("simulated_mini", first="candidate")
    with _server(lambda b: Reply(text="hello, how can I help?"), lambda b: Reply(status=400)) as srv:
        o, _ = _talk(srv, spec, q)
    assert o.user_error.startswith("simulated user, turn 1: ") and o.cand_calls == 1


def test_only_the_first_stop_signal_counts(fake_key: str) -> None:
    spec, q = _spec_and_question("simulated_mini")
    stop = spec.conversation.stop
    with _server(lambda b: Reply(text="answer"), _user_says("hi", f"bye {stop} and {stop} again")) as srv:
        o, _ = _talk(srv, spec, q)
    assert o.transcript[-1].content == "bye" and o.ended == "stop"


def test_a_second_session_replays_every_turn_from_the_cache_and_counts_the_hits(fake_key: str, tmp_path: Path) -> None:
    from rubric_engine.models.cache import ResultCache

    spec, q = _spec_and_question("simulated_mini")
    with _server(lambda b: Reply(text=f"answer {_said(b, 'user')}"), _user_says("hi", "more", f"{spec.conversation.stop}")
                 ) as srv:
        cache = ResultCache(tmp_path / "cache")
        first, _ = _talk(srv, spec, q, cache=cache)
        sent = len(srv.requests)
        again, _ = _talk(srv, spec, q, cache=cache)
        assert len(srv.requests) == sent  # nothing paid twice
        other, _ = _talk(srv, spec, q, cache=cache, repeat=1)  # another sample is another set of calls
        assert len(srv.requests) == 2 * sent
        default, _ = _talk(srv, spec, q, cache=cache, repeat=0)
        assert len(srv.requests) == 2 * sent
        cache.close()
    assert (first.cand_cached, first.user_cached) == (0, 0)
    assert (again.cand_cached, again.user_cached) == (2, 3) and again.transcript == first.transcript
    assert (other.cand_cached, default.cand_cached) == (0, 2)


def test_the_mock_user_says_the_stop_signal_after_three_turns(fake_key: str) -> None:
    spec, q = _spec_and_question("simulated_mini", max_turns=5)
    mock = ModelSpec.from_config({"name": "mock", "model": "mock/user"}, role="candidate")

    async def main() -> ModelClient:
        return ModelClient(mock, cache=None, concurrency=1, max_retries=0, role="user")
    with _server(lambda b: Reply(text="answer")) as srv:
        user = asyncio.run(main())
        o, exc = _talk(srv, spec, q, sim_client=user)
    assert exc is None and o.ended == "stop" and o.user_calls == 4 and o.cand_calls == 3
