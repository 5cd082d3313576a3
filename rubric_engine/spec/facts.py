"""Plain facts a spec's evaluation shape fixes for the layers below rubric_engine/shapes/: what its data rows
must carry, and what a stored run of it holds.

Why here: the strategies of rubric_engine/shapes/ own each shape's behaviour, but the data reader (dataset/),
the statistics (stats/) and the validity tools (validity/) sit below them and may not import them. What
those need is a fact of the spec (a rubric or none, user turns from the data or not), read once here where
the spec's shape is validated, so no module below asks for the shape by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["ShapeFacts", "facts_of", "RUBRIC_BY_KIND", "JUDGELESS_KINDS", "verdict_kind", "stored_verdict_kind"]


@dataclass(frozen=True)
class ShapeFacts:
    """What a spec's verdict kind and conversation mode mean to the data and to the stored results."""
    conversation: bool  # the candidate writes several replies (scripted or simulated): a row's dialogue is a prefix
    scripted_turns: bool  # the user's turns are the data row's `turns` (each one a candidate turn)
    rubric: Literal["required", "optional", "none"]  # a row's rubric: criteria, a score's optional one, a comparison's none
    per_criterion_verdicts: bool  # a judge answers per rubric criterion (met or not)
    scale_sections: bool  # the summary has per-turn and per-group sections of scores on a scale (stats/turns.py)
    expected_points: bool = False  # judge.verdict.use: probability on criteria: an item counts P(met) of its points


# what a data row's rubric is to each verdict kind (a new kind adds its line: tests/shapes/test_shapes.py checks it)
RUBRIC_BY_KIND: dict[str, Literal["required", "optional", "none"]] = {"criteria": "required", "score": "optional",
                                                                      "pairwise": "none", "rating": "none",
                                                                      "user_state": "none", "anchored": "none"}

# verdict kinds the engine decides alone, with no judge model: each is declared by a top-level spec block named
# after it (`<kind>: {...}`) instead of `judge.verdict.kind` (a new judge-less kind adds its name here)
JUDGELESS_KINDS: tuple[str, ...] = ("rating", "user_state")


def verdict_kind(spec: Any) -> str:
    """The verdict kind `spec` declares: a judge-less kind's block, else its judge's kind; no judge and no such
    block: criteria (every item checked by the engine). The one place a loaded spec's kind is read."""
    declared = [kind for kind in JUDGELESS_KINDS if getattr(spec, kind, None) is not None]
    if declared:
        return declared[0]
    return spec.judge.verdict.kind if spec.judge is not None else "criteria"


def stored_verdict_kind(resolved: Mapping[str, Any]) -> Any:
    """verdict_kind of a stored run's resolved spec as plain data (spec.resolved.json; a key left out has the
    schema's default). Not checked against the known kinds: the caller names the file when it is unknown."""
    declared = [kind for kind in JUDGELESS_KINDS if resolved.get(kind) is not None]
    if declared:
        return declared[0]
    return ((resolved.get("judge") or {}).get("verdict") or {}).get("kind") or "criteria"


def facts_of(spec: Any) -> ShapeFacts:
    """The facts of `spec` (a spec with no judge: every item checked by the engine, a criteria spec)."""
    kind = verdict_kind(spec)
    mode = getattr(getattr(spec, "conversation", None), "mode", None) or "single"
    return ShapeFacts(conversation=mode != "single", scripted_turns=mode == "scripted", rubric=RUBRIC_BY_KIND[kind],
                      per_criterion_verdicts=spec.judge is not None and kind == "criteria",
                      scale_sections=kind == "score",
                      expected_points=spec.judge is not None and kind == "criteria"
                      and spec.judge.verdict.use == "probability")
