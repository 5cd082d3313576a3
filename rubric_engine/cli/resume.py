"""The exact command that resumes a run: what the user typed, with the run's directory named.

Why: without `hydra.run.dir=` every launch gets a new timestamped directory, so "run the same command" after a
Ctrl-C or a failure would start afresh beside the interrupted run instead of resuming it. The interrupt line
(and a failure line of a run that had started) prints this command instead: the words as typed (not the
`hydra.searchpath` the command line adds itself), any directory key replaced by the directory this run used,
shell-quoted and redacted as the provenance command is (run/provenance.py).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from rubric_engine.models.redact import redact
from rubric_engine.run.provenance import COMMAND

__all__ = ["resume_command"]

_PLAIN = re.compile(r"[A-Za-z0-9_./:@+%-]+")  # a value Hydra's override grammar reads as is


def _hydra_value(text: str) -> str:
    """`text` as one value of Hydra's override grammar (quoted when it holds a comma, a space, a bracket ...)."""
    if _PLAIN.fullmatch(text):
        return text
    # the grammar reads a backslash as an escape only before a quote (or the closing one): double just those
    return "'" + re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, text).replace("'", "\\'") + "'"


def resume_command(typed: Sequence[str], directory: Path, *, sweep: bool = False, retry: bool = False) -> str:
    """The command line that continues the run in `directory` (the sweep in it when `sweep`): `typed` with its
    `hydra.run.dir=` (`hydra.sweep.dir=`) replaced by `directory`, made absolute, shell-quoted and redacted;
    `retry`: with `retry_errors=true` (the questions that ended in errors asked again)."""
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    dropped = (f"{key}=", "retry_errors=") if retry else (f"{key}=",)
    kept = [a for a in typed if not a.lstrip("+~").startswith(dropped)]
    where = f"{key}={_hydra_value(str(Path(directory).absolute()))}"
    return redact(shlex.join([COMMAND, *kept, where, *(["retry_errors=true"] if retry else [])]))
