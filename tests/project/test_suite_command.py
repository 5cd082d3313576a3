"""README's test command is the one CI runs: `.ci/run` runs README.md's command, word for word, so the
suite a contributor runs locally is the suite CI runs (docs/development.md, "Running the suite")."""

from __future__ import annotations

import re

from conftest import REPO


def _readme_command() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Running the tests", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README's 'Running the tests' has no bash block"
    [command] = [line for line in block.group(1).splitlines() if line.startswith("pytest")]
    return command


def test_ci_runs_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert [line for line in ci if line.startswith("pytest")] == [_readme_command()]


def test_the_readme_test_command_runs_on_every_worker_a_whole_file_at_a_time() -> None:
    words = _readme_command().split()
    assert "-n" in words and "--dist" in words and words[words.index("--dist") + 1] == "loadfile", words


def test_the_tests_that_start_a_process_are_found_through_helpers_and_fixtures() -> None:
    from slowmarks import starts_a_process

    assert starts_a_process("test_cli_words", "test_an_unknown_flag_is_one_line_with_the_fix")  # run_cli
    assert starts_a_process("test_agree", "test_numbers_match_independent_computation")  # conftest's review_runs
    assert starts_a_process("test_startup", "test_cached_rescore_never_imports_litellm")  # a helper: sys.executable
    assert not starts_a_process("test_scoring_rules", "test_a_group_without_positive_points")
    assert not starts_a_process("test_suite_command", "test_ci_runs_the_readme_test_command")
