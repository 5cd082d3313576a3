"""The walkthrough of docs/authoring.md (section 19) end to end through the console script: ten customer-support
dialogues (tests/data/walk_mini) grown into a released benchmark by `validate`, `draft` (mock, then a scripted
drafter on tests/fakeserver.py planting a duplicate, a compound, a vague and a malformed draft), `review
criteria` / `review merge`, `lint`, `filter`, a pilot sweep and `pilot`, `diff` and `release`. Each step's exit
code and the number the walkthrough quotes are checked here, so the document cannot drift from what runs."""

from __future__ import annotations

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
    verdicts = [{"id": int(i), "reasoning": "r",
                 "met": t.startswith("Greets") or (who == "strong") == (float(w) > 0)} for i, w, t in ITEM.findall(text)]
    return Reply(text=json.dumps({"criteria": verdicts}), usage=(100, 50))


def _set(spec: Path, old: str, new: str) -> None:
    path = spec / "benchmark.yaml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")


def _number(pattern: str, text: str) -> str:
    found = re.search(pattern, text)
    assert found, text
    return found.group(1)


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
        for group, names in (("candidate", ("strong", "weak")), ("judge", ("judge",)), ("drafter", ("drafter",))):
            (tmp_path / "conf" / group).mkdir(parents=True)
            for name in names:
                (tmp_path / "conf" / group / f"{name}.yaml").write_text(_entry(name, srv.url), encoding="utf-8")
        drafts = tmp_path / "drafts.jsonl"
        res = cli("draft", f"benchmark={v1}", f"drafter=openai/drafter", f"api_base={srv.url}",
                  "api_key_env=FAKE_KEY", "n=3", f"out={drafts}", f"cache.dir={tmp_path / 'cache'}")
        assert res.returncode == 1, res.stdout + res.stderr
        assert "drafted 18 criteria for 9/10 question(s)" in res.stdout, res.stdout
        assert [x for x in res.stdout.splitlines() if x.startswith("FAILED")][0].startswith("FAILED s04")
        assert len(rows(drafts)) == 18
        print("draft:", res.stdout)
