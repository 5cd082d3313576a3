"""`rubric-engine localize`: structure kept, failures reported, resumable after a kill, review applied."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import EXE, MINI, sigkill
from fakeserver import FakeServer, Reply
from rubric_engine.authoring.localize import TranslationError, check_translation
from rubric_engine.cli.localize import localize_command, parse_options
from rubric_engine.errors import ConfigError, DataError

from conftest import REPO as ROOT
DATA = MINI  # the project's own HeartBench-shaped file: runs on a bare clone
SOURCE = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()[:5]]
IDS = [r["question_id"] for r in SOURCE]
PREFIX = "Translate and adapt into English:\n"


def payload(body: dict[str, Any]) -> dict[str, Any]:
    """The question the translator was sent (the JSON block of the first user message)."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return json.loads(user[len(PREFIX):user.index("\n\nAnswer with")])


def translator(drop: set[str] = frozenset()) -> Callable[[dict[str, Any]], Reply]:
    """A scripted model: 'EN: ' + every text; for ids in `drop`, always one criterion short."""
    def handle(body: dict[str, Any]) -> Reply:
        p = payload(body)
        crits = [f"EN: {c['text']}" for c in p["criteria"]]
        if p["id"] in drop:
            crits = crits[:-1]
        return Reply(text=json.dumps({"turns": [f"EN: {t['text']}" for t in p["turns"]], "criteria": crits},
                                     ensure_ascii=False))
    return handle


def args(srv: FakeServer, tmp_path: Path, *extra: str) -> list[str]:
    return ["source=heartbench", "target=heartbench_xx", "locale=en", "model=openai/fake-model",
            f"api_base={srv.url}", "api_key_env=FAKE_KEY", f"data.path={DATA}", "limit=5",
            f"out={tmp_path / 'out'}", f"cache.dir={tmp_path / 'cache'}", f"benchmark_dirs={ROOT / 'benchmarks'}",
            *extra]


def requested(srv: FakeServer) -> list[str]:
    return [payload(b)["id"] for b in srv.requests]


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_structure_is_kept(tmp_path: Path, fake_key: str) -> None:
    with FakeServer(translator()) as srv:
        assert localize_command(args(srv, tmp_path)) == 0
        assert sorted(requested(srv)) == sorted(IDS)
    out = rows_of(tmp_path / "out" / "heartbench_xx.jsonl")
    assert [r["question_id"] for r in out] == IDS
    for src, new in zip(SOURCE, out):
        assert list(new) == list(src)
        for key in ("difficulty", "primary_scene", "secondary_scene"):
            assert new[key] == src[key]
        assert [t["role"] for t in new["dialogue"]] == [t["role"] for t in src["dialogue"]]
        assert [t["content"] for t in new["dialogue"]] == [f"EN: {t['content']}" for t in src["dialogue"]]
        assert [(i["dimension"], i["score"]) for i in new["rubric"]] == [(i["dimension"], i["score"]) for i in src["rubric"]]
        assert [i["content"] for i in new["rubric"]] == [f"EN: {i['content']}" for i in src["rubric"]]
    report = json.loads((tmp_path / "out" / "localize_report.json").read_text(encoding="utf-8"))
    assert (report["questions"], report["translated"], report["failed"], report["failures"]) == (5, 5, 0, [])
    assert report["calls"]["cost"] is None  # the fake model has no price: unknown, not a partial sum of $0
    assert (report["calls"]["calls"], report["calls"]["requests"], report["calls"]["rejected"]) == (5, 5, 0)
    with open(tmp_path / "out" / "review.csv", encoding="utf-8-sig", newline="") as fh:
        table = list(csv.reader(fh))
    assert table[0] == ["id", "kind", "index", "source", "translation"]
    assert len(table) - 1 == sum(len(r["dialogue"]) + len(r["rubric"]) for r in SOURCE)
    assert "sk-test" not in json.dumps(report)


def test_dropped_criterion_is_reported_not_written(tmp_path: Path, fake_key: str, capsys: Any) -> None:
    bad = IDS[2]
    with FakeServer(translator({bad})) as srv:
        assert localize_command(args(srv, tmp_path)) == 1
        assert requested(srv).count(bad) == 2  # the first answer plus one re-ask
        reask = [b for b in srv.requests if payload(b)["id"] == bad][1]["messages"][-1]["content"]
        n = len(SOURCE[2]["rubric"])
        assert f"'criteria' has {n - 1} items, expected exactly {n}" in reask
        printed = capsys.readouterr().out
        assert f"FAILED: 1 question(s), not written: {bad}" in printed
        report = json.loads((tmp_path / "out" / "localize_report.json").read_text(encoding="utf-8"))
        assert report["failed"] == 1 and [f["id"] for f in report["failures"]] == [bad]
        assert "invalid translation" in report["failures"][0]["error"]
        assert [r["question_id"] for r in rows_of(tmp_path / "out" / "heartbench_xx.jsonl")] == [i for i in IDS if i != bad]
        # rerun with a fixed model: only the failed question is asked again (its bad answers were never cached)
        srv.handler = translator()
        srv.reset()
        assert localize_command(args(srv, tmp_path)) == 0
        assert requested(srv) == [bad]
    assert len(rows_of(tmp_path / "out" / "heartbench_xx.jsonl")) == 5


def test_reask_repairs_and_is_remembered(tmp_path: Path, fake_key: str) -> None:
    """A first answer one criterion short is re-asked; the repaired result is not paid for again on rerun."""
    good, short = translator(), translator({IDS[1]})

    def handle(body: dict[str, Any]) -> Reply:
        return good(body) if len(body["messages"]) > 2 else short(body)

    with FakeServer(handle) as srv:
        assert localize_command(args(srv, tmp_path)) == 0
        assert requested(srv).count(IDS[1]) == 2 and len(srv.requests) == 6
        srv.reset()
        assert localize_command(args(srv, tmp_path)) == 0
        assert srv.requests == []
    assert len(rows_of(tmp_path / "out" / "heartbench_xx.jsonl")) == 5


def test_console_script_reasks_then_resumes_after_kill_paying_nothing_twice(tmp_path: Path) -> None:
    """Through the console script: a malformed translation is re-asked and repaired, SIGKILL mid-run, rerun:
    the server never sees a question again whose translation had completed, the re-asked one included."""
    good, short = translator(), translator({IDS[1]})

    def first_run(body: dict[str, Any]) -> Reply:
        if payload(body)["id"] in IDS[3:]:
            return Reply(text="", delay=60)  # these two hang until the kill
        return good(body) if len(body["messages"]) > 2 else short(body)  # IDS[1]: one criterion short, once

    env = dict(os.environ, FAKE_KEY="sk-test")
    exe = [EXE, "localize"]  # the console script under test
    log = tmp_path / "first_run.log"
    with FakeServer(first_run) as srv, open(log, "w", encoding="utf-8") as err:
        proc = subprocess.Popen([*exe, *args(srv, tmp_path, "concurrency=5")], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 120  # the progress line is printed after the reply is in the cache
        while f"{IDS[1]} ok" not in log.read_text(encoding="utf-8") and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text(encoding="utf-8")
            time.sleep(0.05)
        sigkill(proc)
        assert sorted(requested(srv)) == sorted(IDS + [IDS[1]]), log.read_text(encoding="utf-8")
        n = len(SOURCE[1]["rubric"])
        reask = next(b["messages"] for b in srv.requests if len(b["messages"]) > 2)
        assert payload({"messages": reask})["id"] == IDS[1] and len(reask) == 4
        assert f"'criteria' has {n - 1} items, expected exactly {n}" in reask[-1]["content"]
        assert not (tmp_path / "out" / "heartbench_xx.jsonl").exists()  # nothing is written before the end
        srv.handler = translator()  # same server (api_base is part of the cache key), now answering everything
        srv.reset()
        res = subprocess.run([*exe, *args(srv, tmp_path, "concurrency=5")], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        assert sorted(requested(srv)) == sorted(IDS[3:])  # the re-asked IDS[1] came from the cache too
        assert all(f"{q} ok (cached)" in res.stderr for q in IDS[:3])
        assert "translated 5/5 question(s)" in res.stdout
        srv.reset()
        again = subprocess.run([*exe, *args(srv, tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=300)
        assert again.returncode == 0, again.stderr
        assert srv.requests == []  # a third run pays for nothing
    out = rows_of(tmp_path / "out" / "heartbench_xx.jsonl")
    assert [r["question_id"] for r in out] == IDS
    assert [i["content"] for i in out[1]["rubric"]] == [f"EN: {i['content']}" for i in SOURCE[1]["rubric"]]
    report = json.loads((tmp_path / "out" / "localize_report.json").read_text(encoding="utf-8"))
    assert (report["translated"], report["failed"], report["calls"]["cache_hits"]) == (5, 0, 5)


def test_review_is_applied_and_validated(tmp_path: Path, fake_key: str, capsys: Any) -> None:
    with FakeServer(translator()) as srv:
        assert localize_command(args(srv, tmp_path)) == 0
    review = tmp_path / "out" / "review.csv"
    with open(review, encoding="utf-8-sig", newline="") as fh:
        table = list(csv.reader(fh))
    table[1][4] = "Edited by a human reviewer"
    crit = next(r for r in table[1:] if r[1] == "criterion" and r[2] == "2")
    crit[4] = "A reviewed criterion"
    edited = tmp_path / "edited.csv"
    with open(edited, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(table)
    base = ["source=heartbench", "target=heartbench_xx", f"out={tmp_path / 'out'}", f"benchmark_dirs={ROOT / 'benchmarks'}"]
    assert localize_command([*base, f"review={edited}"]) == 0
    assert "2 text(s) changed" in capsys.readouterr().out
    rows = {r["question_id"]: r for r in rows_of(tmp_path / "out" / "heartbench_xx.jsonl")}
    assert rows[table[1][0]]["dialogue"][0]["content"] == "Edited by a human reviewer"
    assert rows[crit[0]]["rubric"][1]["content"] == "A reviewed criterion"
    assert rows[crit[0]]["rubric"][1]["score"] == SOURCE[IDS.index(crit[0])]["rubric"][1]["score"]

    table[3][0] = "NOPE42"
    with open(edited, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(table)
    with pytest.raises(DataError, match=rf"{edited}:4: id 'NOPE42' is not in heartbench_xx.jsonl"):
        localize_command([*base, f"review={edited}"])
    table[3][0], table[3][2] = table[2][0], "99"
    with open(edited, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(table)
    with pytest.raises(DataError, match="index '99' out of range"):
        localize_command([*base, f"review={edited}"])


def test_rerun_keeps_an_edited_review_csv(tmp_path: Path, fake_key: str) -> None:
    with FakeServer(translator()) as srv:
        assert localize_command(args(srv, tmp_path)) == 0
        review = tmp_path / "out" / "review.csv"
        review.write_text(review.read_text(encoding="utf-8-sig") + "\n", encoding="utf-8")
        edited = review.read_bytes()
        assert localize_command(args(srv, tmp_path)) == 0
        assert len(srv.requests) == 5  # the second run came from the cache
    assert review.read_bytes() == edited and (tmp_path / "out" / "review.new.csv").is_file()


@pytest.mark.parametrize("argv, message", [
    (["source=heartbench", "target=x", "locale=en"], "missing model="),
    (["source=heartbench", "target=x", "locale=en", "model=openai/m", "colour=red"], "unknown key 'colour'"),
    (["source=heartbench", "target=x", "locale=en", "model=openai/m", "limit=many"], "limit='many'"),
    (["source=heartbench", "target=a/b", "locale=en", "model=openai/m"], "must be a benchmark name"),
    (["heartbench"], "is not key=value"),
])
def test_bad_arguments(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_options(argv)


def test_parse_defaults() -> None:
    o = parse_options(["source=s", "target=t", "locale=en", "model=openai/m", "ids=[a,b]", "concurrency=3"])
    assert o.ids == ["a", "b"] and o.concurrency == 3 and o.out == Path("localized") / "t" and o.review is None


def test_check_translation() -> None:
    assert check_translation('```json\n{"turns": ["a"], "criteria": ["b", "c"]}\n```', 1, 2) == (["a"], ["b", "c"])
    assert check_translation('Sure: {"turns": [{"text": "a"}], "criteria": ["b"]}', 1, 1) == (["a"], ["b"])
    for text, msg in [("no json", "not a JSON object"), ('{"turns": ["a"]}', "'criteria' is missing"),
                      ('{"turns": ["a"], "criteria": []}', "'criteria' has 0 items, expected exactly 1"),
                      ('{"turns": [""], "criteria": ["b"]}', r"turns\[1\] is not a non-empty string"),
                      ('[1]', "not a JSON object")]:
        with pytest.raises(TranslationError, match=msg):
            check_translation(text, 1, 1)
