"""Models named by their LiteLLM id on the command line (`candidate=openai/gpt-4o-mini`, `judge=`, `user=`)
made a Hydra choice like any entry.

Why: `candidate`, `judge` and `user` are Hydra config groups, whose values name entry files; an id with a
provider prefix names none. Before Hydra composes, each such value is stored in Hydra's ConfigStore as the
entry models/adhoc.py builds for it (the same entry baseline=, a juror and paraphraser= get), so a run, a sweep
mixing ids and entries (`-m candidate=openai/a,gpt-4o`), the sweep's key check and every launcher (they carry
the ConfigStore to their workers) see an ordinary entry, and `candidate.api_base=` / `candidate.api_key_env=`
change it as they change any entry. An entry file of that path (a user's conf/candidate/openai/x.yaml) wins.
No Hydra import at module level: cli/overrides.py asks `adhoc_model` before Hydra starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from rubric_engine.cli.args import config_dirs
from rubric_engine.models.adhoc import adhoc_entry, is_model_id

__all__ = ["adhoc_model", "register", "entry_file_exists"]

_CONFIG_MODULE = "rubric_engine.conf"


def entry_file_exists(group: str, name: str) -> bool:
    """An entry file `<group>/<name>.yaml` in the package or a user config directory (Hydra would load it)."""
    shipped = resources.files(_CONFIG_MODULE).joinpath(group, *f"{name}.yaml".split("/"))
    return shipped.is_file() or any((Path(d) / group / f"{name}.yaml").is_file() for d in config_dirs())


def adhoc_model(group: str, name: str) -> dict[str, Any] | None:
    """The entry `group=name` stands for when `name` is a LiteLLM id and no entry file has that name; None
    otherwise. A provider LiteLLM does not know is one line with the closest one (ConfigError)."""
    if not is_model_id(name) or entry_file_exists(group, name):
        return None
    return adhoc_entry(name, group)


def register(choices: Sequence[tuple[str, str]]) -> None:
    """Store the entry of every LiteLLM id among the (group, value) choices (overrides.group_choices) where
    Hydra looks for `<group>/<id>`."""
    from hydra.core.config_store import ConfigStore

    for group, name in choices:
        entry = adhoc_model(group, name)
        if entry is not None:
            where, option = name.rsplit("/", 1)
            ConfigStore.instance().store(group=f"{group}/{where}", name=option, node=entry, package=group)
