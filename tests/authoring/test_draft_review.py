"""`draft` -> `review criteria` -> `review merge` through the console script: drafts stay out of the data until
experts keep them by the declared rule, agreement equals a hand computation, bad input is one line, exit 2."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import shutil

from conftest import EXE, MINI, REPO, run_cli, sigkill
from fakeserver import FakeServer, Reply
from rubric_engine.spec.load import load_spec

MINI_SHA = hashlib.sha256(MINI.read_bytes()).hexdigest()
IDS = ["mq01aa", "mq02bb", "mq03cc"]
GOOD = {"text": "The reply names the worry the user describes", "weight": 3, "group": "情绪感知",
        "polarity": "positive", "reason": "naming the feeling shows it was heard"}
DRAFTS = {  # question -> its drafting reply: well-formed, a duplicate and a compound criterion, malformed
    "mq01aa": {"criteria": [GOOD, {**GOOD, "text": "The reply lectures the user", "polarity": "pitfall",
                                   "group": "温暖", "weight": 2, "reason": "lecturing pushes the user away"}]},
    "mq02bb": {"criteria": [{**GOOD, "text": "The reply asks what happened and suggests a first step"},
                            {**GOOD, "text": "The reply asks what happened and suggests a first step"}]},
    "mq03cc": "I think a good reply should be warm.",
}


def handler(body: dict[str, Any]) -> Reply:
    prompt = body["messages"][0]["content"]
    qid = next(q for q in IDS if f"({q})" in prompt)
    got = DRAFTS[qid]
    return Reply(text=got if isinstance(got, str) else json.dumps(got, ensure_ascii=False))


def env() -> dict[str, str]:
    return {**os.environ, "FAKE_KEY": "sk-test"}


def draft_args(tmp: Path, *extra: str, srv: FakeServer | None = None) -> list[str]:
    model = ["drafter=openai/fake-model", f"api_base={srv.url}", "api_key_env=FAKE_KEY"] if srv else ["drafter=mock"]
    return ["draft", "benchmark=heartbench", f"data.path={MINI}", "ids=" + ",".join(IDS), "n=2",
            f"out={tmp / 'drafts.jsonl'}", f"cache.dir={tmp / 'cache'}", f"benchmark_dirs={REPO / 'benchmarks'}",
            *model, *extra]


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_mock_drafts_in_the_spec_format(tmp_path: Path) -> None:
    res = run_cli(draft_args(tmp_path), env())
    assert res.returncode == 0, res.stderr
    drafted = rows(tmp_path / "drafts.jsonl")
    assert {d["id"] for d in drafted} == set(IDS) and len(drafted) == 6
    groups = set(load_spec("heartbench", [REPO / "benchmarks"]).label_to_ability())
    for d in drafted:
        assert d["group"] in groups and d["polarity"] in ("positive", "pitfall") and d["weight"] in (1, 2, 3)
        assert d["text"].startswith("[mock]") and d["reason"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "drafts.jsonl", "drafts.report.json"]
    assert hashlib.sha256(MINI.read_bytes()).hexdigest() == MINI_SHA  # drafts never go into the data


def test_fake_server_drafts_malformed_reasked_then_counted_and_cached(tmp_path: Path) -> None:
    with FakeServer(handler) as srv:
        res = run_cli(draft_args(tmp_path, srv=srv), env())
        assert res.returncode == 2, res.stderr  # a reply not in the declared format is bad input: exit 2, one line
        last = res.stderr.strip().splitlines()[-1]  # the lines before it: one per question, as it settled
        assert last.startswith("rubric-engine: error: draft: 1 question(s) got no reply in the declared format "
                               "(mq03cc)") and "ids=[mq03cc]" in last, res.stderr
        asked = [next(q for q in IDS if f"({q})" in b["messages"][0]["content"]) for b in srv.requests]
        assert sorted(asked) == ["mq01aa", "mq02bb", "mq03cc", "mq03cc"]  # the malformed one re-asked once
        failed = [line for line in res.stdout.splitlines() if line.startswith("FAILED")]
        assert failed == [failed[0]] and "mq03cc" in failed[0] and "not a JSON object" in failed[0]
        drafted = rows(tmp_path / "drafts.jsonl")
        assert [d["text"] for d in drafted] == [GOOD["text"], "The reply lectures the user"] + [
            "The reply asks what happened and suggests a first step"] * 2  # duplicate and compound kept for lint
        report = json.loads((tmp_path / "drafts.report.json").read_text(encoding="utf-8"))
        assert (report["drafted"], report["failed"], report["criteria"]) == (2, 1, 4)
        assert (report["calls"]["requests"], report["calls"]["cost"]) == (4, None)  # no price known: unknown, not $0
        srv.reset()
        again = run_cli(draft_args(tmp_path, srv=srv), env())
        assert again.returncode == 2
        assert len(srv.requests) == 2  # only the failed question is asked again; the rest comes from the cache


def test_a_call_that_fails_for_good_is_exit_1_not_bad_input(tmp_path: Path) -> None:
    def refusing(body: dict[str, Any]) -> Reply:  # mq03cc's call is refused (400: retrying cannot help)
        return Reply(status=400, error="this request cannot be served") if "(mq03cc)" in body["messages"][0][
            "content"] else handler(body)

    with FakeServer(refusing) as srv:
        res = run_cli(draft_args(tmp_path, srv=srv), env())
    assert res.returncode == 1, res.stderr  # the model's server failed: counted, not blamed on the user's input
    assert "declared format" not in res.stderr
    assert [x for x in res.stdout.splitlines() if x.startswith("FAILED")][0].startswith("FAILED mq03cc:")
    report = json.loads((tmp_path / "drafts.report.json").read_text(encoding="utf-8"))
    assert [(f["id"], f["kind"]) for f in report["failures"]] == [("mq03cc", "call")]


def fill(path: Path, decisions: list[str], edits: dict[int, dict[str, str]] | None = None) -> None:
    with open(path, encoding="utf-8-sig", newline="") as fh:
        table = list(csv.DictReader(fh))
    for i, (row, d) in enumerate(zip(table, decisions, strict=True)):
        row["decision"] = d
        row.update((edits or {}).get(i, {}))
    with open(path, "w", encoding="utf-8-sig", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)


def sheets(tmp_path: Path) -> tuple[Path, list[Path]]:
    with FakeServer(handler) as srv:
        assert run_cli(draft_args(tmp_path, srv=srv), env()).returncode == 2
    out = tmp_path / "sheets"
    res = run_cli(["review", "criteria", str(tmp_path / "drafts.jsonl"), "experts=a,b,c", f"out={out}"], env())
    assert res.returncode == 0, res.stderr
    html = (out / "criteria.html").read_text(encoding="utf-8")
    assert "The reply lectures the user" in html and "@font-face" in html  # the CJK glyphs embedded
    files = [out / f"criteria-{x}.csv" for x in "abc"]
    # planted: c1 kept by all, c2 by two (both edit its text), c3 by one, c4 by none
    fill(files[0], ["accept", "edit", "accept", "reject"], {0: {"weight": "1"}, 1: {"text": "Names the loss"}})
    fill(files[1], ["accept", "edit", "reject", "reject"], {1: {"text": "Names the loss"}})
    fill(files[2], ["accept", "reject", "reject", "reject"])
    return out, files


def test_merge_follows_the_rule_and_agreement_equals_the_hand_value(tmp_path: Path) -> None:
    out, files = sheets(tmp_path)
    for rule, kept in (("majority", ["mq01aa#1", "mq01aa#2"]), ("all", ["mq01aa#1"])):
        into = tmp_path / f"data.{rule}.jsonl"
        res = run_cli(["review", "merge", *map(str, files), f"rule={rule}", f"into={into}"], env())
        assert res.returncode == 0, res.stderr
        report = json.loads(into.with_suffix(".merge.json").read_text(encoding="utf-8"))
        assert report["kept_keys"] == kept
        # by hand: pairs agreeing 3 + 1 + 1 + 3 of 12; alpha (nominal) = 1 - (4/12) / (2*6*6/(12*11)) = 7/18
        assert abs(report["agreement"]["percent_agreement"] - 8 / 12) < 1e-12
        assert abs(report["agreement"]["krippendorff_alpha"] - 7 / 18) < 1e-9
        assert "66.7% of expert pairs agree, Krippendorff's alpha 0.389" in res.stdout
        data = rows(into)
        original = rows(MINI)
        assert [len(r["rubric"]) for r in data] == [len(r["rubric"]) + (len(kept) if r["question_id"] == "mq01aa" else 0)
                                                    for r in original]
        added = data[0]["rubric"][len(original[0]["rubric"]):]
        assert added[0] == {"content": GOOD["text"], "score": 3, "dimension": "情绪感知"}  # 1 of 3 changed the weight
        if rule == "majority":
            assert added[1] == {"content": "Names the loss", "score": -2, "dimension": "温暖"}  # a pitfall: negative
    assert rows(MINI) == original  # the original data never changes
    # two experts: c3 has one keep of two, a tie, which is no majority; `all` keeps what both keep
    for rule in ("majority", "all"):
        into = tmp_path / f"two.{rule}.jsonl"
        res = run_cli(["review", "merge", *map(str, files[:2]), f"rule={rule}", f"into={into}"], env())
        assert res.returncode == 0, res.stderr
        report = json.loads(into.with_suffix(".merge.json").read_text(encoding="utf-8"))
        assert report["kept_keys"] == ["mq01aa#1", "mq01aa#2"], rule
        assert report["agreement"]["percent_agreement"] == 3 / 4  # c3 is the one pair disagreeing


def test_sheet_of_another_drafts_version_is_refused(tmp_path: Path) -> None:
    out, files = sheets(tmp_path)
    drafts = tmp_path / "drafts.jsonl"  # a criterion reworded after the sheets went out: another version
    drafts.write_text(drafts.read_text(encoding="utf-8").replace("lectures", "scolds"), encoding="utf-8")
    into = tmp_path / "data.new.jsonl"
    res = run_cli(["review", "merge", *map(str, files), "rule=majority", f"into={into}"], env())
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "another drafts file or version" in res.stderr and not into.exists()
    existing = tmp_path / "exists.jsonl"
    existing.write_text("{}\n")
    (tmp_path / "drafts.jsonl").unlink()
    res = run_cli(["review", "merge", *map(str, files), "rule=all", f"into={existing}"], env())
    assert res.returncode == 2 and existing.read_text() == "{}\n"


def test_mock_tryout_reads_the_packaged_sample(tmp_path: Path) -> None:
    """No data.path and a download spec: drafter=mock drafts the spec's sample, keyless and offline."""
    res = run_cli(["draft", "benchmark=heartbench_en", "drafter=mock", "limit=2", f"out={tmp_path / 'd.jsonl'}",
                   f"cache.dir={tmp_path / 'cache'}"], env())
    assert res.returncode == 0, res.stderr
    assert "packaged sample" in res.stderr and len({d["id"] for d in rows(tmp_path / "d.jsonl")}) == 2


def test_killed_draft_resumes_paying_nothing_twice(tmp_path: Path) -> None:
    """SIGKILL while one question hangs: the rerun asks only that one; the answered ones come from the cache."""
    def first_run(body: dict[str, Any]) -> Reply:
        return Reply(text="", delay=60) if "(mq02bb)" in body["messages"][0]["content"] else handler(body)

    log = tmp_path / "first.log"
    with FakeServer(first_run) as srv, open(log, "w", encoding="utf-8") as err:
        proc = subprocess.Popen([EXE, *draft_args(tmp_path, srv=srv)], env=env(), stdout=subprocess.DEVNULL,
                                stderr=err)
        deadline = time.monotonic() + 120  # each line is printed once its question is settled (cached or failed)
        while not ("mq01aa 2 criteria" in log.read_text(encoding="utf-8")
                   and "mq03cc FAILED" in log.read_text(encoding="utf-8")) and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text(encoding="utf-8")
            time.sleep(0.05)
        sigkill(proc)
        assert not (tmp_path / "drafts.jsonl").exists()  # nothing is written before the end
        srv.handler = handler
        srv.reset()
        res = run_cli(draft_args(tmp_path, srv=srv), env())
        assert res.returncode == 2, res.stderr  # mq03cc's reply is still malformed: asked again, still counted
        asked = sorted(next(q for q in IDS if f"({q})" in b["messages"][0]["content"]) for b in srv.requests)
        assert asked == ["mq02bb", "mq03cc", "mq03cc"]
    assert len(rows(tmp_path / "drafts.jsonl")) == 4


def test_bad_decision_or_into_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    out, files = sheets(tmp_path)
    into = tmp_path / "new.jsonl"
    fill(files[2], ["accept", "maybe", "reject", "reject"])
    res = run_cli(["review", "merge", *map(str, files), "rule=all", f"into={into}"], env())
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "'maybe'" in res.stderr
    assert not into.exists()
    again = shutil.copy(files[0], out / "criteria-a-again.csv")
    res = run_cli(["review", "merge", str(files[0]), str(files[1]), str(again), "rule=all", f"into={into}"], env())
    assert res.returncode == 2 and "also filled" in res.stderr and not into.exists()  # one vote per expert
    fill(files[2], ["accept", "", "", ""])  # undecided: keeps nothing under either rule
    res = run_cli(["review", "merge", *map(str, files), "rule=majority", f"into={MINI}"], env())
    assert res.returncode == 2 and hashlib.sha256(MINI.read_bytes()).hexdigest() == MINI_SHA  # never the original
    res = run_cli(["review", "merge", *map(str, files), "rule=majority", f"into={into}"], env())
    assert res.returncode == 0, res.stderr
    report = json.loads(into.with_suffix(".merge.json").read_text(encoding="utf-8"))
    assert report["kept_keys"] == ["mq01aa#1", "mq01aa#2"] and report["experts"] == ["a", "b", "c"]


def test_the_spec_draft_template_is_used_and_sandboxed(tmp_path: Path) -> None:
    spec = tmp_path / "hb"
    shutil.copytree(REPO / "benchmarks" / "heartbench", spec)
    (spec / "draft.j2").write_text("Our own drafting prompt for ({{ id }}), {{ n }} items, groups "
                                   "{{ groups | map(attribute='group') | join('/') }}\n", encoding="utf-8")
    args = [a if not a.startswith("benchmark=") else f"benchmark={spec}" for a in draft_args(tmp_path)]
    with FakeServer(handler) as srv:
        res = run_cli([*args[:-1], "drafter=openai/fake-model", f"api_base={srv.url}", "api_key_env=FAKE_KEY"], env())
        assert res.returncode == 2, res.stderr
        prompts = [b["messages"][0]["content"] for b in srv.requests]
    assert all(p.startswith("Our own drafting prompt for (mq") and "情绪感知/" in p for p in prompts)
    (spec / "draft.j2").write_text("{{ ''.__class__.__mro__[1].__subclasses__() }}\n", encoding="utf-8")
    res = run_cli([*args, "out=" + str(tmp_path / "other.jsonl")], env())
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "draft.j2" in res.stderr and "sandbox" in res.stderr and not (tmp_path / "other.jsonl").exists()


def test_merge_refuses_data_changed_since_drafting(tmp_path: Path) -> None:
    data = tmp_path / "mine.jsonl"
    shutil.copy(MINI, data)
    args = [a if not a.startswith("data.path=") else f"data.path={data}" for a in draft_args(tmp_path)]
    assert run_cli(args, env()).returncode == 0
    out = tmp_path / "sheets"
    assert run_cli(["review", "criteria", str(tmp_path / "drafts.jsonl"), "experts=a", f"out={out}"], env()).returncode == 0
    fill(out / "criteria-a.csv", ["accept"] * 6)
    data.write_text(data.read_text(encoding="utf-8").replace("mq01aa", "mq01zz"), encoding="utf-8")
    res = run_cli(["review", "merge", str(out / "criteria-a.csv"), "rule=all"], env())
    assert res.returncode == 2 and "changed since the criteria were drafted" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "drafts.jsonl", "drafts.report.json", "mine.jsonl",
                                                          "sheets"]


def test_a_reply_outside_the_taxonomy_is_reasked_naming_the_problem(tmp_path: Path) -> None:
    def once_wrong(body: dict[str, Any]) -> Reply:
        if len(body["messages"]) == 1:
            return Reply(text=json.dumps({"criteria": [{**GOOD, "group": "Empathy"}]}))
        return Reply(text=json.dumps({"criteria": [GOOD]}, ensure_ascii=False))

    with FakeServer(once_wrong) as srv:
        res = run_cli([*draft_args(tmp_path, srv=srv)[:-3], "ids=mq01aa", "drafter=openai/fake-model",
                       f"api_base={srv.url}", "api_key_env=FAKE_KEY"], env())
        assert res.returncode == 0, res.stderr
        assert len(srv.requests) == 2 and "group 'Empathy' is not a group of the taxonomy" in srv.requests[1]["messages"][-1]["content"]
    assert [d["text"] for d in rows(tmp_path / "drafts.jsonl")] == [GOOD["text"]]


def test_references_and_preference_pairs_reach_the_default_prompt(tmp_path: Path) -> None:
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"id": "mq01aa", "reference": "EXPERT REPLY"}) + "\n"
                    + json.dumps({"id": "mq01aa", "chosen": "BETTER REPLY", "rejected": "WORSE REPLY"}) + "\n",
                    encoding="utf-8")
    with FakeServer(handler) as srv:
        res = run_cli([*draft_args(tmp_path, srv=srv), "ids=mq01aa", f"references={refs}"], env())
        assert res.returncode == 0, res.stderr
        prompt = srv.requests[0]["messages"][0]["content"]
    assert all(x in prompt for x in ("EXPERT REPLY", "A better reply:\nBETTER REPLY", "A worse reply:\nWORSE REPLY"))
    refs.write_text('{"reference": "no id"}\n', encoding="utf-8")
    res = run_cli([*draft_args(tmp_path), f"references={refs}"], env())
    assert res.returncode == 2 and "a row needs an id" in res.stderr and len(res.stderr.strip().splitlines()) == 1
