"""A model entry named the way a user names it: an entry's name (`gpt-4o`, `mock`), a LiteLLM id
(`openai/gpt-4o-mini`), a dict entry or a `ModelSpec`, made a `ModelSpec` without Hydra.

Why here and not in cli/: the command line resolves `candidate=gpt-4o` through Hydra's config groups, but a
juror, a baseline, robustness's paraphraser and the Python API (`rubric_engine.evaluate`) name entries outside
a group override. They all find the entry file as Hydra's search path would (the shipped conf/<group>/ first,
then the user's config directories, so a shipped entry is never silently replaced by a user file of the same
name) and read it here, so a name means the same entry wherever it is given; no Hydra import.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError
from rubric_engine.models.adhoc import adhoc_entry, is_model_id
from rubric_engine.models.entries import ModelSpec

__all__ = ["CONFIG_MODULE", "CONFIG_DIRS_ENV", "config_dirs", "entry_file", "read_entry", "entry_data", "model_entry"]

CONFIG_MODULE = "rubric_engine.conf"  # the shipped entries: conf/<group>/<name>.yaml, installed in the package
CONFIG_DIRS_ENV = "RUBRIC_ENGINE_CONFIG_DIRS"
_NAME = re.compile(r"(?:[A-Za-z0-9_-][A-Za-z0-9_.-]*/)*[A-Za-z0-9_-][A-Za-z0-9_.-]*")


def config_dirs(cwd: Path | None = None) -> list[Path]:
    """User directories holding model entries (`candidate/<name>.yaml`, `judge/<name>.yaml`, `user/<name>.yaml`),
    in order: $RUBRIC_ENGINE_CONFIG_DIRS (os.pathsep-separated), then ./conf when it has candidate/, judge/ or user/."""
    found: list[Path] = []
    for part in os.environ.get(CONFIG_DIRS_ENV, "").split(os.pathsep):
        if part.strip():
            found.append(Path(part).expanduser().resolve())
    local = (cwd or Path.cwd()) / "conf"
    if (local / "candidate").is_dir() or (local / "judge").is_dir() or (local / "user").is_dir():
        found.append(local.resolve())
    unique: list[Path] = []
    for d in found:
        if d not in unique:
            unique.append(d)
    return unique


def entry_file(name: str, group: str) -> Any:
    """A model entry's file by name, as Hydra's search path finds `candidate=<name>`: the shipped conf/<group>/
    first, then the user's config dirs (a shipped entry is never silently replaced by a user file); None if none."""
    from importlib import resources

    if not _NAME.fullmatch(name):
        return None  # (an entry may sit in a folder, conf/judge/openai/x.yaml, as Hydra allows; never a `..` part)
    places = [Path(d) / group / f"{name}.yaml" for d in config_dirs()]
    return next((p for p in [resources.files(CONFIG_MODULE) / group / f"{name}.yaml", *places] if p.is_file()), None)


def read_entry(found: Any) -> Any:
    """An entry file's YAML (a juror's, a baseline's, a paraphraser's): the one reader of entries found by name."""
    import yaml

    return yaml.safe_load(found.read_text(encoding="utf-8"))


def entry_data(name: str, role: str, groups: tuple[str, ...]) -> dict[str, Any]:
    """`role=NAME` given outside a group override (baseline=, robustness's paraphraser=, the Python API): the first
    entry file of that name in `groups` (found as Hydra finds `candidate=NAME`), else an ad-hoc LiteLLM id."""
    found = next((f for f in (entry_file(name, g) for g in groups) if f is not None), None)
    if found is not None:
        return dict(read_entry(found) or {})
    if is_model_id(name):
        return adhoc_entry(name, role)  # the one way an id stands for an entry (models/adhoc.py)
    raise ConfigError(f"{role}={name}: not a {' or '.join(f'conf/{g}/' for g in groups)} entry nor a LiteLLM id "
                      "(provider/model); use an entry name such as mock or an id such as openai/gpt-4o")


def model_entry(value: str | Mapping[str, Any] | ModelSpec | None, role: str,
                timeout: float | None = None) -> ModelSpec | None:
    """The `ModelSpec` for `value` in `role` (candidate, judge, user: the conf/ group of that name): an entry name
    or a LiteLLM id (entry_data), a dict entry (the keys of an entry file: model, api_base, api_key_env, params,
    ...; `entry: NAME` starts from that entry and changes the keys given beside it), or a ModelSpec as is.
    `timeout`: the run-wide override, as `timeout=` on the command line. As on the command line, an entry whose
    api_base is changed gets a key only from an api_key_env changed with it (a key goes only where its entry
    sends it)."""
    if value is None or isinstance(value, ModelSpec):
        return value
    if isinstance(value, str):
        return ModelSpec.from_config(entry_data(value, role, (role,)), role=role, timeout=timeout)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{role}: give an entry name (gpt-4o, mock), a LiteLLM id (openai/gpt-4o-mini), a dict "
                          f"entry or a ModelSpec, not {type(value).__name__}")
    changes = dict(value)
    base = changes.pop("entry", None)
    if base is None:
        return ModelSpec.from_config(changes, role=role, timeout=timeout)
    data = entry_data(str(base), role, (role,))
    if "api_base" in changes and "api_key_env" not in changes:
        data["api_key_env"] = None
    return ModelSpec.from_config({**data, **changes}, role=role, timeout=timeout)
