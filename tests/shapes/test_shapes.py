"""The evaluation shapes' registry and strategies (rubric_engine/shapes/), in-process.

The rules docs/development.md ("How to add a shape") states: every name the spec schema accepts for
`conversation.mode` and `judge.verdict.kind` has exactly one strategy, registered under that name; a spec with no
judge is judged by criteria; a conversation drives its session's turns in its own order (scripted: each data turn
then the candidate; simulated: the candidate first when it opens, then user and candidate until the user stops or
max_turns is reached, which is recorded as a cut).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

import pytest

from rubric_engine.dataset.load import load_dataset
from rubric_engine.errors import SpecError
from rubric_engine.shapes.base import Talk
from rubric_engine.errors import DataError
from rubric_engine.record.codec import decode
from rubric_engine.shapes.plan import question_calls
from rubric_engine.shapes.registry import CONVERSATIONS, VERDICTS, check_templates, shape_for, stored_shape
from rubric_engine.spec.facts import JUDGELESS_KINDS, RUBRIC_BY_KIND
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import BenchmarkSpec, Conversation, VerdictFields

from conftest import DATA
REPO = DATA.parents[1]


def test_every_name_the_schema_accepts_has_one_strategy_under_that_name() -> None:
    assert sorted(CONVERSATIONS) == sorted(get_args(Conversation.model_fields["mode"].annotation))
    # a judge's kinds, and the kinds the engine decides alone, each declared by a top-level block of its name
    assert sorted(VERDICTS) == sorted(get_args(VerdictFields.model_fields["kind"].annotation) + JUDGELESS_KINDS)
    assert all(kind in BenchmarkSpec.model_fields for kind in JUDGELESS_KINDS)
    assert all(s.name == name for name, s in (*CONVERSATIONS.items(), *VERDICTS.items()))
    assert len({id(s) for s in (*CONVERSATIONS.values(), *VERDICTS.values())}) == len(CONVERSATIONS) + len(VERDICTS)
    assert sorted(RUBRIC_BY_KIND) == sorted(VERDICTS)  # what the data reader needs of each kind (spec/facts.py)


@pytest.mark.parametrize(("bench", "conversation", "verdict"), [
    ("checks_mini", "single", "criteria"), ("scripted_mini", "scripted", "criteria"),
    ("simulated_mini", "simulated", "criteria"), ("pairwise_mini_spec", "single", "pairwise"),
    ("likert_mini", "single", "score"), (REPO / "benchmarks" / "mt_bench", "scripted", "score"),
    (REPO / "benchmarks" / "eq_bench", "single", "rating")])
def test_a_spec_is_looked_up_by_its_mode_and_kind(bench: str | Path, conversation: str, verdict: str) -> None:
    spec = load_spec(DATA / bench)
    shape = shape_for(spec)
    assert (shape.conversation.name, shape.verdict.name) == (conversation, verdict)
    assert shape.conversation.talks is (conversation != "single")
    assert shape.conversation.simulates_user is (conversation == "simulated")
    assert shape.verdict.compares is (verdict == "pairwise")

    stored = stored_shape(json.loads(json.dumps(spec.resolved())), "spec.resolved.json")  # as a run wrote it
    assert (stored.conversation, stored.verdict) == (shape.conversation, shape.verdict)


def test_a_stored_run_is_read_through_its_shape() -> None:
    """A resolved spec without the keys (an older run's) is a single reply judged by criteria; a stored record's
    session and games are read by the shape that wrote them; a name this version does not know is one line."""
    plain = stored_shape({}, "spec.resolved.json")
    rec = decode({"id": "q", "transcript": [],
                  "games": [{"order": "baseline_first", "label": "A>B", "reasoning": None, "error": None}]})
    assert plain.conversation.stored_transcript(rec) is None and plain.verdict.stored_games(rec) is None
    session, games = CONVERSATIONS["scripted"].stored_transcript(rec), VERDICTS["pairwise"].stored_games(rec)
    assert session is not None and session.turns == () and session.ended is None
    assert games is not None and [(g.order, g.label, g.error) for g in games] == [("baseline_first", "A>B", None)]
    bare = decode({"id": "q"})
    assert CONVERSATIONS["simulated"].stored_transcript(bare) is None and VERDICTS["pairwise"].stored_games(bare) is None
    with pytest.raises(DataError, match=r"run/spec.resolved.json: the run's spec names verdict kind 'elo'"):
        stored_shape({"judge": {"verdict": {"kind": "elo"}}}, "run/spec.resolved.json")


def test_a_spec_without_a_judge_is_judged_by_criteria() -> None:
    spec = load_spec(DATA / "checks_mini")
    assert shape_for(spec.model_copy(update={"judge": None})).verdict is VERDICTS["criteria"]


def _session(bench: str, **conversation: Any) -> tuple[list[str], Any]:
    """The moves a conversation makes on a recording Talk: 'user:<text>' for a data turn, 'candidate', 'user'
    (the simulated user asked; it stops at its third turn), 'cut'."""
    spec = load_spec(DATA / bench)
    spec.conversation = spec.conversation.model_copy(update=conversation)
    q = load_dataset(spec, DATA / bench / f"{bench}.jsonl").questions[0]
    moves: list[str] = []

    async def candidate() -> None:
        moves.append("candidate")

    async def user() -> bool:
        moves.append("user")
        return moves.count("user") < 3

    talk = Talk(user_says=lambda text: moves.append(f"user:{text}"), candidate=candidate, user=user,
                cut=lambda: moves.append("cut"))
    asyncio.run(shape_for(spec).conversation.converse(spec, q, talk))
    return moves, q


def test_a_scripted_session_answers_each_data_turn_in_order() -> None:
    moves, q = _session("scripted_mini")
    assert len(q.turns) >= 2
    assert moves == [m for t in q.turns for m in (f"user:{t}", "candidate")]


def test_a_simulated_session_ends_when_the_user_stops_or_is_cut_at_max_turns() -> None:
    moves, _ = _session("simulated_mini", max_turns=5, first="user")
    assert moves == ["user", "candidate", "user", "candidate", "user"]  # the third user turn says stop
    moves, _ = _session("simulated_mini", max_turns=2, first="candidate")
    assert moves == ["candidate", "user", "candidate", "user", "candidate", "cut"]


def test_a_single_reply_has_no_session() -> None:
    spec = load_spec(DATA / "checks_mini")
    with pytest.raises(NotImplementedError):
        asyncio.run(shape_for(spec).conversation.converse(spec, None, None))  # type: ignore[arg-type]


def test_the_preflight_renders_the_judge_template_of_a_question_whose_items_are_all_checked(tmp_path: Path) -> None:
    """The preflight renders the plan of calls (shapes/plan.py); a question the engine grades alone has no judge
    request in it, yet a broken judge.template is still refused before any call, with its file named."""
    src = DATA / "checks_mini"
    shutil.copytree(src, tmp_path / "checks_mini")
    (tmp_path / "checks_mini" / "judge.j2").write_text("Grade {{ no_such_variable }}.\n")
    spec = load_spec(str(tmp_path / "checks_mini"))
    q = load_dataset(spec).questions[0]
    check = next(c.check for c in q.criteria if c.check is not None)
    checked = replace(q, criteria=tuple(replace(c, check=c.check or check) for c in q.criteria))
    assert question_calls(spec, shape_for(spec), checked).judge == ()
    with pytest.raises(SpecError, match="judge.j2"):
        check_templates(spec, [checked])
