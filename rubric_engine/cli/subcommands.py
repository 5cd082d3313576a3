"""Routing `rubric-engine <subcommand> ...` and the one-line error every command ends with.

Why apart from cli/main.py: cli/main.py owns Hydra (the run itself, sweeps, composing a config); the subcommands
only parse `positional key=value` arguments (cliargs.parse) and call plain functions. The two that need
a composed config (validate, data) receive a `compose` function from cli/main.py, so Hydra stays there.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rubric_engine.cli.args import COMMANDS, HelpRequested, Parsed, parse
from rubric_engine.errors import ConfigError, RubricEngineError

__all__ = ["SUBCOMMANDS", "run_subcommand", "one_line", "shortened", "fail", "is_config_library_error",
           "short_help", "print_quietly", "closed_pipe", "pipes_close_quietly", "CLOSED_PIPE"]

CLOSED_PIPE = 141  # 128 + SIGPIPE: what a shell reports for `cat big | head` when cat is ended by the closed pipe
SUBCOMMANDS = ("validate", "cache", "leaderboard", "new", "localize", "data", "review", "agree", "calibrate", "rescore",
               "audit", "items", "estimate", "robustness", "serve-reward", "view", "show", "prompts", "import",
               "lint", "diff", "draft", "filter", "pilot", "release")
Compose = Callable[[list[str]], Any]  # Hydra overrides -> the composed config (cli/main.py's _compose)


_HYDRA_ADVICE = (  # Hydra's "+key" advice for a key the config lacks / has: our words instead
    (re.compile(r"Could not override '([^']+)'.*", re.S), "there is no key {0!r} to set here; the keys are listed by "
     "`rubric-engine --help` (model entries: docs/cli.md, Models and API keys)"),
    (re.compile(r"Could not append to config.*?already at '([^']+)'.*", re.S), "{0} is already in the config: set it "
     "with {0}=VALUE (no +)"),
    (re.compile(r"Ambiguous value for argument '([^']+)'.*", re.S), "{0!r} holds a comma: a list is key=[a,b], a "
     "text key='a,b', and a sweep over the values needs -m (rubric-engine -m ... {0})"))


_MAX_LINE = 700  # characters of one error line: room for a long list, still one line a terminal wraps
_MAX_FIX = 400  # the last clause (the fix) is kept whole up to this length; what precedes it is shortened


def one_line(exc: BaseException) -> str:
    """The error as one redacted line of at most about 700 characters. Hydra's wording for an override never
    reaches the user: a grammar error gets our own line (overrides.override_syntax_error), its `+key` advice
    (which would build a key the engine does not check) a line pointing to --help, and its URL is dropped."""
    from rubric_engine.cli.overrides import override_syntax_error
    from rubric_engine.models.redact import redact
    from rubric_engine.text.terminal import shown

    bad = getattr(exc, "override", None)  # Hydra's OverrideParseException names the override it choked on
    text = override_syntax_error(bad) if isinstance(bad, str) else " ".join(str(exc).split())
    for pattern, words in _HYDRA_ADVICE:
        text = pattern.sub(lambda m: words.format(m.group(1)), text)  # noqa: B023 - used at once
    text = re.sub(r"\s*See https?://hydra\.cc\S*( for details)?", "", text)
    return shown(shortened(redact(text)), markup=False)  # redacted whole: a cut never splits a secret


def shortened(text: str, limit: int = _MAX_LINE) -> str:
    """`text` within `limit` characters, its fix kept: messages end with what to do, so a long line loses
    the middle of what precedes its last clause (after the last '; ' or '. '), never that clause itself."""
    if len(text) <= limit:
        return text
    cut = max(text.rfind("; "), text.rfind(". "))
    if 0 < cut and len(text) - cut - 2 <= _MAX_FIX:
        tail = text[cut + 2:]
    else:  # no short last clause: the last words, from a word boundary
        tail = text[-_MAX_FIX:].split(" ", 1)[-1]
    head = text[: max(limit - len(tail) - 5, 0)].rsplit(" ", 1)[0].rstrip(",;: ")
    return f"{head} ... {tail}"


def fail(exc: BaseException, debug: bool, original: BaseException | None = None, code: int = 2,
         hint: bool = True, then: str = "") -> int:
    """One line on stderr (the traceback before it with debug=true); returns the exit code. An error the
    engine raised on purpose names its fix, so the line ends there; anything else (a bug) says, on the same
    line, how to see its traceback. `hint=False`: no traceback hint whatever the error.
    `then`: what to do next, appended to the line whole (never cut: the resume command of a run that began)."""
    if debug:
        traceback.print_exception(original or exc)
    line = one_line(exc)
    if hint and not debug and not isinstance(exc, RubricEngineError):
        line += " (debug=true shows the traceback)"
    print(f"rubric-engine: error: {line}{'; ' + then if then else ''}", file=sys.stderr)
    return code


def short_help() -> str:
    """What a bare `rubric-engine` prints: the --help header (usage, the keyless quickstart, subcommands)
    and where to read more, without Hydra's listing of groups and the current config."""
    from rubric_engine.cli.overrides import DOCS, help_config

    return f"{help_config()['header'].rstrip()}\n\nEvery key and the model entries (yours too): rubric-engine --help\n{DOCS}"


def print_quietly(text: str) -> None:
    """Print help text; a reader that left early (`rubric-engine --help | head`) is fine (exit 141, quiet)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        closed_pipe()


def pipes_close_quietly() -> None:
    """rich ends a command whose stdout reader left with exit 1 (Console.on_broken_pipe, its documented
    hook); the command line's convention is 141 on every path, so its consoles end through closed_pipe."""
    from rich.console import Console

    Console.on_broken_pipe = lambda self: closed_pipe()  # type: ignore[method-assign]


def closed_pipe() -> None:
    """stdout's reader has gone: point stdout at /dev/null (so the exit flush cannot fail again) and exit 141,
    the status a shell reports for a program ended by SIGPIPE, silently."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(CLOSED_PIPE)


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
    if name in ("show", "prompts"):  # a question's calls from a run / its prompts from the spec (cli/show.py)
        from rubric_engine.cli.show import prompts_command, show_command

        parsed = parse(COMMANDS[name], args)
        if name == "show":
            return show_command(Path(parsed.positionals[0]).expanduser(), parsed.positionals[1])
        cfg = compose([o for o in _overrides(parsed, "benchmark") if not o.startswith("question=")])
        return prompts_command(str(cfg.benchmark), list(cfg.benchmark_dirs or []), cfg.data.path, cfg.data.cache_dir,
                               parsed.get("question"), trust_code=bool(cfg.get("trust_code", False)))
    if name == "serve-reward":  # a run's overrides plus the server's own keys (cli/reward.py)
        from rubric_engine.cli.reward import serve_reward_main

        return serve_reward_main(args)
    if name == "view":  # the index of past runs (cli/view.py)
        from rubric_engine.cli.view import view_main

        return view_main(args)
    if name in ("lint", "diff"):  # building a benchmark: checks and versions (cli/building.py)
        from rubric_engine.cli import building

        return int(getattr(building, f"{name}_main")(args))
    if name in ("filter", "pilot", "release"):  # building a benchmark: its gates (cli/gates.py)
        from rubric_engine.cli.gates import gate_main

        return gate_main(name, args)
    from rubric_engine.cli import mains

    return int(getattr(mains, f"{name}_main")(args))


def run_subcommand(name: str, args: list[str], compose: Compose) -> int:
    """Run one subcommand; every failure is one line on stderr with its exit code (--help exits 0)."""
    debug = any(a.lower() in ("debug=true", "--debug") for a in args)
    try:
        return _dispatch(name, args, compose)
    except HelpRequested as text:
        print_quietly(str(text))
        return 0
    except RubricEngineError as exc:
        return fail(exc, debug)
    except OSError as exc:  # a full disk, a read-only directory: the file and the fix, not a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        return fail(ConfigError(f"{name}: {where}cannot write or read ({exc.strerror or exc}); check free disk "
                                "space and permissions, or choose another out=DIR"), debug, exc)
    except Exception as exc:  # Hydra's own errors (bad override, unknown group option)
        if is_config_library_error(exc):
            return fail(ConfigError(one_line(exc)), debug, exc)
        raise
