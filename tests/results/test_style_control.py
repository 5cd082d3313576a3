"""Style and length control through the console script: two Arena-Hard runs judged by tests/fakeserver.py,
where `longwinded` wins mostly by writing longer replies and `concise` is the better model at equal length.

The raw Bradley-Terry ranking puts longwinded first; `leaderboard ... style_control=true` puts concise first, and
its numbers equal the covariate fit restated here on the stored replies (Arena-Hard's features) and solved by
scikit-learn. `length_control=true` gives each run's score at the common mean reply length, checked against
numpy's least squares on the same (length, score) points read from samples.jsonl.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from conftest import DATA, EXE, model_args
from fakeserver import FakeServer, Reply

N = 40
QID = re.compile(r"PROMPT\[(\w+)\]")


def replies(model: str) -> dict[str, str]:
    """longwinded: long replies on 24 of 40 questions; concise: always short. Some bold, unrelated to winning."""
    out = {}
    for i in range(N):
        long = model == "longwinded" and i < 24
        body = ("More detail on every aspect of the question. " * (30 if long else 1)) + (" **note**" if i % 3 else "")
        out[f"q{i:02d}"] = f"{model.upper()}[q{i:02d}] {body}"
    return out


def wins(model: str, i: int) -> bool:
    """longwinded: 21 of its 24 long replies win, 3 of its 16 short ones; concise: 20 of 40."""
    if model == "longwinded":
        return i % 8 != 0 if i < 24 else i % 5 == 0
    return i % 2 == 0


def judge(body: dict[str, Any]) -> Reply:
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    qid = QID.search(prompt).group(1)  # type: ignore[union-attr]
    model = "longwinded" if "LONGWINDED[" in prompt else "concise"
    cand_first = prompt.index(f"{model.upper()}[") < prompt.index("BASE[")
    won = wins(model, int(qid[1:]))
    label = ("A>B" if cand_first else "B>A") if won else ("B>A" if cand_first else "A>B")
    return Reply(text=f"Weighing both.\n\nMy final verdict is [[{label}]].")


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=300)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def features(samples: list[dict[str, Any]]) -> np.ndarray:
    """Arena-Hard's style features restated: characters, headers, list items, bold (code removed), as
    (cand - base) / (cand + base + 1), standardised; columns without spread dropped."""
    def counts(t: str) -> list[int]:
        prose = re.sub(r"```[^`]*```", "", t)
        return [len(t), len(re.findall(r"^#{1,6}\s", prose, re.M)),
                len(re.findall(r"^\s*(\d+\.|[-*+])\s", prose, re.M)),
                len(re.findall(r"\*\*[^*\n]+\*\*", prose)) + len(re.findall(r"__[^_\n]+__", prose))]
    a = np.array([counts(s["response"]) for s in samples], dtype=float)
    b = np.array([counts(s["baseline_response"]) for s in samples], dtype=float)
    d = (a - b) / (a + b + 1)
    keep = d.std(axis=0) > 0
    return (d[:, keep] - d[:, keep].mean(axis=0)) / d[:, keep].std(axis=0)


@pytest.mark.slow
def test_style_control_reorders_a_length_win(tmp_path: Path, env: dict[str, str]) -> None:
    ids = [f"q{i:02d}" for i in range(N)]
    data = write_jsonl(tmp_path / "questions.jsonl", [{"uid": q, "category": "hard_prompt", "subcategory": "s",
                                                        "prompt": f"PROMPT[{q}] please answer"} for q in ids])
    base = write_jsonl(tmp_path / "base.jsonl", [{"uid": q, "response": f"BASE[{q}] the baseline's reply here."}
                                                 for q in ids])
    runs = []
    with FakeServer(judge) as srv:
        for model in ("longwinded", "concise"):
            answers = write_jsonl(tmp_path / f"{model}.jsonl",
                                  [{"uid": q, "response": r} for q, r in replies(model).items()])
            out = tmp_path / "runs" / model
            res = cli(["benchmark=arena_hard", f"data.path={data}", "stage=score", f"answers={answers}",
                       f"baseline.answers={base}", "judge=openai_compatible", "judge.model=openai/judge-x",
                       f"judge.api_base={srv.url}", "judge.api_key_env=FAKE_KEY", "progress=none",
                       f"cache.dir={tmp_path / 'cache'}", f"hydra.run.dir={out}"], env)
            assert res.returncode == 0, res.stderr
            runs.append(out)
    lb_dir = tmp_path / "lb"
    res = cli(["leaderboard", *map(str, runs), f"out={lb_dir}", "style_control=true", "length_control=true",
               "bootstrap.samples=200"], env)
    assert res.returncode == 0, res.stderr
    lb = json.loads((lb_dir / "leaderboard.json").read_text())
    raw = [x["label"] for x in lb["bradley_terry"]["ratings"] if not x["baseline"]]
    sc = lb["style_control"]
    controlled = [x["label"] for x in sc["ratings"] if not x["baseline"]]
    assert raw == ["longwinded", "concise"] and controlled == ["concise", "longwinded"]
    assert sc["features"] == ["length", "bold"]  # no headers or lists anywhere: no spread, no column

    # the reference: the same design from the stored records, fitted by scikit-learn (no intercept, no penalty)
    samples = {m: [json.loads(x) for x in (d / "samples.jsonl").read_text().splitlines()]
               for m, d in zip(("longwinded", "concise"), runs)}
    both = samples["longwinded"] + samples["concise"]
    z = features(both)
    x = np.zeros((len(both), 2 + z.shape[1]))
    x[: N, 0] = x[N:, 1] = math.log(10)
    x[:, 2:] = z
    y = np.array([s["score"] for s in both])
    lr = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-12, max_iter=100_000)
    lr.fit(np.vstack([x, x]), np.r_[np.ones(len(y)), np.zeros(len(y))], sample_weight=np.r_[y, 1 - y])
    by = {r["label"]: r for r in sc["ratings"]}
    assert by["longwinded"]["rating"] == pytest.approx(1000 + 400 * lr.coef_[0][0], abs=1e-3)
    assert by["concise"]["rating"] == pytest.approx(1000 + 400 * lr.coef_[0][1], abs=1e-3)
    coefs = {c["feature"]: c for c in sc["coefficients"]}
    assert [coefs[f]["coef"] for f in sc["features"]] == pytest.approx(list(lr.coef_[0][2:]), abs=1e-5)
    assert coefs["length"]["coef"] > 0 and coefs["length"]["lo"] > 0  # longer wins, and surely so
    for r in sc["ratings"]:
        assert r["lo"] <= r["rating"] <= r["hi"]
        assert r["raw_rating"] == next(b["rating"] for b in lb["bradley_terry"]["ratings"] if b["label"] == r["label"])

    # length control: numpy least squares on the stored (length, score) points, one intercept per run
    pts = [(k, len(s["response"]), s["score"]) for k, m in enumerate(("longwinded", "concise")) for s in samples[m]]
    lengths = np.array([p[1] for p in pts], dtype=float) / 1000
    design = np.zeros((len(pts), 3))
    design[np.arange(len(pts)), [p[0] for p in pts]] = 1
    design[:, 2] = lengths - lengths.mean()
    beta = np.linalg.lstsq(design, np.array([p[2] for p in pts]), rcond=None)[0]
    lc = lb["length_control"]
    rows = {r["label"]: r for r in lc["rows"]}
    assert rows["longwinded"]["adjusted"] == pytest.approx(100 * beta[0], abs=1e-9)
    assert rows["concise"]["adjusted"] == pytest.approx(100 * beta[1], abs=1e-9)
    assert lc["slope"] == pytest.approx(100 * beta[2], abs=1e-9) and lc["slope_lo"] < lc["slope"] < lc["slope_hi"]
    assert rows["longwinded"]["raw"] == pytest.approx(60.0) and rows["concise"]["raw"] == pytest.approx(50.0)
    assert [r["label"] for r in lc["rows"]] == ["concise", "longwinded"]

    md = (lb_dir / "leaderboard.md").read_text()
    assert "Style-controlled Bradley-Terry" in md and "Style coefficients" in md and "Length-adjusted" in md
    assert "Style-controlled Bradley-Terry" in res.stdout
    assert "Style-controlled Bradley-Terry" in (lb_dir / "report.html").read_text()

    # a record without the baseline's reply: left out of the controlled fit and counted, never guessed
    path = runs[1] / "samples.jsonl"
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    first["baseline_response"] = None
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    res = cli(["leaderboard", *map(str, runs), f"out={tmp_path / 'lb2'}", "style_control=true",
               "bootstrap.samples=50"], env)
    assert res.returncode == 0, res.stderr
    assert "style_control: 1 scored question(s) without both replies in the record are left out" in res.stderr
    again = json.loads((tmp_path / "lb2" / "leaderboard.json").read_text())["style_control"]
    assert again["games"] == 2 * N - 1 and again["left_out"] == 1


LIKERT = DATA / "likert_mini"
PROMPTS = [json.loads(x)["prompt"] for x in (LIKERT / "likert_mini.jsonl").read_text().splitlines()]
WORDS = {"wordy": [20, 40, 60, 80, 100, 120], "terse": [2, 4, 6, 8, 10, 12]}
RATING = {"wordy": [1, 2, 3, 3, 4, 5], "terse": [2, 3, 2, 3, 2, 3]}
MARK = re.compile(r"(WORDY|TERSE)#(\d)")


def likert_server(body: dict[str, Any]) -> Reply:
    """Candidates: a marked reply whose length depends on model and question; judge: the scripted rating."""
    text = "\n".join(str(m["content"]) for m in body["messages"])
    if body["model"] != "judge":
        i = next(i for i, p in enumerate(PROMPTS) if p in text)
        return Reply(text=f"{body['model'].upper()}#{i} " + "word " * WORDS[body["model"]][i])
    model, i = MARK.search(text).groups()  # type: ignore[union-attr]
    return Reply(text=json.dumps({"why": "ok", "rating": RATING[model.lower()][int(i)]}))


@pytest.mark.slow
def test_length_control_on_score_runs(tmp_path: Path, env: dict[str, str]) -> None:
    runs = []
    with FakeServer(likert_server) as srv:
        for model in ("wordy", "terse"):
            out = tmp_path / "runs" / model
            res = cli([f"benchmark={LIKERT}", *model_args(srv.url, candidate=model), "progress=none",
                       f"cache.dir={tmp_path / 'cache'}", f"hydra.run.dir={out}"], env)
            assert res.returncode == 0, res.stderr
            runs.append(out)
    lb_dir = tmp_path / "lb"
    res = cli(["leaderboard", *map(str, runs), f"out={lb_dir}", "length_control=true", "style_control=true",
               "bootstrap.samples=200"], env)
    assert res.returncode == 0, res.stderr
    lb = json.loads((lb_dir / "leaderboard.json").read_text())
    assert "style_control" not in lb and "style_control=true: no style-controlled ranking" in res.stderr
    samples = [[json.loads(x) for x in (d / "samples.jsonl").read_text().splitlines()] for d in runs]
    x = np.array([len(s["response"]) for ss in samples for s in ss], dtype=float) / 1000
    y = np.array([s["score"] for ss in samples for s in ss])
    design = np.zeros((len(x), 3))
    design[:6, 0] = design[6:, 1] = 1
    design[:, 2] = x - x.mean()
    beta = np.linalg.lstsq(design, y, rcond=None)[0]
    lc = lb["length_control"]
    rows = {r["label"]: r for r in lc["rows"]}
    # scores on a scale are shown on the judge's own scale (1-5): no multiplier
    assert rows["wordy"]["adjusted"] == pytest.approx(beta[0], abs=1e-9)
    assert rows["terse"]["adjusted"] == pytest.approx(beta[1], abs=1e-9)
    assert lc["slope"] == pytest.approx(beta[2], abs=1e-9) and lc["slope"] > 0
    raw = {r["label"]: r["overall"] for r in lb["rows"]}
    assert rows["wordy"]["raw"] == pytest.approx(raw["wordy"]) and rows["terse"]["raw"] == pytest.approx(raw["terse"])
    assert raw["wordy"] > raw["terse"] and rows["terse"]["adjusted"] > rows["wordy"]["adjusted"]
    assert "Length-adjusted scores" in res.stdout
