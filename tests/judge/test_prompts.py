"""Prompt construction against the real heartbench spec, on the mini data and (when present) the real data."""

from __future__ import annotations

from pathlib import Path

import pytest

from rubric_engine.dataset.load import Criterion, Question, Turn
from rubric_engine.errors import SpecError
from rubric_engine.judge.prompts import candidate_messages, criteria_vars, judge_messages
from rubric_engine.spec.load import load_spec

from conftest import REPO


@pytest.fixture(params=["mini", "real"])
def every_question(request, spec):
    """Every question of the mini file, then of the real HeartBench file (skipped when absent)."""
    from rubric_engine.dataset.load import load_dataset

    path = request.getfixturevalue("mini_file" if request.param == "mini" else "heartbench_file")
    return load_dataset(spec, path).questions

def _weight_text(c: Criterion) -> str:
    if c.weight is None:
        return "—"  # how the heartbench judge template shows an unweighted item
    return str(int(c.weight)) if float(c.weight).is_integer() else str(c.weight)


def _derived(tmp_path: Path, yaml_body: str, files: dict[str, str] | None = None):
    """A benchmark extending heartbench, written to tmp_path (search path = the repo's benchmarks)."""
    d = tmp_path / "derived"
    d.mkdir()
    (d / "benchmark.yaml").write_text("extends: heartbench\nname: derived\n" + yaml_body, encoding="utf-8")
    for name, text in (files or {}).items():
        (d / name).write_text(text, encoding="utf-8")
    return load_spec(d, search_path=[REPO / "benchmarks"])


def test_candidate_single_user_message_with_every_turn_in_order(spec, every_question):
    assert len(every_question) in (12, 296)
    for q in every_question:
        msgs = candidate_messages(spec, q)
        assert [m["role"] for m in msgs] == ["user"]
        text = msgs[0]["content"]
        pos = 0
        for turn in q.dialogue:
            line = f"{turn.role}：{turn.content}"  # speaker shown as the data's role label
            found = text.find(line, pos)
            assert found >= 0, (q.id, line)
            pos = found + len(line)


def test_judge_message_has_every_criterion_numbered_and_count(spec, every_question):
    for q in every_question:
        response = f"回复-{q.id}"
        msgs = judge_messages(spec, q, response)
        assert [m["role"] for m in msgs] == ["system", "user"]
        text = msgs[-1]["content"]
        assert response in text
        assert f"共 {len(q.criteria)} 条" in text
        pos = 0
        for i, c in enumerate(q.criteria, start=1):
            line = f"{i}. [{c.label}][{_weight_text(c)}] {c.text}"
            found = text.find(line, pos)
            assert found >= 0, (q.id, line)
            pos = found + len(line)
        # failure-rule items are shown to the judge like any other item
        assert any(c.rule for c in q.criteria) == ("[其他]" in text)


def test_criteria_vars_number_all_items_and_show_integral_weights():
    crit = (Criterion(1, "x", 3.0, "a", ability="a1"), Criterion(2, "y", -2.5, "b", ability="a1"),
            Criterion(3, "z", None, "c", rule="r"))
    out = criteria_vars(crit)
    assert [c["index"] for c in out] == [1, 2, 3]
    assert [c["weight"] for c in out] == [3, -2.5, None]
    assert isinstance(out[0]["weight"], int)
    assert out[2]["rule"] == "r" and out[0]["ability"] == "a1"


def test_chat_turns_maps_roles(tmp_path, questions):
    spec = _derived(tmp_path, "candidate: {mode: chat_turns, template: null}\n")
    q = max(questions, key=lambda q: len(q.dialogue))
    msgs = candidate_messages(spec, q)
    assert [m["content"] for m in msgs] == [t.content for t in q.dialogue]
    assert [m["role"] for m in msgs] == [{"A": "user", "B": "assistant"}[t.role] for t in q.dialogue]
    assert msgs[-1]["role"] == "user"


def test_chat_turns_template_becomes_system_message(tmp_path):
    spec = _derived(tmp_path, "candidate: {mode: chat_turns, template: inst.j2, system: sys.j2}\n",
                    {"inst.j2": "Reply to {{ dialogue[-1].speaker }} ({{ dialogue | length }} turns).",
                     "sys.j2": "You are kind."})
    q = Question(id="q", dialogue=(Turn("A", "hi"), Turn("B", "yo"), Turn("A", "sad")), criteria=())
    msgs = candidate_messages(spec, q)
    assert msgs == [{"role": "system", "content": "You are kind."},
                    {"role": "system", "content": "Reply to A (3 turns)."},
                    {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                    {"role": "user", "content": "sad"}]


def test_undefined_variable_names_file_and_variable(tmp_path, questions):
    spec = _derived(tmp_path, "judge: {template: bad_judge.j2}\n",
                    {"bad_judge.j2": "{{ response }} {{ rubric_lines }}\n"})
    with pytest.raises(SpecError) as err:
        judge_messages(spec, questions[0], "r")
    msg = str(err.value)
    assert "bad_judge.j2" in msg and "rubric_lines" in msg and "judge.template" in msg


def test_undefined_attribute_in_candidate_template(tmp_path, questions):
    spec = _derived(tmp_path, "candidate: {template: bad_cand.j2}\n",
                    {"bad_cand.j2": "{% for t in dialogue %}{{ t.speekr }}{% endfor %}"})
    with pytest.raises(SpecError, match=r"bad_cand\.j2.*speekr"):
        candidate_messages(spec, questions[0])


def test_inherited_template_resolves_against_declaring_spec(tmp_path, spec, questions):
    derived = _derived(tmp_path, "description: same prompts\n")
    q = questions[0]
    assert candidate_messages(derived, q) == candidate_messages(spec, q)
    assert judge_messages(derived, q, "x") == judge_messages(spec, q, "x")


def test_unmapped_role_label_is_a_spec_error(spec):
    q = Question(id="q", dialogue=(Turn("C", "hello"),), criteria=())
    with pytest.raises(SpecError, match=r"data\.roles.*'C'"):
        candidate_messages(spec, q)
