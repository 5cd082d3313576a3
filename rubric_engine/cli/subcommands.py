"""Routing `rubric-engine <subcommand> ...` and the one-line error every command ends with.

Why apart from cli/main.py: cli/main.py owns Hydra (the run itself, sweeps, composing a config); the subcommands
only parse `positional key=value` arguments (cliargs.parse) and call plain functions. The two that need
a composed config (validate, data) receive a `compose` function from cli/main.py, so Hydra stays there.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from rubric_engine.cli.args import COMMANDS, HelpRequested, Parsed, parse
from rubric_engine.errors import ConfigError, RubricEngineError

__all__ = ["SUBCOMMANDS", "run_subcommand", "one_line", "fail", "is_config_library_error"]

SUBCOMMANDS = ("validate", "cache", "leaderboard", "new", "localize", "data", "review", "agree", "rescore", "audit")
Compose = Callable[[list[str]], Any]  # Hydra overrides -> the composed config (cli/main.py's _compose)


def one_line(exc: BaseException) -> str:
    """The error as one redacted line, at most 400 characters; Hydra's override errors name the override."""
    from rubric_engine.models.redact import redact

    text = " ".join(str(exc).split())
    bad = getattr(exc, "override", None)  # Hydra's OverrideParseException names the override it choked on
    if isinstance(bad, str) and bad not in text:
        text = f"cannot parse override {bad!r}: {text}"
    return redact(text[:400] + ("..." if len(text) > 400 else ""))


def fail(exc: BaseException, debug: bool, original: BaseException | None = None, code: int = 2) -> int:
    """One line on stderr (plus a hint, or the traceback with debug=true); returns the exit code."""
    if debug:
        traceback.print_exception(original or exc)
    print(f"rubric-engine: error: {one_line(exc)}", file=sys.stderr)
    if not debug:
        print("(add debug=true for the full traceback)", file=sys.stderr)
    return code


def is_config_library_error(exc: BaseException) -> bool:
    """An error raised by Hydra or OmegaConf (a bad override, an unknown config group option)."""
    return type(exc).__module__.startswith(("hydra", "omegaconf"))


def _overrides(parsed: Parsed, positional_key: str | None = None) -> list[str]:
    """A subcommand's key=value options (and its positional, as `positional_key=`) as Hydra overrides."""
    over = [f"{k}={v}" for k, v in parsed.options.items() if k != "debug"]
    if positional_key and parsed.positionals:
        over.append(f"{positional_key}={parsed.positionals[0]}")
    return over


def _dispatch(name: str, args: list[str], compose: Compose) -> int:
    if name == "validate":
        from rubric_engine.cli.commands import validate_command

        cfg = compose(_overrides(parse(COMMANDS[name], args), "benchmark"))
        return validate_command(str(cfg.benchmark), list(cfg.benchmark_dirs or []), cfg.data.path, cfg.data.cache_dir,
                                trust_code=bool(cfg.get("trust_code", False)))
    if name == "data":
        from rubric_engine.cli.commands import data_command

        parsed = parse(COMMANDS[name], args)
        cfg = compose(_overrides(parsed))
        return data_command(parsed.positionals[0] if parsed.positionals else "fetch", str(cfg.benchmark),
                            list(cfg.benchmark_dirs or []), cfg.data.cache_dir)
    if name == "cache":
        from rubric_engine.cli.commands import cache_command

        parsed = parse(COMMANDS[name], args)
        return cache_command(parsed.positionals[0] if parsed.positionals else "info", parsed.options.get("cache.dir"))
    if name == "localize":  # checked (help, unknown keys) here; localize_cli.parse_options converts the values
        from rubric_engine.cli.localize import localize_command

        parse(COMMANDS[name], args)
        return localize_command([a for a in args if a.partition("=")[0] != "debug"])
    from rubric_engine.cli import mains

    return int(getattr(mains, f"{name}_main")(args))


def run_subcommand(name: str, args: list[str], compose: Compose) -> int:
    """Run one subcommand; every failure is one line on stderr with its exit code (--help exits 0)."""
    debug = any(a.lower() in ("debug=true", "--debug") for a in args)
    try:
        return _dispatch(name, args, compose)
    except HelpRequested as text:
        try:
            print(text, flush=True)
        except BrokenPipeError:  # `rubric-engine x --help | head`: the reader left, which is fine
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except RubricEngineError as exc:
        return fail(exc, debug)
    except Exception as exc:  # Hydra's own errors (bad override, unknown group option)
        if is_config_library_error(exc):
            return fail(ConfigError(one_line(exc)), debug, exc)
        raise
