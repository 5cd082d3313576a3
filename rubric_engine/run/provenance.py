"""Where a run's numbers came from: engine version, the command, every model and its parameters.

Why: summary.json already holds the date, the spec hash and the data's sha256, but not which engine built
the run, with which command, nor the models' sampling parameters; report.html shows all of them in its
provenance block, so a reader can tell two reports apart and reproduce one. Keys never appear: a model is
recorded by its id, endpoint, revision and sampling params (params cannot hold credentials, see
models/entries.py), and the command passes the one key redaction (models/redact.py).
"""

from __future__ import annotations

import platform
import shlex
import sys
from pathlib import Path
from typing import Any

from rubric_engine.models.redact import redact
from rubric_engine.run.plan import RunPlan

__all__ = ["run_provenance", "engine_version", "COMMAND"]

COMMAND = "rubric-engine"
_MAX_HYDRA_BYTES = 1024 * 1024  # Hydra's own small files; anything larger is not one


def engine_version() -> str:
    """The installed rubric-engine version ('unknown' when run from a source tree that is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rubric-engine")
    except PackageNotFoundError:
        return "unknown"


def _yaml(path: Path) -> Any:
    """A small YAML file Hydra wrote, or None when it is missing, too large to be Hydra's, or unreadable."""
    import yaml

    try:
        if path.is_file() and path.stat().st_size <= _MAX_HYDRA_BYTES:
            return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        pass
    return None


# Hydra overrides the command line adds itself: hydra.mode (Hydra), hydra.searchpath (the user's config
# directories, ./conf and $RUBRIC_ENGINE_CONFIG_DIRS, which the same command adds again): not what was typed
_ADDED = ("hydra.mode=", "hydra.searchpath=")


def _command(out_dir: Path) -> str | None:
    """The command that made this run: the console script with the Hydra overrides (hydra.run.dir=...; not
    hydra.mode, which Hydra adds itself) and the job's own overrides, as Hydra recorded them in .hydra/ (for
    each job of a sweep, that job's values, so the command reruns that job alone); else this process's
    arguments when it is the console script; else None (a Python caller)."""
    task = _yaml(Path(out_dir) / ".hydra" / "overrides.yaml")
    args: list[str] | None = None
    if isinstance(task, list):
        found: Any = _yaml(Path(out_dir) / ".hydra" / "hydra.yaml")
        for key in ("hydra", "overrides", "hydra"):  # hydra.overrides.hydra: the list of hydra.* overrides
            found = found.get(key) if isinstance(found, dict) else None
        own = [str(x) for x in found or [] if not str(x).startswith(_ADDED)] if isinstance(found, list) else []
        args = [*own, *(str(x) for x in task)]
    elif Path(sys.argv[0]).name == COMMAND:
        args = [a for a in sys.argv[1:] if not a.startswith(_ADDED)]
    return redact(shlex.join([COMMAND, *args])) if args is not None else None


def run_provenance(plan: RunPlan, out_dir: Path) -> dict[str, Any]:
    """summary.json's `provenance` section (docs/outputs.md)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        litellm = version("litellm")
    except PackageNotFoundError:
        litellm = None
    models = [{"role": m.role, "name": m.name, "model": m.model, "api_base": redact(m.api_base),
               "revision": m.revision, "family": m.family, "params": dict(m.params), "timeout": m.timeout,
               "mock": m.offline} for m in plan.models()]
    return {"engine_version": engine_version(), "python": platform.python_version(), "litellm": litellm,
            "command": _command(out_dir), "models": models}
