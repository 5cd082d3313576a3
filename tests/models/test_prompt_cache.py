"""Prompt caching for per-criterion judging, through the console script and LiteLLM to the fake server.

What is checked: the shipped per-criterion template puts everything a question's criteria share first (the
bytes every judge request of a question repeats end after the reply, and each criterion's text comes after
them); an `anthropic/` judge (LiteLLM's Anthropic provider pointed at the fake server's /v1/messages) gets
that prefix marked `cache_control: ephemeral`, an OpenAI-style one plain text; cached-token counts read from
usage reach summary.json per role with the money saved at LiteLLM's cache-read price (recomputed here from
the price map), "unknown" when the map has no price; the marker never changes a cache key; the published
HealthBench scores hold (the restatement in test_healthbench.py).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import EXE
from fakeserver import FakeServer, Reply
from test_healthbench import judge_met, make_rows, restated, write_jsonl
from rubric_engine.models.promptcache import mark_prefix, needs_marker, saving, shared_prefix

CACHED = 700  # prompt tokens the fake server says it served from its cache, per judge request


def text_of(content: Any) -> str:
    """A message's text whether sent as a string or as content blocks."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


def is_judge(body: dict[str, Any]) -> bool:
    return "CRIT[" in json.dumps(body)  # only judge prompts show criteria


class Script:
    """Candidate replies name their prompt id; the judge answers one criterion per request, reporting cache reads."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.by_case = {r["prompt"][-1]["content"].split("case ")[-1].rstrip(".)"): r["prompt_id"] for r in rows}

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = "\n".join(text_of(m.get("content")) for m in body["messages"])
        if is_judge(body):
            k, i = re.search(r"CRIT\[(\d+)#(\d+)\]", text).groups()  # type: ignore[union-attr]
            pid = re.search(r"REPLY\[([\w-]+)\]", text).group(1)  # type: ignore[union-attr]
            return Reply(text=json.dumps({"explanation": f"criterion {i}", "criteria_met": judge_met(pid, int(i))}),
                         usage=(1000, 20), cached=CACHED)
        case = text_of(body["messages"][-1]["content"]).split("case ")[-1].rstrip(".)")
        return Reply(text=f"REPLY[{self.by_case[case]}] Please see a clinician if it gets worse.")


def run(tmp_path: Path, env: dict[str, str], srv: FakeServer, data: Path, name: str, judge_model: str,
        api_base: str, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [EXE, "benchmark=healthbench", f"data.path={data}", "progress=none", f"hydra.run.dir={tmp_path / name}",
            "candidate=openai_compatible", "candidate.model=openai/cand", f"candidate.api_base={srv.url}",
            "candidate.name=cand", "candidate.api_key_env=FAKE_KEY",
            "judge=openai_compatible", f"judge.model={judge_model}", f"judge.api_base={api_base}",
            "judge.name=judge", "judge.api_key_env=FAKE_KEY", *extra]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)


def price(model: str) -> tuple[float, float]:
    """(input, cache read) USD per token from the price map LiteLLM ships, read here as plain JSON."""
    import importlib.util

    spec = importlib.util.find_spec("litellm")  # found, not imported (an import would try to fetch the map)
    assert spec is not None and spec.origin is not None
    table = json.loads((Path(spec.origin).parent / "model_prices_and_context_window_backup.json").read_text())
    info = table[model]
    return info["input_cost_per_token"], info["cache_read_input_token_cost"]


def check_scores(tmp_path: Path, name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    summary = json.loads((tmp_path / name / "summary.json").read_text())
    verdicts = {r["prompt_id"]: [judge_met(r["prompt_id"], i) for i in range(1, len(r["rubrics"]) + 1)] for r in rows}
    want = restated(rows, verdicts)
    assert summary["overall"] == pytest.approx(100 * want["overall_score"], abs=1e-9)
    for tag, value in {**summary["breakdowns"]["axes"], **summary["breakdowns"]["themes"]}.items():
        assert value == pytest.approx(100 * want[tag], abs=1e-9), tag
    return summary


def by_question(bodies: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The judge prompts (first user message's text) grouped by the question they grade."""
    out: dict[str, list[str]] = {}
    for body in bodies:
        prompt = text_of(next(m["content"] for m in body["messages"] if m["role"] == "user"))
        out.setdefault(re.search(r"REPLY\[([\w-]+)\]", prompt).group(1), []).append(prompt)  # type: ignore[union-attr]
    return out


def judge_run(tmp_path: Path, env: dict[str, str], seed: int, n: int, model: str,
              *extra: str) -> tuple[list[dict[str, Any]], subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """A HealthBench run of n handmade rows, the judge `model` at the fake server: (rows, result, judge requests)."""
    rows = make_rows(seed=seed, n=n)
    data = write_jsonl(tmp_path / "hb.jsonl", rows)
    with FakeServer(Script(rows)) as srv:
        base = srv.url.rsplit("/v1", 1)[0] if model.startswith("anthropic/") else srv.url  # Anthropic: <base>/v1/messages
        res = run(tmp_path, env, srv, data, "run", model, base, *extra)
        assert res.returncode == 0, res.stderr
    return rows, res, [b for b in srv.requests if is_judge(b)]


def test_openai_style_prefix_shared_and_cached_tokens_reported(tmp_path: Path, env: dict[str, str]) -> None:
    rows, res, judged = judge_run(tmp_path, env, 5, 6, "openai/gpt-4.1")
    assert len(judged) == sum(len(r["rubrics"]) for r in rows)
    for pid, prompts in by_question(judged).items():
        row = next(r for r in rows if r["prompt_id"] == pid)
        common = prompts[0][:shared_prefix(prompts)]
        # everything shared comes first: the conversation, the reply and the instructions; the criterion last
        assert f"REPLY[{pid}]" in common and row["prompt"][-1]["content"] in common
        assert "criteria_met" in common and "CRIT[" not in common
        endings = {next(r["criterion"] for r in row["rubrics"] if p.rstrip().endswith(r["criterion"])) for p in prompts}
        assert endings == {r["criterion"] for r in row["rubrics"]}
    assert all(isinstance(m["content"], str) for b in judged for m in b["messages"])  # no marker for OpenAI
    summary = check_scores(tmp_path, "run", rows)
    judge = summary["calls"]["judge"]
    assert judge["cached_tokens"] == CACHED * len(judged) and judge["prompt_cache"] is True
    full, read = price("gpt-4.1")
    assert judge["cache_saved"] == pytest.approx(CACHED * len(judged) * (full - read), rel=1e-9)
    assert "cached_tokens" not in summary["calls"]["candidate"]  # no marker, no cache reads: nothing to say
    assert f"judge: {CACHED * len(judged):,} prompt tokens served from the provider's prompt cache; saved ~$" in res.stdout


def test_anthropic_marker_sent_and_never_keyed_on(tmp_path: Path, env: dict[str, str]) -> None:
    rows = make_rows(seed=9, n=4)
    data = write_jsonl(tmp_path / "hb.jsonl", rows)
    n = sum(len(r["rubrics"]) for r in rows)
    with FakeServer(Script(rows)) as srv:
        root = srv.url.rsplit("/v1", 1)[0]  # LiteLLM's Anthropic provider posts to <api_base>/v1/messages
        res = run(tmp_path, env, srv, data, "on", "anthropic/claude-sonnet-4-5", root)
        assert res.returncode == 0, res.stderr
        judged = [b for b in srv.requests if is_judge(b)]
        assert len(judged) == n
        for pid, prompts in by_question(judged).items():
            marked = [m["content"] for b in judged for m in b["messages"]
                      if m["role"] == "user" and f"REPLY[{pid}]" in text_of(m["content"])]
            assert all(isinstance(c, list) and len(c) == 2 for c in marked)
            assert all(c[0]["cache_control"] == {"type": "ephemeral"} and "cache_control" not in c[1] for c in marked)
            assert len({c[0]["text"] for c in marked}) == 1  # one prefix, byte for byte, for every criterion
            assert all(c[1]["text"].lstrip().startswith("## Criterion") for c in marked)
        summary = check_scores(tmp_path, "on", rows)
        assert summary["calls"]["judge"]["cached_tokens"] == CACHED * n  # Anthropic's cache_read_input_tokens
        full, read = price("claude-sonnet-4-5")
        assert summary["calls"]["judge"]["cache_saved"] == pytest.approx(CACHED * n * (full - read), rel=1e-9)
        # prompt_cache=false: plain text, and the same cache keys (every judge answer found again)
        srv.reset()
        off = run(tmp_path, env, srv, data, "off", "anthropic/claude-sonnet-4-5", root, "prompt_cache=false")
        assert off.returncode == 0, off.stderr
        assert srv.requests == []  # the candidate's and the judge's answers all came from the cache
    summary = check_scores(tmp_path, "off", rows)
    assert summary["calls"]["judge"]["cache_hits"] == n and "prompt_cache" not in summary["calls"]["judge"]


def test_prompt_cache_off_sends_plain_text(tmp_path: Path, env: dict[str, str]) -> None:
    _, _, judged = judge_run(tmp_path, env, 3, 2, "anthropic/claude-sonnet-4-5", "prompt_cache=false")
    assert judged and all("cache_control" not in json.dumps(b) for b in judged)  # (LiteLLM sends one text block)


def test_unknown_price_says_unknown(tmp_path: Path, env: dict[str, str]) -> None:
    _, res, _ = judge_run(tmp_path, env, 4, 2, "openai/judge-model-without-a-price")
    judge = json.loads((tmp_path / "run" / "summary.json").read_text())["calls"]["judge"]
    assert judge["cached_tokens"] > 0 and judge["cache_saved"] is None
    assert "saved unknown (no cache-read price in LiteLLM's price map) against" in " ".join(res.stdout.split())


def test_bad_prompt_cache_value_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    res = subprocess.run([EXE, "benchmark=healthbench", "prompt_cache=maybe", "candidate=mock", "judge=mock",
                          f"hydra.run.dir={tmp_path / 'r'}"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "prompt_cache=maybe is not valid; use true, false or null" in res.stderr


# ------------------------------------------------------------------------------------------ the pieces

def test_shared_prefix_and_marking() -> None:
    assert shared_prefix(["abcX", "abcY", "abZ"]) == 2 and shared_prefix(["only one"]) == 0
    assert shared_prefix(["a\nb\n## C 1", "a\nb\n## C 2"]) == 4  # cut after the last whole line they share
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "SHARED tail"}]
    marked = mark_prefix(msgs, 7)
    assert marked[0] == msgs[0] and msgs[1]["content"] == "SHARED tail"  # the caller's messages are untouched
    assert marked[1]["content"] == [{"type": "text", "text": "SHARED ", "cache_control": {"type": "ephemeral"}},
                                    {"type": "text", "text": "tail"}]
    assert mark_prefix(msgs, 0) is msgs and mark_prefix(msgs, len("SHARED tail")) is msgs  # nothing to split


def test_which_providers_need_a_marker() -> None:
    assert needs_marker("anthropic/claude-sonnet-4-5") and needs_marker("bedrock/anthropic.claude-3-5-sonnet")
    assert needs_marker("vertex_ai/claude-sonnet-4-5")
    assert not needs_marker("openai/gpt-4.1") and not needs_marker("gemini/gemini-2.5-pro")
    assert not needs_marker("bedrock/meta.llama3-70b")


def test_saving_uses_the_price_map_or_says_unknown() -> None:
    class Map:
        model_cost = {"m": {"input_cost_per_token": 3e-6, "cache_read_input_token_cost": 3e-7}, "n": {
            "input_cost_per_token": 1e-6}}

    assert saving(Map, "prov/m", 1000) == pytest.approx(1000 * 2.7e-6)
    assert saving(Map, "n", 1000) is None and saving(Map, "unknown", 5) is None
    assert saving(Map, "unknown", 0) == 0.0


def dry_run(tmp_path: Path, env: dict[str, str], data: Path, judge: str, *extra: str) -> str:
    res = subprocess.run([EXE, "benchmark=healthbench", f"data.path={data}", "dry_run=true", "candidate=gpt-4o",
                          f"judge={judge}", f"hydra.run.dir={tmp_path / 'dry'}", *extra],
                         env={**env, "OPENAI_API_KEY": "sk-x", "ANTHROPIC_API_KEY": "sk-x"}, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return " ".join(res.stdout.split())


def test_dry_run_estimates_cached_prefix_tokens_and_saving(tmp_path: Path, env: dict[str, str]) -> None:
    rows = make_rows(seed=2, n=4)
    short = write_jsonl(tmp_path / "short.jsonl", rows)
    for r in rows:  # a conversation long enough for a provider to cache its prefix (1,024+ tokens)
        r["prompt"][-1]["content"] += " " + " ".join(f"detail {i} of the symptom" for i in range(400))
    long = write_jsonl(tmp_path / "long.jsonl", rows)
    out = dry_run(tmp_path, env, long, "claude-sonnet-4-5")
    found = re.search(r"judge: ~([\d,]+) of the ~([\d,]+) prompt tokens may come from the provider's prompt cache "
                      r"\(each question's shared prefix, for every criterion but the first; prefixes under 1,024 tokens "
                      r"are not cached\), saving ~\$([\d.]+)", out)
    assert found, out
    tokens, total = int(found.group(1).replace(",", "")), int(found.group(2).replace(",", ""))
    assert 0 < tokens < total
    full, read = price("claude-sonnet-4-5")
    assert float(found.group(3)) == pytest.approx(tokens * (full - read), abs=0.005)
    assert "prompt cache" not in dry_run(tmp_path, env, long, "claude-sonnet-4-5", "prompt_cache=false")
    assert "prompt cache" in dry_run(tmp_path, env, long, "gpt-4.1", "prompt_cache=false")  # OpenAI: automatic
    assert "prompt cache" not in dry_run(tmp_path, env, short, "claude-sonnet-4-5")  # prefixes under 1,024 tokens
