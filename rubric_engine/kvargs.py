"""`POSITIONAL ... key=value ...` argument lists for the review and agree subcommands.

Why not Hydra: these commands read existing run directories and take a handful of options; a
small parser keeps them self-contained and gives one-line errors naming the bad argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .errors import ConfigError

__all__ = ["parse_kv", "as_list", "as_int"]


def parse_kv(args: Sequence[str], allowed: Mapping[str, Any], command: str) -> tuple[list[str], dict[str, Any]]:
    """Split args into positionals and options (`key=value`); unknown keys are an error."""
    positional: list[str] = []
    opts = dict(allowed)
    for a in args:
        key, eq, value = a.partition("=")
        if eq and key in allowed:
            opts[key] = value
        elif eq and "/" not in key and not key.startswith("."):
            from .cliargs import did_you_mean

            raise ConfigError(f"{command}: unknown option {key!r}{did_you_mean(key, list(allowed))}; "
                              f"known: {', '.join(sorted(allowed))} "
                              f"(see `rubric-engine {command} --help`)")
        else:
            positional.append(a)
    return positional, opts


def as_list(value: Any) -> list[str]:
    """`a,b`, `[a,b]` or a list -> ['a', 'b']; '' or None -> []."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return [p.strip().strip("'\"") for p in text.split(",") if p.strip()]


def as_int(value: Any, key: str, command: str, minimum: int = 0) -> int:
    try:
        n = int(str(value))
    except ValueError:
        raise ConfigError(f"{command}: {key}={value!r} is not a whole number") from None
    if n < minimum:
        raise ConfigError(f"{command}: {key}={n} must be at least {minimum}")
    return n
