"""Leaderboard from stored run dirs: numbers equal the runs' summaries, intervals, files, errors.

The synthetic run dirs are built with the real scoring and aggregation code, so samples.jsonl,
summary.json and spec.resolved.json agree with each other exactly as a real run's would.
`make_run` / `SPEC` are also used by test_html_report.py.
"""

from __future__ import annotations

import csv
import json
import random
import statistics
import struct
from xml.etree import ElementTree
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

import pytest

from rubric_engine.cli.mains import leaderboard_main
from rubric_engine.dataset.load import Criterion
from rubric_engine.errors import ConfigError, DataError
from rubric_engine.report.leaderboard import leaderboard_command, write_leaderboard
from rubric_engine.results.leaderboard import build_leaderboard, compare
from rubric_engine.scoring.aggregate import aggregate, scored_from_samples
from rubric_engine.scoring.question import score_question
from rubric_engine.store.runs import collect_runs

SPEC: dict[str, Any] = {
    "name": "toybench",
    "version": "0.3",
    "locale": "fr",
    "data": {"format": "jsonl", "subsets": ["normal", "hard"]},
    "taxonomy": {
        "dimensions": [
            {"id": "mind", "labels": {"en": "Mind", "fr": "Esprit"}, "abilities": [
                {"id": "warmth", "labels": {"en": "Warmth", "fr": "Chaleur"}, "data_labels": ["chaleur"]},
                {"id": "curiosity", "labels": {"en": "Curiosity", "fr": "Curiosité"}, "data_labels": ["curiosité"]},
            ]},
            {"id": "heart", "labels": {"en": "Heart", "fr": "Cœur"}, "abilities": [
                {"id": "coping", "labels": {"en": "Coping", "fr": "Adaptation"}, "data_labels": ["adaptation"]},
                {"id": "humor", "labels": {"en": "Humor", "fr": "Humour"}, "data_labels": ["humour"]},
                {"id": "morality", "labels": {"en": "Morality", "fr": "Morale"}, "data_labels": ["morale"]},
            ]},
        ]
    },
    "failure_rules": [{"id": "role_confusion", "labels": {"en": "Role confusion"}, "data_labels": ["autre"],
                       "effect": "zero_question", "fires_when": "hit"}],
    "scoring": {"formula": "log_normalised", "params": {}, "scale": 100},
    "report": {"subsets": {"normal": {"en": "Normal", "fr": "Normal"}, "hard": {"en": "Hard", "fr": "Difficile"}},
               "decay": {"from": "normal", "to": "hard", "base": "hard"},
               "scenarios": {"croissance": {"en": "Growth"}, "travail": {"en": "Work"}}},
}
DIMS = {"mind": ["warmth", "curiosity"], "heart": ["coping", "humor", "morality"]}
ABILITIES = [a for v in DIMS.values() for a in v]
RULES = [SimpleNamespace(id="role_confusion", effect="zero_question", fires_when="hit")]
N_QUESTIONS = 18


def _criteria(i: int) -> list[Criterion]:
    """3 abilities per question (rotating), weights +3/+2/-2 each, plus one role-confusion item."""
    out: list[Criterion] = []
    for k in range(3):
        ability = ABILITIES[(i + k) % len(ABILITIES)]
        for w in (3, 2, -2):
            out.append(Criterion(index=len(out) + 1, label=ability, weight=w, text=f"{ability} item {w:+d}",
                                 ability=ability))
    out.append(Criterion(index=len(out) + 1, label="autre", weight=None, text="speaks as the user",
                         rule="role_confusion"))
    return out


def make_samples(p: float, seed: str, judge_errors: Sequence[int] = (), candidate_errors: Sequence[int] = (),
                 catastrophic: Sequence[int] = (), response: str = "Réponse") -> list[dict[str, Any]]:
    """Per-question records as the runner writes them; quality p = chance of meeting a good item."""
    samples = []
    for i in range(N_QUESTIONS):
        qid = f"q{i:02d}"
        crits = _criteria(i)
        rng = random.Random(f"{seed}-{qid}")
        hits = [(i in catastrophic) if c.rule else (rng.random() < p if c.weight > 0 else rng.random() > p)
                for c in crits]
        rec: dict[str, Any] = {
            "id": qid, "subset": "hard" if i % 3 == 0 else "normal",
            "scenario": "croissance" if i % 2 else "travail",
            "response": f"{response} {qid}", "candidate_error": None, "judge_error": None,
            "criteria": [{"index": c.index, "label": c.label, "ability": c.ability, "rule": c.rule,
                          "weight": c.weight, "text": c.text, "reasoning": f"because {c.index}", "hit": h}
                         for c, h in zip(crits, hits)],
            "tokens": {"candidate": {"prompt": 50, "completion": 20}, "judge": {"prompt": 400, "completion": 90}},
            "cost": {"candidate": 0.001, "judge": 0.004}, "cache_hits": {"candidate": 0, "judge": 0},
        }
        if i in candidate_errors:
            rec.update(response=None, candidate_error="HTTP 500 after 5 attempts", criteria=[], abilities={},
                       score=None, failed_rules=[], catastrophic=False)
        elif i in judge_errors:
            rec.update(judge_error="3 verdicts for 10 criteria", judge_raw=['{"criteria": [1, 2, 3]}'],
                       abilities={}, score=None, failed_rules=[], catastrophic=False)
            for c in rec["criteria"]:
                c.update(reasoning=None, hit=None)
        else:
            qs = score_question(crits, hits, "log_normalised", {}, RULES)
            rec.update(abilities={a: {"raw": s.raw, "lo": s.lo, "hi": s.hi, "score": s.score}
                                  for a, s in qs.abilities.items()},
                       score=qs.score, failed_rules=list(qs.failed_rules), catastrophic=qs.catastrophic)
        samples.append(rec)
    return samples


def make_run(run_dir: Path, candidate: str, p: float, *, judge: str = "judge-x", seed: str | None = None,
             benchmark: str = "toybench", **kw: Any) -> Path:
    """Write samples.jsonl, summary.json (from aggregate()) and spec.resolved.json into run_dir."""
    samples = make_samples(p, seed or candidate, **kw)
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "samples.jsonl").open("w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps(s, ensure_ascii=False) + "\n")
    agg = aggregate(scored_from_samples(samples), DIMS, decay=("normal", "hard", "hard"))
    summary = {
        "schema_version": 1, "benchmark": benchmark, "benchmark_version": "0.3", "data_sha256": "ab" * 32,
        "candidate": {"name": candidate, "model": f"openai/{candidate}"}, "judge": {"name": judge, "model": "openai/j"},
        **agg,
        "counts": {"questions": len(samples), "scored": sum(s["score"] is not None for s in samples),
                   "judge_errors": sum(bool(s["judge_error"]) for s in samples),
                   "candidate_errors": sum(bool(s["candidate_error"]) for s in samples),
                   "catastrophic": sum(bool(s.get("catastrophic")) for s in samples)},
        "tokens": {"candidate": {"prompt": 900, "completion": 360}, "judge": {"prompt": 7200, "completion": 1620}},
        "cost": {"candidate": 0.018, "judge": None}, "created": "2026-11-22T06:00:00+00:00", "stage": "full",
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, ensure_ascii=False), encoding="utf-8")
    (run_dir / "spec.resolved.json").write_text(json.dumps({**SPEC, "name": benchmark}, ensure_ascii=False),
                                                encoding="utf-8")
    return run_dir


def make_sweep(root: Path) -> Path:
    """Three runs as a multirun sweep lays them out (numbered job dirs, a hidden .hydra dir)."""
    make_run(root / "0", "model-c", 0.25, judge_errors=(4,), candidate_errors=(7,), catastrophic=(1,))
    make_run(root / "1", "model-a", 0.85)
    make_run(root / "2", "model-b", 0.55, catastrophic=(2,))
    (root / ".hydra").mkdir()
    (root / ".hydra" / "summary.json").write_text("{not json", encoding="utf-8")  # hidden dirs are not runs
    (root / "multirun.yaml").write_text("x: 1\n", encoding="utf-8")
    return root


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return make_sweep(tmp_path / "sweep")


def _summary(row: Any) -> dict[str, Any]:
    return json.loads((Path(row.run_dir) / "summary.json").read_text(encoding="utf-8"))


def reference(run_dir: Path) -> dict[str, Any]:
    """The headline numbers recomputed from samples.jsonl alone, without aggregate(): per-ability means over
    the scored questions, dimension = mean of its ability means, overall = mean of all ability means."""
    rows = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    scored = [r for r in rows if r["score"] is not None]

    def macro(qs: list[dict[str, Any]], abilities: Sequence[str]) -> float | None:
        means = [statistics.fmean(q["abilities"][a]["score"] for q in qs if a in q["abilities"])
                 for a in abilities if any(a in q["abilities"] for q in qs)]
        return 100 * statistics.fmean(means) if means else None

    return {"overall": macro(scored, ABILITIES),
            "abilities": {a: macro(scored, [a]) for a in ABILITIES},
            "dimensions": {d: macro(scored, abilities) for d, abilities in DIMS.items()},
            "subsets": {s: macro([q for q in scored if q["subset"] == s], ABILITIES) for s in ("hard", "normal")},
            "scored": scored}


def test_order_and_numbers_equal_an_independent_computation(sweep: Path) -> None:
    lb = build_leaderboard(collect_runs([sweep]), n_boot=200)
    assert [r.label for r in lb.rows] == ["model-a", "model-b", "model-c"]
    assert [r.rank for r in lb.rows] == [1, 2, 3]
    overalls = [r.overall for r in lb.rows]
    assert overalls == sorted(overalls, reverse=True)
    for row in lb.rows:
        ref, s = reference(Path(row.run_dir)), _summary(row)
        assert row.overall == pytest.approx(ref["overall"], abs=1e-9)
        assert row.abilities == pytest.approx(ref["abilities"], abs=1e-9)
        assert row.dimensions == pytest.approx(ref["dimensions"], abs=1e-9)
        assert row.subsets == pytest.approx(ref["subsets"], abs=1e-9)
        hard, normal = ref["subsets"]["hard"], ref["subsets"]["normal"]
        assert row.decay_pct == pytest.approx((normal - hard) / hard * 100, abs=1e-9) and row.decay_base == "hard"
        assert row.counts == s["counts"] and row.scenarios == s["scenarios"]
        assert row.judge == "judge-x" and row.candidate_model == f"openai/{row.candidate}"
        assert row.cost == {"candidate": 0.018, "judge": None, "total": None}  # never a partial sum
        assert row.cost_text() == "0.0180 + ?"
    c = lb.row("model-c")
    assert c.counts["judge_errors"] == 1 and c.counts["candidate_errors"] == 1 and c.counts["scored"] == N_QUESTIONS - 2
    assert c.counts["catastrophic"] == 1
    assert any("model-c" in w and "judge errors" in w for w in lb.warnings)
    assert lb.taxonomy.labels["warmth"] == "Warmth"  # English labels from spec.resolved.json


def test_interval_is_the_bootstrap_percentile_interval_and_reproducible(sweep: Path) -> None:
    runs = collect_runs([sweep])
    lb = build_leaderboard(runs, n_boot=300, seed=7)
    for row in lb.rows:
        scored = reference(Path(row.run_dir))["scored"]
        rng = random.Random(7)  # resample the scored questions, recompute the macro mean, take 2.5% / 97.5%
        values = []
        for _ in range(300):
            draw = [scored[i] for i in rng.choices(range(len(scored)), k=len(scored))]
            means = [statistics.fmean(q["abilities"][a]["score"] for q in draw if a in q["abilities"])
                     for a in ABILITIES if any(a in q["abilities"] for q in draw)]
            values.append(100 * statistics.fmean(means))
        cuts = statistics.quantiles(values, n=40, method="inclusive")
        assert row.ci_lo == pytest.approx(cuts[0], abs=1e-9) and row.ci_hi == pytest.approx(cuts[-1], abs=1e-9)
    again = build_leaderboard(runs, n_boot=300, seed=7)
    assert [(r.ci_lo, r.ci_hi) for r in again.rows] == [(r.ci_lo, r.ci_hi) for r in lb.rows]


def test_adjacent_pairs_and_any_pair(sweep: Path) -> None:
    lb = build_leaderboard(collect_runs([sweep]), n_boot=300)
    assert [(p.a, p.b) for p in lb.pairs] == [("model-a", "model-b"), ("model-b", "model-c")]
    for p, (ra, rb) in zip(lb.pairs, zip(lb.rows, lb.rows[1:])):
        assert p.error is None and p.lo <= p.diff <= p.hi
    p = compare(lb, "model-a", "model-c")
    assert p.questions == N_QUESTIONS - 2  # only questions scored for both
    assert p.diff > 0 and p.excludes_zero == (p.lo > 0 or p.hi < 0)
    with pytest.raises(ConfigError, match="no leaderboard row named 'nope'"):
        compare(lb, "nope", "model-a")


def test_identical_runs_have_exactly_zero_paired_difference(tmp_path: Path) -> None:
    make_run(tmp_path / "x", "twin-1", 0.6, seed="same")
    make_run(tmp_path / "y", "twin-2", 0.6, seed="same")
    lb = build_leaderboard(collect_runs([tmp_path / "x", tmp_path / "y"]), n_boot=200)
    (p,) = lb.pairs
    assert (p.diff, p.lo, p.hi, p.excludes_zero, p.questions) == (0.0, 0.0, 0.0, False, N_QUESTIONS)
    assert lb.rows[0].overall == lb.rows[1].overall


def test_same_candidate_and_judge_twice_keeps_both_rows(tmp_path: Path) -> None:
    make_run(tmp_path / "monday", "model-a", 0.7)
    make_run(tmp_path / "tuesday", "model-a", 0.7, seed="other")
    make_run(tmp_path / "other-judge", "model-a", 0.7, judge="judge-y")
    lb = build_leaderboard(collect_runs([tmp_path]), n_boot=50)
    labels = sorted(r.label for r in lb.rows)
    # two judges: each label names its judge too (the tables show `name` beside a Judge column)
    assert labels == ["model-a [judge judge-y]", "model-a [monday] [judge judge-x]", "model-a [tuesday] [judge judge-x]"]
    assert sorted(r.name for r in lb.rows) == ["model-a", "model-a [monday]", "model-a [tuesday]"]


def test_files_written_and_consistent(sweep: Path, tmp_path: Path) -> None:
    lb = build_leaderboard(collect_runs([sweep]), n_boot=200)
    files = write_leaderboard(lb, tmp_path / "out")
    names = sorted(p.name for p in files.values())
    assert names == sorted(["leaderboard.json", "leaderboard.csv", "leaderboard.md", "radar.png", "radar.svg", "length.png", "length.svg",
                            "subsets.png", "subsets.svg", "report.html"])
    html_text = files["html"].read_text(encoding="utf-8")
    assert html_text.lstrip().lower().startswith("<!doctype html") and html_text.rstrip().endswith("</html>")
    assert all(f">{row.label}<" in html_text and f"{row.overall:.2f}" in html_text for row in lb.rows)
    for name in ("radar.svg", "subsets.svg"):
        root = ElementTree.parse(tmp_path / "out" / name).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg" and len(root.iter().__next__()) > 0
    for name in ("radar.png", "subsets.png"):
        head = (tmp_path / "out" / name).read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        w, h = struct.unpack(">II", head[16:24])
        assert w > 300 and h > 200
    assert "<svg" in (tmp_path / "out" / "radar.svg").read_text(encoding="utf-8")

    data = json.loads(files["json"].read_text(encoding="utf-8"))
    assert data["benchmark"] == "toybench" and data["bootstrap"]["n"] == 200
    assert "hierarchical" not in data["bootstrap"]["method"]  # plain runs: questions only
    assert data["decay"] == {"from": "normal", "to": "hard", "base": "hard"}
    with files["csv"].open(encoding="utf-8", newline="") as fh:
        records = list(csv.DictReader(fh))
    md = files["md"].read_text(encoding="utf-8")
    md_rows = [line for line in md.splitlines() if line.startswith("| ") and line[2:3].isdigit()]
    assert len(data["rows"]) == len(records) == len(md_rows) == 3
    for jr, cr, mr, row in zip(data["rows"], records, md_rows, lb.rows):
        assert jr["label"] == cr["label"] == row.label and f"| {row.label} |" in mr
        assert jr["rank"] == int(cr["rank"]) == row.rank
        assert jr["overall"] == pytest.approx(float(cr["overall"])) == pytest.approx(row.overall)
        assert f"| {row.overall:.2f} |" in mr and f"[{row.ci_lo:.2f}, {row.ci_hi:.2f}]" in mr
        for d in DIMS:
            assert float(cr[f"dim.{d}"]) == pytest.approx(jr["dimensions"][d])
        for s in ("normal", "hard"):
            assert float(cr[f"subset.{s}"]) == pytest.approx(jr["subsets"][s])
        assert float(cr["decay_pct"]) == pytest.approx(jr["decay_pct"])
        assert int(cr["judge_errors"]) == jr["counts"]["judge_errors"]
        assert cr["cost_judge"] == "" and jr["cost"]["judge"] is None  # unknown cost stays unknown
    assert "Decay % = (normal - hard) / hard x 100 (base: hard)." in md
    assert [tuple(p.values())[:2] for p in data["pairs"]] == [("model-a", "model-b"), ("model-b", "model-c")]


def test_print_and_leaderboard_command(sweep: Path) -> None:
    from rich.console import Console

    console = Console(record=True, width=80)  # a CI log's width: both tables must stay readable
    errors = Console(record=True, width=80)
    lb, files = leaderboard_command([sweep], n_boot=50, console=console, errors=errors)
    text = console.export_text()
    for label in ("judge: judge-x", "model-a", "model-b", "model-c", "Mind", "Heart", "Normal", "Hard", "Decay %",
                  "(base: hard)", "model-a - model-b:", "0.0180 + ?"):
        assert label in text, label
    assert "warning:" not in text and "warning: model-c" in errors.export_text()  # warnings: stderr's console
    for row in lb.rows:  # every number fits: nothing cropped at 80 columns
        assert f"[{row.ci_lo:.2f}, {row.ci_hi:.2f}]" in text and f"{row.dimensions['heart']:.2f}" in text
    assert files["html"] == sweep / "report.html"  # one dir: written where the end-of-sweep callback writes
    # the written leaderboard files are not mistaken for a run when the sweep is ranked again
    assert len(collect_runs([sweep])) == 3


def test_leaderboard_main_arguments(sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert leaderboard_main([str(sweep / "0"), str(sweep / "1"), f"out={tmp_path / 'o1'}", "bootstrap.samples=20"]) == 0
    html_text = (tmp_path / "o1" / "report.html").read_text(encoding="utf-8")
    assert ">model-a<" in html_text and ">model-c<" in html_text and ">model-b<" not in html_text
    assert leaderboard_main([str(sweep), f"out={tmp_path / 'o2'}", "bootstrap.samples=20", "bootstrap.seed=3"]) == 0
    data = json.loads((tmp_path / "o2" / "leaderboard.json").read_text(encoding="utf-8"))
    assert data["bootstrap"]["n"] == 20 and data["bootstrap"]["seed"] == 3 and len(data["rows"]) == 3
    with pytest.raises(ConfigError, match=r"missing DIR\.\.\.; usage: rubric-engine leaderboard DIR"):
        leaderboard_main([])
    with pytest.raises(ConfigError, match="bootstrap.samples must be at least 1"):
        leaderboard_main([str(sweep), "bootstrap.samples=0"])
    with pytest.raises(ConfigError, match="unknown option '--out'; write out=VALUE"):
        leaderboard_main([str(sweep), "--out", "x"])


def test_sweep_search_and_dedup(sweep: Path) -> None:
    runs = collect_runs([sweep, sweep / "1"])
    assert [r.dir.name for r in runs] == ["0", "1", "2"]


def test_failed_sweep_job_is_reported_not_dropped(sweep: Path) -> None:
    (sweep / "10").mkdir()
    (sweep / "10" / "error.txt").write_text("openai/x [HTTP 401]: bad key (after 1 attempt)\n", encoding="utf-8")
    from rich.console import Console

    console, errors = Console(record=True, width=200), Console(record=True, width=200)
    lb, _ = leaderboard_command([sweep], n_boot=20, console=console, errors=errors)
    assert len(lb.rows) == 3
    assert lb.warnings[0].endswith("10: run failed, not ranked (openai/x [HTTP 401]: bad key (after 1 attempt))")
    assert "run failed, not ranked" in errors.export_text() and "not ranked" not in console.export_text()


def test_dir_without_summary_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"empty: no summary\.json in this directory or below"):
        collect_runs([empty])
    with pytest.raises(ConfigError, match="not a directory"):
        collect_runs([tmp_path / "missing"])
    with pytest.raises(ConfigError, match="no directories given"):
        collect_runs([])


def test_corrupt_or_incomplete_run_names_the_file(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", "model-a", 0.5)
    (run / "summary.json").write_text('{"benchmark": "toybench", ', encoding="utf-8")
    with pytest.raises(DataError, match=r"r[/\\]summary\.json: not valid JSON"):
        collect_runs([run])
    run = make_run(tmp_path / "s", "model-a", 0.5)
    (run / "samples.jsonl").unlink()
    with pytest.raises(DataError, match=r"s[/\\]samples\.jsonl: missing"):
        collect_runs([run])
    run = make_run(tmp_path / "t", "model-a", 0.5)
    with (run / "samples.jsonl").open("a", encoding="utf-8") as fh:
        fh.write("{oops\n")
    with pytest.raises(DataError, match=rf"t[/\\]samples\.jsonl:{N_QUESTIONS + 1}: not valid JSON"):
        collect_runs([run])
    run = make_run(tmp_path / "u", "model-a", 0.5)
    (run / "summary.json").write_text('{"benchmark": "toybench"}', encoding="utf-8")
    with pytest.raises(DataError, match=r"u[/\\]summary\.json: missing key 'candidate'"):
        collect_runs([run])


def test_runs_of_different_benchmarks_are_refused(tmp_path: Path) -> None:
    make_run(tmp_path / "a", "model-a", 0.5)
    make_run(tmp_path / "b", "model-b", 0.5, benchmark="otherbench")
    with pytest.raises(ConfigError, match="different benchmarks.*otherbench"):
        collect_runs([tmp_path])


def test_stale_summary_is_reported(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", "model-a", 0.5)
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    summary["overall"] += 1.0
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    lb = build_leaderboard(collect_runs([run]), n_boot=20)
    assert any("differs from" in w and "re-score" in w for w in lb.warnings)


def test_run_with_no_scored_question_ranks_last_without_numbers(tmp_path: Path) -> None:
    make_run(tmp_path / "ok", "model-a", 0.6)
    make_run(tmp_path / "broken", "model-z", 0.6, judge_errors=tuple(range(N_QUESTIONS)))
    lb = build_leaderboard(collect_runs([tmp_path]), n_boot=20)
    last = lb.rows[-1]
    assert last.label == "model-z" and last.overall is None and last.ci_lo is None and last.ci_hi is None
    (p,) = lb.pairs
    assert p.diff is None and p.error and "no scored question in common" in p.error
    files = write_leaderboard(lb, tmp_path / "out")  # charts and report still render, with gaps
    assert "| 2 | model-z | judge-x | — | [—, —] |" in files["md"].read_text(encoding="utf-8")


def test_same_dir_names_in_two_sweeps_get_distinct_labels(tmp_path: Path) -> None:
    make_run(tmp_path / "sweep1" / "0", "model-a", 0.6)
    make_run(tmp_path / "sweep2" / "0", "model-a", 0.6, seed="x")
    lb = build_leaderboard(collect_runs([tmp_path / "sweep1", tmp_path / "sweep2"]), n_boot=20)
    assert sorted(r.label for r in lb.rows) == ["model-a [sweep1/0]", "model-a [sweep2/0]"]


def test_unknown_ability_in_samples_names_the_file(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", "model-a", 0.6)
    spec = json.loads((run / "spec.resolved.json").read_text(encoding="utf-8"))
    spec["taxonomy"]["dimensions"][1]["abilities"].pop()  # drop 'morality' from the stored taxonomy
    (run / "spec.resolved.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(DataError, match=r"r[/\\]samples\.jsonl: .*'morality'"):
        build_leaderboard(collect_runs([run]), n_boot=20)
