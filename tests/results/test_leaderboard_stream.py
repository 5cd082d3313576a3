"""The leaderboard streams samples.jsonl into compact per-question scores (issue 15) with the same numbers.

Before, every record of every run was held in memory for the whole leaderboard; now `runs.load_run`
reads samples.jsonl once, line by line, keeping only ScoredQuestions and (reply length, score) pairs,
and the HTML drill-down streams each run again while it is written. The reference here is the old
path written out: read every record, `scored_from_samples`, `bootstrap_stats` and `paired_difference`
on the full lists, the length points from the records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_leaderboard import DIMS, make_run, make_sweep

from rubric_engine.report.html_page import _drilldown, _question
from rubric_engine.shapes.registry import stored_shape
from rubric_engine.report.leaderboard import _length_points, write_leaderboard
from rubric_engine.results.leaderboard import build_leaderboard
from rubric_engine.scoring.aggregate import scored_from_samples
from rubric_engine.scoring.question import Aggregation
from rubric_engine.stats.bootstrap import bootstrap_stats, paired_difference
from rubric_engine.record.codec import decode
from rubric_engine.store.runs import collect_runs

N_BOOT, SEED = 300, 5


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]


def test_streamed_leaderboard_has_the_numbers_of_the_full_records(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path / "sweep")
    lb = build_leaderboard(collect_runs([sweep]), n_boot=N_BOOT, seed=SEED)
    how = Aggregation()
    full = {r.run_dir: scored_from_samples(records(Path(r.run_dir))) for r in lb.rows}
    for r in lb.rows:
        ref = bootstrap_stats(full[r.run_dir], DIMS, n=N_BOOT, seed=SEED, how=how)
        assert (r.ci_lo, r.ci_hi) == (ref["lo"], ref["hi"])
        assert r.scored == full[r.run_dir]
        pts = [(float(len(s["response"])), s["score"] * 100.0) for s in records(Path(r.run_dir))
               if s["score"] is not None and isinstance(s.get("response"), str)]
        xs, ys, _ = _length_points(r, 100.0)
        assert list(zip(xs, ys)) == pts and pts
    for p, (a, b) in zip(lb.pairs, zip(lb.rows, lb.rows[1:])):
        ref = paired_difference(full[a.run_dir], full[b.run_dir], DIMS, n=N_BOOT, seed=SEED, how=how)
        assert (p.diff, p.lo, p.hi, p.questions) == (ref["diff"], ref["lo"], ref["hi"], ref["questions"])


def test_no_run_holds_its_records_while_ranking_and_writing(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path / "sweep")
    runs = collect_runs([sweep])
    lb = build_leaderboard(runs, n_boot=50)
    write_leaderboard(lb, tmp_path / "out")
    # `samples` is a cached property: present in a run's __dict__ only once something read every record
    assert all("samples" not in vars(run) for run in runs)
    assert [run.records for run in runs] == [len(records(run.dir)) for run in runs]


def test_streamed_drilldown_equals_the_one_from_full_records(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "r", "model-a", 0.6, judge_errors=(2,), candidate_errors=(5,))
    lb = build_leaderboard(collect_runs([run_dir]), n_boot=20)
    row = lb.rows[0]
    html = _drilldown(lb, row, {})
    full = records(run_dir)
    assert html.count('<details class="q') == len(full) and f"{len(full)} questions" in html
    shape = stored_shape(row.run.spec, str(run_dir / "spec.resolved.json"))
    assert "".join(_question(decode(s), lb, shape) for s in full) in html  # each record as the codec reads it


def test_a_record_that_is_no_score_is_named_when_ranked_and_every_line_is_still_checked(tmp_path: Path) -> None:
    import pytest

    from rubric_engine.errors import DataError

    run_dir = make_run(tmp_path / "r", "model-a", 0.6)
    lines = (run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    bad = json.loads(lines[0])
    bad["abilities"] = "not a mapping"
    (run_dir / "samples.jsonl").write_text("\n".join([json.dumps(bad), *lines[1:], "{oops"]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"samples\.jsonl:{len(lines) + 1}: not valid JSON"):
        collect_runs([run_dir])  # the broken last line is found although record 1 already failed to score
    (run_dir / "samples.jsonl").write_text("\n".join([json.dumps(bad), *lines[1:]]) + "\n", encoding="utf-8")
    runs = collect_runs([run_dir])
    with pytest.raises(DataError, match=r"samples\.jsonl: .*sample record 1"):
        build_leaderboard(runs, n_boot=20)
