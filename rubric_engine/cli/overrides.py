"""Checks the main command's key=value overrides before Hydra sees them.

Why: Hydra answers a misspelt key (`candiate=gpt-4o`) with "use +candiate=..." advice that makes things
worse, and an unknown model entry with a multi-line listing. Here an unknown key gets "did you mean
candidate=?" from the keys of the primary config, and an unknown model entry the list of entries in the
package and in the user's config directories (cliargs.config_dirs). No Hydra import: this runs first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rubric_engine.cli.args import CONFIG_DIRS_ENV, config_dirs, did_you_mean
from rubric_engine.errors import ConfigError

__all__ = ["check_overrides", "known_keys", "group_entries", "GROUPS"]

GROUPS = ("candidate", "judge")
_CONFIG_MODULE = "rubric_engine.conf"
_SWEEP_FN = re.compile(r"^\s*\w+\(")  # choice(...), range(...), glob(...): Hydra's sweep functions


def _primary() -> dict[str, Any]:
    text = resources.files(_CONFIG_MODULE).joinpath("config.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    return data if isinstance(data, dict) else {}


def known_keys() -> list[str]:
    """Top-level keys a user may override: the primary config's keys and its config groups."""
    cfg = _primary()
    keys = [k for k in cfg if k not in ("defaults", "hydra")]
    for entry in cfg.get("defaults") or []:
        if isinstance(entry, dict):
            keys += [k for k in entry if not str(k).startswith("override ") and k not in keys]
    return keys


def group_entries(group: str) -> list[str]:
    """Entry names of a config group: the package's, then each user config directory's."""
    names = {p.name[:-5] for p in resources.files(_CONFIG_MODULE).joinpath(group).iterdir()
             if p.name.endswith(".yaml")}
    for d in config_dirs():
        if (d / group).is_dir():
            names |= {p.stem for p in Path(d / group).glob("*.yaml")}
    return sorted(names)


def _group_keys(group: str) -> list[str]:
    """Keys a model entry may set: those of the shipped entries, plus `timeout`."""
    keys = {"timeout"}
    for p in resources.files(_CONFIG_MODULE).joinpath(group).iterdir():
        if p.name.endswith(".yaml"):
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
            keys |= set(data) if isinstance(data, dict) else set()
    return sorted(keys)


def _check_nested(key: str, top: str) -> None:
    """`candidate.modle=` or `cache.dri=`: the key below the top level must exist too."""
    parts = key.split(".")
    if len(parts) < 2 or "@" in key or "/" in key:
        return
    if top in GROUPS:
        known = _group_keys(top)
        if parts[1] in known or parts[1] == "params":
            return
    else:
        node = _primary().get(top)
        if not isinstance(node, dict) or parts[1] in node:
            return
        known = [str(k) for k in node]
    hint = did_you_mean(parts[1], known).replace(" (did you mean ", f" (did you mean {top}.").replace("?)", "=?)")
    raise ConfigError(f"unknown key {key!r}{hint}; {top} has: {', '.join(known)}")


def check_overrides(argv: Sequence[str]) -> None:
    """Raise ConfigError (one line) for an unknown top-level key or an unknown model entry."""
    keys: list[str] | None = None
    for arg in argv:
        if arg.startswith("-"):
            continue
        key, eq, value = arg.partition("=")
        if not eq or not key or key.startswith(("+", "~")):
            continue
        top = re.split(r"[./@]", key, maxsplit=1)[0]
        if top == "hydra":
            continue
        keys = keys if keys is not None else known_keys()
        if top not in keys:
            hint = did_you_mean(top, keys).replace("?)", "=?)")
            raise ConfigError(f"unknown key {key!r}{hint}; known keys: {', '.join(keys)} "
                              "(see rubric-engine --help)")
        _check_nested(key, top)
        if key in GROUPS and value and not _SWEEP_FN.match(value) and value.lower() != "null":
            entries = group_entries(key)
            for name in (v.strip() for v in value.split(",")):
                if name and name not in entries:
                    raise ConfigError(
                        f"unknown {key} entry {name!r}{did_you_mean(name, entries)}; known: {', '.join(entries)}. "
                        f"Your own entries go in ./conf/{key}/<name>.yaml or a directory named in "
                        f"${CONFIG_DIRS_ENV} (see docs/cli.md: Models and API keys)")
