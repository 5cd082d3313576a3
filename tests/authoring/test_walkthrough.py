"""The walkthrough of docs/authoring.md (section 19) end to end through the console script: ten customer-support
dialogues (tests/data/walk_mini) grown into a released benchmark by `validate`, `draft` (mock, then a scripted
drafter on tests/fakeserver.py planting a duplicate, a compound, a vague and a malformed draft), `review
criteria` / `review merge`, `lint`, `filter`, a pilot sweep and `pilot`, `diff` and `release`. Each step's exit
code and the number the walkthrough quotes are checked here, so the document cannot drift from what runs."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path
from typing import Any

from conftest import DATA, clean_env, run_cli
from fakeserver import FakeServer, Reply
from test_draft_review import fill, rows
from test_gates_cli import _entry

SPEC = DATA / "walk_mini"
IDS = [f"s{i:02d}" for i in range(1, 11)]
MARK = re.compile(r"MODEL\[(\w+)\]")
ITEM = re.compile(r"^(\d+)\. \((-?\d+(?:\.\d+)?) points\) (.*)$", re.M)


def _c(text: str, group: str = "resolve", weight: int = 2, polarity: str = "positive") -> dict[str, Any]:
    return {"text": text, "weight": weight, "group": group, "polarity": polarity, "reason": "seen in the dialogue"}


BLAME = _c("Blames the customer for the problem", "acknowledge", 2, "pitfall")
DRAFTS: dict[str, Any] = {  # the scripted drafter's reply per question; the planted defects are marked
    "s01": {"criteria": [_c("Greets the customer", "acknowledge", 1), BLAME]},  # a greeting: no signal
    "s02": {"criteria": [_c("Gives the number of days the refund takes")] * 2},  # a duplicate
    "s03": {"criteria": [_c("Apologises for the soaked parcel and offers a replacement"), BLAME]},  # a compound
    "s04": "The address can usually be changed.",  # not the declared format: re-asked once, then counted
    "s05": {"criteria": [_c("Responds appropriately to the complaint", "acknowledge"), BLAME]},  # vague
    "s06": {"criteria": [_c("Greets the customer", "acknowledge", 1), _c("Opens a trace request")]},
    "s07": {"criteria": [_c("Offers express delivery"), BLAME]},
    "s08": {"criteria": [_c("Offers a refund or a replacement"), BLAME]},
    "s09": {"criteria": [_c("Gives the return deadline"), BLAME]},
    "s10": {"criteria": [_c("Offers a call back at a set time"), BLAME]},
}


def script(body: dict[str, Any]) -> Reply:
    """Drafter, candidates and judge in one: the judge meets a reward for the strong reply only and a penalty
    for the weak only, except "Greets ...", met by every reply (it separates nothing)."""
    text = "\n".join(str(m.get("content", "")) for m in body["messages"])
    if body["model"] == "drafter":
        got = DRAFTS[next(q for q in IDS if f"({q})" in text)]
        return Reply(text=got if isinstance(got, str) else json.dumps(got))
    if body["model"] != "judge":
        return Reply(text=f"MODEL[{body['model']}] I am sorry, let me sort this out.", usage=(30, 10))
    who = MARK.search(text).group(1)  # type: ignore[union-attr]
    verdicts = [{"id": int(i), "reasoning": "r", "met": t.startswith("Greets") or (who == "strong") == (float(w) > 0)}
                for i, w, t in ITEM.findall(text)]
    return Reply(text=json.dumps({"criteria": verdicts}), usage=(100, 50))


def _set(spec: Path, old: str, new: str) -> None:
    path = spec / "benchmark.yaml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_the_walkthrough_runs_end_to_end(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    env["RUBRIC_ENGINE_CONFIG_DIRS"] = str(tmp_path / "conf")
    env["FAKE_KEY"] = "sk-test"
    v1, v2 = tmp_path / "v1" / "walk_mini", tmp_path / "v2" / "walk_mini"
    shutil.copytree(SPEC, v1)
    cli = lambda *args: run_cli([str(a) for a in args], env)  # noqa: E731

    res = cli("validate", f"benchmark={v1}")
    assert res.returncode == 0 and "10 questions, 10 ability items" in res.stdout, res.stdout + res.stderr

    # 1. draft: keyless with mock, then with a drafting model (here the fake server)
    res = cli("draft", f"benchmark={v1}", "drafter=mock", "n=3", f"out={tmp_path / 'mock.jsonl'}",
              f"cache.dir={tmp_path / 'cache'}")
    assert res.returncode == 0 and "drafted 30 criteria for 10/10 question(s)" in res.stdout, res.stdout + res.stderr
    with FakeServer(script) as srv:
        for group, names in (("candidate", ("strong", "weak")), ("judge", ("judge", "drafter"))):
            (tmp_path / "conf" / group).mkdir(parents=True)
            for name in names:
                (tmp_path / "conf" / group / f"{name}.yaml").write_text(_entry(name, srv.url), encoding="utf-8")
        drafts = tmp_path / "drafts.jsonl"
        res = cli("draft", f"benchmark={v1}", "drafter=drafter", "n=3", f"out={drafts}",
                  f"cache.dir={tmp_path / 'cache'}")
        assert res.returncode == 2, res.stdout + res.stderr  # s04's reply was never in the declared format
        assert "1 question(s) got no reply in the declared format (s04)" in res.stderr, res.stderr
        assert "drafted 18 criteria for 9/10 question(s)" in res.stdout, res.stdout
        failed = [x for x in res.stdout.splitlines() if x.startswith("FAILED")]
        assert failed == ["FAILED s04: invalid draft after 2 replies: the answer is not a JSON object"], res.stdout
        assert len(rows(drafts)) == 18
        assert (v1 / "walk_mini.jsonl").read_bytes() == (SPEC / "walk_mini.jsonl").read_bytes()  # drafts stay out

        # 2. review: three experts, kept by majority
        sheets = tmp_path / "sheets"
        res = cli("review", "criteria", drafts, "experts=ana,ben,chen", f"out={sheets}")
        assert res.returncode == 0, res.stdout + res.stderr
        keys = [d["key"] for d in rows(drafts)]
        rejects = {"ana": set(), "ben": {"s05#1"}, "chen": {"s05#1", "s02#2"}}  # the vague one, one duplicate
        for name, out in rejects.items():
            fill(sheets / f"criteria-{name}.csv", ["reject" if k in out else "accept" for k in keys])
        merged = tmp_path / "walk_mini.v2.jsonl"
        expert_sheets = (sheets / f"criteria-{x}.csv" for x in rejects)
        res = cli("review", "merge", *expert_sheets, "rule=majority", f"into={merged}")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "kept 17/18 drafted criteria" in res.stdout
        # by hand: 50 of 54 expert pairs agree (s05#1 and s02#2 split 2-1); alpha 1 - (4/54) / (2*51*3/(54*53))
        assert "92.6% of expert pairs agree, Krippendorff's alpha 0.307" in res.stdout

        # 3. version 2 of the spec holds the merged data; lint it
        shutil.copytree(v1, v2)
        shutil.copy(merged, v2 / "walk_mini.jsonl")
        _set(v2, 'version: "1"', 'version: "2"')
        (v2 / "changelog.yaml").write_text(
            "versions:\n  - {version: 1, changes: [ten dialogues, one criterion each]}\n"
            "  - {version: 2, changes: [drafted criteria kept by review, lint and filter]}\n", encoding="utf-8")
        res = cli("lint", v2)
        assert res.returncode == 1 and res.stdout.splitlines() == [
            "s02 criterion 3: duplicate: same text as criterion 2",
            "s03 criterion 2: compound: 'and offers' joins two demands; split it into two criteria",
            "lint: 2 findings in walk_mini 2"], res.stdout + res.stderr
        fixed = []  # by hand, as the findings say: delete the duplicate, split the compound
        for row in rows(v2 / "walk_mini.jsonl"):
            if row["id"] == "s02":
                del row["rubric"][2]
            if row["id"] == "s03":
                row["rubric"][1:2] = [{**row["rubric"][1], "text": "Apologises for the soaked parcel"},
                                      {**row["rubric"][1], "text": "Offers a replacement for the soaked items"}]
            fixed.append(json.dumps(row) + "\n")
        (v2 / "walk_mini.jsonl").write_text("".join(fixed), encoding="utf-8")
        res = cli("lint", v2)
        assert res.returncode == 0 and res.stdout == "lint: 0 findings in walk_mini 2\n", res.stdout + res.stderr

        # 4. filter: keep what separates a strong from a weak reply
        pairs = tmp_path / "pairs.jsonl"
        pairs.write_text("".join(json.dumps({"id": q, "strong": "MODEL[strong] Sorry, I have opened a case.",
                                             "weak": "MODEL[weak] Not our fault."}) + "\n" for q in IDS), "utf-8")
        res = cli("filter", f"benchmark={v2}", f"pairs={pairs}", "judge=judge")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "kept 25, dropped 2 of 27 criteria from 10 pair(s); 20 judge call(s)" in res.stdout
        dropped = [x for x in res.stdout.splitlines() if x.startswith("dropped")]
        assert dropped == ["dropped s01#2: favours both replies", "dropped s06#2: favours both replies"]
        _set(v2, "path: walk_mini.jsonl", "path: walk_mini.filtered.jsonl")

        # 5. pilot: a sweep of a strong and a weak candidate, then the gate
        sweep = tmp_path / "sweep"
        res = run_cli(["-m", f"benchmark={v2}", "progress=none", "bootstrap.samples=20", f"hydra.sweep.dir={sweep}",
                       "candidate=strong,weak", "judge=judge"], env, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        res = cli("pilot", sweep, f"out={tmp_path / 'pilot'}")
    assert res.returncode == 0 and res.stdout.splitlines()[:4] == [
        "pass: discriminating criteria 100.0% (must be >= 50.0%)",
        "pass: saturated criteria 0.0% (must be <= 20.0%)",
        "pass: hard set found 100.0% (must be >= 100.0%)",
        f"proposed hard set: 3 questions -> {tmp_path / 'pilot' / 'hard_set.ids'}"], res.stdout + res.stderr

    # 6. diff: what changed between the versions, and how version 1's runs would score under version 2
    with FakeServer(script) as srv:
        for group, names in (("candidate", ("strong", "weak")), ("judge", ("judge",))):
            for name in names:
                (tmp_path / "conf" / group / f"{name}.yaml").write_text(_entry(name, srv.url), encoding="utf-8")
        res = run_cli(["-m", f"benchmark={v1}", "progress=none", "bootstrap.samples=20",
                       f"hydra.sweep.dir={tmp_path / 'sweep_v1'}", "hydra.sweep.subdir=${hydra.job.num}",
                       "candidate=strong,weak", "judge=judge"], env, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
    # `runs=` takes the sweep directory as pilot and release do (its runs named by job number above: hydra's
    # default names hold commas, which a runs=[a,b] list of single runs would split)
    res = cli("diff", v1, v2, f"runs={tmp_path / 'sweep_v1'}")
    for cand, score in (("strong", "100.00 -> 100.00 (+0.00)"), ("weak", "0.00 -> 0.00 (+0.00)")):
        line = next(x for x in res.stdout.splitlines() if x.startswith(f"  {cand} "))
        assert f": {score} over 1 question; not rescored: s01: criterion 2 added, no verdict;" in line, line
        fresh = next(sweep.glob(f"*candidate={cand}*")) / "samples.jsonl"  # version 2's own run of s04
        s04 = next(r for r in rows(fresh) if r["id"] == "s04")["score"]
        assert f"{100 * s04:.2f} (" in line
    assert res.returncode == 1 and res.stdout.splitlines()[-1] == "diff: walk_mini 1 -> walk_mini 2: 15 changes"
    assert res.stdout.count(": added: ") == 15 and "s06 criterion 2: added: 'Opens a trace request'" in res.stdout

    # 7. release: a blind sheet from the pilot runs, then the humans' labels against the declared 75%
    res = cli("release", f"benchmark={v2}", f"runs={sweep}", "n=20")
    assert res.returncode == 0 and "for version 2: 20 replies, 50 items" in res.stdout, res.stdout + res.stderr
    sheet = v2 / "release" / "2"
    with (sheet / "review.csv").open(encoding="utf-8-sig") as fh:  # the rater sees each question's dialogue
        assert all(row["dialogue"].strip() for row in csv.DictReader(fh))
    res = cli("release", f"benchmark={v2}", f"runs={sweep}", f"labels={_labels(sheet, tmp_path / 'l1.csv', 14)}")
    assert res.returncode == 1 and "release gate failed" in res.stdout and not (v2 / "RELEASE-2.md").exists()
    res = cli("release", f"benchmark={v2}", f"runs={sweep}", f"labels={_labels(sheet, tmp_path / 'l2.csv', 6)}")
    assert res.returncode == 0 and "release gate passed" in res.stdout, res.stdout + res.stderr
    assert "88.0%" in (v2 / "RELEASE-2.md").read_text(encoding="utf-8")


def _labels(sheet: Path, path: Path, wrong: int) -> Path:
    """One rater's labels of the release sheet: the judge's verdict, except on the first `wrong` items."""
    with (sheet / "review.csv").open(encoding="utf-8-sig") as fh:
        table = list(csv.DictReader(fh))
    for n, row in enumerate(table):
        who = MARK.search(row["reply"]).group(1)  # type: ignore[union-attr]
        judged = (who == "strong") == (float(row["weight"]) > 0)
        row.update(met=str(int(judged != (n < wrong))), rater="ann")
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.DictWriter(fh, fieldnames=list(table[0]))
        out.writeheader()
        out.writerows(table)
    return path
