"""What the simulated user and the dry run see (judge/dialogue.py), in-process so the mutation tool sees them.

The rules the module docstring and docs/authoring.md ("Shapes: simulated users") state: the simulator's view is
its persona, its optional opening, then the data's fixed dialogue and the transcript with the roles swapped
(every candidate line as `user`, its own lines as `assistant`, the prefix's system turns left out); its templates
read `question`, `row`, `dialogue`, `reference`, `max_turns` and `stop`; a template that renders only whitespace
is one error naming the file and the question; templates are checked against the first `n` questions (3 by
default) before any call; the dry run counts one call for a single reply. The fixed dialogue here is asymmetric
(a system note, two patient lines, one doctor line) so a role swap applied the wrong way, or not at all, shows.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dataset.load import load_dataset
from rubric_engine.errors import SpecError
from rubric_engine.judge.dialogue import simulator_view
from rubric_engine.shapes.registry import check_templates, shape_for
from rubric_engine.judge.prompts import candidate_messages
from rubric_engine.spec.load import load_spec

from conftest import DATA

_ROWS = [
    {"id": "d1", "name": "Ana", "persona": "a patient", "ref": "REF-ONE",
     "dialogue": [{"role": "note", "content": "NOTE"}, {"role": "patient", "content": "P1"},
                  {"role": "doctor", "content": "D1"}, {"role": "patient", "content": "P2"}],
     "checks": [{"text": "Listens.", "points": 1}]},
    {"id": "d2", "name": "Ben", "persona": "a student", "ref": "REF-TWO",
     "dialogue": [{"role": "patient", "content": "Q"}], "checks": [{"text": "Helps.", "points": 1}]},
    {"id": "d3", "name": "Cleo", "persona": "a cook", "ref": "REF-3",
     "dialogue": [{"role": "patient", "content": "R"}], "checks": [{"text": "Helps.", "points": 1}]},
    {"id": "d4", "name": "Dan", "persona": "a hiker", "ref": "REF-4",
     "dialogue": [{"role": "patient", "content": "S"}], "checks": [{"text": "Helps.", "points": 1}]},
]


def first_request(spec: Any, q: Any, role: str = "candidate") -> Any:
    """The dry run's first request's messages and call count for a role: the spec's conversation's (shapes/)."""
    request = shape_for(spec).conversation.first_request(spec, q, role)
    return request.messages, request.calls


def _bench(tmp_path: Path, persona: str | None = None, opening: str | None = None,
           judge: str | None = None) -> tuple[Any, list[Any], Path]:
    """simulated_mini copied, its rows holding a fixed dialogue with labels mapped to chat roles."""
    root = tmp_path / "simulated_mini"
    shutil.copytree(DATA / "simulated_mini", root)
    yaml = (root / "benchmark.yaml").read_text(encoding="utf-8")
    yaml = yaml.replace("  roles: {user: user, assistant: assistant}",
                        "  roles: {patient: user, doctor: assistant, note: system}")
    yaml = yaml.replace("    item_weight: points\n", "    item_weight: points\n    reference: ref\n")
    (root / "benchmark.yaml").write_text(yaml, encoding="utf-8")
    (root / "simulated_mini.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _ROWS), encoding="utf-8")
    for name, text in (("persona.j2", persona), ("open.j2", opening), ("judge.j2", judge)):
        if text is not None:
            (root / name).write_text(text, encoding="utf-8")
    spec = load_spec(root)
    return spec, list(load_dataset(spec, root / "simulated_mini.jsonl").questions), root


def test_the_simulator_sees_the_given_dialogue_swapped_without_its_system_turns(tmp_path: Path) -> None:
    persona = ("PERSONA {{ question.id }} {{ row.name }} ref={{ reference }} turns={{ max_turns }} stop={{ stop }} "
               "{% for t in dialogue %}{{ t.speaker }}:{{ t.role }};{% endfor %}")
    spec, qs, _ = _bench(tmp_path, persona=persona)
    transcript = [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"}]
    got = simulator_view(spec, qs[0], transcript)
    assert got == [
        # the persona reads the question, the row, the reference, the bounds and the dialogue (speaker: chat role)
        {"role": "system", "content": "PERSONA d1 Ana ref=REF-ONE turns=3 stop=[END] "
                                      "note:system;patient:user;doctor:assistant;patient:user;"},
        {"role": "user", "content": "Start the conversation as Ana.\n"},
        # the prefix without its system note, roles swapped: the patient (the user) speaks as the simulator
        {"role": "assistant", "content": "P1"}, {"role": "user", "content": "D1"},
        {"role": "assistant", "content": "P2"},
        # then the transcript, swapped the same way, after the prefix (not instead of it)
        {"role": "assistant", "content": "u1"}, {"role": "user", "content": "a1"},
    ]
    # the candidate's own view keeps the data's roles (and its system note): only the simulator's is swapped
    assert candidate_messages(spec, qs[0], mode="chat_turns")[-3:] == [
        {"role": "user", "content": "P1"}, {"role": "assistant", "content": "D1"}, {"role": "user", "content": "P2"}]


def test_an_opening_that_renders_empty_for_a_row_is_one_error_naming_the_question(tmp_path: Path) -> None:
    spec, qs, root = _bench(tmp_path, opening="{% if row.id != 'd2' %}Hello as {{ row.name }}{% endif %}  \n")
    assert simulator_view(spec, qs[0], [])[1] == {"role": "user", "content": "Hello as Ana  \n"}
    with pytest.raises(SpecError) as e:
        simulator_view(spec, qs[1], [])
    assert str(e.value) == (f"{root / 'open.j2'}: conversation.simulator.template: rendered an empty message for "
                            "question d2; the template must write the simulated user's instructions for every row "
                            "(check the row fields it reads)")


def test_templates_are_checked_against_the_first_n_questions_three_by_default(tmp_path: Path) -> None:
    # the persona breaks on the fourth row only: the default check (three rows) passes, n=4 finds it
    spec, qs, root = _bench(tmp_path, persona="{% if row.id == 'd4' %}{{ row.nope.deeper }}{% endif %}P {{ row.name }}")
    check_templates(spec, qs)
    with pytest.raises(SpecError):
        check_templates(spec, qs, n=4)
    # the judge's template breaks on the second row only: n reaches the judge's check too (n=1 passes)
    judge = (root / "judge.j2").read_text(encoding="utf-8")
    spec, qs, _ = _bench(tmp_path / "j", judge="{% if question.id == 'd2' %}{{ row.nope.deeper }}{% endif %}" + judge)
    check_templates(spec, qs, n=1)
    with pytest.raises(SpecError):
        check_templates(spec, qs, n=2)


def test_a_candidate_with_nothing_to_answer_names_the_last_spec_file_or_the_spec_dir() -> None:
    spec = load_spec(DATA / "simulated_mini")
    qs = list(load_dataset(spec, DATA / "simulated_mini" / "simulated_mini.jsonl").questions)
    spec.conversation.first = "candidate"
    spec.candidate.system = None
    rest = ("conversation.first: the candidate speaks first but has nothing to answer (got 'candidate'); "
            "set candidate.system (or give the data a dialogue), or use first: user")
    with pytest.raises(SpecError) as e:
        check_templates(spec, qs)
    assert str(e.value) == f"{spec.files[-1]}: {rest}" and e.value.file == str(DATA / "simulated_mini" / "benchmark.yaml")
    spec._files = []  # a spec built in memory has no file: the error names its directory
    with pytest.raises(SpecError) as e:
        check_templates(spec, qs)
    assert str(e.value) == f"{spec.dir}: {rest}"


def test_the_dry_run_counts_one_call_for_a_single_reply_whatever_the_role() -> None:
    spec = load_spec(DATA / "checks_mini")
    q = load_dataset(spec, DATA / "checks_mini" / "checks_mini.jsonl").questions[0]
    assert spec.conversation.mode == "single"
    assert first_request(spec, q) == (candidate_messages(spec, q), 1)
    assert first_request(spec, q, role="user") == (candidate_messages(spec, q), 1)
    assert first_request(spec, q)[0][-1]["role"] == "user"  # the question itself, no "..." placeholder
    assert {"role": "user", "content": "..."} not in first_request(spec, q)[0]
