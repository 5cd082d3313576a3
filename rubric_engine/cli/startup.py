"""What the command line does around a run, for speed: the cyclic GC and the report worker.

Why apart from cli/main.py: these are process-wide decisions measured in bench/bench_run.py
(docs/scaling.md), not configuration. The command line owns its process, so it may pause the GC and
start a helper process; `run_benchmark` called from Python does neither (its caller's process is theirs).
"""

from __future__ import annotations

import gc
from collections.abc import Callable

__all__ = ["start_up", "start_up_done", "report_worker_for", "shut_down"]


def start_up() -> None:
    """What a command does before Hydra composes its config, measured in bench/bench_run.py: the cyclic GC
    paused while modules load (full collections during imports find nothing and cost ~1 s of CPU)."""
    gc.disable()


def report_worker_for(stage: str, sweeping: bool) -> Callable[[], object] | None:
    """What a run started by the command line calls once it has passed its checks (run_benchmark's `checked`):
    start the report worker, so that it loads matplotlib on the other core while this one loads LiteLLM and
    makes the calls. None when the run writes no report.html (stage=generate) or is a sweep's job (jobs may
    run in other processes; with the basic launcher each builds its page itself). Not earlier: a run refused
    by its spec, data or keys would pay the worker's second of CPU for nothing."""
    if stage == "generate" or sweeping:
        return None
    from rubric_engine.report import worker as report_worker

    return report_worker.start


def start_up_done() -> None:
    """Start-up is over (Hydra, our modules): freeze what it left out of later collections and turn the
    cyclic GC back on; LiteLLM's import pauses it again while it runs (litellm_runtime.quiet_gc)."""
    from rubric_engine.models.litellm_runtime import RUNTIME

    RUNTIME.quiet_gc = True
    gc.freeze()
    gc.enable()


def shut_down() -> None:
    """The report worker ended and reaped, the GC on: nothing of the above outlives the command."""
    from rubric_engine.report import worker as report_worker

    report_worker.stop()
    gc.enable()
