"""The shape of the command line, through the console script: Hydra never shows through.

`--dry-run` gets the key=value to write, a bare word the subcommands (`run` and `help` among them), an
override Hydra's grammar refuses our own line, `candidate.model=` without `candidate=` the entry to start
from (never Hydra's `+candidate.model=` advice, which would skip the key check), a bare `rubric-engine`
a short help, and a reader that closes stdout early a quiet exit 141.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import EXE, MINI, model_args, run_cli
from fakeserver import FakeServer, Reply

HYDRA_WORDS = ("hydra.cc", "Error parsing override", "usage: rubric-engine [--help]", "unrecognized arguments",
               "To append to your config", "use +", "Ambiguous value", "Traceback", "EQUAL", "expecting")


def one_line(res: subprocess.CompletedProcess, needle: str) -> str:
    """The run failed with exit 2 and exactly one line on stderr holding `needle`, no Hydra words."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rubric-engine: error: ") and needle in lines[0], lines
    assert not any(w in res.stderr for w in HYDRA_WORDS), res.stderr
    assert res.stdout == ""
    return lines[0]


# ---------------------------------------------------------------------------------- GNU-style flags

@pytest.mark.parametrize("args, needle", [
    (["--dry-run"], "'--dry-run': use key=value: dry_run=true"),
    (["--limit", "3"], "'--limit 3': use key=value: limit=3"),
    (["--limit=3"], "use key=value: limit=3"),
    (["--cache-dir", "calls"], "use key=value: cache.dir=calls"),
    (["--debug"], "use key=value: debug=true"),
    (["benchmark=heartbench_en", "--dry-run", "--limit", "3", "candidate=mock"],
     "'--dry-run' '--limit 3': use key=value: dry_run=true limit=3"),
])
def test_a_flag_that_names_a_key_gets_the_key_value_to_write(env: dict[str, str], args: list[str],
                                                              needle: str) -> None:
    one_line(run_cli(args, env, timeout=60), needle)


@pytest.mark.parametrize("args, needle", [
    (["--foo"], "unknown option '--foo'; a run takes key=value overrides"),
    (["--limt", "3"], "unknown option '--limt 3' (did you mean limit=3?)"),
    (["-x"], "unknown option '-x'"),
])
def test_an_unknown_flag_is_one_line_with_the_fix(env: dict[str, str], args: list[str], needle: str) -> None:
    one_line(run_cli(args, env, timeout=60), needle)


# ------------------------------------------------------------------------------- words: help and run

@pytest.mark.parametrize("args, needle", [
    (["foo"], "'foo' is neither a subcommand nor a key=value override; subcommands: run, help, validate"),
    (["validat", "heartbench_en"], "(did you mean validate?)"),
    (["hepl"], "(did you mean help?)"),
    (["dry_run"], "(did you mean dry_run=true?)"),
    (["benchmark=heartbench_en", "candidate=mock", "oops"], "'oops' is neither"),
    (["help", "validat"], "(did you mean validate?)"),
])
def test_a_bare_word_names_the_subcommands_and_the_key_value_form(env: dict[str, str], args: list[str],
                                                                  needle: str) -> None:
    line = one_line(run_cli(args, env, timeout=60), needle)
    assert "benchmark=heartbench_en candidate=mock judge=mock" in line


def test_help_is_the_help(env: dict[str, str]) -> None:
    full = run_cli(["--help"], env, timeout=60)
    assert full.returncode == 0 and "Config groups" in full.stdout, full.stderr
    for args in (["help"], ["help", "run"], ["run", "--help"]):
        res = run_cli(args, env, timeout=60)
        assert (res.returncode, res.stdout, res.stderr) == (0, full.stdout, ""), args
    sub = run_cli(["validate", "--help"], env, timeout=60)
    res = run_cli(["help", "validate"], env, timeout=60)
    assert res.returncode == 0 and res.stdout == sub.stdout and res.stdout.startswith("usage: rubric-engine validate")


def test_run_is_an_explicit_run(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli(["run", "benchmark=heartbench_en", "candidate=mock", "judge=mock", "limit=1", "progress=none",
                   f"hydra.run.dir={tmp_path / 'r'}"], env, timeout=180)
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["counts"]["scored"] == 1


@pytest.mark.parametrize("args", [[], ["run"]])
def test_a_bare_command_prints_a_short_help_and_downloads_nothing(tmp_path: Path, env: dict[str, str],
                                                                  args: list[str]) -> None:
    res = run_cli(args, env, timeout=60, cwd=tmp_path)
    assert (res.returncode, res.stderr) == (0, ""), res.stderr
    out = res.stdout
    assert out.startswith("rubric-engine: ") and "Usage: rubric-engine [run] key=value" in out
    assert "rubric-engine benchmark=heartbench_en candidate=mock judge=mock" in out and "docs/cli.md" in out
    for name in ("help", "validate", "leaderboard", "rescore", "audit"):
        assert f"rubric-engine {name}" in out, name
    assert len(out.splitlines()) < 40 and "Current config" not in out  # short: --help has the rest
    assert list(tmp_path.iterdir()) == [] and not (tmp_path / "xdg").exists()  # no run dir, no download


# ------------------------------------------------------------------------------------ override syntax

@pytest.mark.parametrize("arg, needle", [
    ("limit==", "cannot parse override 'limit==': give one value after '='"),
    ("limit=[1", "cannot parse override 'limit=[1': '[' and ']' do not pair up"),
    ("ids=[a,b", "a list is ids=[a,b]"),
    ("subset=a=b", "quote a value that holds = [ ] { } ( ) or quotes (subset='a=b')"),
    ("subset='ab", "a quote is not closed"),
    ("limit=1,2", "'limit=1,2' holds a comma: a list is key=[a,b]"),
])
def test_an_override_hydra_cannot_parse_gets_our_line(tmp_path: Path, env: dict[str, str], arg: str,
                                                      needle: str) -> None:
    res = run_cli(["benchmark=heartbench_en", "candidate=mock", "judge=mock", arg,
                   f"hydra.run.dir={tmp_path / 'r'}"], env, timeout=60)
    assert res.returncode == 2 and needle in res.stderr.splitlines()[0], res.stderr
    assert not any(w in res.stderr for w in HYDRA_WORDS), res.stderr
    assert not (tmp_path / "r").exists()


# ----------------------------------------------------------------------- model keys without an entry

@pytest.mark.parametrize("arg", ["candidate.model=openai/gpt-4o", "+candidate.model=openai/gpt-4o",
                                 "++candidate.model=openai/gpt-4o"])
def test_a_model_key_without_an_entry_gets_the_engines_advice(tmp_path: Path, env: dict[str, str], arg: str) -> None:
    res = run_cli(["benchmark=heartbench_en", arg, "judge=mock", "limit=1", f"hydra.run.dir={tmp_path / 'r'}"],
                  env, timeout=60)
    assert res.returncode == 2, res.stderr
    line = res.stderr.splitlines()[0]
    assert "no candidate= chooses one" in line and "write candidate=openai/gpt-4o (the model by its LiteLLM id" in line
    assert "$OPENAI_API_KEY" in line and "candidate=openai/gpt-4o candidate.api_base=URL" in line
    assert not any(w in res.stderr for w in HYDRA_WORDS), res.stderr
    assert not (tmp_path / "r").exists()


def test_plus_on_a_model_key_never_skips_the_key_check(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(lambda body: Reply(text="x")) as srv:  # no call may reach it
        no_entry = run_cli(["benchmark=heartbench_en", f"data.path={MINI}", "+candidate.model=openai/cand",
                            f"+candidate.api_base={srv.url}", "judge=mock", f"hydra.run.dir={tmp_path / 'a'}"], env)
        assert srv.requests == []
    assert no_entry.returncode == 2 and "no candidate= chooses one" in no_entry.stderr, no_entry.stderr
    assert "write candidate=openai/cand (the model by its LiteLLM id" in no_entry.stderr
    assert "candidate=openai/cand candidate.api_base=URL" in no_entry.stderr
    # With an entry chosen, `+` is the entry's key set: the entry's key variable is checked before any call.
    keyed = run_cli(["benchmark=heartbench_en", "candidate=gpt-4o", "+candidate.model=openai/gpt-4o", "judge=mock",
                     "limit=1", f"hydra.run.dir={tmp_path / 'b'}"], env, timeout=120)
    assert keyed.returncode == 2 and "needs an API key: export OPENAI_API_KEY" in keyed.stderr, keyed.stderr
    assert not any(w in keyed.stderr for w in HYDRA_WORDS), keyed.stderr


def test_a_judge_key_without_a_judge_entry_is_refused(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli(["benchmark=heartbench_en", "candidate=mock", "judge.model=openai/gpt-4o",
                   f"hydra.run.dir={tmp_path / 'r'}"], env, timeout=60)
    assert res.returncode == 2 and "write judge=openai/gpt-4o (the model by its LiteLLM id" in res.stderr, res.stderr


@pytest.mark.parametrize("args, needle", [
    (["+limt=3"], "unknown key 'limt' (did you mean limit=?)"),  # `+` no longer slips an unknown key past the check
    (["data.path.x=1"], "there is no key 'data.path.x' to set here"),
])
def test_hydra_plus_advice_is_never_shown(tmp_path: Path, env: dict[str, str], args: list[str], needle: str) -> None:
    res = run_cli(["benchmark=heartbench_en", "candidate=mock", "judge=mock", *args,
                   f"hydra.run.dir={tmp_path / 'r'}"], env, timeout=60)
    assert res.returncode == 2 and needle in res.stderr, res.stderr
    assert not any(w in res.stderr for w in HYDRA_WORDS), res.stderr


def test_keys_an_entry_leaves_out_and_plus_forms_just_work(tmp_path: Path, env: dict[str, str]) -> None:
    """`candidate.revision=` (only some entries have it), `+candidate=mock` and `+limit=1` are set, not refused."""
    res = run_cli(["benchmark=heartbench_en", "+candidate=mock", "candidate.revision=r1", "judge=mock", "+limit=1",
                   "dry_run=true", f"hydra.run.dir={tmp_path / 'r'}"], dict(env, COLUMNS="200"), timeout=120)
    assert res.returncode == 0, res.stderr
    assert "mock/candidate" in res.stdout


def test_version_anywhere_is_ours(env: dict[str, str]) -> None:
    res = run_cli(["limit=3", "--version"], env, timeout=60)
    assert res.returncode == 0 and res.stdout.startswith("rubric-engine ") and "Hydra" not in res.stdout


# ------------------------------------------------------------------------------------- a closed pipe

@pytest.mark.parametrize("args", [["--help"], [], ["help"], ["validate", "--help"], ["validate", "heartbench_en"],
                                  ["--cfg", "job"]])
def test_a_closed_pipe_exits_141_quietly(env: dict[str, str], args: list[str]) -> None:
    """`rubric-engine --help | head -3`: the reader is gone before the command writes (closed at once here,
    so the test does not depend on timing); nothing on stderr, exit 141 as for a program ended by SIGPIPE."""
    proc = subprocess.Popen([EXE, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert (proc.wait(timeout=120), err) == (141, "")
