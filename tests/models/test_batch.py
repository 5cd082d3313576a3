"""Batch mode end to end: the console script, LiteLLM's files and batches functions, the fake files + batches
server (tests/fakebatches.py). A batched run gives a synchronous run's files; kill -9 between every step and
the same command re-attaches and submits no request twice; failed and expired requests are sent again, alone;
cost is the batch price; a model without a batch API is one line before any call.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE, clean_env, model_args, run_cli, sigkill
from fakebatches import FakeBatchServer
from fakeserver import Reply
from test_cli import DATA, Script

pytestmark = pytest.mark.slow
# batch_poll=0.2: polls every 0.2 s, and a wave ends after 0.2 s without a new request (one batch per wave even
# on a loaded machine)
ARGS = ["benchmark=heartbench", f"data.path={DATA}", "limit=4", "progress=plain", "batch_poll=0.2"]


def records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "samples.jsonl").read_text(encoding="utf-8").splitlines()]


def scores(run: Path) -> dict[str, Any]:
    """What a run concluded per question: its reply, verdicts and score (not tokens, cost or cache flags)."""
    return {r["id"]: (r.get("response"), r.get("score"), r.get("candidate_error"), r.get("judge_error"),
                      json.dumps(r.get("criteria"), sort_keys=True)) for r in records(run)}


@pytest.fixture(scope="module")
def sync_ref(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same 4 questions run synchronously against the same script."""
    root = tmp_path_factory.mktemp("sync")
    with FakeBatchServer(Script()) as srv:
        res = run_cli([*ARGS, f"hydra.run.dir={root / 'run'}", *model_args(srv.url)], clean_env(root))
        assert res.returncode == 0, res.stderr
        assert srv.requests and not srv.batches
    return root / "run"


def test_batched_run_gives_the_synchronous_runs_results(tmp_path: Path, sync_ref: Path) -> None:
    with FakeBatchServer(Script()) as srv:
        res = run_cli([*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}", *model_args(srv.url)],
                      clean_env(tmp_path))
        assert res.returncode == 0, res.stderr
        assert srv.requests == []  # no synchronous call at all
        assert len(srv.batches) == 2  # one wave of generation, one of judging
        assert set(srv.submitted.values()) == {1} and len(srv.submitted) == 8
        assert "candidate batch batch-0002: completed, 4 of 4 done, 0 failed" in res.stderr  # progress per batch
        # into a new run directory: every answer from the call cache, nothing submitted
        again = run_cli([*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'again'}", *model_args(srv.url)],
                        clean_env(tmp_path))
        assert again.returncode == 0, again.stderr
        assert len(srv.batches) == 2 and not srv.requests
    assert scores(tmp_path / "run") == scores(sync_ref) == scores(tmp_path / "again")
    assert (tmp_path / "run" / "answers.jsonl").read_bytes() == (sync_ref / "answers.jsonl").read_bytes()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"]["scored"] == 4
    assert summary["calls"]["candidate"]["batched"] == summary["calls"]["judge"]["batched"] == 4


@pytest.mark.parametrize("wave", [0, 1], ids=["generate", "judge"])
@pytest.mark.parametrize("step", ["upload", "create:before", "create", "poll", "content"])
def test_kill9_at_every_step_then_the_same_command_submits_nothing_twice(tmp_path: Path, sync_ref: Path,
                                                                         step: str, wave: int) -> None:
    """Killed after the server carried out `step` (its answer never reached the client; `create:before`: before the
    server created the batch) of the generation wave or of the judging wave; the same command finishes the run,
    each request submitted exactly once."""
    env = clean_env(tmp_path)
    cmd = [EXE, *ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}"]
    with FakeBatchServer(Script()) as srv:
        skip = wave * (srv.polls_to_finish if step == "poll" else 1)  # the same step of the judging wave
        srv.hold(step, skip=skip)
        proc = subprocess.Popen([*cmd, *model_args(srv.url)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            assert srv.held.wait(120), f"the run never reached {step} of wave {wave}"
        finally:
            sigkill(proc)
            srv.release()
        journal = (tmp_path / "run" / "batches.jsonl").read_text()
        res = run_cli([*cmd[1:], *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        assert srv.requests == []
        assert len(srv.submitted) == 8 and set(srv.submitted.values()) == {1}, srv.submitted
        assert srv.steps["create"] == 2  # never a second batch for a wave
        if step.startswith("create"):  # the file id is in the journal, the batch id is not: the provider is asked
            assert '"event":"file"' in journal.splitlines()[-1]  # for the batch of that file before any create
            assert srv.steps["list"] >= 1
    assert scores(tmp_path / "run") == scores(sync_ref)


class Flaky(Script):
    """The candidate's first request for one question fails with a 500, another question's always with a 400."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: set[str] = set()

    def candidate(self, model: str, qid: str) -> Reply:
        if qid == self.bad:
            return Reply(status=400, error="invalid 'messages': scripted refusal")
        if qid == self.flaky and qid not in self.failed:
            self.failed.add(qid)
            return Reply(status=500)
        return super().candidate(model, qid)


def test_partial_failure_resends_only_the_retryable_request(tmp_path: Path, sync_ref: Path) -> None:
    ids = list(scores(sync_ref))
    script = Flaky()
    script.flaky, script.bad = ids[0], ids[1]
    with FakeBatchServer(script) as srv:
        res = run_cli([*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}", *model_args(srv.url)],
                      clean_env(tmp_path))
        assert res.returncode == 0, res.stderr
        again = [cid for cid, n in srv.submitted.items() if n == 2]
        assert len(again) == 1 and set(srv.submitted.values()) == {1, 2}  # only the 500 went out again
        second = srv.batches["batch-0009"] if "batch-0009" in srv.batches else None
        assert second is None or all(line["custom_id"] in again for line in second["_lines"])
    got, ref = scores(tmp_path / "run"), scores(sync_ref)
    assert got[ids[0]] == ref[ids[0]]  # the 500 was sent again and answered
    assert "HTTP 400" in got[ids[1]][2] and "scripted refusal" in got[ids[1]][2]  # recorded, never padded
    assert got[ids[1]][1] is None
    assert {k: v for k, v in got.items() if k not in ids[:2]} == {k: v for k, v in ref.items() if k not in ids[:2]}


def test_expired_batch_resends_only_what_it_did_not_answer(tmp_path: Path, sync_ref: Path) -> None:
    with FakeBatchServer(Script(), expire=(3,)) as srv:
        res = run_cli([*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}", *model_args(srv.url)],
                      clean_env(tmp_path))
        assert res.returncode == 0, res.stderr
        cand = [b for b in srv.batches.values() if b["_lines"][0]["body"]["model"] == "cand"]
        assert set(srv.submitted.values()) == {1, 2}
    assert [len(b["_lines"]) for b in cand] == [4, 1]  # the one request it never ran, alone
    assert [b["status"] for b in cand] == ["expired", "completed"]
    assert "expired, 3 of 4 done" in res.stderr
    assert scores(tmp_path / "run") == scores(sync_ref)


def test_cost_is_the_batch_price(tmp_path: Path) -> None:
    """A priced model (gpt-4o's id behind the fake server): every batched call costs half the synchronous one,
    as OpenAI's batch price list says ($1.25 / $5 per million tokens against $2.50 / $10)."""
    args = [*ARGS, "limit=2", "candidate=openai_compatible", "candidate.model=openai/gpt-4o",
            "candidate.name=gpt4o", "candidate.api_key_env=FAKE_KEY"]
    costs = []
    for mode in ("false", "true"):
        with FakeBatchServer(Script()) as srv:
            judge = model_args(srv.url)[5:]
            res = run_cli([*args, f"candidate.api_base={srv.url}", *judge, f"batch={mode}",
                           f"hydra.run.dir={tmp_path / mode}"], clean_env(tmp_path / mode))
            assert res.returncode == 0, res.stderr
        costs.append([r["cost"]["candidate"] for r in records(tmp_path / mode)])
    sync, batch = costs
    assert sync == [pytest.approx(40 * 2.5e-6 + 20 * 10e-6)] * 2
    assert batch == [pytest.approx(40 * 1.25e-6 + 20 * 5e-6)] * 2


@pytest.mark.parametrize("case, words", [
    ("mock", "answered offline by the engine"),
    ("anthropic", "no batch API for provider 'anthropic'"),
    ("nocache", "cache"),
])
def test_no_batch_api_is_one_line_before_any_call(tmp_path: Path, case: str, words: str) -> None:
    with FakeBatchServer(Script()) as srv:
        models = {"mock": ["candidate=mock", "judge=mock"],
                  "anthropic": [model_args(srv.url)[0], "candidate.model=anthropic/claude-x",
                                *model_args(srv.url)[2:]],
                  "nocache": [*model_args(srv.url), "cache.enabled=false"]}[case]
        res = run_cli([*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}", *models], clean_env(tmp_path))
        assert not srv.requests and not srv.files
    assert res.returncode == 2, res.stderr
    lines = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine:")]
    assert len(lines) == 1 and "batch=true" in lines[0] and words in lines[0], res.stderr
    assert not (tmp_path / "run").exists()


def test_dry_run_prices_both_modes(tmp_path: Path) -> None:
    res = run_cli(["benchmark=heartbench", f"data.path={DATA}", "dry_run=true", "candidate=gpt-4o",
                   "judge=claude-sonnet-4-5"], clean_env(tmp_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = res.stdout + res.stderr
    line = next(x for x in out.splitlines() if x.startswith("candidate: $"))
    sync, batch = (float(x.split("$")[1].split()[0]) for x in line.split(", "))
    assert "synchronous" in line and "with batch=true" in line
    assert batch == pytest.approx(sync / 2, abs=0.011)  # gpt-4o's batch price is half, to the cent shown
    assert any(x.startswith("judge: $") and x.endswith("no batch API through LiteLLM") for x in out.splitlines())


def test_batch_api_errors_are_retried_and_a_create_is_never_repeated(tmp_path: Path, sync_ref: Path) -> None:
    """A create answered with a 500 after the server created the batch is looked up, not sent again; a 500 on a
    poll or a fetch is retried."""
    with FakeBatchServer(Script()) as srv:
        srv.failing.update({"create": 1, "poll": 1, "content": 1, "upload": 1})
        res = run_cli([*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}", *model_args(srv.url)],
                      clean_env(tmp_path))
        assert res.returncode == 0, res.stderr
        assert len(srv.batches) == 2 and set(srv.submitted.values()) == {1}
        assert srv.steps["list"] >= 1
    assert scores(tmp_path / "run") == scores(sync_ref)


def test_a_batch_api_that_keeps_failing_stops_the_run_and_the_same_command_reattaches(tmp_path: Path,
                                                                                     sync_ref: Path) -> None:
    cmd = [*ARGS, "batch=true", "max_retries=1", f"hydra.run.dir={tmp_path / 'run'}"]
    with FakeBatchServer(Script()) as srv:
        srv.failing["poll"] = 10
        res = run_cli([*cmd, *model_args(srv.url)], clean_env(tmp_path))
        assert res.returncode == 2, res.stderr
        line = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine:")]
        assert len(line) == 1 and "cannot poll batch batch-0002" in line[0] and "re-attaches" in line[0], res.stderr
        # no question recorded as an error: its request may still be answered
        assert not (tmp_path / "run" / "samples.jsonl").exists() or records_or_journal(tmp_path / "run") == []
        srv.failing["poll"] = 0
        res = run_cli([*cmd, *model_args(srv.url)], clean_env(tmp_path))
        assert res.returncode == 0, res.stderr
        assert len(srv.batches) == 2 and set(srv.submitted.values()) == {1}
    assert scores(tmp_path / "run") == scores(sync_ref)


def records_or_journal(run: Path) -> list[str]:
    """The question records a run directory's samples.jsonl holds (a journal's header line left out)."""
    lines = (run / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    return [x for x in lines if '"journal"' not in x[:20]]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_polling_stops_the_run_and_the_same_command_reattaches(tmp_path: Path, sync_ref: Path,
                                                                            sig: int, code: int) -> None:
    env = clean_env(tmp_path)
    cmd = [EXE, *ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}"]
    with FakeBatchServer(Script()) as srv:
        srv.hold("poll", skip=srv.polls_to_finish)  # the judging wave's first poll
        proc = subprocess.Popen([*cmd, *model_args(srv.url)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            assert srv.held.wait(120)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            srv.release()
        assert proc.returncode == code, err
        res = run_cli([*cmd[1:], *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        assert len(srv.batches) == 2 and set(srv.submitted.values()) == {1}
    assert scores(tmp_path / "run") == scores(sync_ref)


def test_identical_requests_share_one_line_of_a_batch(tmp_path: Path) -> None:
    rows = DATA.read_text(encoding="utf-8").splitlines()[:3]
    twin = json.loads(rows[0])
    twin["question_id"] = "twin01"  # the same dialogue under another id: the same candidate request
    data = tmp_path / "twins.jsonl"
    data.write_text("\n".join([*rows, json.dumps(twin, ensure_ascii=False)]) + "\n", encoding="utf-8")
    args = [a for a in ARGS if not a.startswith(("data.path", "limit"))]
    with FakeBatchServer(Script()) as srv:
        res = run_cli([*args, f"data.path={data}", "batch=true", f"hydra.run.dir={tmp_path / 'run'}",
                       *model_args(srv.url)], clean_env(tmp_path))
        assert res.returncode == 0, res.stderr
        first = next(iter(srv.batches.values()))
        assert len(first["_lines"]) == 3 and set(srv.submitted.values()) == {1}  # 4 questions, 3 requests
    got = {r["id"]: r["response"] for r in records(tmp_path / "run")}
    assert len(got) == 4 and got["twin01"] == got[json.loads(rows[0])["question_id"]]


def test_a_server_refusing_json_schema_in_a_batch_is_asked_again_without_it(tmp_path: Path, sync_ref: Path) -> None:
    """The judge's json_schema lines come back as HTTP 400 error lines: the judge asks again without
    response_format (in the next batch), as after a synchronous 400, and scores as the synchronous run."""
    with FakeBatchServer(Script(), reject_json_schema=True) as srv:
        res = run_cli([*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}", *model_args(srv.url)],
                      clean_env(tmp_path))
        assert res.returncode == 0, res.stderr
        assert set(srv.submitted.values()) == {1} and len(srv.batches) == 3
    assert "the server refused structured output" in res.stderr
    assert scores(tmp_path / "run") == scores(sync_ref)


def test_resuming_batches_in_flight_without_batch_mode_is_refused(tmp_path: Path, sync_ref: Path) -> None:
    env = clean_env(tmp_path)
    cmd = [EXE, *ARGS, f"hydra.run.dir={tmp_path / 'run'}"]
    with FakeBatchServer(Script()) as srv:
        srv.hold("poll")
        proc = subprocess.Popen([*cmd, "batch=true", *model_args(srv.url)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            assert srv.held.wait(120)
        finally:
            sigkill(proc)
            srv.release()
        res = run_cli([*cmd[1:], *model_args(srv.url)], env)  # the same run, synchronously
        assert res.returncode == 2 and not srv.requests, res.stderr
        line = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine:")]
        assert len(line) == 1 and "batch-0002" in line[0] and "resume it with batch=true" in line[0], res.stderr
        res = run_cli([*cmd[1:], "batch=true", *model_args(srv.url)], env)
        assert res.returncode == 0, res.stderr
        assert set(srv.submitted.values()) == {1} and not srv.requests
    assert scores(tmp_path / "run") == scores(sync_ref)


def test_a_batch_cancelled_at_the_provider_is_not_sent_again(tmp_path: Path, sync_ref: Path) -> None:
    with FakeBatchServer(Script(), expire=(2,)) as srv:
        srv.cut_status = "cancelled"
        res = run_cli([*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}", *model_args(srv.url)],
                      clean_env(tmp_path))
        assert res.returncode == 0, res.stderr
        assert set(srv.submitted.values()) == {1}  # the 2 requests it never ran are not sent behind anyone's back
    got, ref = scores(tmp_path / "run"), scores(sync_ref)
    errors = {q: v[2] for q, v in got.items() if v[2]}
    assert len(errors) == 2 and all("ended 'cancelled'" in e for e in errors.values())
    assert {q: v for q, v in got.items() if q not in errors} == {q: v for q, v in ref.items() if q not in errors}


def test_a_batch_failed_as_a_whole_records_its_reason_for_every_request(tmp_path: Path) -> None:
    with FakeBatchServer(Script(), expire=(0,)) as srv:
        srv.cut_status = "failed"
        res = run_cli([*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}", *model_args(srv.url)],
                      clean_env(tmp_path))
        assert set(srv.submitted.values()) == {1} and len(srv.batches) == 1
    assert res.returncode == 1, res.stderr  # nothing was scored: never exit 0
    errors = [v[2] for v in scores(tmp_path / "run").values()]
    assert len(errors) == 4 and all("the file did not validate" in (e or "") for e in errors)


# ------------------------------------------------------------------------------------------------ a hostile provider

def _first_answered(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return next(r for r in rows if r["response"]["status_code"] == 200)


def test_duplicate_ids_in_a_batch_output_are_an_error_for_that_request(tmp_path: Path, sync_ref: Path) -> None:
    def twice(rows: list[dict[str, Any]]) -> list[str]:
        other = json.loads(json.dumps(_first_answered(rows)))
        other["response"]["body"]["choices"][0]["message"]["content"] = "a second, different answer"
        return [json.dumps(r) for r in [*rows, other]]  # the same custom_id again, last

    with FakeBatchServer(Script()) as srv:
        srv.tamper = twice
        res = run_cli([*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}", *model_args(srv.url)],
                      clean_env(tmp_path))
        assert res.returncode == 0, res.stderr
    got, ref = scores(tmp_path / "run"), scores(sync_ref)
    bad = [q for q, v in got.items() if v[2]]
    assert len(bad) == 1 and "2 lines" in got[bad[0]][2] and got[bad[0]][1] is None  # recorded, never last-wins
    assert all("a second, different answer" != v[0] for v in got.values())
    assert {q: v for q, v in got.items() if q not in bad} == {q: v for q, v in ref.items() if q not in bad}


def test_an_unparsable_output_line_is_a_per_question_error_and_the_resume_lives(tmp_path: Path,
                                                                              sync_ref: Path) -> None:
    def nested(rows: list[dict[str, Any]]) -> list[str]:
        victim = _first_answered(rows)
        deep = '{"custom_id": "%s", "response": {"status_code": 200, "body": %s}}' % (
            victim["custom_id"], "[" * 100_000 + "]" * 100_000)
        return [deep if r is victim else json.dumps(r) for r in rows]

    cmd = [*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}"]
    with FakeBatchServer(Script()) as srv:
        srv.tamper = nested
        res = run_cli([*cmd, *model_args(srv.url)], clean_env(tmp_path))
        assert res.returncode == 0, res.stderr
        assert "Traceback" not in res.stderr
        again = run_cli([*cmd, *model_args(srv.url)], clean_env(tmp_path))  # the journal is read back: no death
        assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
        assert set(srv.submitted.values()) == {1}
    got, ref = scores(tmp_path / "run"), scores(sync_ref)
    bad = [q for q, v in got.items() if v[2]]
    assert len(bad) == 1 and "unreadable" in got[bad[0]][2] and got[bad[0]][1] is None
    assert {q: v for q, v in got.items() if q not in bad} == {q: v for q, v in ref.items() if q not in bad}


def test_absurd_usage_is_unknown_never_summed(tmp_path: Path, sync_ref: Path) -> None:
    def absurd(rows: list[dict[str, Any]]) -> list[str]:
        victim = _first_answered(rows)
        victim["response"]["body"]["usage"] = {"prompt_tokens": 1e15, "completion_tokens": -5, "total_tokens": 1}
        return [json.dumps(r) for r in rows]

    with FakeBatchServer(Script()) as srv:
        srv.tamper = absurd
        res = run_cli([*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}", *model_args(srv.url)],
                      clean_env(tmp_path))
        assert res.returncode == 0, res.stderr
    assert "usage" in res.stderr and "unknown" in res.stderr  # one warning line
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    text = json.dumps(summary)
    assert "1000000000000000" not in text and "1e+15" not in text
    assert summary["tokens"]["candidate"] == {"prompt": 3 * 40, "completion": 3 * 20}  # the 3 honest answers only
    assert scores(tmp_path / "run") == scores(sync_ref)  # the answer itself is kept


def test_a_batch_that_never_completes_stops_at_batch_max_wait(tmp_path: Path, sync_ref: Path) -> None:
    cmd = [*ARGS, "batch=true", f"hydra.run.dir={tmp_path / 'run'}"]
    with FakeBatchServer(Script(), polls_to_finish=10**9) as srv:
        res = run_cli([*cmd, "batch_max_wait=2", *model_args(srv.url)], clean_env(tmp_path), timeout=120)
        assert res.returncode == 2, res.stderr
        line = [x for x in res.stderr.splitlines() if x.startswith("rubric-engine:")]
        assert len(line) == 1 and "batch_max_wait=2" in line[0] and "batch-0002" in line[0], res.stderr
        assert "in_progress" in line[0] and "same command" in line[0] and "Traceback" not in res.stderr
        srv.polls_to_finish = 1
        res = run_cli([*cmd, *model_args(srv.url)], clean_env(tmp_path))
        assert res.returncode == 0, res.stderr
        assert set(srv.submitted.values()) == {1}
    assert scores(tmp_path / "run") == scores(sync_ref)
