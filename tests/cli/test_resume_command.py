"""The resume command (cli/resume.py): what was typed, the directory key replaced, read back exactly by the shell
and then by Hydra's override grammar, whatever characters the directory holds, and redacted.

Why in-process: the console-script tests (tests/run/test_drain.py) run the printed command for ordinary directories;
here every awkward character is checked against Hydra's own parser in milliseconds.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from rubric_engine.cli.resume import resume_command


@pytest.mark.parametrize("directory", ["/r/plain-dir_1", "/r/a b", "/r/x,y=z", "/r/it's", "/r/q\\back", "/r/e\\'x",
                                       "/r/end\\", "/r/[a]{b}", "/r/日志",
                                       "/r/100%~+@:x"])
def test_the_directory_reads_back_exactly(directory: str) -> None:
    argv = shlex.split(resume_command(["-m", "benchmark=heartbench", "hydra.run.dir=old", "limit=3"], Path(directory)))
    assert argv[:4] == ["rubric-engine", "-m", "benchmark=heartbench", "limit=3"]  # typed order, old dir gone
    [override] = OverridesParser.create().parse_overrides([argv[-1]])
    assert override.key_or_group == "hydra.run.dir" and override.value() == directory


def test_a_sweep_and_a_retry_name_their_keys_once() -> None:
    argv = shlex.split(resume_command(["-m", "hydra.sweep.dir=a", "retry_errors=false"], Path("/s"), sweep=True,
                                      retry=True))
    assert argv == ["rubric-engine", "-m", "hydra.sweep.dir=/s", "retry_errors=true"]


def test_a_key_typed_on_the_command_line_is_redacted() -> None:
    text = resume_command(["candidate.api_key=sk-abcdefghijklmnopqrstuvwxyz0123456789"], Path("/r"))
    assert "sk-abcdefghijklmnopqrstuvwxyz0123456789" not in text
