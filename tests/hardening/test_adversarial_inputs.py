"""Hostile inputs, round two, through the console script and LiteLLM against the loopback fake server.

A shared run directory, a reply that is valid JSON but not valid Unicode, a run directory prepared by
someone else, a review sheet about to be overwritten: each ends in one clear line (exit 2) or a
per-question error recorded in samples.jsonl, never a traceback, a double bill or a write outside the run.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import time
import uuid
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, REAL_EXE
from fakeserver import FakeServer, Reply
from test_adversarial import (assert_clean, cli, hostile_spec, is_judge, n_items, one_error_line, run, samples,
                              script, verdict)

SAMPLE = Path(str(files("rubric_engine.data"))) / "heartbench_en_sample.jsonl"


@pytest.fixture
def srv():
    with FakeServer() as server:
        yield server


def raw_completion(text_json: str) -> Reply:
    """A 200 answer whose message content is `text_json` spliced in verbatim (a JSON string literal)."""
    body = {"id": f"chatcmpl-{uuid.uuid4().hex[:8]}", "object": "chat.completion", "created": 0, "model": "x",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "@@"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
    return Reply(raw=json.dumps(body).replace('"@@"', text_json))


def popen(srv: FakeServer, tmp: Path, *extra: str) -> subprocess.Popen:
    """`run` of test_adversarial, started in the background (same arguments, same environment)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(RUBRIC_ENGINE_CACHE=str(tmp / "cache"), XDG_CACHE_HOME=str(tmp / "xdg"))
    args = ["benchmark=heartbench_en", "candidate=openai_compatible", "candidate.model=openai/cand",
            f"candidate.api_base={srv.url}", "judge=openai_compatible", "judge.model=openai/judge",
            f"judge.api_base={srv.url}", "limit=3", "progress=none", "max_retries=0", f"hydra.run.dir={tmp / 'run'}",
            *extra]
    # a real start: the refusal names the owning process's pid, which a warm start's run does not share
    return subprocess.Popen([REAL_EXE, *args], env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


# -- A: one process owns a run directory --------------------------------------------------------------------

def test_a_second_process_into_the_same_run_directory_is_refused(srv: FakeServer, tmp_path: Path) -> None:
    srv.handler = script(candidate=lambda b: Reply(text="A slow, careful reply.", delay=1.5))
    first = popen(srv, tmp_path, "concurrency=1")
    try:
        deadline = time.monotonic() + 60
        while not srv.requests and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.05)
        assert srv.requests, "the first run never called the server"
        sent = len(srv.requests)
        second = run(srv, tmp_path, "concurrency=1")
        line = one_error_line(second)
        assert str(tmp_path / "run") in line and "in use by another rubric-engine process" in line
        assert f"pid {first.pid}" in line
        assert len([b for b in srv.requests if not is_judge(b)]) <= sent + 3  # the second paid nothing
    finally:
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    before = len(srv.requests)
    again = run(srv, tmp_path, "concurrency=1")  # the lock died with its process: the same command resumes
    assert again.returncode == 0, again.stderr
    assert len(srv.requests) == before  # everything was done; nothing paid twice
    summary = json.loads((tmp_path / "run" / "summary.json").read_text("utf-8"))
    assert summary["counts"]["questions"] == 3


# -- B: unpaired surrogates -----------------------------------------------------------------------------------

def test_a_lone_surrogate_in_a_candidate_reply_is_a_recorded_question_error(srv: FakeServer, tmp_path: Path) -> None:
    calls = {"n": 0}

    def candidate(body: dict[str, Any]) -> Reply | str:
        calls["n"] += 1
        return raw_completion('"broken \\ud800 text"') if calls["n"] == 1 else "A fine reply."

    srv.handler = script(candidate=candidate)
    proc = run(srv, tmp_path, "concurrency=1")
    assert proc.returncode == 0, proc.stderr
    recs = samples(tmp_path)
    bad = [r for r in recs if r.get("candidate_error")]
    assert len(bad) == 1 and "surrogate" in bad[0]["candidate_error"], bad
    assert sum(r["score"] is not None for r in recs) == 2
    assert "disk" not in proc.stderr
    before = len(srv.requests)
    again = run(srv, tmp_path, "concurrency=1")  # resumes: the recorded error is final, nothing re-sent
    assert again.returncode == 0 and len(srv.requests) == before, again.stderr
    assert_clean(proc, tmp_path)


def test_a_lone_surrogate_in_a_judge_reply_is_a_recorded_judge_error(srv: FakeServer, tmp_path: Path) -> None:
    srv.handler = script(judge=lambda b: raw_completion('"{\\"criteria\\": \\"\\udc00\\"}"'))
    proc = run(srv, tmp_path, "limit=1")
    assert proc.returncode in (0, 1), proc.stderr
    (rec,) = samples(tmp_path)
    assert rec["judge_error"] and "surrogate" in rec["judge_error"] and rec["score"] is None
    assert_clean(proc, tmp_path)


def test_data_with_a_lone_surrogate_is_refused_before_any_call(srv: FakeServer, tmp_path: Path) -> None:
    lines = SAMPLE.read_text("utf-8").splitlines()
    row = json.loads(lines[1])
    row["rubric"][0]["content"] = "@@"
    lines[1] = json.dumps(row, ensure_ascii=False).replace('"@@"', '"bad \\ud800 text"')
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(lines) + "\n", "utf-8")
    checked = cli(tmp_path, "validate", "heartbench_en", f"data.path={data}")
    line = one_error_line(checked)
    assert f"{data}:2" in line and "surrogate" in line
    proc = run(srv, tmp_path, f"data.path={data}")
    line = one_error_line(proc)
    assert f"{data}:2" in line and "surrogate" in line and not srv.requests


def test_an_answers_file_with_a_lone_surrogate_is_refused(srv: FakeServer, tmp_path: Path) -> None:
    qid = json.loads(SAMPLE.read_text("utf-8").splitlines()[0])["question_id"]
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"question_id": qid, "response": "@@"}).replace('"@@"', '"x\\udfff"') + "\n", "utf-8")
    proc = run(srv, tmp_path, "stage=score", f"answers={answers}", f"ids=[{qid}]")
    line = one_error_line(proc)
    assert f"{answers}:1" in line and "surrogate" in line and not srv.requests


# -- C: a run directory prepared by someone else -------------------------------------------------------------

def test_a_planted_log_symlink_is_refused_and_its_target_untouched(srv: FakeServer, tmp_path: Path) -> None:
    victim = tmp_path / "bashrc"
    victim.write_text("# mine\n", "utf-8")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "rubric-engine.log").symlink_to(victim)
    proc = run(srv, tmp_path, "limit=1")
    line = one_error_line(proc)
    assert "rubric-engine.log" in line and "symbolic link" in line
    assert victim.read_text("utf-8") == "# mine\n" and not srv.requests


def test_a_dangling_samples_symlink_creates_nothing_at_its_target(srv: FakeServer, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "planted.jsonl"
    target.parent.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "samples.jsonl").symlink_to(target)
    proc = run(srv, tmp_path, "limit=1")
    line = one_error_line(proc)
    assert "samples.jsonl" in line and "symbolic link" in line
    assert not target.exists() and not srv.requests


def test_a_newline_in_a_logged_value_cannot_start_a_line(srv: FakeServer, tmp_path: Path) -> None:
    srv.handler = script()
    proc = run(srv, tmp_path, "limit=1", "candidate.name='cand\necho pwned >> ~/.bashrc'")
    assert proc.returncode == 0, proc.stderr
    log = (tmp_path / "run" / "rubric-engine.log").read_text("utf-8")
    assert not any(ln.startswith("echo pwned") for ln in log.splitlines()), log
    assert "cand\\necho pwned" in log


# -- D: review export never overwrites a sheet -----------------------------------------------------------

def test_review_export_refuses_to_overwrite_a_sheet(srv: FakeServer, tmp_path: Path) -> None:
    srv.handler = script()
    assert run(srv, tmp_path).returncode == 0
    sheet = tmp_path / "sheet"
    assert cli(tmp_path, "review", "export", str(tmp_path / "run"), f"out={sheet}", "n=3").returncode == 0
    filled = (sheet / "review.csv").read_bytes().decode("utf-8-sig").replace(",,,\r\n", ",true,ana,\r\n")
    assert filled.count(",true,ana,") >= 3
    (sheet / "review.csv").write_text(filled, "utf-8-sig")
    again = cli(tmp_path, "review", "export", str(tmp_path / "run"), f"out={sheet}", "n=3")
    line = one_error_line(again)
    assert str(sheet) in line and "out=" in line and "force=true" in line
    assert (sheet / "review.csv").read_bytes().decode("utf-8-sig") == filled  # the labels are still there
    forced = cli(tmp_path, "review", "export", str(tmp_path / "run"), f"out={sheet}", "n=3", "force=true")
    assert forced.returncode == 0, forced.stderr
    assert ",true,ana," not in (sheet / "review.csv").read_bytes().decode("utf-8-sig")
    assert not list(sheet.glob(".*.tmp"))  # written atomically, no temp file left


# -- E: hostile files end in one line naming the file, never a traceback ----------------------------------

@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One complete run directory (3 questions through the fake server), copied by the tests that tamper."""
    tmp = tmp_path_factory.mktemp("finished")
    with FakeServer() as server:
        server.handler = script()
        proc = run(server, tmp)
    assert proc.returncode == 0, proc.stderr
    return tmp / "run"


def tampered(finished: Path, tmp: Path, key: str, value: Any) -> Path:
    run_dir = tmp / "copy"
    shutil.copytree(finished, run_dir)
    summary = json.loads((run_dir / "summary.json").read_text("utf-8"))
    head, _, leaf = key.rpartition(".")
    node = summary
    for part in filter(None, head.split(".")):
        node = node[part]
    node[leaf] = value
    (run_dir / "summary.json").write_text(json.dumps(summary), "utf-8")
    return run_dir


@pytest.mark.parametrize("key,value", [("counts", "x"), ("overall", "high"), ("abilities", [1]),
                                       ("counts.questions", "a"), ("interval", 3), ("overall", 1e308 * 10)],
                         ids=["counts-str", "overall-str", "abilities-list", "count-str", "interval-int", "overall-inf"])
def test_tampered_summary_types_are_one_line(finished: Path, tmp_path: Path, key: str, value: Any) -> None:
    run_dir = tampered(finished, tmp_path, key, value)
    for command in (["leaderboard", str(run_dir), f"out={tmp_path / 'lb'}"], ["rescore", str(run_dir)]):
        line = one_error_line(cli(tmp_path, *command))
        assert f"{run_dir / 'summary.json'}" in line and key in line


def test_a_template_raising_index_error_is_a_spec_error(tmp_path: Path) -> None:
    bench = hostile_spec(tmp_path, '{{ "{1}".format("a") }}\n')
    line = one_error_line(cli(tmp_path, "validate", f"benchmark={bench}"))
    assert "judge.j2:1" in line and "IndexError" in line


def test_a_deeply_nested_spec_yaml_is_refused_in_one_line(tmp_path: Path) -> None:
    bench = hostile_spec(tmp_path)
    spec = bench / "benchmark.yaml"
    spec.write_text(spec.read_text("utf-8") + "extra: " + "[" * 20000 + "]" * 20000 + "\n", "utf-8")
    line = one_error_line(cli(tmp_path, "validate", f"benchmark={bench}"))
    assert str(spec) in line and "nested deeper" in line


def test_a_labels_csv_cell_past_the_field_limit_is_one_line(finished: Path, tmp_path: Path) -> None:
    sheet = tmp_path / "sheet"
    assert cli(tmp_path, "review", "export", str(finished), f"out={sheet}", "n=3").returncode == 0
    rows = (sheet / "review.csv").read_bytes().decode("utf-8-sig").split("\r\n")
    rows[1] = rows[1][:-3] + ",true,ana," + '"' + "x" * 140_000 + '"'
    labels = tmp_path / "labels.csv"
    labels.write_text("\r\n".join(rows), "utf-8")
    line = one_error_line(cli(tmp_path, "agree", str(finished), f"labels={labels}", f"out={tmp_path / 'agr'}"))
    assert str(labels) in line and "field limit" in line


def test_a_full_disk_while_writing_the_leaderboard_is_one_line(finished: Path, tmp_path: Path) -> None:
    def small_files() -> None:  # writes past 20 kB fail with EFBIG, as on a full disk (Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    out = tmp_path / "lb"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.run([EXE, "leaderboard", str(finished), f"out={out}"], capture_output=True, text=True,
                          cwd=tmp_path, env=env, preexec_fn=small_files, timeout=120)
    line = one_error_line(proc)
    assert "cannot write" in line and "disk space" in line
    assert not list(out.glob(".*.tmp"))  # atomic writers leave no temp file, and no half-written file
    for name in ("leaderboard.json", "leaderboard.md", "leaderboard.csv", "report.html"):
        assert not (out / name).exists() or (out / name).stat().st_size < 20_000
    if (out / "leaderboard.json").exists():
        json.loads((out / "leaderboard.json").read_text("utf-8"))


# -- F: numeric options and weights are finite and bounded ------------------------------------------------

@pytest.mark.parametrize("option", ["timeout=nan", "timeout=inf", "timeout=1e12", "rpm=nan", "bootstrap.samples=-1",
                                    "candidate.timeout=inf"])
def test_unbounded_numeric_options_are_refused_before_any_call(srv: FakeServer, tmp_path: Path, option: str) -> None:
    line = one_error_line(run(srv, tmp_path, option))
    assert option.split("=")[0].split(".")[-1] in line and not srv.requests


def test_a_sweep_with_a_bad_bootstrap_option_pays_nothing(srv: FakeServer, tmp_path: Path) -> None:
    proc = run(srv, tmp_path, "-m", "bootstrap.samples=-1", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert proc.returncode == 2 and "bootstrap.samples=-1" in proc.stderr and "Traceback" not in proc.stderr
    assert not srv.requests


def test_huge_weights_in_data_are_refused_at_validate(srv: FakeServer, tmp_path: Path) -> None:
    lines = SAMPLE.read_text("utf-8").splitlines()
    row = json.loads(lines[0])
    row["rubric"][0]["score"] = row["rubric"][1]["score"] = 1e308
    lines[0] = json.dumps(row, ensure_ascii=False)
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(lines) + "\n", "utf-8")
    line = one_error_line(cli(tmp_path, "validate", "heartbench_en", f"data.path={data}"))
    assert f"{data}:1" in line and "weight" in line
    line = one_error_line(run(srv, tmp_path, f"data.path={data}"))
    assert f"{data}:1" in line and not srv.requests


def edit_samples(finished: Path, tmp: Path, change: str) -> Path:
    run_dir = tmp / "copy"
    shutil.copytree(finished, run_dir)
    path = run_dir / "samples.jsonl"
    lines = path.read_text("utf-8").splitlines()
    rec = json.loads(lines[0])
    if change == "nan-weight":
        rec["criteria"][0]["weight"] = float("nan")
    elif change == "huge-weights":
        rec["criteria"][0]["weight"] = rec["criteria"][1]["weight"] = 1e308
    elif change == "text-hit":
        rec["criteria"][0]["hit"] = "yes"
    lines[0] = json.dumps(rec)
    if change == "duplicate":
        lines.append(lines[1])
    path.write_text("\n".join(lines) + "\n", "utf-8")
    if change == "manifest-hash":
        manifest = json.loads((run_dir / "manifest.json").read_text("utf-8"))
        manifest["spec_hash"] = "0" * 64
        (run_dir / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    return run_dir


@pytest.mark.parametrize("change,says", [("nan-weight", "weight nan"), ("huge-weights", "weight 1e+308"),
                                         ("text-hit", 'hit="yes"'), ("duplicate", "recorded twice"),
                                         ("manifest-hash", "spec_hash")])
def test_rescore_and_leaderboard_refuse_edited_run_files(finished: Path, tmp_path: Path, change: str, says: str) -> None:
    run_dir = edit_samples(finished, tmp_path, change)
    for command in (["rescore", str(run_dir)], ["leaderboard", str(run_dir), f"out={tmp_path / 'lb'}"]):
        line = one_error_line(cli(tmp_path, *command))
        assert str(run_dir) in line and says in line, line
    assert not (run_dir / "rescore-log_normalised").exists()


# -- G: structured output is turned off only by a 400 that names the response format -----------------------

def test_one_unrelated_judge_400_keeps_structured_output_on(srv: FakeServer, tmp_path: Path) -> None:
    seen = {"n": 0}

    def judge(body: dict[str, Any]) -> Reply | str:
        seen["n"] += 1
        if seen["n"] == 1:
            return Reply(status=400, error="This response was filtered by the content management policy")
        return verdict(n_items(body))

    srv.handler = script(judge=judge)
    proc = run(srv, tmp_path, "concurrency=1")
    assert proc.returncode == 0, proc.stderr
    judged = [b for b in srv.requests if is_judge(b)]
    assert len(judged) == 3 and all("response_format" in b for b in judged)  # never dropped after the 400
    recs = samples(tmp_path)
    assert sum(bool(r["judge_error"]) for r in recs) == 1 and "filtered" in next(r["judge_error"] for r in recs
                                                                                   if r["judge_error"])
    assert "refused structured output" not in proc.stderr


def test_a_400_naming_the_format_turns_it_off_with_a_notice(tmp_path: Path) -> None:
    with FakeServer(script(), reject_json_schema=True) as server:
        proc = run(server, tmp_path, "concurrency=1", "progress=plain")
        judged = [b for b in server.requests if is_judge(b)]
    assert proc.returncode == 0, proc.stderr
    assert "response_format" in judged[0] and "response_format" not in judged[-1]  # off once refused
    assert proc.stderr.count("the server refused structured output") == 1, proc.stderr
    assert all(r["score"] is not None for r in samples(tmp_path))


# -- H: `timeout` is a wall-clock limit per attempt ----------------------------------------------------------

def test_a_trickling_server_is_cut_at_the_timeout(srv: FakeServer, tmp_path: Path) -> None:
    calls = {"n": 0}

    def candidate(body: dict[str, Any]) -> Reply | str:
        calls["n"] += 1  # one byte every 0.3 s: every read is quick, the whole reply takes minutes
        return Reply(text="A reply sent very slowly.", trickle=0.3) if calls["n"] == 1 else "A fine reply."

    srv.handler = script(candidate=candidate)
    started = time.monotonic()
    proc = run(srv, tmp_path, "timeout=3", "concurrency=1")
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    recs = samples(tmp_path)
    assert sum(bool(r["candidate_error"]) for r in recs) == 1 and sum(r["score"] is not None for r in recs) == 2
    assert took < 30, took  # was timeout + 30 s per attempt, and more while bytes kept coming


# -- I: error texts name the right cause -----------------------------------------------------------------

def test_a_401_from_a_custom_endpoint_does_not_blame_a_variable_it_never_received(srv: FakeServer,
                                                                                   tmp_path: Path) -> None:
    srv.handler = lambda body: Reply(status=401)
    proc = run(srv, tmp_path, "limit=1")
    assert proc.returncode == 2, proc.stderr
    assert "$OPENAI_API_KEY" not in proc.stderr and "api_key_env" in proc.stderr and srv.url in proc.stderr


def test_a_huge_dialogue_is_named_as_the_data_not_the_template(srv: FakeServer, tmp_path: Path) -> None:
    lines = SAMPLE.read_text("utf-8").splitlines()
    row = json.loads(lines[0])
    row["dialogue"][0]["content"] = "I feel lost. " * 240_000  # ~3 MB
    lines[0] = json.dumps(row, ensure_ascii=False)
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(lines) + "\n", "utf-8")
    line = one_error_line(run(srv, tmp_path, f"data.path={data}"))
    # refused when the data is read, before any call: the row is named, not a template
    assert f"question {row['question_id']}" in line and "leave it out of the data" in line and ".j2" not in line
    assert not srv.requests
