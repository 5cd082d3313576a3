"""The `release:` block of a spec: the thresholds its build gates check (`rubric-engine pilot` and `release`).

Why in the spec: a gate is only a gate when its bar is fixed before the numbers are seen and is the same for
everyone who runs it; declared beside the rubric, it is versioned with it. The block changes no score, so a
spec that leaves it at its defaults keeps the dump (and spec hash) it had before the block existed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PilotGate", "ReleaseGate", "drop_release_defaults"]


class PilotGate(BaseModel):
    """`rubric-engine pilot`: shares of the judged criteria (as `items` counts them) and the hard set's reach."""
    model_config = ConfigDict(extra="forbid")

    min_discriminating: float = Field(default=0.5, ge=0, le=1)  # criteria that are not saturated, dead or flat
    max_saturated: float = Field(default=0.2, ge=0, le=1)  # criteria met by >= 95% of the replies
    hard: float = Field(default=0.3, gt=0, le=1)  # share of the questions proposed as the hard set
    min_hard: float = Field(default=1.0, ge=0, le=1)  # share of that target the proposal must reach


class ReleaseGate(BaseModel):
    """`agreement`: each judge's raw agreement with the human majority on the blind sheet (default 0.75)."""
    model_config = ConfigDict(extra="forbid")

    agreement: float = Field(default=0.75, ge=0, le=1)
    pilot: PilotGate = PilotGate()


def drop_release_defaults(dump: dict[str, Any]) -> None:
    """The block at its defaults is left out of the dump: the spec hash of specs written before it, unchanged."""
    if dump.get("release") == ReleaseGate().model_dump(mode="json"):
        dump.pop("release", None)
