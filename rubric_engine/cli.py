"""The `rubric-engine` command: a small dispatcher in front of a Hydra app.

Why a dispatcher: `@hydra.main` owns the whole command line, so subcommands (validate, cache,
leaderboard, new, localize) are routed before Hydra sees argv. Hydra lives only in this module;
everything it calls is plain Python taking plain values.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from .errors import ConfigError, RubricEngineError

__all__ = ["main", "settings_from_config", "SweepLeaderboard"]

CONFIG_MODULE = "rubric_engine.conf"
SUBCOMMANDS = ("validate", "cache", "leaderboard", "new", "localize", "review", "agree", "rescore", "audit")


def _slug(value: Any) -> str:
    """A directory-safe name for a benchmark given by name or by path."""
    name = Path(str(value).rstrip("/\\")).name or str(value)
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _dir_safe(value: Any) -> str:
    """A sweep job's override string as one directory name (no slashes, bounded length)."""
    text = re.sub(r"[/\\:]+", "_", str(value)) or "run"
    return text[:120]


for _name, _fn in (("benchmark_slug", _slug), ("dir_safe", _dir_safe)):
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _fn)


def _model_spec(node: Any, role: str, timeout: float | None) -> Any:
    from .models import ModelSpec

    if node is None:
        return None
    data = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
    return ModelSpec.from_config(data, role=role, timeout=timeout)  # type: ignore[arg-type]


def settings_from_config(cfg: DictConfig, out_dir: Path) -> Any:
    """Turn the composed Hydra config into the engine's plain `RunSettings`."""
    from .runner import RunSettings

    def opt(key: str) -> Any:
        return OmegaConf.select(cfg, key, default=None)

    ids = opt("ids")
    if isinstance(ids, str):
        ids = [s for s in re.split(r"[,\s]+", ids) if s]
    return RunSettings(
        benchmark=str(cfg.benchmark), out_dir=out_dir,
        candidate=_model_spec(opt("candidate"), "candidate", opt("timeout")),
        judge=_model_spec(opt("judge"), "judge", opt("timeout")), timeout=opt("timeout"),
        benchmark_dirs=list(opt("benchmark_dirs") or []), data_path=opt("data.path"), data_cache_dir=opt("data.cache_dir"),
        subset=opt("subset"), limit=opt("limit"), ids=list(ids) if ids else None, stage=str(cfg.stage),
        answers=opt("answers"), from_run=opt("from_run"), concurrency=int(cfg.concurrency), rpm=opt("rpm"),
        max_retries=int(cfg.max_retries), cache_dir=opt("cache.dir"), cache_enabled=bool(opt("cache.enabled")),
        progress=str(cfg.progress),
    )


def _fail(exc: BaseException, debug: bool) -> int:
    if debug:
        traceback.print_exception(exc)
    print(f"rubric-engine: error: {exc}", file=sys.stderr)
    if not debug:
        print("(add debug=true for the full traceback)", file=sys.stderr)
    return 2


def _run_job(cfg: DictConfig) -> int:
    """One run inside Hydra; in a sweep a failure is written to the job dir, never raised."""
    from .runner import run_benchmark

    hc = HydraConfig.get()
    out_dir = Path(hc.runtime.output_dir)
    sweeping = hc.mode == RunMode.MULTIRUN
    if sweeping:
        (out_dir / _ERROR_FILE).unlink(missing_ok=True)  # a re-run job in a reused sweep dir starts clean
    try:
        if cfg.dry_run:
            from .commands import print_estimate

            print_estimate(settings_from_config(cfg, out_dir))
            return 0
        run_benchmark(settings_from_config(cfg, out_dir))
        return 0
    except (RubricEngineError, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt):
            print("rubric-engine: interrupted; completed calls are cached: run the same command to resume", file=sys.stderr)
            return 130
        if sweeping:
            (out_dir / _ERROR_FILE).write_text(f"{exc}\n", encoding="utf-8")
        return _fail(exc, bool(cfg.debug))
    except Exception as exc:
        if not sweeping:
            raise
        # An unexpected error in one job must not stop the others or the leaderboard: Hydra's sweeper
        # re-raises after the batch and skips on_multirun_end (hydra #2284). Written down, shown in full.
        traceback.print_exception(exc)
        first: BaseException = exc
        while isinstance(first, BaseExceptionGroup) and first.exceptions:  # asyncio's TaskGroup wraps
            first = first.exceptions[0]
        (out_dir / _ERROR_FILE).write_text(f"internal error: {type(first).__name__}: {first}\n", encoding="utf-8")
        return 1


_exit_code = 0  # with the basic launcher jobs run in this process; parallel launchers: see _finish_sweep
_ERROR_FILE = "error.txt"  # a failed sweep job's one line (the leaderboard lists it as not ranked)


@dataclass
class _Sweep:
    """The sweep this process launched, recorded by the callback (it runs in this process)."""

    dir: Path
    n_boot: int
    seed: int
    dry_run: bool = False
    leaderboard_done: bool = False


_sweep: _Sweep | None = None


@hydra.main(config_path="pkg://" + CONFIG_MODULE, config_name="config", version_base="1.3")
def _hydra_app(cfg: DictConfig) -> None:
    global _exit_code
    code = _run_job(cfg)
    _exit_code = max(_exit_code, code)


class SweepLeaderboard(Callback):
    """At the end of a sweep, build the leaderboard from the job directories that finished.

    Both hooks run in the process that launched the sweep, whatever the launcher; jobs may run in
    other processes or machines (Ray, joblib), so they report only through their run directories."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        global _sweep
        _sweep = _Sweep(Path(config.hydra.sweep.dir),
                        n_boot=int(OmegaConf.select(config, "bootstrap.samples", default=1000)),
                        seed=int(OmegaConf.select(config, "bootstrap.seed", default=0)),
                        dry_run=bool(OmegaConf.select(config, "dry_run", default=False)))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if _sweep is None:
            self.on_multirun_start(config)
        _build_leaderboard()


def _build_leaderboard() -> None:
    """Rank the sweep's finished jobs once; failed jobs appear among the warnings as not ranked."""
    if _sweep is None or _sweep.leaderboard_done:
        return
    _sweep.leaderboard_done = True
    try:
        from .leaderboard import leaderboard_command

        leaderboard_command([_sweep.dir], out_dir=_sweep.dir, n_boot=_sweep.n_boot, seed=_sweep.seed)
    except RubricEngineError as exc:
        print(f"rubric-engine: leaderboard not built: {exc}", file=sys.stderr)


def _finish_sweep(code: int) -> int:
    """After a sweep: the leaderboard even if the sweeper raised (a job crashed outside our handling,
    a worker died), and an exit code that sees failures of jobs that ran in other processes."""
    if _sweep is None:
        return code
    if _sweep.dry_run:
        return code
    _build_leaderboard()
    started = sorted(p.parent for p in _sweep.dir.rglob(".hydra") if p.is_dir())  # every job that began
    failed = [job for job in started if not (job / "summary.json").is_file()]  # error.txt, or it died
    if failed:
        print(f"rubric-engine: {len(failed)} sweep job(s) failed or did not finish, not ranked (see error.txt "
              f"in {', '.join(str(job) for job in failed)})", file=sys.stderr)
        code = max(code, 2)
    return code


def _compose(overrides: list[str]) -> DictConfig:
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def _subcommand(name: str, args: list[str]) -> int:
    debug = any(a in ("debug=true", "debug=True", "--debug") for a in args)
    args = [a for a in args if a not in ("debug=true", "debug=True", "--debug")]
    try:
        if name == "validate":
            from .commands import validate_command

            cfg = _compose(args)
            return validate_command(str(cfg.benchmark), list(cfg.benchmark_dirs or []), cfg.data.path, cfg.data.cache_dir)
        if name == "cache":
            from .commands import cache_command

            return cache_command(args)
        if name == "leaderboard":
            from .leaderboard import leaderboard_main

            return leaderboard_main(args)
        if name == "new":
            from .scaffold import new_command

            return new_command(args)
        if name == "review":
            from .review import review_main

            return review_main(args)
        if name == "agree":
            from .agree import agree_main

            return agree_main(args)
        if name == "rescore":
            from .rescore import rescore_main

            return rescore_main(args)
        if name == "audit":
            from .audit import audit_main

            return audit_main(args)
        from .localize import localize_command

        return localize_command(args)
    except RubricEngineError as exc:
        return _fail(exc, debug)
    except Exception as exc:  # Hydra's own errors (bad override, unknown group option)
        if type(exc).__module__.startswith(("hydra", "omegaconf")):
            return _fail(exc, debug)
        raise


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        sys.exit(_subcommand(argv[0], argv[1:]))
    sys.argv = [sys.argv[0], *argv]
    # Ray (hydra/launcher=ray) reports usage statistics over the network unless told not to; an
    # evaluation run sends nothing its user did not ask for. RAY_USAGE_STATS_ENABLED=1 turns them on.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    code = 0
    try:
        _hydra_app()
    except SystemExit as exc:  # Hydra reports its own errors (or a crashed sweep job) and exits 1
        code = exc.code if isinstance(exc.code, int) else 1
    sys.exit(_finish_sweep(max(code, _exit_code)))


if __name__ == "__main__":
    main()
