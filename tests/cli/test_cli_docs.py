"""docs/cli.md lists every subcommand: each command of the parser's table (cli/args.py COMMANDS), each word the
dispatcher routes (cli/subcommands.py SUBCOMMANDS) and the run itself has a row in its subcommand table, so a
new subcommand cannot ship undocumented."""

from __future__ import annotations

import re

from conftest import REPO
from rubric_engine.cli.args import COMMANDS
from rubric_engine.cli.subcommands import SUBCOMMANDS

CLI_MD = REPO / "docs" / "cli.md"


def _rows() -> list[str]:
    """The first cell of every table row of docs/cli.md that shows a command line (`rubric-engine ...`)."""
    rows = []
    for line in CLI_MD.read_text(encoding="utf-8").splitlines():
        cell = re.match(r"\|\s*`(rubric-engine [^`]*)`", line)
        if cell:
            rows.append(cell.group(1))
    return rows


def _documented(words: str, rows: list[str]) -> bool:
    """A row whose command line starts with `rubric-engine WORDS` (then a space, an argument or nothing)."""
    return any(re.fullmatch(rf"rubric-engine {re.escape(words)}(\s.*)?", row) for row in rows)


def test_every_subcommand_has_a_row_in_docs_cli_md() -> None:
    rows = _rows()
    names = {cmd.name for cmd in COMMANDS.values()} | {name for name in SUBCOMMANDS if name not in COMMANDS}
    missing = sorted(name for name in names if not _documented(name, rows))
    assert not missing, f"docs/cli.md has no row `rubric-engine NAME ...` in its subcommand table for: {missing}"


def test_the_run_has_a_row_too() -> None:
    assert _documented("[run]", _rows())


def test_the_check_can_fail() -> None:
    """The contrast: a name nobody documented is not found."""
    assert not _documented("no-such-subcommand", _rows()) and not _documented("valid", _rows())
