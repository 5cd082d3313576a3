"""Scores on a scale in the spec language: the defaults and cross-field rules of `judge.verdict.kind: score`
and `judge.scope`.

Why apart from spec/checks.py: a score verdict changes what a question's score is (the judge's number, not a
formula over criteria), so it brings its own defaults (scoring.scale 1, the overall a mean over questions) and
its own one-line errors (a range with min >= max, a pattern that does not compile or has no group, per-turn
judging of a single reply), all before any call is paid for.
"""

from __future__ import annotations

from typing import Any, Callable

from rubric_engine.scoring.checks import compile_re2

BenchmarkSpec = Any  # spec/schema.py imports this module: its BenchmarkSpec cannot be imported back

__all__ = ["score_defaults", "drop_score_defaults", "check_scale", "is_score", "multi_turn"]

Fail = Callable[..., None]
_VERDICT_DEFAULTS = {"kind": "criteria", "min": None, "max": None, "field": "score", "pattern": None}


def is_score(spec: "BenchmarkSpec") -> bool:
    """True when the judge answers with a number on a scale."""
    return spec.judge is not None and spec.judge.verdict.kind == "score"  # None: every item checked


def multi_turn(spec: "BenchmarkSpec") -> bool:
    """True when the candidate writes several replies (a scripted or simulated conversation)."""
    conversation = getattr(spec, "conversation", None)
    return getattr(conversation, "mode", "single") not in ("single", None)


def score_defaults(spec: "BenchmarkSpec") -> None:
    """A score verdict's question score is the judge's number: unless declared, it is reported as is (scale
    1) and the overall is the mean over questions (a taxonomy's groups do not exist for it)."""
    if not is_score(spec):
        return
    if "scale" not in spec.scoring.model_fields_set:
        spec.scoring = spec.scoring.model_copy(update={"scale": 1.0})
    agg, update = spec.aggregation, {}
    if "overall" not in agg.model_fields_set:
        update["overall"] = "mean_over_questions"
    if "question" not in agg.model_fields_set:
        update["question"] = "all_items"
    if update:
        spec.aggregation = agg.model_copy(update=update)


def drop_score_defaults(dump: dict[str, Any]) -> None:
    """Leave the score keys out of a resolved spec's dump where they hold their defaults, so the dump and the
    spec hash of every spec written before they existed stay byte for byte the same."""
    verdict = (dump.get("judge") or {}).get("verdict", {})  # no judge: every item is checked by the engine
    for key, default in _VERDICT_DEFAULTS.items():
        if key in verdict and verdict[key] == default:
            del verdict[key]
    if (dump.get("judge") or {}).get("scope") == "conversation":
        del dump["judge"]["scope"]
    if "turn" in (dump.get("judge") or {}) and dump["judge"]["turn"] is None:
        del dump["judge"]["turn"]
    if "references" in dump.get("data", {}) and dump["data"]["references"] is None:
        del dump["data"]["references"]


def _check_chosen_turn(spec: "BenchmarkSpec", fail: Fail) -> None:
    """`judge.scope: turn` grades the candidate turn `judge.turn` of a conversation with a score; a scripted
    row with fewer turns is refused as the data is read (dataset/load.py), a simulated session that ended
    sooner is that question's judge error (judge/scores.py)."""
    j = spec.judge
    if j.scope != "turn":
        if j.turn is not None:
            fail(("judge", "turn"), "judge.turn applies only to judge.scope: turn", j.turn,
                 "set judge.scope: turn, or drop judge.turn")
        return
    if j.turn is None:
        fail(("judge", "turn"), "judge.scope: turn needs the candidate turn to grade", None,
             "declare judge.turn: K (1 = the first candidate reply)")
    if not is_score(spec):
        fail(("judge", "scope"), "judging a chosen turn needs a score verdict (one number for that turn)", j.scope,
             "set judge.verdict.kind: score, or judge.scope: conversation")
    if not multi_turn(spec):
        fail(("judge", "scope"), "judging a chosen turn needs a conversation of several candidate turns; this "
             "spec's candidate writes one reply", j.scope, "use judge.scope: conversation, or declare "
             "conversation.mode: scripted")
    conv = spec.conversation
    most = conv.max_turns + (conv.first == "candidate")
    if conv.mode == "simulated" and j.turn is not None and j.turn > most:
        fail(("judge", "turn"), f"a simulated session has at most {most} candidate turns "
             f"(conversation.max_turns {conv.max_turns})", j.turn, f"choose a turn from 1 to {most}")


def check_scale(spec: "BenchmarkSpec", fail: Fail) -> None:
    """The rules of score verdicts and judge scopes; `fail(key, message, value, fix)` raises the SpecError."""
    v, j = spec.judge.verdict, spec.judge
    if j.scope == "each_turn" and not is_score(spec):
        fail(("judge", "scope"), "each_turn judging needs a score verdict (one number per turn)", j.scope,
             "set judge.verdict.kind: score, or judge.scope: conversation")
    if j.scope == "each_turn" and not multi_turn(spec):
        fail(("judge", "scope"), "each_turn judging needs a conversation of several candidate turns; this spec's "
             "candidate writes one reply", j.scope, "use judge.scope: conversation (or last_turn), or declare "
             "conversation.mode: scripted")
    _check_chosen_turn(spec, fail)
    if not is_score(spec):
        for key in ("min", "max", *(("pattern",) if v.kind == "criteria" else ())):  # pairwise reads labels by one
            if getattr(v, key) is not None:
                fail(("judge", "verdict", key), f"judge.verdict.{key} applies only to kind: score", getattr(v, key),
                     "set judge.verdict.kind: score, or drop the key")
        return
    if v.min is None or v.max is None:
        fail(("judge", "verdict", "min" if v.min is None else "max"), "a score verdict needs its declared range",
             None, "declare judge.verdict.min and judge.verdict.max (e.g. 1 and 10)")
    assert v.min is not None and v.max is not None
    if v.min >= v.max:
        fail(("judge", "verdict", "min"), f"min must be below max (got min {v.min:g}, max {v.max:g})", v.min,
             "declare the scale's lowest value as min and its highest as max")
    if not v.field.isidentifier() or v.field == v.reasoning:
        fail(("judge", "verdict", "field"), "the score field must be an identifier other than the reasoning field",
             v.field, "e.g. field: score, reasoning: reasoning")
    if isinstance(v.pattern, list) and not v.pattern:
        fail(("judge", "verdict", "pattern"), "the pattern list is empty", v.pattern,
             r"give one regular expression whose group 1 is the number, e.g. \[\[(\d+\.?\d*)\]\]")
    for pattern in [v.pattern] if isinstance(v.pattern, str) else v.pattern or []:  # several: tried in order
        try:
            groups = compile_re2(pattern).groups  # RE2 reads the judge's replies: linear time, no look-arounds
        except ValueError as exc:
            fail(("judge", "verdict", "pattern"), f"the pattern does not compile: {exc}", pattern,
                 r"an RE2 regular expression whose group 1 is the number, e.g. \[\[(\d+\.?\d*)\]\]")
            return
        if groups < 1:
            fail(("judge", "verdict", "pattern"), "the pattern has no group (group 1 must capture the number)",
                 pattern, r"put the number in parentheses, e.g. \[\[(\d+\.?\d*)\]\]")
    agg = spec.aggregation
    if agg.overall != "mean_over_questions":
        fail(("aggregation", "overall"), "a score verdict has no taxonomy groups to macro-average", agg.overall,
             "use mean_over_questions (the default for kind: score)")
    if agg.clip in ("group", "overall"):
        fail(("aggregation", "clip"), "scores on a scale are not clipped to [0, 1]", agg.clip,
             "use clip: none (or leave it out)")
    if spec.failure_rules:
        fail(("failure_rules",), "failure rules act on rubric items; a score verdict has none", len(spec.failure_rules),
             "drop failure_rules, or use kind: criteria")
