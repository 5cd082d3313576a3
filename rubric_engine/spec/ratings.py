"""The `rating:` block of a spec: the candidate rates named things (EQ-Bench: four emotions, 0-10) and the engine
scores the ratings against the data's reference values, with no judge (shapes/rating.py, scoring/ratings.py).

Why a block of its own rather than `judge.verdict.kind: rating`: a judge block names a model and a template,
and a rating calls neither; a spec that declares `rating:` and no `judge:` says exactly what runs
(spec/facts.JUDGELESS_KINDS). Its cross-field rules are its own and stay here, as validators of the block.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Rating"]


class Rating(BaseModel):
    """How a reply's ratings are read and scored.

    `reference`: the data column holding a row's reference ratings, either `{name: value}` or, with `name` and
    `value` set (EQ-Bench: `emotion{i}` and `emotion{i}_score`), numbered keys `i` = 1, 2, ... for as long as
    the name key exists. `parse`: `lines` (`Name: number` pairs) or `json` (one `{name: number}` object).
    `passes`: the headings of the passes a reply gives in order (EQ-Bench: first pass, revised), [] for one.
    `distance`: eq_bench_v2, eq_bench_v1 or absolute (scoring/ratings.DISTANCES). `scored`: the pass each
    question's score is (first or last). `best_pass`: the summary's benchmark number uses EQ-Bench's rule (the
    last pass unless it scores lower or has under `min_share` of the first pass's parseable answers)."""
    model_config = ConfigDict(extra="forbid")

    reference: str = Field(min_length=1)
    name: str | None = None
    value: str | None = None
    parse: Literal["lines", "json"] = "lines"
    passes: list[str] = Field(default=[], max_length=8)
    distance: Literal["eq_bench_v2", "eq_bench_v1", "absolute"] = "eq_bench_v2"
    scored: Literal["first", "last"] = "last"
    best_pass: bool = True
    min_share: float = Field(default=0.95, ge=0, le=1, allow_inf_nan=False)

    @model_validator(mode="after")
    def _together(self) -> "Rating":
        if (self.name is None) != (self.value is None):
            raise ValueError("rating.name and rating.value go together (numbered keys such as emotion{i} and "
                             "emotion{i}_score), or neither (the reference column is {name: value})")
        for key in (self.name, self.value):
            if key is not None and "{i}" not in key:
                raise ValueError(f"rating.name / rating.value must hold {{i}} (the rating's number): got {key!r}")
        if any(not h.strip() for h in self.passes) or len(set(self.passes)) != len(self.passes):
            raise ValueError("rating.passes: each heading non-empty and distinct")
        if self.parse == "json" and self.passes:
            raise ValueError("rating.passes reads `Name: number` lines under headings: with parse: json use []")
        return self
