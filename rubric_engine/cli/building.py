"""`rubric-engine lint` and `rubric-engine diff` on the command line: the checks and versions of a benchmark
being built.

Why apart from cli/mains.py: these steps of building a benchmark (authoring/lint.py, authoring/versions.py) grow
together and share how a spec is found (a name on the search path or a directory); mains.py runs finished ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rubric_engine.cli.args import COMMANDS, as_list, parse

__all__ = ["lint_main", "diff_main"]


def _spec(name: str, dirs: str | None) -> Any:
    from rubric_engine.spec.files import benchmark_search_path
    from rubric_engine.spec.load import load_spec

    return load_spec(name, benchmark_search_path(as_list(dirs) if dirs else []))


def _emit(lines: list[str], out: str | None) -> None:
    """Print the lines; with out=FILE write them there too (a new file each time, the whole listing)."""
    for line in lines:
        print(line)
    if out:
        Path(out).expanduser().write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def lint_main(argv: Sequence[str]) -> int:
    """`rubric-engine lint BENCHMARK [out=FILE] [data.path=FILE]`: 0 clean, 1 findings, 2 the spec or data is
    unreadable (or its changelog skips a version)."""
    from rubric_engine.authoring.lint import lint_spec
    from rubric_engine.authoring.versions import check_changelog

    parsed = parse(COMMANDS["lint"], argv)
    name = parsed.positionals[0] if parsed.positionals else parsed.get("benchmark")
    if not name:
        from rubric_engine.errors import ConfigError

        raise ConfigError("lint: which benchmark? pass its name or spec directory (rubric-engine lint my_bench)")
    spec = _spec(name, parsed.get("benchmark_dirs"))
    check_changelog(spec)
    findings = lint_spec(spec, parsed.get("data.path"))
    lines = [f.line() for f in findings]
    _emit(lines, parsed.get("out"))
    print(f"lint: {len(findings)} finding{'s' * (len(findings) != 1)} in {spec.name} {spec.version}", flush=True)
    return 1 if findings else 0


def diff_main(argv: Sequence[str]) -> int:
    """`rubric-engine diff OLD_SPEC NEW_SPEC [runs=DIR,...] [out=FILE]`: 0 no change, 1 changes listed, 2 a spec,
    its data, a run or a changelog is unusable (a changelog that skips a version, a run of another version)."""
    from rubric_engine.authoring.lint import rules_for
    from rubric_engine.authoring.moves import score_moves
    from rubric_engine.authoring.versions import check_changelog, criteria_changes
    from rubric_engine.dataset.load import load_dataset

    parsed = parse(COMMANDS["diff"], argv)
    dirs = parsed.get("benchmark_dirs")
    old, new = (_spec(name, dirs) for name in parsed.positionals[:2])
    for spec in (old, new):
        check_changelog(spec)
    new_questions = load_dataset(new).questions
    changes = criteria_changes(load_dataset(old).questions, new_questions, new.locale)
    lines = [c.line() for c in changes]
    runs = as_list(parsed.get("runs")) if parsed.get("runs") else []
    if runs:
        moves = score_moves([Path(r) for r in runs], old, new, new_questions, rules_for(new.locale).ngram)
        lines += [f"scores under {new.name} {new.version} from the verdicts of {old.version} (no model called):"]
        lines += [f"  {m.line()}" for m in moves]
    _emit(lines, parsed.get("out"))
    print(f"diff: {old.name} {old.version} -> {new.name} {new.version}: {len(changes)} "
          f"change{'s' * (len(changes) != 1)}", flush=True)
    return 1 if changes else 0
