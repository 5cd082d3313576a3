"""`rubric-engine items` end to end: a Hydra sweep of the console script (4 candidates x 4 samples on the
shipped English sample) against tests/fakeserver.py, with a scripted judge that plants dead, saturated and
non-discriminating criteria; the command must recover exactly the flags the script implies, point its
hard set at the questions the script made hard, and show human disagreement where a rater was planted
to dispute a criterion."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, QuestionScript, clean_env, read_rows, run_cli
from fakeserver import FakeServer, Reply

SAMPLE = REPO / "data" / "heartbench_en_sample.jsonl"
ROWS, BY_ID = read_rows(SAMPLE)
STRENGTH = {"c_top": 0.9, "c_good": 0.7, "c_fair": 0.45, "c_low": 0.2}
SAMPLES = 4
DEAD = {("enq001", 1), ("enq004", 2)}
SATURATED = {("enq002", 2), ("enq007", 3)}
FLAT = {("enq005", 1), ("enq008", 1)}  # met by samples 0 and 1 of every model, never by 2 and 3
DISPUTED = ("enq010", 2)  # the planted human rater always says the opposite of the judge here
HARD = {r["question_id"] for r in ROWS if r["difficulty"] == "hard"}
REPLY_RE = re.compile(r"REPLY\[(\w+)\|(\w+)\|(\d+)\]")


def u(*parts: Any) -> float:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:12], 16) / 16 ** 12


def met(qid: str, i: int, cand: str, k: int) -> bool:
    """The judge's verdict on item i (1-based) of qid for cand's k-th sample: the simulation's truth."""
    if (qid, i) in DEAD:
        return False
    if (qid, i) in SATURATED:
        return True
    if (qid, i) in FLAT:
        return k < 2
    item = BY_ID[qid]["rubric"][i - 1]
    if item["score"] is None:  # the failure rule never fires
        return False
    s = STRENGTH[cand] - (0.35 if qid in HARD else 0.0)  # hard questions are hard for every model
    return u(qid, i, cand) < s if item["score"] > 0 else u(qid, i, cand) > s + 0.3


class Script(QuestionScript):
    judges = frozenset({"judge"})

    def __init__(self) -> None:
        super().__init__(ROWS)
        self.count: Counter = Counter()
        self.lock = threading.Lock()

    def judge(self, model: str, text: str) -> Reply:
        qid, cand, k = REPLY_RE.search(text).groups()  # type: ignore[union-attr]
        return self.verdict(len(BY_ID[qid]["rubric"]), lambda i: met(qid, i, cand, int(k)))

    def candidate(self, model: str, qid: str) -> Reply:
        with self.lock:  # the K samples of one question are K calls: number them
            k = self.count[(model, qid)]
            self.count[(model, qid)] += 1
        return Reply(text=f"REPLY[{qid}|{model}|{k % SAMPLES}] I hear you.", usage=(30, 10))


def _entry(name: str, url: str) -> str:
    return f"name: {name}\nmodel: openai/{name}\napi_base: {url}\napi_key_env: FAKE_KEY\nparams: {{}}\n"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("items")
    env = clean_env(tmp)
    env["RUBRIC_ENGINE_CONFIG_DIRS"] = str(tmp / "conf")
    with FakeServer(Script()) as srv:
        for group, names in (("candidate", STRENGTH), ("judge", ["judge"])):
            (tmp / "conf" / group).mkdir(parents=True)
            for name in names:
                (tmp / "conf" / group / f"{name}.yaml").write_text(_entry(name, srv.url), encoding="utf-8")
        res = run_cli(["-m", "benchmark=heartbench_en", "progress=none", "bootstrap.samples=20",
                       f"candidate.samples={SAMPLES}", f"hydra.sweep.dir={tmp / 'sweep'}",
                       f"candidate={','.join(STRENGTH)}", "judge=judge"], env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return {"tmp": tmp, "env": env, "sweep": tmp / "sweep"}


def _labels(sweep: Path, out: Path) -> Path:
    """A labels CSV: one rater agreeing with the judge everywhere except on DISPUTED."""
    rows = []
    for samples in sweep.glob("*/samples.jsonl"):
        for line in samples.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if rec["id"] not in ("enq010", "enq011"):
                continue
            rid = hashlib.sha256(rec["response"].encode()).hexdigest()[:10]
            for c in rec["criteria"]:
                hit = bool(c["hit"])
                rows.append({"question_id": rec["id"], "criterion_index": c["index"],
                             "item_key": f"{rec['id']}#{c['index']}@{rid}", "rater": "ann",
                             "met": int(hit != ((rec["id"], c["index"]) == DISPUTED))})
    path = out / "labels.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_items_recovers_planted_criteria_and_hard_set(sweep: dict[str, Any]) -> None:
    out = sweep["tmp"] / "items"
    labels = _labels(sweep["sweep"], sweep["tmp"])
    res = run_cli(["items", str(sweep["sweep"]), f"out={out}", "hard=0.33", f"labels={labels}", "n_boot=200"],
                  sweep["env"])
    assert res.returncode == 0, res.stderr
    assert "carry no signal" in res.stdout and "hard_set.ids" in res.stdout
    with (out / "items.csv").open(encoding="utf-8") as f:
        rows = {(r["question"], int(r["criterion_index"])): r for r in csv.DictReader(f)}
    assert len(rows) == sum(len(r["rubric"]) for r in ROWS)
    for (qid, i), r in rows.items():  # every flag is the one the simulation implies, none more, none less
        rate = sum(met(qid, i, c, k) for c in STRENGTH for k in range(SAMPLES)) / (len(STRENGTH) * SAMPLES)
        assert float(r["pass_rate"]) == pytest.approx(rate), (qid, i)
        assert int(r["replies"]) == len(STRENGTH) * SAMPLES
        want = "saturated" if rate >= 0.95 else ("dead" if rate <= 0.05 else "")
        assert r["flag"] == want, (qid, i, rate)
    assert all(rows[k]["flag"] == "dead" for k in DEAD) and all(rows[k]["flag"] == "saturated" for k in SATURATED)
    for k in FLAT:  # met half the time by every model: no flag, but no signal either
        assert rows[k]["flag"] == "" and rows[k]["no_signal"] == "True" and float(rows[k]["model_spread"]) == 0
        assert float(rows[k]["discrimination_r"]) == pytest.approx(0, abs=1e-9)
    assert float(rows[DISPUTED]["human_disagreement"]) == 1.0
    assert all(float(r["human_disagreement"]) == 0 for k, r in rows.items() if r["human_units"] != "0" and k != DISPUTED)
    assert int(rows[DISPUTED]["review_rank"]) <= 2 + len(DEAD | SATURATED | FLAT) + sum(
        r["no_signal"] == "True" for r in rows.values())
    # the hard set: hard questions are 0.35 harder for every model, so the proposal finds them
    ids = re.fullmatch(r"ids=\[(.*)\]\n", (out / "hard_set.ids").read_text(encoding="utf-8")).group(1).split(",")  # type: ignore[union-attr]
    assert len(ids) == 5 and len(set(ids) & HARD) >= 4
    data = json.loads((out / "items.json").read_text(encoding="utf-8"))
    (hard_row,) = [r for r in data["hard_compare"] if r["subset"] == "hard"]
    assert hard_row["overlap"] == len(set(ids) & HARD)
    assert hard_row["jaccard"] == pytest.approx(len(set(ids) & HARD) / len(set(ids) | HARD))
    assert all(v > 0 for v in hard_row["decay_published"].values())
    md = (out / "items.md").read_text(encoding="utf-8")
    assert md.startswith("# Rubric items: heartbench_en\n\n") and "## Proposed hard set (hard=0.33)" in md
    html = (out / "items.html").read_text(encoding="utf-8")
    assert "<table>" in html and "<script" not in html.lower()
    # the proposal runs: its override selects exactly those questions
    run = run_cli(["benchmark=heartbench_en", "candidate=mock", "judge=mock", "progress=none",
                   f"hydra.run.dir={sweep['tmp'] / 'hardrun'}", (out / "hard_set.ids").read_text().strip()], sweep["env"])
    assert run.returncode == 0, run.stderr
    done = [json.loads(x)["id"] for x in (sweep["tmp"] / "hardrun" / "samples.jsonl").read_text().splitlines()]
    assert sorted(done) == sorted(ids)


def test_items_errors_are_one_line(sweep: dict[str, Any]) -> None:
    res = run_cli(["items", str(sweep["sweep"]), "hard=1.5"], sweep["env"])
    assert res.returncode == 2 and "hard=1.5 is not a fraction" in res.stderr and "Traceback" not in res.stderr
    res = run_cli(["items", str(sweep["tmp"] / "nowhere")], sweep["env"])
    assert res.returncode == 2 and "not a directory" in res.stderr
    res = run_cli(["items", "--help"], sweep["env"])
    assert res.returncode == 0 and "hard=" in res.stdout and "review-first" in res.stdout


def test_report_html_shows_the_items_section(sweep: dict[str, Any]) -> None:
    res = run_cli(["items", str(sweep["sweep"]), "n_boot=50"], sweep["env"])  # default out=: SWEEP/items
    assert res.returncode == 0, res.stderr
    assert (sweep["sweep"] / "items" / "items.json").is_file()
    res = run_cli(["leaderboard", str(sweep["sweep"]), "bootstrap.samples=20"], sweep["env"])
    assert res.returncode == 0, res.stderr
    page = (sweep["sweep"] / "report.html").read_text(encoding="utf-8")
    assert "<h2>Rubric items</h2>" in page and "carry no signal" in page
    assert page.count("<h2>Rubric items</h2>") == 1


def test_report_section_of_a_broken_items_json_is_one_warning(tmp_path: Path) -> None:
    from rubric_engine.report.items_view import items_section, load_items_section

    bad = tmp_path / "items.json"
    bad.write_text("{not json", encoding="utf-8")
    assert 'class="warn"' in load_items_section(bad) and "unreadable" in load_items_section(bad)
    bad.write_text('{"criteria": 3}', encoding="utf-8")
    assert "not an items.json" in load_items_section(bad)
    page = items_section({"summary": "<b>x</b>", "criteria": [{"qid": "q<1>", "index": 1, "text": "<script>", "replies": 2}]})
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;x" in page


class Jury(QuestionScript):
    """Two jurors grading every reply twice: j1 flips between its gradings on (enq001, 1); j2 always says
    not met on (enq001, 2), where j1 says met; every other verdict is met."""

    judges = frozenset({"j1", "j2"})

    def __init__(self) -> None:
        super().__init__(ROWS)
        self.arrival: Counter = Counter()
        self.lock = threading.Lock()

    def judge(self, model: str, text: str) -> Reply:
        qid = re.search(r"ANSWER\[(\w+)\]", text).group(1)  # type: ignore[union-attr]
        with self.lock:
            n = self.arrival[(model, qid)]
            self.arrival[(model, qid)] += 1

        def met(i: int) -> bool:
            if (qid, i) == ("enq001", 1) and model == "j1":
                return n % 2 == 0
            return not ((qid, i) == ("enq001", 2) and model == "j2")

        return self.verdict(len(BY_ID[qid]["rubric"]), met)


def test_flip_rate_and_juror_disagreement_from_a_jury_with_repeats(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    ids = ["enq001", "enq002"]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"question_id": q, "response": f"ANSWER[{q}]"}) + "\n" for q in ids))
    with FakeServer(Jury()) as srv:
        jurors = ",".join(f"{{name:{j},model:openai/{j},api_base:'{srv.url}',api_key_env:FAKE_KEY}}" for j in ("j1", "j2"))
        res = run_cli(["benchmark=heartbench_en", "stage=score", f"answers={answers}", "progress=none",
                       f"hydra.run.dir={tmp_path / 'run'}", f"judge=[{jurors}]", "judge.repeats=2"], env)
    assert res.returncode == 0, res.stderr[-2000:]
    res = run_cli(["items", str(tmp_path / "run"), "n_boot=20"], env)
    assert res.returncode == 0, res.stderr
    assert "one model" in res.stderr  # a single candidate: said, not hidden
    assert "13 repl(y/ies) with a candidate or judge error" in res.stderr  # the questions without an answer
    assert "1 judged replies (median): its rates and flags are weak evidence" in res.stderr
    with (tmp_path / "run" / "items" / "items.csv").open(encoding="utf-8") as f:
        rows = {(r["question"], int(r["criterion_index"])): r for r in csv.DictReader(f)}
    assert (rows[("enq001", 1)]["flip_rate"], rows[("enq001", 1)]["flip_units"]) == ("0.5", "2")  # j1 of 2 jurors
    assert rows[("enq001", 1)]["juror_disagreement"] == "1.0"  # j1's 1-1 tie is not met, j2 says met
    assert (rows[("enq001", 2)]["flip_rate"], rows[("enq001", 2)]["juror_disagreement"]) == ("0.0", "1.0")
    others = [r for k, r in rows.items() if k not in {("enq001", 1), ("enq001", 2)} and k[0] in ids]
    assert others and all(r["flip_rate"] == "0.0" and r["juror_disagreement"] == "0.0" for r in others)
    assert all(r["replies"] == "0" and r["pass_rate"] == "" for k, r in rows.items() if k[0] not in ids)  # no number
    ranked = sorted((r for r in rows.values() if r["replies"] != "0"), key=lambda r: int(r["review_rank"]))
    assert {(r["question"], int(r["criterion_index"])) for r in ranked[:2]} == {("enq001", 1), ("enq001", 2)}


def test_a_failed_job_of_the_sweep_is_named(sweep: dict[str, Any], tmp_path: Path) -> None:
    import shutil

    one = next(p.parent for p in sorted(sweep["sweep"].glob("*/summary.json")))
    shutil.copytree(one, tmp_path / "sw" / "0_ok")
    (tmp_path / "sw" / "1_failed" / ".hydra").mkdir(parents=True)
    (tmp_path / "sw" / "1_failed" / "error.txt").write_text("rubric-engine: error: no key\n", encoding="utf-8")
    res = run_cli(["items", str(tmp_path / "sw"), "n_boot=10"], sweep["env"])
    assert res.returncode == 0, res.stderr
    assert "1_failed: run failed, left out (rubric-engine: error: no key)" in res.stderr
    assert "run failed" in (tmp_path / "sw" / "items" / "items.md").read_text(encoding="utf-8")
