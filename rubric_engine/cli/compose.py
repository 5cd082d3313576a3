"""A run's key=value overrides as Hydra composes them: the rewriting of run-level keys, the user's config
directories on the search path, and the composition itself.

Why apart from cli/main.py: a run, a subcommand that needs a composed config and a rubric reward built from
Python (cli/reward.py) compose the same way; cli/main.py keeps the Hydra app, the sweep and the dispatch.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from rubric_engine.cli.config import CONFIG_MODULE

__all__ = ["compose", "rewrite", "user_search_path"]

_ALIASES = {"judge.repeats": "repeats", "judge.tie": "tie", "judge.repeats_max": "repeats_max",
            "judge.repeats_prior": "repeats_prior", "judge.repeats_confidence": "repeats_confidence",  # run-level keys spelled under judge / candidate
            "candidate.samples": "samples", "baseline": "baseline.entry"}  # baseline=ENTRY: pairwise specs


def rewrite(argv: list[str]) -> list[str]:
    """`judge=[a,b,c]` (a jury) and `judge.repeats=K` / `judge.tie=X` as plain config keys: `judge` is a
    Hydra config group, whose list form would merge the entries into one instead of keeping a list."""
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if eq and key.lstrip("+") == "judge" and value.lstrip().startswith("["):
            arg = f"jury.judges={value}"
        elif eq and key.lstrip("+") in _ALIASES:
            arg = f"{_ALIASES[key.lstrip('+')]}={value}"
        out.append(arg)
    return out


def compose(overrides: list[str]) -> DictConfig:
    from hydra import compose as hydra_compose, initialize_config_module

    from rubric_engine.cli.adhoc import register
    from rubric_engine.cli.overrides import group_choices

    register(group_choices(overrides))  # candidate=openai/gpt-4o-mini: an entry Hydra finds like any other
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def user_search_path(argv: list[str]) -> list[str]:
    """`hydra.searchpath=[...]` for the user's config directories (cliargs.config_dirs), so entries such as
    ./conf/candidate/<name>.yaml work after `pip install`. Hydra searches them after the package's configs:
    new names work, and a shipped entry is never silently replaced."""
    from rubric_engine.cli.args import config_dirs

    if any(a.startswith(("hydra.searchpath=", "+hydra.searchpath=")) for a in argv):
        return []
    dirs = [d for d in config_dirs() if d.resolve() != Path(__file__).resolve().parents[2] / "conf"]
    return [f"hydra.searchpath=[{','.join(repr('file://' + str(d)) for d in dirs)}]"] if dirs else []
