"""A sweep's keys, every job's, checked before its first job starts.

Why before Hydra launches: its launcher runs one job after another (or many at once), and a job lacking
its key would otherwise fail only after the jobs before it were paid for. The jobs are expanded as Hydra's
basic sweeper expands them and each is composed on its own; the key check itself is the one every run
makes (run/plan.check_run_keys -> models/entries.check_keys). A single run checks its own keys in run_benchmark.
A parallel launcher (`hydra/launcher=ray|joblib`) comes from an extra: without it Hydra says only that the config
group has no such option (or, with the plugin but no Ray, fails inside the launch), so `check_launcher` says in one
line which extra to install. `launcher_overrides` adds what Hydra's Ray launcher needs to join an existing cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError

__all__ = ["check_sweep_keys", "check_launcher", "launcher_overrides"]

_LAUNCHERS = {"ray": "hydra_plugins.hydra_ray_launcher", "joblib": "hydra_plugins.hydra_joblib_launcher"}


def sweep_jobs(argv: list[str]) -> list[list[str]]:
    """Each job's overrides, as Hydra's basic sweeper expands `key=a,b` sweeps; [] when argv is no sweep
    or does not parse (Hydra then reports it in its own words)."""
    if not any(a in ("-m", "--multirun") for a in argv):
        return []
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides([a for a in argv if not a.startswith("-")])
        return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    except Exception:  # noqa: BLE001 - a bad override is Hydra's to report
        return []


def check_sweep_keys(argv: list[str], compose: Callable[[list[str]], Any],
                     settings: Callable[[Any, Path, list[str]], Any]) -> None:
    """Raise ConfigError (one line naming the job and the variable) when any job of the sweep lacks a key.
    `compose` and `settings` are the CLI's (cli/main._compose, cli/config.settings_from_config). A job that does not
    compose or whose settings are wrong is left to report itself in its run directory."""
    from rubric_engine.models.bodycap import max_reply_bytes
    from rubric_engine.run.plan import check_run_keys

    jobs = sweep_jobs(argv)
    if jobs:
        max_reply_bytes()  # a bad $RUBRIC_ENGINE_MAX_REPLY_MB would reject every job: one line instead
    shared = set.intersection(*(set(job) for job in jobs)) if jobs else set()
    for job in jobs:
        try:
            run = settings(compose(job), Path("."), job)
        except Exception:  # noqa: BLE001 - not a key problem
            continue
        try:
            check_run_keys(run)
        except ConfigError as exc:
            own = " ".join(o for o in job if o not in shared) or " ".join(job)
            raise ConfigError(f"sweep job {own} (no job was started): {exc}") from None


def check_launcher(argv: list[str]) -> None:
    """Raise ConfigError (one line naming the extra) when `hydra/launcher=ray|joblib` is asked for and its plugin, or
    Ray, cannot be imported here."""
    import importlib

    for arg in argv:
        key, _, name = arg.lstrip("+~").partition("=")
        if key != "hydra/launcher" or name not in _LAUNCHERS:
            continue
        option = f"hydra/launcher={name}"
        if name == "ray":
            from rubric_engine.cluster.connect import require_ray

            require_ray(option)
        try:
            importlib.import_module(_LAUNCHERS[name])
        except ImportError:
            raise ConfigError(f"{option} needs Hydra's {name} launcher, which is not installed here; install the "
                              f"extra (pip install 'rubric-engine[{name}]') or leave {option} out to run the jobs "
                              "one after another") from None


def launcher_overrides(argv: list[str]) -> list[str]:
    """The overrides to add to `argv`: for `hydra/launcher=ray` with an existing cluster's address, no object store
    size. Hydra's Ray launcher asks `ray.init` for a small object store unless told otherwise, and Ray refuses any
    size when it joins a running cluster ("object_store_memory must not be provided"): the address alone must do."""
    given = {a.lstrip("+~").partition("=")[0]: a.partition("=")[2] for a in argv}
    address = given.get("hydra.launcher.ray.init.address", "")
    if given.get("hydra/launcher") != "ray" or address.lower() in ("", "null", "none", "local") \
            or "hydra.launcher.ray.init.object_store_memory" in given:
        return []
    return ["+hydra.launcher.ray.init.object_store_memory=null"]
