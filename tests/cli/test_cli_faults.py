"""Faults through the console script of the environment under test, against the fake server on 127.0.0.1.

Each test names one behaviour a user sees: which failures stop the run with one line, which are
counted per question, that keys go only where they belong, that a corrupt cache entry or a `content:
null` reply is recorded rather than crashing or padding a score.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, Callable

import diskcache
import pytest

from fakeserver import FakeServer, Reply

from conftest import EXE  # noqa: E402 - the console script under test (warm-started: tests/warmstart.py)
from conftest import MINI as DATA  # the project's own HeartBench-shaped rows
ITEM_RE = re.compile(r"^(\d+)\. \[", re.MULTILINE)

pytestmark = pytest.mark.slow


def n_items(body: dict[str, Any]) -> int:
    """How many rubric items the judge prompt lists (numbered lines '1. [label][weight] text')."""
    text = "\n".join(str(m.get("content", "")) for m in body["messages"] if m.get("role") == "user")
    return max(int(m) for m in ITEM_RE.findall(text))


def verdict(n: int, met: Callable[[int], bool] = lambda i: i % 2 == 1) -> str:
    return json.dumps({"criteria": [{"id": i, "reasoning": f"r{i}", "met": met(i)} for i in range(1, n + 1)]})


class Roles:
    """Candidate and judge on one server, told apart by model name; each role can be scripted."""

    def __init__(self, candidate: Callable[[dict], Reply] | None = None,
                 judge: Callable[[dict], Reply] | None = None) -> None:
        self.candidate = candidate or (lambda body: Reply(text="我在，慢慢说。", usage=(40, 20)))
        self.judge = judge or (lambda body: Reply(text=verdict(n_items(body)), usage=(100, 50)))

    def __call__(self, body: dict[str, Any]) -> Reply:
        return (self.judge if body["model"] == "judge" else self.candidate)(body)


def model_args(url: str, *, cand_key: bool = True, judge_key: bool = True) -> list[str]:
    args = ["candidate=openai_compatible", "candidate.model=openai/cand", f"candidate.api_base={url}",
            "candidate.name=cand", "judge=openai_compatible", "judge.model=openai/judge",
            f"judge.api_base={url}", "judge.name=judge"]
    return args + (["candidate.api_key_env=FAKE_KEY"] if cand_key else []) + \
        (["judge.api_key_env=FAKE_KEY"] if judge_key else [])


def run_cli(tmp_path: Path, env: dict[str, str], *args: str, run: str = "run") -> subprocess.CompletedProcess:
    cmd = [EXE, "benchmark=heartbench", f"data.path={DATA}", "progress=none", f"hydra.run.dir={tmp_path / run}",
           *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("rubric-engine: error:")]


def summary(tmp_path: Path, run: str = "run") -> dict[str, Any]:
    return json.loads((tmp_path / run / "summary.json").read_text(encoding="utf-8"))


def samples(tmp_path: Path, run: str = "run") -> list[dict[str, Any]]:
    return [json.loads(x) for x in (tmp_path / run / "samples.jsonl").read_text(encoding="utf-8").splitlines()]


# -- failures that stop the run ------------------------------------------------------------------------
@pytest.mark.parametrize("status, advice", [(401, "set the API key in $FAKE_KEY"),
                                            (403, "check that the key in $FAKE_KEY may use this model"),
                                            (404, "check the model id 'openai/cand'")])
def test_candidate_auth_or_missing_model_stops_the_run(tmp_path: Path, env: dict[str, str], status: int,
                                                       advice: str) -> None:
    with FakeServer(Roles(candidate=lambda body: Reply(status=status))) as srv:
        res = run_cli(tmp_path, env, "limit=6", "concurrency=1", *model_args(srv.url))
        models = [b["model"] for b in srv.requests]
    assert res.returncode == 2, res.stderr
    # the run stopped at the first answer (a second request may already be on its way when it does):
    # not one failure recorded per question, and never a judge call
    assert models in (["cand"], ["cand", "cand"]), models
    [line] = error_lines(res.stderr)
    assert f"[HTTP {status}]" in line and advice in line and "Traceback" not in res.stderr
    assert not (tmp_path / "run" / "summary.json").exists()  # no score for a run that could not run


def test_judge_forbidden_stops_the_run(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Roles(judge=lambda body: Reply(status=403))) as srv:
        res = run_cli(tmp_path, env, "limit=6", "concurrency=1", *model_args(srv.url))
        judge_calls = sum(b["model"] == "judge" for b in srv.requests)
    assert res.returncode == 2, res.stderr
    assert judge_calls in (1, 2)  # stopped at the first 403 (one more may be in flight), not 6 per-question errors
    [line] = error_lines(res.stderr)
    assert "judge model 'judge'" in line and "[HTTP 403]" in line and "$FAKE_KEY" in line
    assert not (tmp_path / "run" / "summary.json").exists()


@pytest.mark.parametrize("role", ["candidate", "judge"])
def test_missing_credentials_ends_in_the_one_line_key_error(tmp_path: Path, env: dict[str, str], role: str) -> None:
    """No api_base, no api_key_env, no key in the environment: the run stops before any call with one line
    naming the provider's variable (LiteLLM would only say 'Missing credentials' after the other role's
    calls were paid)."""
    env = {k: v for k, v in env.items() if k not in ("OPENAI_ADMIN_KEY",)}
    with FakeServer(Roles()) as srv:
        args = [a for a in model_args(srv.url) if not a.startswith(role)]
        args += [f"{role}=gpt-4o", f"{role}.api_key_env=null", f"{role}.name={role[:4]}"]  # OpenAI, no key named
        res = run_cli(tmp_path, env, "limit=2", "concurrency=1", "max_retries=3", *args)
        sent = [b["model"] for b in srv.requests]
    assert res.returncode == 2, (res.returncode, res.stderr)
    [line] = error_lines(res.stderr)
    assert line.startswith(f"rubric-engine: error: {role} {role[:4]} (openai/gpt-4o") and "export OPENAI_API_KEY=" in line
    assert f"{role}.api_key_env=<VAR>" in line  # the role's own override
    assert sent == []  # no request at all, for either role


# -- keys go only where they belong ----------------------------------------------------------------------
def test_keyless_local_server_gets_a_placeholder_key(tmp_path: Path, env: dict[str, str]) -> None:
    """openai_compatible with api_base and no api_key_env works out of the box (README: a placeholder key).
    The same run also checks that a 429 is retried and that an unpriced model's cost stays unknown."""
    with FakeServer(Roles()) as srv:
        srv.queue(Reply(status=429, headers={"Retry-After": "0"}))
        res = run_cli(tmp_path, env, "limit=2", "concurrency=1", *model_args(srv.url, cand_key=False, judge_key=False))
        auth = [h.get("authorization", "") for h in srv.headers]
    assert res.returncode == 0, res.stderr
    s = summary(tmp_path)
    assert s["counts"]["scored"] == 2 and s["calls"]["candidate"]["retries"] == 1
    assert len(auth) == 5 and all(a.startswith("Bearer ") and len(a) > len("Bearer ") for a in auth), auth
    # unknown costs are reported as unknown (null), never summed as 0
    assert s["cost"] == {"candidate": None, "judge": None}
    assert all(x["cost"] == {"candidate": None, "judge": None} for x in samples(tmp_path))


def test_a_real_provider_key_is_never_sent_to_a_custom_api_base(tmp_path: Path, env: dict[str, str]) -> None:
    """With OPENAI_API_KEY set for OpenAI, a local server without api_key_env still gets only the placeholder."""
    secret = "sk-real-openai-key-do-not-leak-0123456789"
    with FakeServer(Roles()) as srv:
        res = run_cli(tmp_path, dict(env, OPENAI_API_KEY=secret), "limit=1",
                      *model_args(srv.url, cand_key=False, judge_key=False))
        headers = json.dumps(srv.headers)
    assert res.returncode == 0, res.stderr
    assert secret not in headers and secret[-12:] not in headers
    assert "authorization" in headers


# -- failures recorded per question ----------------------------------------------------------------------
def _raw(content: Any) -> str:
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "cand",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 7, "completion_tokens": 0, "total_tokens": 7}})


def test_content_null_is_a_counted_candidate_error(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Roles(candidate=lambda body: Reply(raw=_raw(None)))) as srv:
        srv.queue(Reply(text="我在，慢慢说。"))  # the first question gets a real reply, the other content: null
        res = run_cli(tmp_path, env, "limit=2", "concurrency=1", *model_args(srv.url))
        models = [b["model"] for b in srv.requests]
    assert res.returncode == 0, res.stderr
    assert sorted(models) == ["cand", "cand", "judge"]  # null not retried as malformed, never judged
    s = summary(tmp_path)
    assert (s["counts"]["candidate_errors"], s["counts"]["scored"]) == (1, 1)
    bad = [x for x in samples(tmp_path) if x["candidate_error"]]
    assert len(bad) == 1 and bad[0]["candidate_error"] == "the candidate returned an empty reply (finish_reason: stop)"
    assert bad[0]["score"] is None and bad[0]["response"] is None and bad[0]["abilities"] == {}


def test_judge_reask_after_invalid_verdict(tmp_path: Path, env: dict[str, str]) -> None:
    replies: list[str] = []

    def judge(body: dict[str, Any]) -> Reply:
        n = n_items(body)
        text = verdict(n - 1) if len(body["messages"]) <= 2 else verdict(n, met=lambda i: True)  # one item short
        replies.append(text)
        return Reply(text=text)

    with FakeServer(Roles(judge=judge)) as srv:
        res = run_cli(tmp_path, env, "limit=1", *model_args(srv.url))
        judge_bodies = [b for b in srv.requests if b["model"] == "judge"]
    assert res.returncode == 0, res.stderr
    assert len(judge_bodies) == 2
    reask = judge_bodies[1]["messages"]
    assert reask[-2] == {"role": "assistant", "content": replies[0]}
    assert "could not be used" in reask[-1]["content"] and "missing id(s)" in reask[-1]["content"]
    [sample] = samples(tmp_path)
    assert sample["judge_error"] is None and all(c["hit"] is True for c in sample["criteria"])


def test_corrupt_cache_entry_is_asked_again_not_a_crash(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Roles()) as srv:
        first = run_cli(tmp_path, env, "limit=2", *model_args(srv.url), run="first")
        assert first.returncode == 0, first.stderr
        with diskcache.Cache(env["RUBRIC_ENGINE_CACHE"]) as raw:
            keys = list(raw.iterkeys())
            assert len(keys) == 4
            raw.set(keys[0], "{truncated")  # e.g. a disk that lied about a write
        srv.reset()
        second = run_cli(tmp_path, env, "limit=2", *model_args(srv.url), run="second")
        resent = len(srv.requests)
    assert second.returncode == 0, second.stderr
    assert resent == 1  # only the unreadable entry was asked again
    assert summary(tmp_path, "second")["overall"] == summary(tmp_path, "first")["overall"]
