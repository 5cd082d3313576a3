"""The `anchors:` block of a spec: the replies a candidate is compared with under `judge.verdict.kind: anchored`
(several anchors' answers files), the rating scale the anchors fix, and the length rule every game follows.

Why a block of its own rather than more keys under `baseline:`: a baseline is one reply per question and gives
a win rate; anchors are several, each may carry a declared rating (the anchor scale: EQ-Bench 3 holds its
anchor models at fixed Elo values; WildBench reports a reward against each of three references), and the
length rule changes what the judge sees (truncation) or what a game counts (a K-character margin). The block's
cross-field rules stay here, as validators; shapes/anchored.py and scoring/anchored.py use it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Anchor", "AnchorScale", "Anchors", "LengthRule", "check_anchored"]


class Anchor(BaseModel):
    """One anchor: its answers file (local, resolved against the spec's directory, in the engine's answers
    format: the id field and `response`; `sha256` pins it), who wrote it, and its declared rating on the anchor scale (None:
    the anchor gives a reward but does not fix the scale)."""
    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1)
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")  # pinned: a changed file is refused
    model: str | None = None
    rating: float | None = Field(default=None, allow_inf_nan=False)


class LengthRule(BaseModel):
    """`none`; `truncate`: both replies cut to `chars` characters before the judge sees them (no `chars`: both
    cut to the shorter one's length, a common length); `margin`: a plain (not strong) win whose winner is longer
    than the loser by more than `chars` characters counts as a tie (WildBench's K)."""
    model_config = ConfigDict(extra="forbid")

    rule: Literal["none", "truncate", "margin"] = "none"
    chars: int | None = Field(default=None, ge=0, le=10_000_000)

    @model_validator(mode="after")
    def _chars(self) -> "LengthRule":
        if self.rule == "margin" and self.chars is None:
            raise ValueError("anchors.length.rule: margin needs chars (the K of WildBench: a plain win by a reply "
                             "more than K characters longer counts as a tie)")
        if self.rule == "none" and self.chars is not None:
            raise ValueError("anchors.length.chars applies to rule truncate or margin, not none")
        if self.rule == "truncate" and self.chars == 0:
            raise ValueError("anchors.length.chars: 0 would show the judge nothing; give a positive length")
        return self

    def line(self) -> str:
        """The rule as one short string, recorded in every game (`margin:500`, `truncate:1200`, `truncate:common`)."""
        if self.rule == "none":
            return "none"
        return f"{self.rule}:{'common' if self.chars is None else self.chars}"


class AnchorScale(BaseModel):
    """The rating scale: `per` points are a factor `base` in the odds of winning (Elo: 400 points = 10:1)."""
    model_config = ConfigDict(extra="forbid")

    per: float = Field(default=400, gt=0, allow_inf_nan=False)
    base: float = Field(default=10, gt=1, allow_inf_nan=False)


class Anchors(BaseModel):
    """The anchors (`files`: name -> file), the answers' id field, the scale, the length rule and the
    bootstrap's rounds for the rating's interval."""
    model_config = ConfigDict(extra="forbid")

    id: str = "id"
    response: str = "response"
    files: dict[str, Anchor] = Field(min_length=1, max_length=32)
    length: LengthRule = LengthRule()
    scale: AnchorScale = AnchorScale()
    rounds: int = Field(default=200, ge=0, le=10_000)  # bootstrap over questions for the rating's interval

    @model_validator(mode="after")
    def _names(self) -> "Anchors":
        bad = [n for n in self.files if not n or not n.replace("_", "").replace("-", "").isalnum()]
        if bad:
            raise ValueError(f"anchors.files: an anchor's name is letters, digits, - and _ (got {bad[0]!r})")
        return self

    def rated(self) -> dict[str, float]:
        """The anchors that fix the scale: name -> declared rating."""
        return {n: a.rating for n, a in self.files.items() if a.rating is not None}


def check_anchored(spec: Any) -> None:
    """The spec-wide rules of an anchored comparison (ValueError, one sentence): the kind and the block go
    together, one reply per question (no conversation), and a pooled mean over questions."""
    anchored = spec.judge is not None and spec.judge.verdict.kind == "anchored"
    if anchored and spec.anchors is None:
        raise ValueError("judge.verdict.kind: anchored needs an anchors: block (anchors.files: name -> {path, rating})")
    if not anchored and spec.anchors is not None:
        raise ValueError("anchors: is only read by judge.verdict.kind: anchored; set that kind, or drop anchors:")
    if anchored and spec.conversation.mode != "single":
        raise ValueError("judge.verdict.kind: anchored compares one reply with each anchor's: use conversation.mode: "
                         "single (or leave it out)")
    if anchored and spec.aggregation.overall != "mean_over_questions":
        raise ValueError("judge.verdict.kind: anchored pools its games' rewards: set aggregation.overall: "
                         "mean_over_questions")
