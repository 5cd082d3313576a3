"""`rubric-engine localize` on the command line: its key=value options and what it prints.

Why apart from authoring/localize.py: the translation itself is callable from Python with a LocalizeOptions; this
module only turns argv into one (with the subcommands' shared parser, cliargs) and reports the outcome.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rubric_engine.authoring.localize import REPORT_FILE, LocalizeOptions, apply_review, localize
from rubric_engine.cli.args import COMMANDS, as_int, as_list, parse
from rubric_engine.errors import ConfigError

__all__ = ["parse_options", "localize_command"]

_USAGE = ("usage: rubric-engine localize source=NAME target=NAME locale=LL model=PROVIDER/MODEL [api_base=URL] "
          "[api_key_env=VAR] [data.path=FILE] [limit=N] [ids=a,b] [out=DIR] [concurrency=N] | "
          "rubric-engine localize source=NAME target=NAME review=EDITED.csv [out=DIR]")


def _positive(key: str) -> Callable[[str], float]:
    def convert(value: str) -> float:
        try:
            n = float(value)
        except ValueError:
            raise ConfigError(f"localize: {key}={value!r} is not a number") from None
        if not n > 0:
            raise ConfigError(f"localize: {key}={value!r} must be greater than 0")
        return n
    return convert


def _path(value: str) -> Path:
    return Path(value).expanduser()


# command-line key -> (LocalizeOptions attribute, converter); cliargs.COMMANDS["localize"] lists the same keys
_OPTIONS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "source": ("source", str), "target": ("target", str), "locale": ("locale", str), "model": ("model", str),
    "api_base": ("api_base", str), "api_key_env": ("api_key_env", str), "data.path": ("data_path", str),
    "data.cache_dir": ("data_cache_dir", str), "limit": ("limit", lambda v: as_int(v, "limit", "localize", 0)),
    "ids": ("ids", as_list), "out": ("out", _path), "review": ("review", _path),
    "concurrency": ("concurrency", lambda v: as_int(v, "concurrency", "localize", 1)),
    "rpm": ("rpm", _positive("rpm")), "timeout": ("timeout", _positive("timeout")), "cache.dir": ("cache_dir", str),
    "benchmark_dirs": ("benchmark_dirs", as_list),
}


def parse_options(args: Sequence[str]) -> LocalizeOptions:
    """key=value arguments -> LocalizeOptions; ConfigError naming the bad argument and the fix."""
    values: dict[str, Any] = {}
    for key, value in parse(COMMANDS["localize"], args).options.items():
        value = value.strip()
        if key in _OPTIONS and value and value.lower() not in ("null", "none"):
            attr, convert = _OPTIONS[key]
            values[attr] = convert(value)
    required = ("source", "target") + (() if values.get("review") else ("locale", "model"))
    missing = [k for k in required if not values.get(k)]
    if missing:
        raise ConfigError(f"localize: missing {', '.join(k + '=' for k in missing)}; {_USAGE}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", values["target"]):
        raise ConfigError(f"localize: target={values['target']!r} must be a benchmark name (letters, digits, _ . -)")
    values.setdefault("out", Path("localized") / values["target"])
    return LocalizeOptions(**values)


def _next_steps(opts: LocalizeOptions, data_file: str, sha: str) -> str:
    """What to do with the file: create the variant if needed, point its data.path here, validate."""
    from rubric_engine.spec.files import SPEC_FILE, benchmark_search_path, list_benchmarks

    variant = list_benchmarks(benchmark_search_path(opts.benchmark_dirs)).get(opts.target)
    steps = [] if variant else [f"  create the variant: rubric-engine new {opts.target} extends={opts.source}"
                                                      + (f" locale={opts.locale}" if opts.locale else "")]
    home = variant if variant else Path(opts.target)  # a spec reads data only inside its own directory
    yaml_file = home / SPEC_FILE
    steps += [f"  put the data inside the spec: copy {data_file} into {home}/ and in {yaml_file} set "
              f"data: {{url: null, path: {Path(data_file).name}, sha256: {sha}}}",
              f"  check it: rubric-engine validate benchmark={opts.target}  (or pass data.path={data_file} to a run)"]
    return "next:\n" + "\n".join(steps)


def localize_command(args: list[str]) -> int:
    """CLI entry (the dispatcher passes argv after `localize`); 0 = all translated, 1 = some failed."""
    opts = parse_options(args)
    if opts.review is not None:
        res = apply_review(opts)
        print(f"applied {opts.review}: {res['changed']} text(s) changed in {res['output']} "
              f"(sha256 {res['output_sha256']})")
        print(_next_steps(opts, res["output"], res["output_sha256"]))
        return 0
    rep = localize(opts)
    print(f"translated {rep['translated']}/{rep['questions']} question(s) -> {rep['output']}")
    print(f"review: {rep['review']} (edit the translation column, then rerun with review={rep['review']})")
    if rep["failed"]:
        print(f"FAILED: {rep['failed']} question(s), not written: "
              f"{', '.join(x['id'] for x in rep['failures'])}; details in {opts.out / REPORT_FILE}; "
              "rerun the same command to retry them (completed ones come from the cache)")
    print(_next_steps(opts, rep["output"], rep["output_sha256"]))
    return 1 if rep["failed"] else 0
