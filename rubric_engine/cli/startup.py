"""What the command line does around a run, for speed: the cyclic GC and the report worker.

Why apart from cli/main.py: these are process-wide decisions measured in bench/bench_run.py
(docs/scaling.md), not configuration. The command line owns its process, so it may pause the GC and
start a helper process; `run_benchmark` called from Python does neither (its caller's process is theirs).
"""

from __future__ import annotations

import gc
import re

__all__ = ["start_up", "start_up_done", "shut_down"]

_NO_REPORT = re.compile(r"^(stage=generate|dry_run=(true|1|yes)|-m|--multirun|-h|--help|--hydra-help|-c|--cfg|"
                        r"--info|-i|--shell-completion|-sc|hydra\.mode=MULTIRUN)$", re.I)


def start_up(argv: list[str]) -> None:
    """What a run does before Hydra composes its config, measured in bench/bench_run.py: the cyclic GC
    paused while modules load (full collections during imports find nothing and cost ~1 s of CPU), and,
    when this command will write a report.html, its worker process started so that it loads matplotlib
    on the other core while this one loads LiteLLM and makes the calls."""
    gc.disable()
    if not any(_NO_REPORT.match(a) for a in argv):
        from rubric_engine.report import worker as report_worker

        report_worker.start()


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
