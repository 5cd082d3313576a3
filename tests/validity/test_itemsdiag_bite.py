"""`rubric-engine items` read from stored runs (validity/itemsdiag.py), in-process so the mutation tool sees it.

The rules its docstring and USAGE state: every judged reply of every run is read (a reply per sample when
candidate.samples > 1), a reply with a candidate or judge error or without verdicts is left out and counted;
a criterion's group is its ability, else `rule:<rule>`, else `unknown`; a criterion without an integer index is
one error naming the file; no judged reply at all is refused; one model, left-out replies, a median below
FEW_REPLIES judged replies per criterion, a short hard set and a spec without subsets are each one warning; the
hard set is compared with every declared subset (overlap, Jaccard, the declared decay on both sets). The run
directories are written by hand (summary.json, the resolved spec, samples.jsonl), asymmetric: model `a` meets
more criteria than `b`, and the two runs differ in what they skip. Statistics themselves are
stats/rubricitems.py's and stats/hardset.py's (their own bite tests).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.spec.load import load_spec
from rubric_engine.store.runs import RunRecord
from rubric_engine.validity.itemsdiag import FEW_REPLIES, ItemsResult, compute_items, read_replies

from conftest import DATA


def _crit(i: int, hit: Any, **kw: Any) -> dict[str, Any]:
    return {"index": i, "text": f"c{i}", "weight": 1, "hit": hit, **kw}


def _run(root: Path, model: str, records: list[dict[str, Any]], report: dict[str, Any] | None = None,
         data_subsets: list[str] | None = None) -> Path:
    spec = load_spec(DATA / "checks_mini")
    resolved = spec.resolved()
    if report is not None:
        resolved["report"] = {**(resolved.get("report") or {}), **report}
    if data_subsets is not None:
        resolved["data"]["subsets"] = data_subsets
    d = root / model
    d.mkdir(parents=True)
    (d / "spec.resolved.json").write_text(json.dumps(resolved), encoding="utf-8")
    (d / "summary.json").write_text(json.dumps({"benchmark": spec.name, "candidate": {"name": model},
                                                "judge": {"name": "j"}, "overall": 50.0, "counts": {}}),
                                    encoding="utf-8")
    (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return d


def _record(qid: str, hits: list[Any], score: Any = 0.5, subset: str | None = None, **kw: Any) -> dict[str, Any]:
    rec = {"id": qid, "score": score, "criteria": [_crit(i, h, ability="listen") for i, h in enumerate(hits, 1)], **kw}
    if subset is not None:
        rec["subset"] = subset
    return rec


def _record_run(tmp_path: Path, model: str, records: list[dict[str, Any]]) -> RunRecord:
    d = _run(tmp_path, model, records)
    return RunRecord(dir=d, summary=json.loads((d / "summary.json").read_text()), spec={})


def test_replies_per_sample_with_their_marks_scores_and_votes(tmp_path: Path) -> None:
    rec = {"id": 7, "subset": "hard", "score": 0.5,
           "criteria": [{"index": 1, "text": "Listens", "weight": 2.0, "hit": True, "ability": "listen",
                         "tags": ["t1", 3]},
                        {"index": 2, "text": "No harm", "weight": -1, "hit": False, "rule": "harm"},
                        {"index": 3, "weight": 1, "hit": None}],
           "samples": [{"score": 1, "criteria": [_crit(1, True, votes={"j1": True, "j2": False}), "junk",
                                                 _crit(2, False, votes=["not", "a", "dict"])]},
                       {"score": "n/a", "criteria": [_crit(1, False), _crit(3, True)]},
                       {"candidate_error": "boom", "criteria": [_crit(1, True)]},
                       {"judge_error": "bad verdict", "criteria": [_crit(1, True)]},
                       {"score": 0.0, "criteria": []}]}
    run = _record_run(tmp_path, "m1", [rec, {"id": "8", "criteria": []}])
    criteria, replies, subsets, skipped = read_replies([run])
    assert [(c.qid, c.index, c.text, c.weight, c.group, c.tags) for c in criteria] == [
        ("7", 1, "Listens", 2.0, "listen", ("t1", "3")), ("7", 2, "No harm", -1, "rule:harm", ()),
        ("7", 3, "", 1, "unknown", ())]
    # two usable samples; three left out (a candidate error, a judge error, no verdicts), plus record 8's own
    assert skipped == 4 and subsets == {"7": "hard", "8": ""}
    assert [(r.qid, r.model, r.score, r.hits, r.votes) for r in replies] == [
        ("7", "m1", 1.0, {1: True, 2: False}, {1: {"j1": True, "j2": False}}),
        ("7", "m1", None, {1: False, 3: True}, {})]


def test_a_record_without_samples_is_one_reply_and_the_first_criterion_text_wins(tmp_path: Path) -> None:
    a = _record_run(tmp_path / "a", "a", [_record("q1", [True, False], score=0.75, subset="s1")])
    b = _record_run(tmp_path / "b", "b", [{**_record("q1", [False, False], score=0, subset="s2"),
                                            "criteria": [_crit(1, False, ability="other", text="changed")]}])
    criteria, replies, subsets, skipped = read_replies([a, b])
    assert [(c.index, c.text, c.group) for c in criteria] == [(1, "c1", "listen"), (2, "c2", "listen")]
    assert subsets == {"q1": "s1"} and skipped == 0  # the first run's subset is kept
    assert [(r.model, r.score, r.hits) for r in replies] == [("a", 0.75, {1: True, 2: False}), ("b", 0.0, {1: False})]


@pytest.mark.parametrize("index", [None, "1", 1.0, True, "not an object"])
def test_a_criterion_without_an_integer_index_names_the_samples_file(tmp_path: Path, index: Any) -> None:
    c = index if index == "not an object" else {"index": index, "hit": True}
    run = _record_run(tmp_path, "m", [{"id": "q9", "criteria": [c]}])
    with pytest.raises(DataError) as e:
        read_replies([run])
    assert str(e.value) == (f"{run.dir / 'samples.jsonl'}: question q9: a criterion without an integer 'index'; "
                            "re-run or re-score this run directory")


def test_no_judged_reply_is_refused(tmp_path: Path) -> None:
    bad = [{"id": "q1", "candidate_error": "x", "criteria": [_crit(1, None)]}]
    _run(tmp_path, "a", bad)
    _run(tmp_path, "b", bad)
    with pytest.raises(ConfigError) as e:
        compute_items([tmp_path])
    assert str(e.value) == "items: no judged reply in 2 run(s) (every question failed); nothing to diagnose"


def _questions(n: int, hits_a: list[bool], hits_b: list[bool], subsets: list[str] | None = None,
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    a = [_record(f"q{i}", hits_a, score=sum(hits_a) / len(hits_a), subset=(subsets or [""] * n)[i]) for i in range(n)]
    b = [_record(f"q{i}", hits_b, score=sum(hits_b) / len(hits_b), subset=(subsets or [""] * n)[i]) for i in range(n)]
    return a, b


def test_the_result_s_counts_and_warnings(tmp_path: Path) -> None:
    a, b = _questions(3, [True, True], [True, False])
    b.append({"id": "q3", "judge_error": "unparsable", "criteria": [_crit(1, None)]})
    _run(tmp_path, "b", b)
    _run(tmp_path, "a", a)
    r = compute_items([tmp_path], n_boot=50, seed=1)
    assert isinstance(r, ItemsResult)
    assert r.benchmark == "checks_mini" and r.models == ["a", "b"] and r.replies == 6 and r.skipped == 1
    assert sorted(r.runs) == [str(tmp_path / "a"), str(tmp_path / "b")] and r.labels == [] and r.hard is None
    assert r.scale == 100.0 and len(r.criteria) == 7 and {q.qid for q in r.questions} == {"q0", "q1", "q2", "q3"}
    # each criterion judged twice (one reply per model): the median 2 is below FEW_REPLIES
    # q3 only failed: its criterion is listed (7 rows), judged by no reply
    assert r.warnings == ["1 repl(y/ies) with a candidate or judge error are left out",
                          f"a criterion has 2 judged replies (median): its rates and flags are weak evidence below "
                          f"{FEW_REPLIES}; add candidates, or candidate.samples=K replies per question"]
    assert r.to_dict()["schema_version"] == 1 and r.to_dict()["replies"] == 6


def test_one_model_is_a_warning(tmp_path: Path) -> None:
    a, _ = _questions(2, [True, False], [True])
    _run(tmp_path, "solo", a)
    r = compute_items([tmp_path], n_boot=20)
    assert r.warnings[0] == ("one model (solo): no per-model spread, question discrimination or group alpha; "
                             "run several candidates (a sweep: rubric-engine -m candidate=a,b,c ...)")


@pytest.mark.parametrize(("samples", "warned"), [(FEW_REPLIES - 1, True), (FEW_REPLIES, False)])
def test_the_few_replies_warning_is_below_ten_judged_replies_at_the_median(tmp_path: Path, samples: int,
                                                                           warned: bool) -> None:
    # two criteria judged `samples` times, two judged once: the median (index len // 2 of the sorted counts) decides
    def rec(qid: str, k: int) -> dict[str, Any]:
        return {"id": qid, "score": 0.5, "criteria": [_crit(1, None), _crit(2, None)],
                "samples": [{"score": 0.5, "criteria": [_crit(1, j % 2 == 0), _crit(2, j % 3 == 0)]}
                            for j in range(k)]}
    def one(qid: str) -> dict[str, Any]:
        return {"id": qid, "score": 0.5, "criteria": [_crit(1, True)],
                "samples": [{"score": 1.0, "criteria": [_crit(1, True)]}]}
    # judged replies per criterion, sorted: [1, 1, samples, samples]; the median is the upper middle (index 2)
    _run(tmp_path, "a", [rec("q0", samples), one("qs"), one("qt")])
    _run(tmp_path, "b", [{**rec("q0", 0), "samples": []}])  # b's record: no verdicts, left out
    r = compute_items([tmp_path], n_boot=20)
    note = [w for w in r.warnings if "judged replies (median)" in w]
    assert note == ([f"a criterion has {samples} judged replies (median): its rates and flags are weak evidence "
                     f"below {FEW_REPLIES}; add candidates, or candidate.samples=K replies per question"]
                    if warned else [])


def test_a_hard_set_without_declared_subsets_is_said(tmp_path: Path) -> None:
    # q0 and q1 discriminate (a meets both criteria, b neither); q2 does not (both meet one)
    a = [_record("q0", [True, True], 1.0), _record("q1", [True, True], 1.0), _record("q2", [True, False], 0.5)]
    b = [_record("q0", [False, False], 0.0), _record("q1", [False, False], 0.0), _record("q2", [True, False], 0.5)]
    _run(tmp_path, "a", a)
    _run(tmp_path, "b", b)
    r = compute_items([tmp_path], hard=1.0, n_boot=20)
    assert r.hard is not None and r.hard.target == 3 and sorted(r.hard.ids) == ["q0", "q1"]
    assert "hard=1: only 2 of the 3 questions asked for discriminate between models; the proposal is shorter" in r.warnings
    assert r.warnings[-1] == "the spec declares no subsets: the proposed hard set is not compared with one"
    assert r.hard_compare == []
    r = compute_items([tmp_path], hard=0.6, n_boot=20)  # round(0.6 x 3) = 2: exactly the two, no shortfall
    assert r.hard is not None and r.hard.target == 2 and not any("the proposal is shorter" in w for w in r.warnings)


def test_the_hard_set_against_each_declared_subset_with_the_declared_decay(tmp_path: Path) -> None:
    subsets = ["hard", "hard", "easy", "easy"]
    # q0, q1 (published hard) and q2 discriminate; a is the strong model
    a = [_record("q0", [True, False], 0.5, "hard"), _record("q1", [True, False], 0.5, "hard"),
         _record("q2", [True, True], 1.0, "easy"), _record("q3", [True, True], 1.0, "easy")]
    b = [_record("q0", [False, False], 0.0, "hard"), _record("q1", [False, False], 0.0, "hard"),
         _record("q2", [True, False], 0.5, "easy"), _record("q3", [True, True], 1.0, "easy")]
    report = {"subsets": {"hard": "Hard", "easy": "Easy", "unused": "Unused"},
              "decay": {"from": "easy", "to": "hard", "base": "hard"}}
    _run(tmp_path, "a", a, report=report)
    _run(tmp_path, "b", b, report=report)
    assert subsets
    r = compute_items([tmp_path], hard=0.5, n_boot=20)
    assert r.hard is not None and sorted(r.hard.ids) == ["q0", "q1"]  # lowest for the strong model a: 0.5, 0.5
    rows = {row["subset"]: row for row in r.hard_compare}
    assert list(rows) == ["hard", "easy"]  # declared subsets the data holds, in declared order; "unused" left out
    assert {k: rows["hard"][k] for k in ("proposed", "published", "overlap", "jaccard")} == {
        "proposed": 2, "published": 2, "overlap": 2, "jaccard": 1.0}
    assert {k: rows["easy"][k] for k in ("proposed", "published", "overlap", "jaccard")} == {
        "proposed": 2, "published": 2, "overlap": 0, "jaccard": 0.0}
    assert "decay_published" not in rows["easy"]  # only the subset the decay goes to carries it
    # decay on the hard base: (mean on the rest - mean on hard) / mean on hard x 100, per model, by hand:
    # a: rest (easy) 1.0, hard 0.5 -> 100.0; b: rest 0.75, hard 0.0 -> None (no base to divide by)
    assert rows["hard"]["decay_base"] == "hard"
    assert rows["hard"]["decay_published"]["a"] == pytest.approx(100.0)
    assert rows["hard"]["decay_proposed"] == rows["hard"]["decay_published"]  # the same two sets here
    assert not any("declares no subsets" in w for w in r.warnings)


def _labelled_runs(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Two models on q0 and q1 (two criteria each), each reply its own text; returns the root and the replies."""
    replies = {(m, q): f"reply of {m} to {q}" for m in ("a", "b") for q in ("q0", "q1")}
    hits = {"a": ([True, False], [True, False]), "b": ([False, None], [False, False])}
    for m in ("a", "b"):
        _run(tmp_path, m, [{**_record(q, hits[m][k], 0.5), "response": replies[(m, q)]}
                           for k, q in enumerate(("q0", "q1"))])
    return tmp_path, {f"{m}/{q}": r for (m, q), r in replies.items()}


def _label_file(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _key(qid: str, idx: int, reply: str) -> str:
    import hashlib

    return f"{qid}#{idx}@{hashlib.sha256(reply.encode('utf-8')).hexdigest()[:10]}"


def test_human_disagreement_against_the_raters_majority(tmp_path: Path) -> None:
    from rubric_engine.validity.itemsdiag import human_disagreement

    root, rep = _labelled_runs(tmp_path / "runs")
    a0, b0, a1 = rep["a/q0"], rep["b/q0"], rep["a/q1"]
    rows = [
        # a's reply to q0: the judge said met 1, not 2; both raters agree on 1, both dispute 2
        *[{"id": "q0", "criterion_index": i, "item_key": _key("q0", i, a0), "rater": r, "met": m}
          for r in ("ann", "bo") for i, m in ((1, 1), (2, 1))],
        # b's reply to q0: the judge said not met on 1 (agreed by the majority 2 of 3), and no verdict on 2
        *[{"id": "q0", "criterion_index": 1, "item_key": _key("q0", 1, b0), "rater": r, "met": m}
          for r, m in (("ann", 0), ("bo", 0), ("cy", 1))],
        {"id": "q0", "criterion_index": 2, "item_key": _key("q0", 2, b0), "rater": "ann", "met": 1},
        # a's reply to q1, criterion 1: a tie between two raters, no majority, not compared
        *[{"id": "q1", "criterion_index": 1, "item_key": _key("q1", 1, a1), "rater": r, "met": m}
          for r, m in (("ann", 1), ("bo", 0))],
        # q1's criterion 2, not met for both replies: the rater disputes both (two disagreements add up)
        *[{"id": "q1", "criterion_index": 2, "item_key": _key("q1", 2, reply), "rater": "ann", "met": 1}
          for reply in (a1, rep["b/q1"])],
    ]
    labels = _label_file(tmp_path, rows)
    got, warnings = human_disagreement([root], [labels])
    # by hand: (q0, 1): a agrees, b agrees -> 0 of 2; (q0, 2): a disputed -> 1 of 1 (b's null verdict not compared)
    assert got == {("q0", 1): (0, 2), ("q0", 2): (1, 1), ("q1", 2): (2, 2)}
    assert isinstance(warnings, list)
    r = compute_items([root], [labels], n_boot=20)
    assert r.labels == [str(labels)]
    by = {(c.qid, c.index): c for c in r.criteria}
    assert (by[("q0", 2)].human_disagreement, by[("q0", 2)].human_units) == (1.0, 1)
    assert (by[("q0", 1)].human_disagreement, by[("q0", 1)].human_units) == (0.0, 2)
    assert (by[("q1", 2)].human_disagreement, by[("q1", 2)].human_units) == (1.0, 2) and by[("q1", 1)].human_units == 0


def test_labels_matching_no_judged_reply_are_refused(tmp_path: Path) -> None:
    from rubric_engine.validity.itemsdiag import human_disagreement

    root, rep = _labelled_runs(tmp_path / "runs")
    # only b's q0 criterion 2, whose verdict is null: nothing to compare
    labels = _label_file(tmp_path, [{"id": "q0", "criterion_index": 2, "item_key": _key("q0", 2, rep["b/q0"]),
                                     "rater": "ann", "met": 1}])
    with pytest.raises(ConfigError) as e:
        human_disagreement([root], [labels])
    assert str(e.value) == ("items: no labelled item matches a judged reply in these runs; pass the labels of a "
                            "review sheet exported from these runs (rubric-engine review export)")


def test_a_failed_or_unfinished_job_is_said_left_out_before_the_labels_warnings(tmp_path: Path) -> None:
    a, b = _questions(2, [True, False], [False, False])
    _run(tmp_path, "a", a)
    _run(tmp_path, "b", b)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "error.txt").write_text("the judge's key is missing\nmore\n", encoding="utf-8")
    r = compute_items([tmp_path], n_boot=20)
    assert r.warnings[0] == f"{tmp_path / 'c'}: run failed, left out (the judge's key is missing)"
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "manifest.json").write_text(json.dumps({"state": "running"}), encoding="utf-8")
    r = compute_items([tmp_path], n_boot=20)
    assert r.warnings[:2] == [f"{tmp_path / 'c'}: run failed, left out (the judge's key is missing)",
                              f"{tmp_path / 'd'}: run running, left out (its files may be partial)"]


def _decay_runs(tmp_path: Path, base: str) -> Path:
    report = {"subsets": {"hard": "Hard", "easy": "Easy"}, "decay": {"from": "easy", "to": "hard", "base": base}}
    a = [_record("q0", [True, False], 0.5, "hard"), _record("q1", [True, False], 0.5, "hard"),
         _record("q2", [True, True], 1.0, "easy"), _record("q3", [True, True], 1.0, "easy")]
    b = [_record("q0", [False, False], 0.0, "hard"), _record("q1", [False, False], 0.0, "hard"),
         _record("q2", [True, False], 0.5, "easy"), _record("q3", [True, True], 1.0, "easy")]
    _run(tmp_path, "a", a, report=report)
    _run(tmp_path, "b", b, report=report)
    return tmp_path


def test_a_decay_on_the_other_subset_s_base_divides_by_the_rest(tmp_path: Path) -> None:
    r = compute_items([_decay_runs(tmp_path, "easy")], hard=0.5, n_boot=20)
    rows = {row["subset"]: row for row in r.hard_compare}
    assert "decay_published" in rows["hard"] and "decay_published" not in rows["easy"]  # the subset it goes to
    assert rows["hard"]["decay_base"] == "easy"
    # (mean on the rest - mean on hard) / mean on the rest x 100, by hand:
    # a: rest (easy) 1.0, hard 0.5 -> 50.0; b: rest 0.75, hard 0.0 -> 100.0
    assert rows["hard"]["decay_published"] == pytest.approx({"a": 50.0, "b": 100.0})
    assert rows["hard"]["decay_proposed"] == pytest.approx({"a": 50.0, "b": 100.0})


def test_the_run_s_scale_the_questions_criteria_and_the_groups(tmp_path: Path) -> None:
    spec = load_spec(DATA / "checks_mini")
    for m, hits in (("a", [True, True, False]), ("b", [True, False, False]), ("c", [False, True, True]),
                    ("d", [False, False, True])):
        d = _run(tmp_path, m, [_record(f"q{i}", hits if i else hits[::-1], 0.5) for i in range(3)])
        resolved = json.loads((d / "spec.resolved.json").read_text())
        resolved["scoring"]["scale"] = 10
        (d / "spec.resolved.json").write_text(json.dumps(resolved), encoding="utf-8")
    assert spec.scoring.scale == 100
    r = compute_items([tmp_path], n_boot=50, seed=0)
    assert r.scale == 10.0
    assert [q.criteria for q in r.questions] == [3, 3, 3]
    assert [(g.group, g.criteria, g.models) for g in r.groups][:1] == [("listen", 9, 4)]
    # the defaults are 1000 resamples and seed 0; another seed or count moves the interval
    default = compute_items([tmp_path])
    assert default.groups == compute_items([tmp_path], n_boot=1000, seed=0).groups
    assert default.groups != compute_items([tmp_path], n_boot=1000, seed=1).groups
    assert default.groups != compute_items([tmp_path], n_boot=1001, seed=0).groups


def test_a_malformed_taxonomy_names_the_run_directory(tmp_path: Path) -> None:
    d = _run(tmp_path, "a", [_record("q0", [True, False])])
    resolved = json.loads((d / "spec.resolved.json").read_text())
    resolved["taxonomy"] = {"dimensions": [{"id": "dim"}]}
    (d / "spec.resolved.json").write_text(json.dumps(resolved), encoding="utf-8")
    with pytest.raises(DataError) as e:
        compute_items([tmp_path], n_boot=20)
    assert str(e.value).startswith(f"{d}: taxonomy.dimensions is missing or malformed")
