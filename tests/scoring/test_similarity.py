"""The checks an imported OpenAI eval or promptfoo suite becomes: equals / not_equals, the similarity metrics
(values computed by hand below) and the multi-grader formula (read with ast and a whitelist, never eval)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rubric_engine.scoring.checks import CheckProblem, check_dict, check_value, parse_check, run_check
from rubric_engine.scoring.expression import ExpressionError, check_expression, evaluate
from rubric_engine.scoring.similarity import similarity

CAT, MAT = "the cat sat on the mat", "the cat sat on a mat"


@pytest.mark.parametrize(("metric", "a", "b", "value"), [
    # 2 * LCS / (len a + len b): "paris"/"Paris" share "aris" -> 8/10; identical -> 1; nothing shared -> 0
    ("fuzzy_match", "paris", "Paris", 0.8), ("fuzzy_match", "Paris", "Paris", 1.0), ("fuzzy_match", "abc", "xyz", 0.0),
    ("fuzzy_match", "", "", 1.0), ("fuzzy_match", "kitten", "sitting", 2 * 4 / 13),
    # clipped n-gram precisions 5/6, 3/5, 2/4, 1/3; equal lengths: no brevity penalty
    ("bleu", CAT, MAT, (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25),
    ("bleu", "the cat", CAT, 0.0),  # no 3-gram: no smoothing, 0
    ("bleu", "the cat sat on", CAT, math.exp(1 - 6 / 4)),  # every n-gram matches; brevity penalty exp(1 - 6/4)
    # GLEU: 11 matched n-grams of 18 in each
    ("gleu", CAT, MAT, 11 / 18),
    ("rouge_1", CAT, MAT, 5 / 6), ("rouge_2", CAT, MAT, 3 / 5), ("rouge_3", CAT, MAT, 2 / 4),
    ("rouge_l", CAT, MAT, 5 / 6),  # LCS "the cat sat on mat"
    ("rouge_l", "Paris", "The capital of France is Paris.", 2 / 7),  # P 1, R 1/6
    ("rouge_1", "THE Cat!", "the cat", 1.0),  # lower case, punctuation is no token
])
def test_metrics_by_hand(metric: str, a: str, b: str, value: float) -> None:
    assert similarity(metric, a, b) == pytest.approx(value)


@pytest.mark.parametrize(("check", "reply", "hit"), [
    ({"type": "equals", "value": "Paris"}, "Paris", True),
    ({"type": "equals", "value": "Paris"}, "Paris.", False),
    ({"type": "equals", "value": "Paris"}, "paris", False),
    ({"type": "equals", "value": "Paris", "ignore_case": True}, "PARIS", True),
    ({"type": "not_equals", "value": "I cannot help"}, "Paris", True),
    ({"type": "not_equals", "value": "I cannot help"}, "I cannot help", False),
    ({"type": "similarity", "metric": "fuzzy_match", "reference": "Paris", "threshold": 0.8}, "paris", True),
    ({"type": "similarity", "metric": "fuzzy_match", "reference": "Paris", "threshold": 0.81}, "paris", False),
    ({"type": "formula", "expression": "0.5 * a + 0.5 * b", "threshold": 0.6,
      "parts": {"a": {"type": "equals", "value": "Tokyo"},
                "b": {"type": "similarity", "metric": "fuzzy_match", "reference": "Tokyo", "threshold": 1}}},
     "tokyo", False),  # 0.5 * 0 + 0.5 * 0.8 = 0.4
    ({"type": "formula", "expression": "max(a, b) ^ 2", "threshold": 0.64,
      "parts": {"a": {"type": "equals", "value": "Tokyo"},
                "b": {"type": "similarity", "metric": "fuzzy_match", "reference": "Tokyo", "threshold": 1}}},
     "tokyo", True),  # 0.8 ^ 2 = 0.64
])
def test_new_checks_truth_table(check: dict[str, Any], reply: str, hit: bool) -> None:
    parsed = parse_check(check)
    assert run_check(parsed, reply).hit is hit
    assert parse_check(check_dict(parsed)) == parsed  # records hold it and read it back


def test_a_formula_part_has_its_value() -> None:
    part = parse_check({"type": "similarity", "metric": "rouge_l", "reference": "a b c d", "threshold": 1})
    assert check_value(part, "a b") == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert check_value(parse_check({"type": "contains", "value": "x"}), "x") == 1.0


@pytest.mark.parametrize(("check", "key"), [
    ({"type": "similarity", "metric": "cosine", "reference": "x", "threshold": 0.5}, "metric"),
    ({"type": "similarity", "metric": "meteor", "reference": "x", "threshold": 0.5}, "metric"),
    ({"type": "similarity", "metric": "bleu", "reference": "x", "threshold": "high"}, "threshold"),
    ({"type": "formula", "expression": "a + c", "threshold": 1, "parts": {"a": {"type": "equals", "value": "x"}}},
     "expression"),
    ({"type": "formula", "expression": "a", "threshold": 1, "parts": {"a": {"type": "formula", "expression": "1",
                                                                            "threshold": 1, "parts": {}}}}, "parts.a"),
    ({"type": "formula", "expression": "a", "threshold": 1, "parts": {"a": {"type": "equals"}}}, "parts.a.value"),
])
def test_a_bad_new_check_names_its_key(check: dict[str, Any], key: str) -> None:
    with pytest.raises(CheckProblem) as err:
        parse_check(check)
    assert err.value.key == key


@pytest.mark.parametrize(("formula", "value"), [
    ("0.5 * a + 0.5 * b", 0.5), ("a ^ 2 + b ** 2", 1.0), ("min(a, b) - max(a, b)", -1.0), ("abs(-3) / 4", 0.75),
    ("floor(2.7) + ceil(0.2)", 3.0), ("sqrt(4) * exp(0) + log(1)", 2.0), ("-(a + 2) * (b - 1)", 3.0)])
def test_formulas_compute(formula: str, value: float) -> None:
    assert evaluate(formula, {"a": 1.0, "b": 0.0}) == pytest.approx(value)


@pytest.mark.parametrize("formula", [
    "__import__('os').system('true')", "a.__class__", "a[0]", "'text'", "lambda: 1", "open('x')", "a if b else 1",
    "[a]", "a < b", "", "2 ** 2 ** 2 ** 2 ** 2", "(" * 200 + "a" + ")" * 200 + " +"])
def test_formulas_that_may_not_run_are_refused(formula: str) -> None:
    with pytest.raises(ExpressionError):
        check_expression(formula, ["a", "b"])
        evaluate(formula, {"a": 1.0, "b": 2.0})


@pytest.mark.parametrize("formula", ["a / b", "log(b)", "sqrt(-1)", "10 ^ 1001", "exp(1000)", "(-1) ^ 0.5"])
def test_impossible_values_are_errors_not_crashes(formula: str) -> None:
    with pytest.raises(ExpressionError):
        evaluate(formula, {"a": 1.0, "b": 0.0})
