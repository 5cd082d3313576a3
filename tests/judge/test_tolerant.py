"""The tolerant reading of a plain-text verdict (judge/tolerant.py): what it repairs, and what it never invents.

Pure parsing (no call): the console-script path that uses it is tests/judge/test_dialects.py's.
"""

from __future__ import annotations

import pytest

from rubric_engine.judge.tolerant import lenient
from rubric_engine.judge.verdicts import VerdictError, VerdictShape

LIST = VerdictShape()
OBJECT = VerdictShape("object", reasoning="explanation", met="criteria_met")


@pytest.mark.parametrize("text, hits", [
    ('```json\n{"criteria": [{"id": 1, "reasoning": "a", "met": true,}, {"id": 2, "reasoning": "b", "met": false},],}\n```',
     [True, False]),
    ('Here you go: {criteria: [{id: 1, reasoning: "a", met: yes}, {id: 2, reasoning: "b", met: "No"}]} Thanks!',
     [True, False]),
    ('{"criteria": [{"id": 2, "reasoning": "b", "met": True}, {"id": 1, "reasoning": "a", "met": False}]}',
     [False, True]),
])
def test_almost_right_lists_are_read(text: str, hits: list[bool]) -> None:
    assert [v.hit for v in lenient(LIST, 2)(text)] == hits


@pytest.mark.parametrize("text, hit, why", [
    ("explanation: the reply names the feeling\ncriteria_met: yes", True, "the reply names the feeling"),
    ("**Explanation**: no advice given.\n**criteria_met**: no", False, "no advice given."),
    ('{"explanation": "fine", "criteria_met": "yes",}', True, "fine"),
])
def test_almost_right_objects_are_read(text: str, hit: bool, why: str) -> None:
    [v] = lenient(OBJECT, 1)(text)
    assert (v.hit, v.reasoning) == (hit, why)


@pytest.mark.parametrize("shape, n, text", [
    (OBJECT, 1, "explanation: unsure\ncriteria_met: maybe"),
    (OBJECT, 1, "I think the reply is fine."),
    (LIST, 2, '{"criteria": [{"id": 1, "reasoning": "a", "met": yes}]}'),  # one item short stays short
])
def test_text_without_a_decision_stays_unusable_with_the_strict_words(shape: VerdictShape, n: int, text: str) -> None:
    with pytest.raises(VerdictError) as strict:
        shape.parse(text, n)
    with pytest.raises(VerdictError) as tolerant:
        lenient(shape, n)(text)
    assert str(tolerant.value) == str(strict.value)
