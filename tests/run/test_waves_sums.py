"""An adaptive run's waves summed into one run's figures (run/waves.py): calls and seconds per stage, by hand."""

from __future__ import annotations

from rubric_engine.run.waves import add_calls, add_seconds


def test_seconds_per_stage_add_up_and_a_stage_no_wave_timed_stays_none() -> None:
    first = {"generate": 1.25, "judge": None}
    later = {"generate": 0.5, "judge": None, "user": 2.0}  # a stage only the later wave timed counts once
    assert add_seconds(first, later) == {"generate": 1.75, "judge": None, "user": 2.0}
    assert add_seconds(later, first) == add_seconds(first, later)


def test_call_counts_add_up_an_unknown_cost_stays_unknown_and_concurrency_is_the_later_waves() -> None:
    first = {"judge": {"requests": 3, "cost": 0.5, "batched": False}, "concurrency": {"judge": 8}}
    later = {"judge": {"requests": 2, "cost": None, "batched": True}, "concurrency": {"judge": 12}}
    assert add_calls(first, later) == {"judge": {"requests": 5, "cost": None, "batched": True},
                                       "concurrency": {"judge": 12}}
