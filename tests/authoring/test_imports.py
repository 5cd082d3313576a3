"""Importing OpenAI Evals and promptfoo suites (issue #41 items 3-4): the sources under tests/data/imports hold every
grader and assertion type in their documented formats. Through the console script: each imports, validates, runs
keyless with mock, and against the fake server gives the scores the source tool's documented semantics give,
restated here by hand on fixed replies; an unknown grader, assertion or field is one line, exit 2, nothing written;
an existing directory is never overwritten; hostile input stays data."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, run_cli
from fakeserver import FakeServer, Reply

SOURCES = REPO / "tests" / "data" / "imports"
EVAL, ITEMS, PROMPTFOO = SOURCES / "openai_eval.json", SOURCES / "openai_items.jsonl", SOURCES / "promptfooconfig.yaml"


def imported(tmp_path: Path, env: dict[str, str], *args: str) -> Path:
    out = tmp_path / "spec"
    res = run_cli(["import", *args, f"out={out}"], env)
    assert res.returncode == 0, res.stderr
    return out


def summary(run: Path) -> dict[str, Any]:
    return json.loads((run / "summary.json").read_text(encoding="utf-8"))


def records(run: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(x) for x in (run / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["id"]: r for r in rows}


class Script:
    """Candidate: the reply `replies` gives for the first key its prompt contains; judge: `met` for each judged
    item in order (the items the judge is shown are numbered `N. `)."""

    def __init__(self, replies: dict[str, str], met: list[bool]) -> None:
        self.replies, self.met = replies, met

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = "\n".join(str(m["content"]) for m in body["messages"])
        if body["model"] == "judge":
            n = len(re.findall(r"^\d+\. ", text.split("Criteria")[-1], re.M))
            return Reply(text=json.dumps({"criteria": [{"id": i, "reasoning": "r", "met": self.met[i - 1]}
                                                       for i in range(1, n + 1)]}))
        return Reply(text=next(r for p, r in self.replies.items() if p in text))


def served(url: str, spec: Path, run: Path) -> list[str]:
    return [f"benchmark={spec}", "progress=none", f"hydra.run.dir={run}",
            "candidate=openai_compatible", "candidate.model=openai/cand", f"candidate.api_base={url}",
            "candidate.name=cand", "candidate.api_key_env=FAKE_KEY",
            "judge=openai_compatible", "judge.model=openai/judge", f"judge.api_base={url}",
            "judge.name=judge", "judge.api_key_env=FAKE_KEY"]


@pytest.mark.parametrize("source", ["openai", "promptfoo"])
def test_each_source_validates_and_runs_keyless(tmp_path: Path, env: dict[str, str], source: str) -> None:
    args = ("openai-evals", str(EVAL), f"data={ITEMS}") if source == "openai" else ("promptfoo", str(PROMPTFOO))
    spec = imported(tmp_path, env, *args)
    assert run_cli(["validate", f"benchmark={spec}"], env).returncode == 0
    res = run_cli([f"benchmark={spec}", "candidate=mock", "judge=mock", "progress=none",
                   f"hydra.run.dir={tmp_path / 'run'}"], env)
    assert res.returncode == 0, res.stderr
    assert summary(tmp_path / "run")["counts"]["scored"] == 2


def test_openai_eval_scores_as_the_graders_document(tmp_path: Path, env: dict[str, str]) -> None:
    """OpenAI's grader semantics on fixed replies, criterion by criterion (each criterion passes or fails; the
    question's score is the share that pass):
    France, reply "Paris" (answer "Paris", long answer "The capital of France is Paris."):
      exact eq: pass; ne "I cannot help": pass; like (answer contained): pass; ilike: pass;
      fuzzy_match 1.0 >= 0.8: pass; bleu: no shared bigram, 0 < 0.5: fail;
      rouge_l: LCS 1 of 1 and 6 tokens, F1 = 2/7 < 0.5: fail; multi 0.5*1 + 0.5*1 = 1 >= 0.6: pass;
      score_model (judge: met): pass; label_model (judge: not met): fail  -> 7/10
    Japan, reply "tokyo" (answer "Tokyo"):
      eq: fail; ne: pass; like: fail (case); ilike: pass; fuzzy_match 2*4/10 = 0.8 >= 0.8: pass; bleu: fail;
      rouge_l 2/7: fail; multi 0.5*0 + 0.5*0.8 = 0.4 < 0.6: fail; score_model: pass; label_model: fail -> 4/10"""
    spec = imported(tmp_path, env, "openai-evals", str(EVAL), f"data={ITEMS}")
    replies = {"capital of France": "Paris", "capital of Japan": "tokyo"}
    with FakeServer(Script(replies, [True, False])) as srv:
        res = run_cli(served(srv.url, spec, tmp_path / "run"), env)
        assert res.returncode == 0, res.stderr
        judge = [b for b in srv.requests if b["model"] == "judge"]
    assert len(judge) == 2  # one call per reply, shown only the two model graders
    shown = judge[0]["messages"][-1]["content"]
    assert "Rate the reply on a scale from 1 to 7; the criterion is met when that score is at least 5" in shown
    assert "Choose one label of polite, neutral, rude; the criterion is met when the label is one of polite, neutral" in shown
    assert "[the reply]" in shown and "{{" not in shown
    recs = records(tmp_path / "run")
    assert [c["hit"] for c in recs["fr"]["criteria"]] == [True, True, True, True, True, False, False, True, True, False]
    assert [c["hit"] for c in recs["jp"]["criteria"]] == [False, True, False, True, True, False, False, False, True, False]
    assert recs["fr"]["score"] == pytest.approx(0.7) and recs["jp"]["score"] == pytest.approx(0.4)
    assert "check formula: 0.4000 (threshold 0.6)" in recs["jp"]["criteria"][7]["reasoning"]
    assert summary(tmp_path / "run")["overall"] == pytest.approx(100 * (0.7 + 0.4) / 2)
    res = run_cli(["rescore", str(tmp_path / "run"), f"out={tmp_path / 'again'}"], env)  # checks read back
    assert res.returncode == 0, res.stderr
    assert summary(tmp_path / "again")["overall"] == pytest.approx(100 * (0.7 + 0.4) / 2)


def test_promptfoo_scores_as_its_assertions_document(tmp_path: Path, env: dict[str, str]) -> None:
    """promptfoo's semantics on fixed replies: a test's score is the weighted mean of its assertions' scores
    (pass 1, fail 0), defaultTest's assertions first.
    France, reply "Paris": not-icontains "as an AI" (1) pass; equals "{{city}}" = Paris (1) pass; contains (2) pass;
      icontains "paris" (1) pass; regex ^[A-Z][a-z]+$ (1) pass; starts-with "Par" (1) pass; llm-rubric (1) judge: fail
      -> 7/8
    JSON, reply '{"city": "Tokyo"}': not-icontains (1) pass; is-json (1) pass; g-eval (1) judge: fail;
      javascript: not imported, listed -> 2/3"""
    res = run_cli(["import", "promptfoo", str(PROMPTFOO), f"out={tmp_path / 'spec'}"], env)
    assert res.returncode == 0, res.stderr
    assert "tests[1].assert[2] (javascript): runs code" in res.stdout
    assert "tests[1].threshold" in res.stdout
    listed = (tmp_path / "spec" / "UNMAPPED.md").read_text()
    assert "javascript" in listed and "tests[1].threshold" in listed
    entry = (tmp_path / "spec" / "conf" / "candidate" / "sonnet.yaml").read_text()
    assert "model: anthropic/claude-sonnet-4-5" in entry and "temperature: 0" in entry
    assert "model: openai/gpt-4.1\n" in (tmp_path / "spec" / "benchmark.yaml").read_text()  # defaultTest's grader
    replies = {"capital of France": "Paris", "capital of Japan": '{"city": "Tokyo"}'}
    with FakeServer(Script(replies, [False])) as srv:
        res = run_cli(served(srv.url, tmp_path / "spec", tmp_path / "run"), env)
        assert res.returncode == 0, res.stderr
        shown = [b["messages"][-1]["content"] for b in srv.requests if b["model"] == "judge"]
    assert any("The answer names Paris as the capital (met when a score from 0 to 1 would be at least 0.8)" in s
               for s in shown)
    recs = records(tmp_path / "run")
    assert [c["hit"] for c in recs["t1"]["criteria"]] == [True, True, True, True, True, True, False]
    assert recs["t1"]["score"] == pytest.approx(7 / 8) and recs["t2"]["score"] == pytest.approx(2 / 3)
    assert summary(tmp_path / "run")["overall"] == pytest.approx(100 * (7 / 8 + 2 / 3) / 2)


def _edited_eval(tmp_path: Path, edit: Any) -> Path:
    ev = json.loads(EVAL.read_text())
    edit(ev)
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(ev))
    return path


@pytest.mark.parametrize(("edit", "words"), [
    (lambda ev: ev["testing_criteria"].append({"type": "sentiment", "name": "s"}),
     "testing_criteria[10]: unknown grader type 'sentiment'"),
    (lambda ev: ev["testing_criteria"][0].update(case_sensitive=True),
     "testing_criteria[0] (string_check): unknown field 'case_sensitive'"),
    (lambda ev: ev.update(owner="me"), "unknown field 'owner'"),
    (lambda ev: ev["testing_criteria"].append({"type": "python", "name": "p", "source": "def grade(s, i): return 1"}),
     "testing_criteria[10]: a python grader runs code; pass trust_code=true if you trust this eval"),
    (lambda ev: ev["testing_criteria"][4].update(evaluation_metric="cosine"),
     "evaluation_metric 'cosine' is not supported (it compares embeddings"),
    (lambda ev: ev["testing_criteria"][7].update(calculate_output="__import__('os').system('x')"),
     "testing_criteria[7].calculate_output: \"__import__('os').system\" is not allowed"),
    (lambda ev: ev["testing_criteria"][0].update(reference="{{ item.__class__.__mro__ }}"),
     "the template tried something the sandbox forbids"),
    (lambda ev: ev["testing_criteria"][0].update(reference="{{ item.missing }}"), "undefined variable"),
    (lambda ev: ev["testing_criteria"][4].update(pass_threshold="high"),
     "testing_criteria[4] (text_similarity): pass_threshold: expected a number"),
    (lambda ev: ev["testing_criteria"][8].update(range=[7, 1]), "testing_criteria[8] (score_model): range:"),
    (lambda ev: ev["testing_criteria"][9].update(passing_labels=["kind"]), "the passing labels among the labels"),
    (lambda ev: ev["testing_criteria"][9].pop("labels"), "testing_criteria[9] (label_model): the required field 'labels'"),
])
def test_openai_refusals_are_one_line_exit_2_nothing_written(tmp_path: Path, env: dict[str, str], edit: Any,
                                                             words: str) -> None:
    res = run_cli(["import", "openai-evals", str(_edited_eval(tmp_path, edit)), f"data={ITEMS}",
                   f"out={tmp_path / 'spec'}"], env)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and words in res.stderr, res.stderr
    assert not (tmp_path / "spec").exists()


@pytest.mark.parametrize(("old", "new", "words"), [
    ("- type: javascript\n", "- type: is-jsonish\n", "tests[1].assert[2]: unknown assertion type 'is-jsonish'"),
    ("defaultTest:\n", "defaultTests: {}\ndefaultTest:\n", "unknown field 'defaultTests'"),
    ("        threshold: 0.8\n", "        treshold: 0.8\n", "tests[0].assert[5]: unknown field 'treshold'"),
    ("description: Capitals", "base: &a [1]\nother: *a\ndescription: Capitals", "YAML aliases (*name) are not allowed"),
    ("{{city}} as the capital", "{{ city.__class__.__mro__ }}", "the sandbox forbids"),
    ("{{city}} as the capital", "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
     "tests[0].assert[5].value: the template ran past the limit of 5 s"),
])
def test_promptfoo_refusals_are_one_line_exit_2_nothing_written(tmp_path: Path, env: dict[str, str], old: str,
                                                                new: str, words: str) -> None:
    text = PROMPTFOO.read_text()
    assert old in text
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(text.replace(old, new))
    res = run_cli(["import", "promptfoo", str(config), f"out={tmp_path / 'spec'}"], env)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and words in res.stderr, res.stderr
    assert not (tmp_path / "spec").exists()


def test_an_existing_directory_is_never_overwritten(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "spec"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    for args in (["openai-evals", str(EVAL), f"data={ITEMS}"], ["promptfoo", str(PROMPTFOO)]):
        res = run_cli(["import", *args, f"out={out}"], env)
        assert res.returncode == 2 and "already exists" in res.stderr
    assert [p.name for p in out.iterdir()] == ["mine.txt"] and (out / "mine.txt").read_text() == "keep me"


CHAT_SUITE = """prompts:
  - '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of {{ country }}?"}]'
tests:
  - vars: {country: [France, Japan]}
    assert:
      - {type: icontains, value: "{{ country }}"}
      - {type: contains, value: "file://expected.txt"}
"""


def test_promptfoo_chat_prompts_and_list_vars(tmp_path: Path, env: dict[str, str]) -> None:
    """A prompt that is a JSON list of messages is sent as those messages; a var holding a list gives one question
    per value (promptfoo's expansion); a value read from a file is listed, never compared as text."""
    config = tmp_path / "suite.yaml"
    config.write_text(CHAT_SUITE)
    res = run_cli(["import", "promptfoo", str(config), f"out={tmp_path / 'spec'}"], env)
    assert res.returncode == 0, res.stderr
    assert "tests[0].assert[1] (contains): a value read from a file" in res.stdout
    with FakeServer(Script({"France": "It is Paris, in France.", "Japan": "Tokyo."}, [])) as srv:
        res = run_cli(served(srv.url, tmp_path / "spec", tmp_path / "run"), env)
        assert res.returncode == 0, res.stderr
        sent = sorted((m["role"], m["content"]) for b in srv.requests for m in b["messages"])
    assert sent == [("system", "Be brief."), ("system", "Be brief."), ("user", "Capital of France?"),
                    ("user", "Capital of Japan?")]
    recs = records(tmp_path / "run")
    assert recs["t1-v1"]["score"] == 1.0 and recs["t1-v2"]["score"] == 0.0  # "Tokyo." does not contain "Japan"


PY_GRADER = {"type": "python", "name": "length", "pass_threshold": 0.5,
             "source": "def grade(sample, item):\n    return 1.0 if len(sample['output_text']) <= item['limit'] else 0.0\n"}


def test_a_python_grader_runs_only_with_trust_code(tmp_path: Path, env: dict[str, str]) -> None:
    """trust_code=true keeps a python grader: OpenAI's grade(sample, item) contract on the reply and the row; the
    spec then loads (validate, runs) only with trust_code=true, and a data row cannot smuggle a python check into
    a spec that was not imported so."""
    ev = {"name": "short", "testing_criteria": [PY_GRADER]}
    (tmp_path / "eval.json").write_text(json.dumps(ev))
    (tmp_path / "items.jsonl").write_text('{"item": {"id": "a", "input": "Say hi.", "limit": 5}}\n'
                                          '{"item": {"id": "b", "input": "Say hello.", "limit": 3}}\n')
    spec = imported(tmp_path, env, "openai-evals", str(tmp_path / "eval.json"), f"data={tmp_path / 'items.jsonl'}",
                    "trust_code=true")
    res = run_cli(["validate", f"benchmark={spec}"], env)
    assert res.returncode == 2 and "trust_code=true" in res.stderr
    with FakeServer(Script({"Say hi.": "hi!", "Say hello.": "hello"}, [])) as srv:
        args = served(srv.url, spec, tmp_path / "run")
        res = run_cli(args, env)
        assert res.returncode == 2 and "trust_code=true" in res.stderr and not srv.requests
        res = run_cli([*args, "trust_code=true"], env)
        assert res.returncode == 0, res.stderr
    recs = records(tmp_path / "run")
    assert recs["a"]["score"] == 1.0 and recs["b"]["score"] == 0.0  # len("hi!") = 3 <= 5; len("hello") = 5 > 3
    assert recs["a"]["criteria"][0]["reasoning"] == "check python: 1.0000 (threshold 0.5)"
    # the same check in the data of a spec whose formula runs no code is refused when the data is read
    text = (spec / "benchmark.yaml").read_text()
    (spec / "benchmark.yaml").write_text(text.replace("rubric_engine.scoring.question:met_over_positive",
                                                      "met_over_positive"))
    res = run_cli(["validate", f"benchmark={spec}"], env)
    assert res.returncode == 2 and "a python check runs code" in res.stderr
