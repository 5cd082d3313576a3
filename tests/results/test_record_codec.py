"""The samples.jsonl codec (rubric_engine/record/): every record a shipped spec writes reads back as a typed
Record and writes back as the very same bytes; a record of an older run (keys missing) reads with the defaults
its readers always gave; a key this version does not know is kept in place; a malformed record is refused
with the file and line; each verdict kind's variant is found by its own keys.

Why: the record is the one format every stored run is read from (rescore, the leaderboard, the reports, resume);
the codec must neither change a byte of it nor read an old file differently (issue #36, item 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import MINI, REPO, clean_env, run_cli
from rubric_engine.errors import DataError
from dataclasses import replace

from rubric_engine.record.codec import VARIANTS, decode, encode, encode_new
from rubric_engine.record.pairwise import PairwiseJudgment
from rubric_engine.record.score import ScoreJudgment
from rubric_engine.record.types import (NO_LAYOUT, Criteria, CriteriaJudgment, Judgment, NotJudged, Record, Reply,
                                        Transcript)
from rubric_engine.store.runs import collect_runs

DATA = REPO / "tests" / "data"
# Each shipped spec's keyless mock run (the console script), on data the repository holds, and the kinds of
# judgment and reply its records must decode to; the test data's own specs cover what no shipped spec does
# (engine-checked items, multiple choice, a score verdict on one reply, scripted and simulated sessions), and a
# sampled, repeated run the `samples` and `votes` fields.
RUNS: dict[str, tuple[list[str], set[tuple[str, str]]]] = {
    "heartbench": (["benchmark=heartbench", f"data.path={MINI}"], {("criteria", "single")}),
    "heartbench_en": (["benchmark=heartbench_en", f"data.path={MINI}"], {("criteria", "single")}),
    "heartbench_official": (["benchmark=heartbench_official", f"data.path={MINI}"], {("criteria", "single")}),
    "mt_bench": (["benchmark=mt_bench", f"data.path={DATA / 'mt_bench_mini.jsonl'}"], {("score", "conversation")}),
    "arena_hard": (["benchmark=arena_hard", f"data.path={DATA / 'pairwise_mini.jsonl'}", "baseline=mock"],
                   {("pairwise", "single")}),
    "counselling_dynamic": (["benchmark=counselling_dynamic", "user=mock", "limit=3"], {("criteria", "conversation")}),
    "counselling_dynamic_zh": (["benchmark=counselling_dynamic_zh", "user=mock", "limit=3"],
                               {("criteria", "conversation")}),
    "reference_qa": (["benchmark=reference_qa", "limit=3"], {("criteria", "single")}),
    "checks": ([f"benchmark={DATA / 'checks_mini'}"], {("criteria", "single")}),
    "choice": ([f"benchmark={DATA / 'choice_mini'}"], {("criteria", "single")}),
    "likert": ([f"benchmark={DATA / 'likert_mini'}"], {("score", "single")}),
    "scripted": ([f"benchmark={DATA / 'scripted_mini'}"], {("criteria", "conversation")}),
    "simulated": ([f"benchmark={DATA / 'simulated_mini'}", "user=mock"], {("criteria", "conversation")}),
    "sampled": (["benchmark=heartbench", f"data.path={MINI}", "candidate.samples=3", "judge.repeats=2"],
                {("criteria", "single")}),
    "eq_bench": (["benchmark=eq_bench"], {("rating", "single")}),  # no judge: its packaged sample, ratings read
    "counselling_turns": (["benchmark=counselling_turns"], {("criteria", "single")}),  # a question per turn
    # no judge: the simulated user's hidden state, on each user turn and as the record's `states`
    "counselling_sage": (["benchmark=counselling_sage", "user=mock"], {("user_state", "conversation")}),
}
JUDGELESS = {"eq_bench", "counselling_sage"}  # a spec whose verdict calls no judge model refuses one


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("codec")
    out = {}
    for name, (args, _) in RUNS.items():
        judge = [] if name in JUDGELESS else ["judge=mock"]
        res = run_cli([*args, "candidate=mock", *judge, "progress=none", f"hydra.run.dir={root / name}"],
                      clean_env(root), cwd=root)
        assert res.returncode == 0, f"{name}: {res.stderr[-2000:]}"
        out[name] = root / name
    return out


def _lines(path: Path) -> list[str]:
    return [x for x in path.read_text(encoding="utf-8").split("\n") if x.strip()]


@pytest.mark.parametrize("name", list(RUNS))
def test_every_shipped_spec_record_reads_and_writes_back_the_same_bytes(runs: dict[str, Path], name: str) -> None:
    path = runs[name] / "samples.jsonl"
    lines = _lines(path)
    assert lines
    for line in lines:
        assert json.dumps(encode(decode(json.loads(line))), ensure_ascii=False) == line
    (run,) = collect_runs([runs[name]])
    records = list(run.iter_records())  # the one reader of stored runs
    assert [json.dumps(encode(r), ensure_ascii=False) for r in records] == lines
    assert {(r.judgment.kind, r.reply.kind) for r in records} == RUNS[name][1]


def _fresh(rec: Record) -> Record:
    """`rec` as the run's writer makes it: no stored key order anywhere (the record, its items, turns, games)."""
    judgment, reply = rec.judgment, rec.reply
    if isinstance(judgment, ScoreJudgment):
        judgment = replace(judgment, turns=tuple(replace(t, layout=NO_LAYOUT) for t in judgment.turns))
    if isinstance(judgment, PairwiseJudgment):
        judgment = replace(judgment, games=tuple(replace(g, layout=NO_LAYOUT) for g in judgment.games))
    if isinstance(reply, Transcript):
        reply = replace(reply, turns=tuple(replace(t, layout=NO_LAYOUT) for t in reply.turns))
    return replace(rec, criteria=Criteria(tuple(replace(c, layout=NO_LAYOUT) for c in rec.criteria)),
                   judgment=judgment, reply=reply, layout=NO_LAYOUT)


@pytest.mark.parametrize("name", [n for n in RUNS if n != "sampled"])  # a sampled record is merged from its samples'
def test_a_fresh_record_is_written_in_the_order_every_shipped_spec_stored(runs: dict[str, Path], name: str) -> None:
    """encode_new (the run's writer) orders a record made in memory as every shipped spec's records were written
    before the codec wrote them: the canonical order, per judgment variant, and the keys written even when empty."""
    for line in _lines(runs[name] / "samples.jsonl"):
        obj = json.loads(line)
        kept = [k for k in ("choice", "judge_raw", "weight", "user_error") if k in obj]
        assert json.dumps(encode_new(_fresh(decode(obj)), kept), ensure_ascii=False) == line


def test_the_sampled_run_decodes_its_samples_and_votes(runs: dict[str, Path]) -> None:
    (run,) = collect_runs([runs["sampled"]])
    rec = run.samples[0]
    assert [e.sample for e in rec.samples] == [0, 1, 2] and rec.entries() == rec.samples
    assert all(len(v) == 2 for c in rec.samples[0].criteria for v in (c.votes or {}).values())


def test_every_stored_samples_file_of_the_test_data_reads_and_writes_back_the_same_bytes() -> None:
    for path in sorted(DATA.rglob("samples.jsonl")):  # run directories kept as test data (none yet: any added counts)
        for line in _lines(path):
            assert json.dumps(encode(decode(json.loads(line))), ensure_ascii=False) == line, path


def test_an_older_record_reads_with_the_defaults_its_readers_gave() -> None:
    """A record with only some keys (an older run, a hand-made file): each missing field reads as before."""
    old = {"id": "q1", "subset": "s", "scenario": "", "response": "hi", "score": 0.5, "abilities": {}}
    rec = decode(old)
    assert (rec.weight, rec.catastrophic, rec.tags, rec.failed_rules, rec.judge_raw, rec.truncated) == \
        (1, False, (), (), (), False)
    assert (rec.judge_error, rec.candidate_error, rec.zeroed, rec.choice, rec.item_tags) == (None, None, None, None, {})
    assert rec.reply == Reply("hi") and rec.response == "hi" and isinstance(rec.judgment, NotJudged)
    assert rec.stored("score") and not rec.stored("weight") and not rec.stored("catastrophic")
    assert encode(rec) == old and list(encode(rec)) == list(old)


def test_a_key_this_version_does_not_know_is_kept_in_its_place() -> None:
    later = {"id": "q1", "novel": {"a": [1, 2]}, "score": None,
             "criteria": [{"index": 1, "hit": True, "novel_too": 3}], "tail": "x"}
    rec = decode(later)
    assert isinstance(rec.judgment, CriteriaJudgment) and rec.criteria[0].hit is True
    assert json.dumps(encode(rec)) == json.dumps(later)


def test_a_session_decodes_as_a_transcript() -> None:
    obj = {"id": "q", "response": "b", "transcript": [{"role": "user", "content": "a"},
                                                      {"role": "assistant", "content": "b"}], "ended": "stop",
           "user_error": None}
    rec = decode(obj)
    assert isinstance(rec.reply, Transcript) and rec.reply.kind == "conversation"
    assert [(t.role, t.content) for t in rec.reply.turns] == [("user", "a"), ("assistant", "b")]
    assert (rec.reply.ended, rec.reply.user_error) == ("stop", None) and encode(rec) == obj


@pytest.mark.parametrize("bad, says", [
    ({"id": "q", "criteria": [{"index": 1, "hit": "yes"}]}, 'verdict hit="yes" is not true, false or null'),
    ({"id": "q", "criteria": [{"index": 1, "weight": "2"}]}, "criterion weight '2' is not a number"),
    ({"id": "q", "criteria": [{"index": 1, "weight": 10**7}]}, "criterion weight 10000000 is not a number between"),
    ({"id": "q", "criteria": [{"index": 1, "weight": True}]}, "criterion weight True is not a number"),
    ({"id": "q", "samples": [{"criteria": [{"index": 1, "hit": 1}]}]}, "verdict hit=1 is not true, false or null"),
    ({"id": "q", "games": [["not", "a", "game"]]}, "not a record this version reads"),
    ({"id": "q", "transcript": "not turns"}, "not a record this version reads"),
])
def test_a_malformed_record_is_refused_with_file_and_line(bad: dict[str, Any], says: str) -> None:
    with pytest.raises(DataError) as info:
        decode(bad, "run/samples.jsonl", 7, "re-run")
    msg = str(info.value)
    assert msg.startswith("run/samples.jsonl:7: question 'q': ") and says in msg and msg.endswith("; re-run")


def test_every_variant_module_is_found_without_a_line_in_the_codec() -> None:
    """A verdict kind's variant is its module in record/: the codec lists the package, so each module's
    Judgment subclass is in VARIANTS once (a slotted dataclass's first draft never is)."""
    import importlib
    import pkgutil

    import rubric_engine.record as package
    defined = []
    for module in pkgutil.iter_modules(package.__path__):
        mod = importlib.import_module(f"{package.__name__}.{module.name}")
        defined += [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, Judgment)
                    and v.__module__ == mod.__name__ and v.marks]
    assert sorted(v.kind for v in VARIANTS) == sorted(v.kind for v in defined) and len(VARIANTS) == len(defined) >= 3


def test_each_variant_owns_its_keys_and_is_found_by_them() -> None:
    kinds = [v.kind for v in VARIANTS]
    assert len(set(kinds)) == len(kinds) and not {"criteria", "none"} & set(kinds)
    owned = [k for v in VARIANTS for k in v.owns]
    assert len(set(owned)) == len(owned), "two variants own one key"
    for variant in VARIANTS:
        assert issubclass(variant, Judgment) and variant.marks and set(variant.marks) <= set(variant.owns)
        for mark in variant.marks:
            assert isinstance(decode({"id": "q", mark: None}).judgment, variant), (variant, mark)


def test_a_record_is_frozen() -> None:
    rec = decode({"id": "q", "score": 1.0})
    with pytest.raises(AttributeError):
        rec.score = 0.0  # type: ignore[misc]
    assert isinstance(rec, Record)


def test_every_summary_key_a_shipped_spec_writes_is_declared_in_the_typed_summary(runs: dict[str, Path]) -> None:
    """summary.json is read as the typed `Summary` (store/layout.read_summary): every top-level key, and every key
    of its counts, interval and aggregation sections, that a shipped spec's run writes is declared there."""
    from rubric_engine.record.summary import AggregationSection, CountsSection, IntervalSection, Summary
    from rubric_engine.store.layout import read_summary

    sections = {"counts": CountsSection, "interval": IntervalSection, "aggregation": AggregationSection}
    for name, run in runs.items():
        summary = read_summary(run)
        assert set(summary) <= set(Summary.__annotations__), (name, set(summary) - set(Summary.__annotations__))
        for key, typed in sections.items():
            section = summary.get(key) or {}
            assert set(section) <= set(typed.__annotations__), (name, key, set(section) - set(typed.__annotations__))
