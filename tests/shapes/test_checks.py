"""Deterministic checks as rubric items (issue #25): each check type's truth table, and through the console
script against the fake server: no judge call for checked items, the judge shown only the judged items, the
scores of a mixed rubric computed by hand, a hostile regex that finishes, and one clear line for a check that
cannot run (before any request)."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, run_cli
from fakeserver import FakeServer, Reply
from rubric_engine.scoring.checks import CheckProblem, parse_check, run_check

MINI = REPO / "tests" / "data" / "checks_mini"

# ------------------------------------------------------------------------------------ truth tables


@pytest.mark.parametrize(("check", "reply", "hit"), [
    ({"type": "contains", "value": "Paris"}, "It is Paris.", True),
    ({"type": "contains", "value": "Paris"}, "It is paris.", False),
    ({"type": "contains", "value": "Paris", "ignore_case": True}, "It is PARIS.", True),
    ({"type": "contains", "value": "Paris"}, "", False),
    ({"type": "not_contains", "value": "as an AI"}, "Sure, here it is.", True),
    ({"type": "not_contains", "value": "as an AI"}, "Speaking as an AI, no.", False),
    ({"type": "not_contains", "value": "as an ai", "ignore_case": True}, "AS AN AI I refuse", False),
    ({"type": "not_contains", "value": "as an ai"}, "AS AN AI I refuse", True),
    ({"type": "regex", "pattern": r"\d{4}"}, "in 1969", True),
    ({"type": "regex", "pattern": r"^\d{4}$"}, "in 1969", False),
    ({"type": "regex", "pattern": "hello"}, "HELLO there", False),
    ({"type": "regex", "pattern": "hello", "ignore_case": True}, "HELLO there", True),
    ({"type": "regex", "pattern": "猫"}, "一只猫", True),
    ({"type": "words", "max": 3}, "one two three", True),
    ({"type": "words", "max": 3}, "one two three four", False),
    ({"type": "words", "min": 2}, "one", False),
    ({"type": "words", "min": 2, "max": 2}, "  one\ntwo  ", True),
    ({"type": "chars", "max": 5}, "  abcde \n", True),
    ({"type": "chars", "max": 5}, "abcdef", False),
    ({"type": "chars", "min": 3}, "ab", False),
    ({"type": "chars", "min": 2, "max": 2}, "猫猫", True),
    ({"type": "json"}, '{"a": 1}', True),
    ({"type": "json"}, "[1, 2]", True),
    ({"type": "json"}, "{'a': 1}", False),
    ({"type": "json"}, "Here: {\"a\": 1}", False),
    ({"type": "json"}, '```json\n{"a": 1}\n```', True),
    ({"type": "json", "keys": ["a", "b"]}, '{"a": 1, "b": null}', True),
    ({"type": "json", "keys": ["a", "b"]}, '{"a": 1}', False),
    ({"type": "json", "keys": ["a"]}, '[{"a": 1}]', False),
    ({"type": "json"}, "[" * 100_000, False),
])
def test_truth_table(check: dict[str, Any], reply: str, hit: bool) -> None:
    got = run_check(parse_check(check), reply)
    assert got.hit is hit, got.found
    assert got.found.startswith(f"check {check['type']}: ")


@pytest.mark.parametrize(("check", "key", "words"), [
    ({"type": "regex", "pattern": "(?<=a)b"}, "pattern", "RE2 cannot compile"),
    ({"type": "regex", "pattern": "(a"}, "pattern", "missing )"),
    ({"type": "regex", "pattern": r"(a)\1"}, "pattern", "RE2 cannot compile"),
    ({"type": "contains"}, "value", "required key is missing"),
    ({"type": "contains", "value": ""}, "value", "expected a non-empty string"),
    ({"type": "contains", "value": "x", "case": "no"}, "case", "unknown key"),
    ({"type": "sentiment"}, "type", "unknown check type 'sentiment'"),
    ({"type": "choice", "answer": "A", "letters": "AB"}, "type", "unknown check type 'choice'"),
    ({"type": "words"}, "", "give min, max or both"),
    ({"type": "words", "min": 5, "max": 2}, "min", "min (5) is above max (2)"),
    ({"type": "chars", "max": -1}, "max", "expected a whole number >= 0"),
    ({"type": "words", "max": True}, "max", "expected a whole number >= 0"),
    ({"type": "contains", "value": "x", "ignore_case": "yes"}, "ignore_case", "expected true or false"),
])
def test_a_check_that_cannot_run_names_its_key(check: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(CheckProblem) as err:
        parse_check(check)
    assert err.value.key == key and words in err.value.message


# ------------------------------------------------------------------------------ through the console script

REPLIES = {  # the candidate's reply per prompt
    "Write a haiku about autumn.": "Crisp leaves drift and fall\nsummer fades to amber light\nthe cold wind whispers",
    "Return a JSON object with the keys name and age for a fictional person.": '{"name": "Ada", "age": 36}',
    "Explain in two sentences why leaves are green.": "Leaves look green because chlorophyll absorbs red and blue "
                                                     "light. The token is TOKEN-7731.",
}


class Script:
    """Candidate: REPLIES; judge: the first criterion it is shown is met, the others not."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = "\n".join(str(m["content"]) for m in body["messages"])
        if body["model"] == "judge":
            n = len(re.findall(r"^\d+\. \(-?\d+ points\)", text, re.M))
            items = [{"id": i, "reasoning": f"item {i}", "met": i == 1} for i in range(1, n + 1)]
            return Reply(text=json.dumps({"criteria": items}))
        return Reply(text=next(r for p, r in REPLIES.items() if p in text))


def args(url: str, run: Path, bench: Path = MINI) -> list[str]:
    return [f"benchmark={bench}", "progress=none", f"hydra.run.dir={run}",
            "candidate=openai_compatible", "candidate.model=openai/cand", f"candidate.api_base={url}",
            "candidate.name=cand", "candidate.api_key_env=FAKE_KEY",
            "judge=openai_compatible", "judge.model=openai/judge", f"judge.api_base={url}",
            "judge.name=judge", "judge.api_key_env=FAKE_KEY"]


def records(run: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(x) for x in (run / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["id"]: r for r in rows}


def test_mixed_rubric_by_hand(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Script()) as srv:
        res = run_cli(args(srv.url, tmp_path / "run"), env)
        assert res.returncode == 0, res.stderr
        judge = [b for b in srv.requests if b["model"] == "judge"]
    # the question whose items are all checks ("person") makes no judge call; the other two one call each
    assert len(judge) == 2
    prompts = {next(p for p in REPLIES if p in b["messages"][-1]["content"]): b["messages"][-1]["content"]
               for b in judge}
    haiku = prompts["Write a haiku about autumn."]
    # only the judged items, numbered 1..m as the judge must answer them
    assert re.findall(r"^(\d+)\. \((-?\d+) points\) (.*)$", haiku, re.M) == [
        ("1", "3", "The reply is a haiku about autumn"), ("2", "2", "It mentions falling leaves")]
    assert "against 2 numbered criteria" in haiku
    for hidden in ("as an AI", "summer", "words", "2,000 characters"):
        assert hidden not in haiku.split("<reply-")[0] + haiku.split("</reply-")[-1]
    leaves = prompts["Explain in two sentences why leaves are green."]
    assert re.findall(r"^\d+\. \(\d+ points\) (.*)$", leaves, re.M) == [
        "It names light as the energy source", "It is accurate"]
    assert "TOKEN-7731" not in leaves.split("</reply-")[-1]

    recs = records(tmp_path / "run")
    # haiku: judged 1 (3 pts) met, judged 4 (2 pts) not; words <= 30 met (1), no "as an AI" met (1),
    # "summer" matched (-2, a penalty that applies), under 2,000 chars met (1): (3 + 1 + 1 - 2 + 1) / 8
    hits = [c["hit"] for c in recs["haiku"]["criteria"]]
    assert hits == [True, True, True, False, True, True]
    assert recs["haiku"]["score"] == pytest.approx(4 / 8)
    # person: valid JSON with name and age (2), <= 80 chars (1), under 2,000 (1): 4 / 4
    assert recs["person"]["score"] == pytest.approx(1.0)
    assert recs["person"]["tokens"]["judge"] == {"prompt": 0, "completion": 0}
    # leaves: the leak check fires the failure rule: the question scores 0
    assert recs["leaves"]["failed_rules"] == ["leaked_token"] and recs["leaves"]["catastrophic"] is True
    assert recs["leaves"]["score"] == 0.0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["overall"] == pytest.approx(100 * (0.5 + 1.0 + 0.0) / 3)
    assert summary["counts"]["catastrophic"] == 1 and summary["calls"]["judge"]["made"] == 2

    # the records: a checked item keeps its check and says what it found; a judged item its verdict
    summer = recs["haiku"]["criteria"][4]
    assert summer["check"] == {"type": "regex", "pattern": r"(?i)\bsummer\b", "ignore_case": False}
    assert summer["reasoning"] == f"check regex: matched at {REPLIES['Write a haiku about autumn.'].index('summer')}"
    assert recs["haiku"]["criteria"][3] == {**recs["haiku"]["criteria"][3], "reasoning": "item 2", "hit": False}
    assert "check" not in recs["haiku"]["criteria"][3]
    assert recs["person"]["criteria"][1]["text"] == "at most 80 characters"  # an item without text: its check

    # rescore gives the run's numbers back from the stored verdicts and checks
    res = run_cli(["rescore", str(tmp_path / "run"), f"out={tmp_path / 'again'}"], env)
    assert res.returncode == 0, res.stderr
    again = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert again["overall"] == pytest.approx(summary["overall"])


def test_repeats_grade_only_the_judged_items_and_checks_are_not_voted(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Script()) as srv:
        res = run_cli([*args(srv.url, tmp_path / "run"), "judge.repeats=3"], env)
        assert res.returncode == 0, res.stderr
        assert sum(b["model"] == "judge" for b in srv.requests) == 2 * 3
    recs = records(tmp_path / "run")
    for c in recs["haiku"]["criteria"]:
        assert ("votes" in c) == ("check" not in c)
    assert recs["haiku"]["criteria"][3]["votes"] == {"judge": [False, False, False]}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["overall"] == pytest.approx(100 * 1.5 / 3)
    # every judged item agrees with itself over the repeats: no flip; checked items are not counted as units
    assert summary["noise"]["groups"]["overall"]["flip_rate"]["units"] == 4
    assert summary["noise"]["groups"]["overall"]["repeat_scores"] == [50.0, 50.0, 50.0]


def test_dry_run_counts_no_judge_call_for_checks(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli([*args("http://127.0.0.1:9/v1", tmp_path / "run"), "dry_run=true"], env)
    assert res.returncode == 0, res.stderr
    row = next(line for line in res.stdout.splitlines() if line.strip("│┃ ").startswith("judge"))
    assert [int(x) for x in re.findall(r"│\s*(\d+)\s*(?=│)", row)][:2] == [2, 0]  # calls, already cached


def test_keyless_mock_judge_with_checks(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli([f"benchmark={MINI}", "candidate=mock", "judge=mock", "progress=none",
                   f"hydra.run.dir={tmp_path / 'run'}"], env)
    assert res.returncode == 0, res.stderr
    recs = records(tmp_path / "run")
    assert all(c["reasoning"].startswith("check ") for r in recs.values() for c in r["criteria"] if "check" in c)
    assert all(c["reasoning"].startswith("[mock]") for r in recs.values() for c in r["criteria"] if "check" not in c)


def variant(tmp_path: Path, rows: list[dict[str, Any]], spec_edit: Any = None) -> Path:
    """checks_mini with other data rows (and an edited spec)."""
    d = tmp_path / "bench"
    shutil.copytree(MINI, d)
    (d / "checks_mini.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if spec_edit is not None:
        spec = d / "benchmark.yaml"
        spec.write_text(spec_edit(spec.read_text(encoding="utf-8")), encoding="utf-8")
    return d


def row(qid: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"id": qid, "prompt": "Write a haiku about autumn.", "rubric": [{"label": "", **i} for i in items]}


def test_a_hostile_regex_finishes(tmp_path: Path, env: dict[str, str]) -> None:
    """(a+)+$ on 'aaa...ab' backtracks exponentially in Python's re; RE2 matches in linear time."""
    bench = variant(tmp_path, [row("evil", {"points": 1, "check": {"type": "regex", "pattern": "(a+)+$"}})])
    with FakeServer(lambda body: Reply(text="a" * 50_000 + "b")) as srv:
        res = run_cli(args(srv.url, tmp_path / "run", bench), env)
        assert res.returncode == 0, res.stderr
        assert [b["model"] for b in srv.requests] == ["cand"]
    crit = records(tmp_path / "run")["evil"]["criteria"][0]
    assert (crit["hit"], crit["reasoning"]) == (False, "check regex: no match")


@pytest.mark.parametrize(("check", "key", "words"), [
    ({"type": "regex", "pattern": "(?<=a)b"}, "check.pattern", "RE2 cannot compile this regular expression"),
    ({"type": "contains"}, "check.value", "required key is missing"),
    ({"type": "sentiment", "value": "x"}, "check.type", "unknown check type 'sentiment'"),
])
def test_a_bad_check_is_one_line_before_any_call(tmp_path: Path, env: dict[str, str], check: dict[str, Any],
                                                 key: str, words: str) -> None:
    bench = variant(tmp_path, [row("ok", {"points": 1, "check": {"type": "words", "max": 9}}),
                               row("bad", {"text": "judged", "points": 1}, {"points": 1, "check": check})])
    res = run_cli(["validate", f"benchmark={bench}"], env)
    assert res.returncode == 2
    line = res.stderr.splitlines()[0]
    assert "Traceback" not in res.stderr
    assert f"checks_mini.jsonl:2: rubric[1]: {key}: {words}" in line
    with FakeServer(Script()) as srv:
        res = run_cli(args(srv.url, tmp_path / "run", bench), env)
        assert res.returncode == 2 and f"rubric[1]: {key}" in res.stderr
        assert srv.requests == []


def test_judged_items_without_a_judge_are_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    def no_judge(text: str) -> str:
        return text.split("\njudge:")[0] + "\n"

    bench = variant(tmp_path, [row("ok", {"points": 1, "check": {"type": "words", "max": 9}}),
                               row("judged", {"text": "A haiku", "points": 1})], no_judge)
    res = run_cli(["validate", f"benchmark={bench}"], env)
    assert res.returncode == 2
    assert "checks_mini.jsonl:2: rubric[0]: no check (check) and the spec declares no judge" in \
        res.stderr.splitlines()[0]
    # every item checked: the spec needs no judge
    bench2 = variant(tmp_path / "2", [row("ok", {"points": 1, "check": {"type": "words", "max": 9}})], no_judge)
    res = run_cli([f"benchmark={bench2}", "candidate=mock", "progress=none", f"hydra.run.dir={tmp_path / 'run'}"], env)
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["judge"]["name"] == "none"


def test_a_spec_check_with_a_bad_regex_names_the_spec_line(tmp_path: Path, env: dict[str, str]) -> None:
    bench = variant(tmp_path, [row("ok", {"points": 1, "check": {"type": "words", "max": 9}})],
                    lambda t: t.replace("check: {type: chars, max: 2000}", 'check: {type: regex, pattern: "(?=x)"}'))
    res = run_cli(["validate", f"benchmark={bench}"], env)
    assert res.returncode == 2
    line = res.stderr.splitlines()[0]
    assert "benchmark.yaml:24: checks[0].check" in line and "pattern: RE2 cannot compile" in line


def test_review_sheets_show_only_judged_items(tmp_path: Path, env: dict[str, str]) -> None:
    with FakeServer(Script()) as srv:
        assert run_cli(args(srv.url, tmp_path / "run"), env).returncode == 0
    res = run_cli(["review", "export", str(tmp_path / "run"), "n=100", f"out={tmp_path / 'sheet'}"], env)
    assert res.returncode == 0, res.stderr
    with (tmp_path / "sheet" / "review.csv").open(encoding="utf-8-sig", newline="") as fh:
        head, *rows = list(csv.reader(fh))  # cells span lines (the dialogue, the reply): read as CSV
    qcol, icol = 2, head.index("criterion_index")  # the question column is the benchmark's own id field, third
    # the judged items only: haiku #1 and #4, leaves #1 and #3 (a check is no judge verdict to agree with)
    assert sorted((r[qcol], int(r[icol])) for r in rows) == [
        ("haiku", 1), ("haiku", 4), ("leaves", 1), ("leaves", 3)]
    # a run whose items are all checks (multiple choice) has nothing to review: one line says why
    mc = [f"benchmark={REPO / 'tests' / 'data' / 'choice_mini'}", "candidate=mock", "progress=none"]
    assert run_cli([*mc, f"hydra.run.dir={tmp_path / 'mc'}"], env).returncode == 0
    res = run_cli(["review", "export", str(tmp_path / "mc"), f"out={tmp_path / 'mc_sheet'}"], env)
    assert res.returncode == 2 and "every item is checked by the engine" in res.stderr.splitlines()[0]


def test_per_criterion_judging_maps_each_verdict_to_its_item(tmp_path: Path, env: dict[str, str]) -> None:
    """One call per judged item: the judge is shown item k of the judged ones; its verdict lands on that item."""
    bench = variant(tmp_path, [json.loads(x) for x in (MINI / "checks_mini.jsonl").read_text().splitlines()],
                    lambda t: t.replace("  template: judge.j2", "  template: judge_one.j2\n"
                                        "  verdict: {granularity: per_criterion, shape: object}"))
    (bench / "judge_one.j2").write_text("Reply <r-{{ tag }}>{{ response }}</r-{{ tag }}>\nCriterion: {{ criterion.text }}"
                                        "\nAnswer {\"reasoning\": \"...\", \"met\": true}\n", encoding="utf-8")

    def script(body: dict[str, Any]) -> Reply:
        text = "\n".join(str(m["content"]) for m in body["messages"])
        if body["model"] == "judge":
            crit = text.split("Criterion: ")[1].splitlines()[0]
            return Reply(text=json.dumps({"reasoning": f"saw {crit}", "met": "leaves" in crit or "light" in crit}))
        return Reply(text=next(r for p, r in REPLIES.items() if p in text))

    with FakeServer(script) as srv:
        res = run_cli(args(srv.url, tmp_path / "run", bench), env)
        assert res.returncode == 0, res.stderr
        shown = sorted(b["messages"][-1]["content"].split("Criterion: ")[1].splitlines()[0]
                       for b in srv.requests if b["model"] == "judge")
    assert shown == sorted(["The reply is a haiku about autumn", "It mentions falling leaves",
                            "It names light as the energy source", "It is accurate"])
    crits = records(tmp_path / "run")["haiku"]["criteria"]
    assert [(c["index"], c["hit"], c["reasoning"]) for c in crits if "check" not in c] == [
        (1, False, "saw The reply is a haiku about autumn"), (4, True, "saw It mentions falling leaves")]


def test_the_reward_decides_checks_as_a_run_does(tmp_path: Path, env: dict[str, str], fake_key: str) -> None:
    """A rubric reward over a mixed rubric: the run's scores, and no judge call for the checked items."""
    from rubric_engine import RubricReward

    with FakeServer(Script()) as srv:
        assert run_cli(args(srv.url, tmp_path / "run"), env).returncode == 0
        srv.reset()
        judge = [a for a in args(srv.url, tmp_path / "unused") if a.startswith("judge")]
        ids = list(records(tmp_path / "run"))
        prompts = {r["id"]: r["prompt"] for r in map(json.loads, (MINI / "checks_mini.jsonl").read_text().splitlines())}
        with RubricReward(benchmark=str(MINI), overrides=[f"cache.dir={tmp_path / 'reward_cache'}", *judge]) as reward:
            rewards = reward(prompts=[[{"role": "user", "content": prompts[q]}] for q in ids],
                             completions=[[{"role": "assistant", "content": REPLIES[prompts[q]]}] for q in ids],
                             id=ids)
        assert sum(b["model"] == "judge" for b in srv.requests) == 2
    scores = {q: r["score"] for q, r in records(tmp_path / "run").items()}
    assert rewards == [min(1.0, max(0.0, scores[q])) for q in ids]
