"""The plan of calls against the calls a run makes: for every shipped shape that runs offline, the dry run's
calls per role equal the requests the fake server saw per role in the real run with the same settings, and every
request `prompts` prints for the run's first question (a role's first request, each judge request of one
grading) is one the server received for that role.

Why one parametrized test over the shapes: the dry run, `prompts` and the run each render what will be sent; a
shape whose plan drifts from its execution (a judge call per turn counted once, a game shown in another order)
is caught here, by the console script speaking HTTP to the fake server, not by a unit test of one renderer.

The fake server answers every role the same way on every request (a candidate reply numbered so no two requests
share a cache entry, a simulated user that never says its stop signal, so sessions run to max_turns as the dry
run assumes; a valid verdict from the request's own schema), so no call is re-asked and the counts are the
plan's. The replies a run fills in are compared as `prompts`' placeholders, the data tag derived from them as TAG.

Beyond the first question: every request the server received, with its response_format, is one the shape's
strategies give for what the run stored (each question's reply and transcript, the judge repeats): the whole
list, per role, as a multiset, so a request the run built apart from its plan, or an extra or a missing one, fails.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import MINI, REPO, run_cli
from fakeserver import FakeServer, Reply
from test_transcripts import hb_rows, write_rows
from rubric_engine.dataset.load import load_dataset
from rubric_engine.judge.checked import judged_question
from rubric_engine.models.request import Request
from rubric_engine.shapes.registry import shape_for
from rubric_engine.spec.files import benchmark_search_path
from rubric_engine.spec.load import load_spec

DATA = REPO / "tests" / "data"
CAND, BASE, USER = "THE CANDIDATE'S REPLY", "THE BASELINE'S REPLY", "THE SIMULATED USER SPEAKS"
REPLY_PLACEHOLDER = "<<<CANDIDATE REPLY: filled in by the run>>>"  # cli/show.py, as `prompts` prints it
BASELINE_PLACEHOLDER = "<<<BASELINE REPLY: filled in by the run>>>"
USER_PLACEHOLDER = "..."  # shapes/simulated.py: a simulated user's line in the plan
TAG = re.compile(r"\b[0-9a-f]{12,64}\b")  # the data tag around untrusted text is derived from the real reply

# (id, benchmark, its data, further settings, the judge's reply when it is asked for text, not a schema)
CASES = [
    ("criteria", "heartbench", MINI, ["limit=3", "judge.repeats=2"], None),
    ("criteria-samples", "heartbench", MINI, ["limit=2", "candidate.samples=2"], None),
    ("criteria-per-criterion-healthbench", "healthbench", "healthbench rows", ["limit=2"], None),
    ("criteria-checks", str(DATA / "checks_mini"), None, ["limit=3"], None),
    ("score", str(DATA / "likert_mini"), None, ["limit=3"], None),
    ("score-scripted-mt-bench", "mt_bench", DATA / "mt_bench_mini.jsonl", ["limit=3"], "Rating: [[7]]"),
    ("pairwise-arena-hard", "arena_hard", DATA / "pairwise_mini.jsonl", ["limit=3"], "My verdict: [[A=B]]"),
    ("scripted", str(DATA / "scripted_mini"), None, ["limit=3"], None),
    ("simulated", str(DATA / "simulated_mini"), None, ["limit=2", "judge.repeats=2"], None),
    ("rating-eq-bench", "eq_bench", REPO / "data" / "eq_bench_sample.json", ["limit=3"], None),
    # user_state: the simulated user's hidden state after each line (never a stop rule's value: max_turns)
    ("user-state-counselling-sage", "counselling_sage", None, ["limit=2"], None),
    # data.expand: one question per counsellor turn; the dry run counts one candidate call per turn
    ("expanded-turns", "counselling_turns", None, ["limit=4"], None),
]


def _endpoint(role: str, model: str, url: str) -> list[str]:
    return [f"{role}=openai_compatible", f"{role}.model=openai/{model}", f"{role}.api_base={url}",
            f"{role}.name={model}", f"{role}.api_key_env=FAKE_KEY"]


def _instance(schema: dict[str, Any], items: int, index: int = 1) -> Any:
    """A value the JSON schema accepts, with `items` entries (ids 1..items) in each array."""
    kind = schema.get("type")
    if kind == "object":
        return {k: _instance(v, items, index) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [_instance(schema["items"], items, i) for i in range(1, items + 1)]
    if kind == "integer":
        return index if "minimum" not in schema else int(schema["minimum"])
    if kind == "number":
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    if "enum" in schema:
        return schema["enum"][0]
    return "because"


class Answers:
    """Every role answered alike on every request; the judge's verdict sized to the question it is asked about."""

    def __init__(self, questions: list[Any], judge_text: str | None) -> None:
        self.questions, self.judge_text = questions, judge_text
        self.said = itertools.count(1)  # every reply its own words: no request is ever a cache hit of another

    def items(self, body: dict[str, Any]) -> int:
        """How many items the request asks about: those of the question whose judged items it lists (the most
        such items: one question's items may be a part of another's)."""
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        shown = [judged_question(q) for q in self.questions]
        return max((len(s.criteria) for s in shown if s is not None and all(c.text in text for c in s.criteria)),
                   default=1)  # none: one item per call (per_criterion), asked as one object

    def __call__(self, body: dict[str, Any]) -> Reply:
        model = body["model"]
        asked = str(body["messages"][-1].get("content", ""))
        if model == "cand" and "<score>" in asked:  # a rating prompt (eq_bench): its format filled in, readable
            return Reply(text=re.sub(r"<[^<>\n]*>", "fine", re.sub(r"<[^<>\n]*score>", "5", asked)))
        if model == "sim" and "inner state" in str(body["messages"][0].get("content", "")):  # a user_state spec
            return Reply(text=f"{USER} {next(self.said)}\n" + json.dumps({"emotion": 50, "change": 0, "reason": "r"}))
        if model != "judge":
            return Reply(text=f"{ {'cand': CAND, 'base': BASE, 'sim': USER}[model]} {next(self.said)}")
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return Reply(text=json.dumps(_instance(fmt["json_schema"]["schema"], self.items(body))))
        assert self.judge_text is not None, f"the judge was asked for text: {body['messages'][-1]['content'][:200]}"
        return Reply(text=self.judge_text)


def _dry_counts(stdout: str) -> dict[str, int]:
    """Role -> calls, from the dry run's table."""
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in stdout.splitlines() if line.startswith("│")]
    return {r[0]: int(r[2]) for r in rows if r[0] and r[2].isdigit()}


def _prompt_sections(stdout: str) -> dict[str, list[dict[str, str]]]:
    """`prompts`' output as its headings' words -> the messages printed under each."""
    out: dict[str, list[dict[str, str]]] = {}
    parts = re.split(r"^=== (.*?) ===$", stdout, flags=re.M)
    for title, body in zip(parts[1::2], parts[2::2]):
        body = re.sub(r"\nnote: .*$", "", body, flags=re.S)  # the closing note is `prompts`' own
        msgs = re.split(r"^--- message \d+ \[(\w+)\] ---\n", body, flags=re.M)
        out[title] = [{"role": r, "content": c} for r, c in zip(msgs[1::2], msgs[2::2])]
    return out


def _normal(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Messages as compared: the replies a run fills in as `prompts`' placeholders, the data tag as TAG, without
    the line breaks ending each text (`prompts` joins its messages with line breaks)."""
    def text(content: Any) -> str:
        content = re.sub(re.escape(CAND) + r" \d+", REPLY_PLACEHOLDER, str(content))
        content = re.sub(re.escape(USER) + r" \d+", USER_PLACEHOLDER, content)
        return TAG.sub("TAG", re.sub(re.escape(BASE) + r" \d+", BASELINE_PLACEHOLDER, content)).rstrip("\n")

    return [{"role": m["role"], "content": text(m["content"])} for m in messages]


@pytest.mark.slow
@pytest.mark.parametrize(("benchmark", "data", "more", "judge_text"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_dry_run_and_prompts_agree_with_the_run(tmp_path: Path, env: dict[str, str], benchmark: str,
                                                data: Path | str | None, more: list[str], judge_text: str | None) -> None:
    if data == "healthbench rows":  # HealthBench's shape, written for the tests (its own data is not shipped)
        data = write_rows(tmp_path / "hb.jsonl", hb_rows(n=3, criteria=4))
    spec = load_spec(benchmark, benchmark_search_path([]))
    questions = list(load_dataset(spec, str(data) if data else None).questions)
    with FakeServer(Answers(questions, judge_text)) as srv:
        args = [f"benchmark={benchmark}", *([f"data.path={data}"] if data else []), *more, "progress=none",
                *_endpoint("candidate", "cand", srv.url), *_endpoint("judge", "judge", srv.url)]
        if spec.conversation.simulator is not None or "simulated" in benchmark:
            args += _endpoint("user", "sim", srv.url)
        if spec.baseline is not None:  # a baseline model on the server (not the spec's answer files)
            args += ["baseline=openai/base", f"baseline.api_base={srv.url}", "baseline.api_key_env=FAKE_KEY"]
        dry = run_cli([*args, "dry_run=true", f"hydra.run.dir={tmp_path / 'dry'}"], dict(env, COLUMNS="250"))
        assert dry.returncode == 0, dry.stderr
        assert srv.requests == []
        run = run_cli([*args, f"hydra.run.dir={tmp_path / 'run'}"], env)
        assert run.returncode == 0, run.stderr
        sent = list(srv.requests)
    roles = {"cand": "candidate", "judge": "judge", "sim": "user", "base": "baseline"}
    assert _dry_counts(dry.stdout) == dict(Counter(roles[b["model"]] for b in sent)), dry.stdout

    first = next(json.loads(line)["id"] for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines())
    shown = run_cli(["prompts", f"benchmark={benchmark}", *([f"data.path={data}"] if data else []), f"question={first}"],
                    env)
    assert shown.returncode == 0, shown.stderr
    sections = _prompt_sections(shown.stdout)
    received = {role: [_normal(b["messages"]) for b in sent if roles[b["model"]] == role] for role in roles.values()}
    for title, messages in sections.items():
        role = "user" if title.startswith("simulated user") else title.split()[0]
        if not messages or role not in received:
            continue
        assert _normal(messages) in received[role], (title, messages, received[role][:2])


def _planned(spec: Any, questions: list[Any], records: list[dict[str, Any]], repeats: int) -> dict[str, Counter[str]]:
    """Per role, every request the shape's strategies give for the stored records (the methods the plan of calls
    renders and the run sends): the candidate's and a simulated user's at each turn of the stored transcript, each
    judge request of every grading of each stored reply, a baseline model's request."""
    shape, by_id = shape_for(spec), {q.id: q for q in questions}
    conv, verdict = shape.conversation, shape.verdict
    out: dict[str, list[Request]] = {"candidate": [], "user": [], "judge": [], "baseline": []}
    for rec in records:
        q = by_id[rec["id"]]
        for one in rec.get("samples") or [rec]:
            said = [{"role": t["role"], "content": t["content"], **({"state": t["state"]} if "state" in t else {})}
                    for t in rec.get("transcript") or ()]  # a simulated user's hidden state: the simulator sees it
            cand = conv.requests(spec, q, "candidate")
            out["candidate"] += [cand(said[:i]) for i, t in enumerate(said) if t["role"] == "assistant"] or [cand([])]
            if conv.simulates_user:
                out["user"] += [conv.requests(spec, q, "user")(said[:i]) for i, t in enumerate(said)
                                if t["role"] == "user"]
            shown = judged_question(q)
            if shown is not None:
                out["judge"] += verdict.judge_requests(spec, shown, one["response"], said or None) * repeats
            base = verdict.baseline_request(spec, q)
            out["baseline"] += [base] if base is not None else []
    return {role: Counter(_key(r.messages, r.response_format, verdict.compares) for r in rs) for role, rs in out.items()}


def _key(messages: list[dict[str, Any]], response_format: Any, compares: bool) -> str:
    """A request as compared: its messages (a comparison's with both replies as placeholders, the tag as TAG: the
    plan shows the baseline's reply as one) and its response_format."""
    return json.dumps([_normal(messages) if compares else messages, response_format], sort_keys=True)


@pytest.mark.slow
@pytest.mark.parametrize(("benchmark", "data", "more", "judge_text"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_request_the_run_sends_is_the_plans(tmp_path: Path, env: dict[str, str], benchmark: str,
                                                  data: Path | str | None, more: list[str],
                                                  judge_text: str | None) -> None:
    if data == "healthbench rows":
        data = write_rows(tmp_path / "hb.jsonl", hb_rows(n=3, criteria=4))
    spec = load_spec(benchmark, benchmark_search_path([]))
    questions = list(load_dataset(spec, str(data) if data else None).questions)
    with FakeServer(Answers(questions, judge_text)) as srv:
        args = [f"benchmark={benchmark}", *([f"data.path={data}"] if data else []), *more, "progress=none",
                *_endpoint("candidate", "cand", srv.url), *_endpoint("judge", "judge", srv.url),
                f"hydra.run.dir={tmp_path / 'run'}"]
        if spec.conversation.simulator is not None:
            args += _endpoint("user", "sim", srv.url)
        if spec.baseline is not None:
            args += ["baseline=openai/base", f"baseline.api_base={srv.url}", "baseline.api_key_env=FAKE_KEY"]
        run = run_cli(args, env)
        assert run.returncode == 0, run.stderr
        sent = list(srv.requests)
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    repeats = next((int(m.split("=")[1]) for m in more if m.startswith("judge.repeats=")), 1)
    planned = _planned(spec, questions, records, repeats)
    roles = {"cand": "candidate", "judge": "judge", "sim": "user", "base": "baseline"}
    compares = shape_for(spec).verdict.compares
    received = {role: Counter(_key(b["messages"], b.get("response_format"), compares) for b in sent
                              if roles[b["model"]] == role) for role in roles.values()}
    for role in roles.values():
        assert received[role] == planned[role], (role, sum(received[role].values()), sum(planned[role].values()))
