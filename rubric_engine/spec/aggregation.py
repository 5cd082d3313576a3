"""The spec's aggregation and failure-rule models: how verdicts become a question score, and which items veto it.

Why a module of its own: spec/schema.py is at its line budget, and these two models grew together. Coverage
(`aggregation.question: coverage`, "at least k of the criteria met", ClinConsensus' CACS@k) and veto groups
(a failure rule whose items are chosen by an item tag as well as by a data label) are both declared here; the
arithmetic lives in scoring/question.py. Defaults left out of the resolved dump keep the spec hash of every
spec written before these keys existed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictInt, model_validator

from rubric_engine.scoring.question import DEFAULT_FIRES_WHEN

__all__ = ["Coverage", "AggregationSpec", "FailureRule", "drop_aggregation_defaults", "rules_of"]

Labels = dict[str, str]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Coverage(_Model):
    """`aggregation.coverage`: a question scores 1 when at least k of its coverage criteria are met, else 0.
    k: a whole number of criteria (1, 2, ...), or a fraction of the question's coverage criteria strictly between
    0 and 1 (rounded up: 0.5 of 5 criteria needs 3). tag: only items carrying this item tag count (default: every
    scored item with a positive weight)."""
    k: StrictInt | float
    tag: str | None = None

    @model_validator(mode="after")
    def _k_range(self) -> "Coverage":
        if isinstance(self.k, bool) or (isinstance(self.k, int) and self.k < 1) or (
                not isinstance(self.k, int) and not 0 < self.k < 1):
            raise ValueError(f"k={self.k!r}: use a whole number of criteria (1 or more) or a fraction strictly "
                             "between 0 and 1")
        return self


class AggregationSpec(_Model):
    """The declared aggregation (see scoring.Aggregation); the defaults are per-question clipping, question
    score = mean over its taxonomy groups, overall = macro mean over groups, the formula decides a group
    without positive points."""
    question: Literal["mean_over_groups", "all_items", "coverage"] = "mean_over_groups"
    overall: Literal["macro_over_groups", "mean_over_questions"] = "macro_over_groups"
    clip: Literal["question", "group", "overall", "none"] = "question"
    no_positive_points: Literal["formula", "exclude", "one", "zero"] = "formula"
    # a question whose candidate call failed for good (content filter, 413, no answer): left out of every
    # score (exclude), or scored 0 on every group it would have been scored on (zero); judge failures never
    candidate_errors: Literal["exclude", "zero"] = "exclude"
    coverage: Coverage | None = None  # question: coverage only

    @model_validator(mode="after")
    def _coverage_declared(self) -> "AggregationSpec":
        if (self.question == "coverage") != (self.coverage is not None):
            raise ValueError("question: coverage needs a coverage block (coverage: {k: 10}), and a coverage block "
                             "needs question: coverage")
        if self.question == "coverage" and self.overall != "mean_over_questions":
            raise ValueError("a coverage score is 0 or 1 per question: declare overall: mean_over_questions")
        return self


class FailureRule(_Model):
    """A failure rule (a veto): when one of its items is hit, the question (and every group of it) scores 0.
    Its items are those whose data label is in data_labels (they are not scored otherwise, as a
    role-confusion item), and those carrying an item tag in `tags` (they stay scored in their groups)."""
    id: str
    labels: Labels = {}
    data_labels: list[str] = []
    tags: list[str] = []
    effect: Literal["zero_question"] = "zero_question"
    fires_when: Literal["hit", "hit_positive_weight"] = DEFAULT_FIRES_WHEN

    @model_validator(mode="after")
    def _selects_items(self) -> "FailureRule":
        if not self.data_labels and not self.tags:
            raise ValueError(f"failure rule {self.id!r} selects no item: give data_labels, tags, or both")
        return self


def rules_of(rule: str | None, tags: Sequence[str], rules: Sequence[FailureRule]) -> list[str]:
    """The ids of the failure rules that select an item (its data label's rule, and every rule naming one of
    its tags), in the order the rules were given."""
    return [r.id for r in rules if r.id == rule or set(r.tags) & set(tags)]


def drop_aggregation_defaults(dump: dict[str, Any]) -> None:
    """Keys at their defaults that did not exist when the first specs were hashed: out of the dump and the hash."""
    if dump["aggregation"]["candidate_errors"] == "exclude":
        del dump["aggregation"]["candidate_errors"]
    if dump["aggregation"]["coverage"] is None:
        del dump["aggregation"]["coverage"]
    for rule in dump.get("failure_rules") or []:
        if not rule["tags"]:
            del rule["tags"]


