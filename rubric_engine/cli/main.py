"""The `rubric-engine` command: a small dispatcher in front of a Hydra app.

Why a dispatcher: `@hydra.main` owns the whole command line, so subcommands (validate, cache,
leaderboard, new, localize, ...) are routed before Hydra sees argv (cli/subcommands.py). Hydra lives only
in cli/ (here and cli/config.py, which turns a composed config into RunSettings); everything it calls is plain
Python taking plain values.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from rubric_engine.cli.compose import compose as _compose, rewrite as _rewrite, user_search_path as _user_search_path
from rubric_engine.cli.config import CONFIG_MODULE, settings_from_config, spread_from_config
from rubric_engine.cli.startup import report_worker_for, shut_down, start_up, start_up_done
from rubric_engine.cli.subcommands import (SUBCOMMANDS, closed_pipe, fail, is_config_library_error, one_line,
                                           pipes_close_quietly, print_quietly, run_subcommand, short_help)
from rubric_engine.errors import ConfigError, RubricEngineError
from rubric_engine.run.evaluate import benchmark_slug  # the run directory's name, as the Python API names it
from rubric_engine.run.result import nothing_scored  # exit 1: the rule the Python API raises NothingScored on
# error.txt / rejected.txt: a failed / rejected sweep job's one line (the leaderboard lists it as not ranked)
from rubric_engine.store.layout import ERROR_FILE, REJECTED_FILE, SUMMARY_FILE, discard_untouched, untouched

__all__ = ["main", "SweepLeaderboard"]


_MAX_DIR_BYTES = 200  # file systems allow 255 bytes per name; room is left for the job number prefix


def _dir_safe(value: Any) -> str:
    """A sweep job's override string as one directory name: no slashes, bounded, and never a cut value.

    Whole `key=value` items are kept while they fit; the rest is replaced by `+N-more-<hash>`, so two
    jobs never share a name and no name shows a value it did not run with (`limit=4` for `limit=40`).
    """
    text = re.sub(r"[/\\:]+", "_", str(value)) or "run"
    if len(text.encode("utf-8")) <= _MAX_DIR_BYTES:
        return text
    items = re.split(r",(?=[\w.+~@-]+=)", text)
    digest = __import__("hashlib").sha256(text.encode("utf-8")).hexdigest()[:8]
    kept: list[str] = []
    room = _MAX_DIR_BYTES - len(f",+{len(items)}-more-{digest}")
    for item in items:  # an item too long to fit is dropped whole; shorter ones after it still count
        if len(",".join([*kept, item]).encode("utf-8")) <= room:
            kept.append(item)
    return ",".join(kept) + f"{',' if kept else ''}+{len(items) - len(kept)}-more-{digest}"


_LAUNCH_ID = f"{os.getpid()}{secrets.token_hex(2)}"  # with sub-second time: two launches never share a dir


def _launch_id() -> str:
    return _LAUNCH_ID


for _name, _fn in (("benchmark_slug", benchmark_slug), ("dir_safe", _dir_safe), ("launch_id", _launch_id)):
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _fn)


def _run_job(cfg: DictConfig) -> int:
    """One run inside Hydra; in a sweep a failure is written to the job dir, never raised."""
    from rubric_engine.run.runner import run_benchmark

    hc = HydraConfig.get()
    out_dir = Path(hc.runtime.output_dir)
    sweeping = hc.mode == RunMode.MULTIRUN
    if sweeping:
        for name in (ERROR_FILE, REJECTED_FILE):  # a re-run job in a reused sweep dir starts clean
            (out_dir / name).unlink(missing_ok=True)
    start_up_done()  # Hydra has composed: the GC paused by start_up is back on for whatever the job does
    try:
        item_model, budget = cfg.get("item_model"), cfg.get("item_budget")
        if cfg.dry_run:
            from rubric_engine.cli.commands import print_estimate

            try:
                print_estimate(_anchored(item_model, settings_from_config(cfg, out_dir), budget, dry=True)[0])
            finally:
                discard_untouched(out_dir)  # a dry run writes nothing: Hydra's .hydra/ and log go too
            return 0
        chosen, selector = _anchored(item_model, settings_from_config(cfg, out_dir), budget)
        settings = replace(chosen, resume_command=_resume(out_dir) if not sweeping else
                           _resume(_sweep.dir, sweep=True) if _sweep is not None else None)
        # a sweep whose jobs run in this process shows each distinct warning once (other launchers: once per job)
        summary = run_benchmark(settings, warned=_sweep.warned if sweeping and _sweep is not None else None,
                                checked=report_worker_for(cfg.stage, sweeping), selector=selector,
                                spread=spread_from_config(cfg))
        why = nothing_scored(summary)
        if why:
            from rubric_engine.text.terminal import shown

            retry = "" if sweeping else f"; to ask the failed questions again: {_resume(out_dir, retry=True)}"
            print(f"rubric-engine: {shown(why, markup=False)}{retry}", file=sys.stderr)
            if hc.mode == RunMode.MULTIRUN:
                (out_dir / ERROR_FILE).write_text(f"{why}\n", encoding="utf-8")
            return 1
        if item_model:
            from rubric_engine.cli.subsetrun import estimate_after

            estimate_after(out_dir, item_model)
        return 0
    except BrokenPipeError:
        raise  # stdout's reader left: main() ends quietly
    except KeyboardInterrupt as exc:
        if sweeping:
            raise  # the sweep stops too; _main says it once
        if discard_untouched(out_dir):  # stopped before it wrote anything: no empty run left behind
            return _interrupted(exc)
        return _interrupted(exc, out_dir)
    except Exception as exc:  # noqa: BLE001 - every failure is one line (traceback only with debug=true)
        # In a sweep an error in one job must not stop the others or the leaderboard: Hydra's sweeper
        # re-raises after the batch and skips on_multirun_end (hydra #2284). Written down, redacted.
        if sweeping:  # rejected before it wrote anything (typo, key, spec): marked so, not "did not finish"
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / (REJECTED_FILE if untouched(out_dir) else ERROR_FILE)).write_text(f"{one_line(exc)}\n",
                                                                                         encoding="utf-8")
        else:
            discard_untouched(out_dir)  # rejected before it wrote anything (typo, key, spec): no debris
            if _began(out_dir):  # it had claimed its directory: the same directory resumes it
                return fail(exc, bool(cfg.debug), then=f"after fixing that, resume with: {_resume(out_dir)}")
        return fail(exc, bool(cfg.debug))


def _anchored(item_model: Any, settings: Any, budget: Any = None, dry: bool = False) -> tuple[Any, Any]:
    """item_model=FILE: the run asks only the model's anchors, or with item_budget=N N questions chosen while it runs
    (the selector; cli/subsetrun.py); unchanged, no selector, without them."""
    if not item_model and budget is None:
        return settings, None
    from rubric_engine.cli.subsetrun import anchored

    return anchored(item_model, settings, budget, dry)


def _began(out_dir: Path) -> bool:
    """The run claimed its directory (a manifest still `running`): the same directory resumes it."""
    from rubric_engine.store.layout import read_manifest

    return (read_manifest(out_dir) or {}).get("state") == "running"


def _resume(directory: Path, sweep: bool = False, retry: bool = False) -> str:
    """The command that resumes the run (sweep) in `directory` (`retry`: asking its errored questions again), safe
    for the terminal (cli/resume.py)."""
    from rubric_engine.cli.resume import resume_command
    from rubric_engine.text.terminal import shown

    return shown(resume_command(_typed, directory, sweep=sweep, retry=retry), markup=False)


def _interrupted(exc: KeyboardInterrupt, directory: Path | None = None, sweep: bool = False) -> int:
    """Ctrl-C or SIGTERM: one line, and 130 / 143 (models/interrupt.py). With the run's (or the sweep's) directory,
    the line ends with the exact command that resumes it there (cli/resume.py)."""
    from rubric_engine.models.interrupt import RESUME_HINT, exit_code

    name = "SIGTERM" if exit_code(exc) == 143 else "Ctrl-C"
    how = f"resume with: {_resume(directory, sweep)}" if directory is not None else \
        "run the same command to start again"
    print(f"rubric-engine: interrupted ({name}); {RESUME_HINT}; {how}", file=sys.stderr)
    return exit_code(exc)


_typed: list[str] = []  # the command line as the user typed it (main() records it once): the resume command's words


_exit_code = 0  # with the basic launcher jobs run in this process; parallel launchers: see _finish_sweep


@dataclass
class _Sweep:
    """The sweep this process launched, recorded by the callback (it runs in this process)."""

    dir: Path
    n_boot: int
    seed: int
    dry_run: bool = False
    leaderboard_done: bool = False
    warned: set[str] = field(default_factory=set)  # the warnings its jobs showed (run_benchmark's `warned`)


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
        from rubric_engine.report.leaderboard import leaderboard_command

        leaderboard_command([_sweep.dir], out_dir=_sweep.dir, n_boot=_sweep.n_boot, seed=_sweep.seed)
    except RubricEngineError as exc:
        print(f"rubric-engine: leaderboard not built: {one_line(exc)}", file=sys.stderr)


def _finish_sweep(code: int) -> int:
    """After a sweep: the leaderboard even if the sweeper raised (a job crashed outside our handling,
    a worker died), and an exit code that sees failures of jobs that ran in other processes."""
    if _sweep is None:
        return code
    if _sweep.dry_run:
        return code
    _build_leaderboard()
    started = sorted(p.parent for p in _sweep.dir.rglob(".hydra") if p.is_dir())  # every job that began
    failed = [job for job in started if not (job / SUMMARY_FILE).is_file()]  # error.txt, or it died
    if failed:
        print(f"rubric-engine: {len(failed)} sweep job(s) failed, were rejected or did not finish, not ranked "
              f"(see error.txt or rejected.txt in {', '.join(str(job) for job in failed)})", file=sys.stderr)
        code = max(code, 2)
    return code


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rubric-engine")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: help, subcommands, --version, argument checks, then the Hydra app.

    A reader that closes stdout early (`rubric-engine --help | head -3`) ends the command quietly with
    exit 141, as a shell reports for a program ended by SIGPIPE (subcommands.closed_pipe)."""
    try:
        _front(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # here, not at interpreter exit, where a closed pipe can no longer be caught
    except BrokenPipeError:
        closed_pipe()
    except SystemExit:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            closed_pipe()
        raise


def _front(argv: list[str]) -> None:
    """`rubric-engine` alone and `run` alone print the short help (exit 0); `help [SUBCOMMAND]` is --help;
    `run key=value ...` is a run; GNU-style flags and bare words are one line each (exit 2)."""
    from rubric_engine.cli.overrides import check_command_line, check_overrides, unknown_word

    _typed[:] = argv
    run = argv[:1] == ["run"]
    if argv[:1] == ["help"]:  # `help [TOPIC]`: the help of a subcommand or of a run
        topic = argv[1] if len(argv) > 1 else "run"
        if topic not in (*SUBCOMMANDS, "run"):
            sys.exit(fail(unknown_word(topic, SUBCOMMANDS), False, hint=False))
        argv = [topic, "--help"] if topic in SUBCOMMANDS else ["--help"]
    argv = argv[1:] if run else argv
    if not argv:
        print_quietly(short_help())
        sys.exit(0)
    pipes_close_quietly()
    if argv[0] in SUBCOMMANDS and not run:
        sys.exit(run_subcommand(argv[0], argv[1:], _compose))
    if any(a in ("--help", "-h") for a in argv):  # the run's help: ours, without Hydra (overrides.run_help)
        from rubric_engine.cli.overrides import run_help

        print_quietly(run_help())
        sys.exit(0)
    if "--version" in argv or argv[:1] == ["-V"]:
        print(f"rubric-engine {_version()}")
        sys.exit(0)
    debug = any(a.lower() == "debug=true" for a in argv)
    argv = _rewrite(argv)
    try:
        check_command_line(argv, SUBCOMMANDS)
    except RubricEngineError as exc:
        sys.exit(fail(exc, debug, hint=False))
    try:
        check_overrides(argv)
    except RubricEngineError as exc:
        sys.exit(fail(exc, debug))
    start_up()
    from rubric_engine.models.interrupt import install_sigterm

    install_sigterm()  # SIGTERM ends a run like Ctrl-C: a message, the journal closed, exit 143
    try:
        _main(argv, debug)
    finally:
        shut_down()


def _main(argv: list[str], debug: bool) -> None:
    from rubric_engine.cli.overrides import group_choices, hydra_form, swept_entry_keys

    argv = swept_entry_keys([hydra_form(a) for a in argv])
    try:
        from rubric_engine.cli.adhoc import register
        from rubric_engine.cli.sweepcheck import check_launcher, check_sweep_keys, launcher_overrides

        check_launcher(argv)  # hydra/launcher=ray without the extra: one line naming it, not Hydra's words
        argv = [*argv, *launcher_overrides(argv)]  # the Ray launcher joining a running cluster
        register(group_choices(argv))  # candidate=openai/gpt-4o-mini (judge=, user=): an entry Hydra finds like any other

        check_sweep_keys([*argv, *_user_search_path(argv)], _compose, settings_from_config)
    except RubricEngineError as exc:
        sys.exit(fail(exc, debug))
    sys.argv = [sys.argv[0], *argv, *_user_search_path(argv)]
    # Ray (hydra/launcher=ray) reports usage statistics over the network unless told not to; an
    # evaluation run sends nothing its user did not ask for. RAY_USAGE_STATS_ENABLED=1 turns them on.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra's errors reach us, and become one line below
    code = 0
    try:
        _hydra_app()
    except SystemExit as exc:  # a crashed sweep job that Hydra reported itself
        code = exc.code if isinstance(exc.code, int) else 1
    except BrokenPipeError:
        raise  # stdout's reader left: main() ends quietly
    except KeyboardInterrupt as exc:  # a signal while Hydra composed, or during a sweep: no leaderboard
        sys.exit(_interrupted(exc, _sweep.dir if _sweep is not None else None, sweep=True))
    except Exception as exc:  # noqa: BLE001 - everything our job does not catch itself
        if isinstance(exc.__cause__, RubricEngineError):  # e.g. our log handler refusing a planted link,
            sys.exit(fail(exc.__cause__, debug, exc))    # wrapped by logging.config as "Unable to configure"
        if is_config_library_error(exc):
            sys.exit(fail(ConfigError(one_line(exc)), debug, exc))
        if debug:
            raise
        code = fail(exc, False, exc, code=1)
    sys.exit(_finish_sweep(max(code, _exit_code)))


if __name__ == "__main__":
    main()
