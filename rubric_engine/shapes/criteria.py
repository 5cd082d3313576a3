"""Judging by criteria: a verdict per rubric item (met or not), items the engine checks decided by their
checks, the question's score by the spec's formula over the items.

Why a module of its own though it adds nothing to shapes/base.Verdict: the base class's defaults are this
shape's behaviour, and the registry (shapes/registry.py) names every shape by one module, so a reader looking
for "what does criteria do" finds the answer here.
"""

from __future__ import annotations

from rubric_engine.shapes.base import Verdict

__all__ = ["Criteria"]


class Criteria(Verdict):
    """The verdict of `judge.verdict.kind: criteria` (and of a spec with no judge: every item checked)."""
    name = "criteria"
