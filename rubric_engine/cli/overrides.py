"""Checks the main command's arguments before Hydra sees them.

Why: Hydra answers a misspelt key (`candiate=gpt-4o`) with "use +candiate=..." advice that makes things
worse, an unknown model entry with a multi-line listing, `--dry-run` with argparse's usage text and a bare
word with its grammar error. Here an unknown key gets "did you mean candidate=?" from the keys of the
primary config, an unknown model entry the list of entries in the package and in the user's config
directories (cliargs.config_dirs) unless it is a LiteLLM id (cli/adhoc.py: its provider checked), a `--flag` the key=value to write, a bare word the subcommands, and
`candidate.model=` without `candidate=` the entry to start from. No Hydra import: this runs first.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rubric_engine.cli.args import CONFIG_DIRS_ENV, config_dirs, did_you_mean
from rubric_engine.errors import ConfigError

__all__ = ["check_overrides", "check_command_line", "known_keys", "group_entries", "override_syntax_error",
           "unknown_word", "hydra_form", "swept_entry_keys", "GROUPS", "RUN_WORDS", "help_config", "quickstart", "group_choices"]

GROUPS = ("candidate", "judge", "user")
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


def _entry_advice(group: str, key: str, value: str) -> str:
    """What to write for `candidate.model=X` (or any `candidate.*`) when no `candidate=` chooses an entry: the
    model by its LiteLLM id (its key variable follows the provider), or the same with a server of one's own."""
    compatible = f"{group}=openai_compatible {group}.model=openai/<served-model-name> {group}.api_base=URL"
    if key == f"{group}.model" and value:
        if "/" not in value:
            return compatible.replace("openai/<served-model-name>", value)
        from rubric_engine.models.entries import KEYED_PROVIDERS, provider_key_env

        key_from = (f"its key comes from ${provider_key_env(value)}" if value.split("/", 1)[0] in KEYED_PROVIDERS
                    else "no key unless you name one")
        return (f"{group}={value} (the model by its LiteLLM id, no entry needed; {key_from}), or for a server of your "
                f"own {group}={value} {group}.api_base=URL (plus {group}.api_key_env=VAR if it wants a key)")
    if key == f"{group}.api_base":
        return compatible.replace("URL", value or "URL")
    return f"{group}=<entry> {key}={value} (entries: {', '.join(group_entries(group))})"


def _check_model_key(arg: str, key: str, value: str, chosen: set[str]) -> None:
    """`candidate.model=...` (with or without Hydra's `+`) changes an entry: one must be chosen first.
    Without it Hydra would advise `+candidate.model=...`, which builds a model with no key variable, so the
    key check before the first call would have nothing to check."""
    group = key.lstrip("+").split(".", 1)[0]
    if group in GROUPS and "." in key and group not in chosen:
        bare = key.lstrip("+")
        why = " (without judge= the benchmark's declared judge is used as it is)" if group == "judge" else ""
        raise ConfigError(f"{arg!r} changes a {group} entry, but no {group}= chooses one{why}; write "
                          f"{_entry_advice(group, bare, value)} (see docs/cli.md: Models and API keys)")


def check_overrides(argv: Sequence[str]) -> None:
    """Raise ConfigError (one line) for an unknown top-level key, an unknown model entry, or a model key
    changed with no entry chosen. `+key` and `++key` are checked like `key` (the CLI sets them with `++`)."""
    keys: list[str] | None = None
    chosen = {k.lstrip("+") for k, eq, v in (a.partition("=") for a in argv)
              if eq and k.lstrip("+") in GROUPS and v.strip().lower() not in ("", "null")}
    for arg in argv:
        if arg.startswith("-"):
            continue
        key, eq, value = arg.partition("=")
        if not eq or not key or key.startswith("~"):
            continue
        top = re.split(r"[./@]", key.lstrip("+"), maxsplit=1)[0]
        if top == "hydra":
            continue
        _check_model_key(arg, key, value, chosen)
        key = key.lstrip("+")
        keys = keys if keys is not None else known_keys()
        if top not in keys:
            ours = foreign_key(key) if key == top else None  # another tool's word: our key with its value
            hint = f" (did you mean {ours}={value}?)" if ours else did_you_mean(top, keys).replace("?)", "=?)")
            raise ConfigError(f"unknown key {key!r}{hint}; known keys: {', '.join(keys)} "
                              "(see rubric-engine --help)")
        _check_nested(key, top)
        if key in GROUPS and value and not _SWEEP_FN.match(value) and value.lower() != "null":
            from rubric_engine.cli.adhoc import adhoc_model, entry_file_exists

            entries = group_entries(key)
            for _, name in group_choices([f"{key}={value}"]):
                if (name not in entries and not entry_file_exists(key, name)  # conf/candidate/a/b.yaml
                        and adhoc_model(key, name) is None):  # a LiteLLM id (its provider checked here)
                    raise ConfigError(
                        f"unknown {key} entry {name!r}{did_you_mean(name, entries)}; known: {', '.join(entries)}, "
                        f"or a LiteLLM id with its provider ({key}=openai/gpt-4o-mini). Your own entries go in "
                        f"./conf/{key}/<name>.yaml or a directory named in ${CONFIG_DIRS_ENV} "
                        "(see docs/cli.md: Models and API keys)")


def group_choices(argv: Sequence[str]) -> list[tuple[str, str]]:
    """(group, value) for every value chosen with `candidate=`, `judge=` or `user=` (each value of a sweep's
    list; not Hydra's sweep functions): what cli/adhoc.py registers when it is a LiteLLM id."""
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        group = key.lstrip("+")
        if eq and group in GROUPS and not _SWEEP_FN.match(value):
            out += [(group, v.strip()) for v in value.split(",") if v.strip()]
    return out


@functools.cache
def _in_every_entry(group: str) -> frozenset[str]:
    """Keys every entry of a group has (the package's and the user's), `params` aside: Hydra sets these
    with a plain `key=`; any other key needs `++`."""
    files = [p for p in resources.files(_CONFIG_MODULE).joinpath(group).iterdir() if p.name.endswith(".yaml")]
    files += [p for d in config_dirs() if (d / group).is_dir() for p in Path(d / group).glob("*.yaml")]
    keys = [set(data) for data in (yaml.safe_load(p.read_text(encoding="utf-8")) for p in files)
            if isinstance(data, dict)]
    return frozenset(set.intersection(*keys) - {"params"}) if keys else frozenset()


def hydra_form(arg: str) -> str:
    """How a checked override reaches Hydra. `candidate.params.temperature=0`, `candidate.params={temperature:0}`
    (as README writes it), `candidate.timeout=30` and other keys some model entries leave out get `++`
    rather than Hydra's "use +" advice. A user's `+key=` / `++key=` (checked by check_overrides like
    `key=`) is set with `++` too, and `+candidate=NAME` is the choice `candidate=NAME` (the `+` means nothing
    to the engine). Anything else is passed as written, so sweep job directories keep their plain names."""
    key, eq, value = arg.partition("=")
    bare = key.lstrip("+")
    if not eq or arg.startswith(("-", "~")) or re.match(r"hydra\b", bare):
        return arg
    if bare in GROUPS:
        return f"{bare}={value}"
    parts = bare.split(".")
    model_key = parts[0] in GROUPS and len(parts) > 1 and (len(parts) > 2 or parts[1] not in _in_every_entry(parts[0]))
    return f"++{bare}={value}" if key != bare or model_key else arg


def swept_entry_keys(argv: Sequence[str]) -> list[str]:
    """`argv` (in hydra_form) with `candidate.api_base=URL` made `++candidate.api_base=URL` when the same sweep
    chooses several `candidate=` entries: Hydra composes a sweep's primary config without its swept choices,
    where no candidate entry exists yet to hold the key; `++` adds it there and sets it in every job."""
    if not any(a in ("-m", "--multirun") for a in argv):
        return list(argv)
    swept = {k for k, _, v in (a.partition("=") for a in argv)  # a jury, judge=[a,b], is one value, not a sweep
             if k in GROUPS and (("," in v and not v.lstrip().startswith("[")) or _SWEEP_FN.match(v))}
    return [f"++{a}" if a.split(".", 1)[0] in swept and "." in a.partition("=")[0] and not a.startswith(("+", "-", "~"))
            else a for a in argv]


# ------------------------------------------------------------------ the shape of the command line

RUN_WORDS = ("run", "help")  # the words the main command takes besides the subcommands of cli/subcommands.py
# Hydra's own flags (hydra._internal.utils.get_args_parser), passed through: how many values follow each
# (a tuple: at most one, from these choices).
_HYDRA_FLAGS: dict[str, int | tuple[str, ...]] = {
    "-h": 0, "--help": 0, "--hydra-help": 0, "--resolve": 0, "-r": 0, "--run": 0, "-m": 0, "--multirun": 0,
    "-sc": 0, "--shell-completion": 0, "-c": 1, "--cfg": 1, "-p": 1, "--package": 1, "-cp": 1,
    "--config-path": 1, "-cn": 1, "--config-name": 1, "-cd": 1, "--config-dir": 1, "--experimental-rerun": 1,
    "-i": ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath"),
    "--info": ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath"),
}
_BOOLS = ("true", "false", "yes", "no", "1", "0", "on", "off")


@functools.cache
def _flag_keys() -> dict[str, Any]:
    """Every key a `--flag` may stand for, dotted (`cache.dir`), with its default value."""
    cfg = _primary()
    out: dict[str, Any] = {}
    for key in known_keys():
        node = cfg.get(key)
        if isinstance(node, dict):
            out.update({f"{key}.{k}": v for k, v in node.items() if not isinstance(v, dict)})
        else:
            out[key] = node
    out.update({"judge.repeats": None, "judge.tie": None, "candidate.samples": 1,  # cli._ALIASES
                "judge.repeats_max": None, "judge.repeats_prior": None, "judge.repeats_confidence": None})
    return out


def _norm(name: str) -> str:
    return name.strip("-").replace("-", "_").replace(".", "_").lower()


# Words of other evaluation tools (inspect_ai, lm-evaluation-harness, promptfoo, OpenAI's evals) for what one of
# our keys does, normalised as _norm does: `--model X`, `model=X`, `--log-dir D`, `output_dir=D`, `--tasks T`.
_FOREIGN = {"model": "candidate", "models": "candidate", "provider": "candidate", "providers": "candidate",
            "log_dir": "hydra.run.dir", "output_dir": "hydra.run.dir", "output_path": "hydra.run.dir",
            "outdir": "hydra.run.dir", "out_dir": "hydra.run.dir", "output": "hydra.run.dir",
            "task": "benchmark", "tasks": "benchmark", "eval": "benchmark", "grader": "judge",
            "judge_model": "judge", "grader_model": "judge", "max_connections": "concurrency",
            "max_concurrency": "concurrency", "temperature": "candidate.params.temperature"}


def foreign_key(word: str) -> str | None:
    """Our key for a word another evaluation tool uses (`log_dir` -> `hydra.run.dir`), or None."""
    return _FOREIGN.get(_norm(word))


def _as_override(flag: str, value: str | None) -> tuple[str | None, str]:
    """`--dry-run` -> ('dry_run', 'dry_run=true'); an unknown flag -> (None, the closest key=value or ''),
    another tool's flag (`--model X`, `--log-dir D`) -> (None, our key=value)."""
    if foreign_key(flag):
        return None, f"{foreign_key(flag)}={'VALUE' if value is None else value}"
    keys = _flag_keys()
    by_norm = {_norm(k): k for k in keys}
    key = by_norm.get(_norm(flag))
    close = [by_norm[m] for m in difflib.get_close_matches(_norm(flag), list(by_norm), n=1, cutoff=0.75)]
    guess = key or (close[0] if close else None)
    if guess is None:
        return None, ""
    if value is None:
        value = "true" if isinstance(keys[guess], bool) else "VALUE"
    return key, f"{guess}={value}"


@functools.cache
def help_config() -> dict[str, str]:
    """conf/hydra/help/rubric_engine.yaml, the text of `--help`: also the short help and the quickstart of
    our error lines (read without Hydra, so a bare command or a typo costs no start-up)."""
    text = resources.files(_CONFIG_MODULE).joinpath("hydra", "help", "rubric_engine.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


_HELP_KEYS = {"baseline.entry": "baseline", "jury.judges": None}  # config paths a user writes otherwise (judge=[a,b])
DOCS = ("Docs: README.md and docs/ (docs/cli.md: the command line) are in the project's source distribution, "
        "not in the installed package: pip download --no-deps --no-binary :all: rubric-engine")


def run_help() -> str:
    """`rubric-engine --help`: the header, each model group's entries (the package's and the user's own, from
    ./conf and $RUBRIC_ENGINE_CONFIG_DIRS), every key as the `key=default` a command line writes, the footer.
    Written here rather than by Hydra, whose listing misses the user's entries and prints the config as YAML
    (`baseline:` / `  entry:` for what is typed `baseline=`)."""
    from rubric_engine.cli.args import config_dirs

    own = {g: {p.stem for d in config_dirs() if (d / g).is_dir() for p in (d / g).glob("*.yaml")} for g in GROUPS}
    groups = [f"{g}: " + ", ".join(f"{n} (yours)" if n in own[g] else n for n in group_entries(g)) for g in GROUPS]
    keys = []
    for key, default in _flag_keys().items():
        shown_key = _HELP_KEYS.get(key, key)
        if shown_key is not None and key not in ("judge.repeats", "judge.tie", "candidate.samples",
                                                                  "judge.repeats_max", "judge.repeats_prior",
                                                                  "judge.repeats_confidence"):
            value = "null" if default is None else str(default).lower() if isinstance(default, bool) else default
            keys.append(f"{shown_key}={'[]' if value == [] else value}")
    cfg = help_config()
    return "\n".join([cfg["header"].rstrip(), "", "== Config groups: model entries (choose one with group=entry, or a LiteLLM id) ==",
                      *groups, f"Your own: ./conf/<group>/<name>.yaml or a directory in ${CONFIG_DIRS_ENV}", "",
                      "== Keys (key=default) ==", *keys, "", cfg["footer"].rstrip()])


def quickstart() -> str:
    """The keyless first command, as --help shows it (`Try it (...): rubric-engine ...`)."""
    found = re.search(r"^Try it[^:]*:\s*(rubric-engine .+)$", help_config()["header"], re.M)
    return found.group(1).strip() if found else "rubric-engine key=value ..."


def unknown_word(word: str, subcommands: Sequence[str]) -> ConfigError:
    """The error for a word that is no subcommand and no key=value (with the closest of either)."""
    words = [*RUN_WORDS, *subcommands]
    key, guess = _as_override(word, None)
    hint = did_you_mean(word, words) if key is None else ""
    hint = hint or (f" (did you mean {guess}?)" if guess else "")
    return ConfigError(f"{word!r} is neither a subcommand nor a key=value override{hint}; subcommands: "
                       f"{', '.join(words)}; a run is key=value overrides, e.g. {quickstart()} "
                       "(see rubric-engine --help)")


def check_command_line(argv: Sequence[str], subcommands: Sequence[str]) -> None:
    """Raise ConfigError (one line) for a GNU-style `--flag` or a bare word: both would reach Hydra as
    argparse's usage text or a grammar error. A `--flag` naming a config key gets the key=value to write."""
    flags: list[tuple[str, str]] = []  # (what was written, key=value)
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("-") or arg == "-":
            if "=" not in arg and not arg.startswith("~"):
                raise unknown_word(arg, subcommands)
            continue
        name, eq, value = arg.partition("=")
        takes = _HYDRA_FLAGS.get(name)
        if takes is not None:
            if not eq and (takes == 1 or (isinstance(takes, tuple) and i < len(argv) and argv[i] in takes)):
                i += 1  # the flag's value (`--cfg job`, `--info searchpath`)
            continue
        nxt = argv[i] if i < len(argv) else None
        key, guess = _as_override(name, value if eq else None)
        if guess and not eq and nxt is not None and not nxt.startswith("-") and "=" not in nxt:
            if not guess.endswith("=true") or nxt.lower() in _BOOLS:
                i += 1  # `--limit 3`: the flag's value
                key, guess = _as_override(name, nxt)
                arg = f"{arg} {nxt}"
        if key is None:
            hint = f" (did you mean {guess}?)" if guess else ""
            raise ConfigError(f"unknown option {arg!r}{hint}; a run takes key=value overrides, not --options "
                              f"(e.g. limit=3 dry_run=true; see rubric-engine --help)")
        flags.append((arg, guess))
    if flags:
        raise ConfigError(f"{' '.join(repr(a) for a, _ in flags)}: use key=value: {' '.join(o for _, o in flags)}")


def override_syntax_error(override: str) -> str:
    """Our one line for an override Hydra's grammar refused, instead of its parser's wording and URL."""
    key, eq, value = override.partition("=")
    if not eq:
        why = "write key=value"
    elif not key.lstrip("+~"):
        why = "the key before '=' is missing"
    elif value.startswith("="):
        why = f"give one value after '=' ({key}=3), or quote a value that holds '=' ({key}='a=b')"
    else:
        why = ""
        for open_, close in ("[]", "{}", "()"):
            if value.count(open_) != value.count(close):
                why = (f"'{open_}' and '{close}' do not pair up; a list is {key}=[a,b], a mapping {key}={{a:1}}, "
                       f"or quote the value ({key}='...')")
                break
        if not why and (value.count("'") % 2 or value.count('"') % 2):
            why = "a quote is not closed"
        why = why or f"quote a value that holds = [ ] {{ }} ( ) or quotes ({key}='a=b'); a list is {key}=[a,b]"
    return f"cannot parse override {override!r}: {why} (see docs/cli.md: Override syntax)"
