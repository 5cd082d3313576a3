"""The engine's errors survive pickling: a Ray actor or task (a reward actor, a shard) raises them to its caller.

Why: Ray sends an exception back by pickling it, and Python's default rebuilds it by calling the class with
`args`, which breaks for every error whose constructor takes other arguments (FatalModelError(model, message,
status=...), SpecError(file, key_path, message)). The caller then got Ray's unpickling failure instead of the
one-line error, and a reward pool took a refused key for a lost actor.
"""

from __future__ import annotations

import pickle

import pytest

from rubric_engine.errors import ConfigError, FatalModelError, ModelCallError, RubricEngineError, SpecError


@pytest.mark.parametrize("exc", [
    FatalModelError("judge", "invalid key", status=401, attempts=2),
    ModelCallError("judge", "server error", status=500),
    SpecError("bench/benchmark.yaml", "scoring.formula", "unknown formula", value="nope", fix="use one of ..."),
    ConfigError("pool=0 is not valid"),
    RubricEngineError("plain"),
], ids=lambda e: type(e).__name__)
def test_an_error_pickles_to_the_same_type_line_and_attributes(exc: RubricEngineError) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and str(back) == str(exc) and vars(back) == vars(exc)


def test_a_refused_key_still_stops_the_run_after_the_trip() -> None:
    assert pickle.loads(pickle.dumps(FatalModelError("judge", "refused", status=403))).stops_run is True
