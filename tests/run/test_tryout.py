"""The try-out rule (run/tryout.py): a run reads a spec's packaged sample instead of its download only when every
model it calls is a mock, never when the user gave data.path=, answers= or from_run=, never for a real model in
any role; the sample spec carries the sample's data and baseline answers and nothing of the downloads.

In-process: the rule is a pure function of the settings and the spec; the console-script try-out of every
shipped spec from an installed wheel is tests/project/test_packaging.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO, edited_spec
from rubric_engine.errors import SpecError
from rubric_engine.models.entries import ModelSpec
from rubric_engine.run.settings import RunSettings
from rubric_engine.run.tryout import tryout_spec
from rubric_engine.spec.load import load_spec

MOCK = ModelSpec(name="mock-candidate", model="mock/candidate")
MOCK_JUDGE = ModelSpec(name="mock-judge", model="mock/judge")
REAL = ModelSpec(name="j", model="openai/gpt-4.1", api_key_env="FAKE_KEY")


def _settings(**kw: object) -> RunSettings:
    return RunSettings(**{"benchmark": "mt_bench", "out_dir": Path("out"), "candidate": MOCK, "judge": MOCK_JUDGE, **kw})


def test_every_model_a_mock_reads_the_sample() -> None:
    spec = load_spec(REPO / "benchmarks" / "mt_bench")
    tried, note = tryout_spec(_settings(), spec)
    assert tried.data.url is None and tried.data.references is None and tried.data.sha256 is None
    assert Path(tried.data.path or "") == (REPO / "data" / "mt_bench_sample.jsonl").resolve()
    assert note is not None and "try-out" in note and spec.data.url in note and "data.path=" in note


@pytest.mark.parametrize("change", [{"judge": REAL}, {"candidate": ModelSpec(name="c", model="openai/c")},
                                   {"judge": None},  # the spec's own judge: a real model
                                   {"candidate": None},  # a mock judge scoring replies the run does not write
                                   {"data_path": "mine.jsonl"}, {"answers": "answers.jsonl"}, {"from_run": "run"}])
def test_anything_real_or_given_keeps_the_spec_data(change: dict[str, object]) -> None:
    spec = load_spec(REPO / "benchmarks" / "mt_bench")
    tried, note = tryout_spec(_settings(**change), spec)
    assert tried is spec and note is None


def test_a_pairwise_sample_brings_its_baseline_answers_unless_a_baseline_is_given() -> None:
    spec = load_spec(REPO / "benchmarks" / "arena_hard")
    tried, _ = tryout_spec(_settings(benchmark="arena_hard"), spec)
    assert tried.baseline is not None and tried.baseline.answers is not None
    (answers,) = tried.baseline.answers.files.values()
    assert Path(answers.path or "") == (REPO / "data" / "arena_hard_sample_baseline.jsonl").resolve()
    assert answers.url is None and tried.baseline.answers.id == spec.data.fields.id == "uid"
    ids = {json.loads(x)["uid"] for x in Path(answers.path or "").read_text().splitlines()}
    assert ids == {json.loads(x)["uid"] for x in Path(tried.data.path or "").read_text().splitlines()}
    # baseline=mock: the baseline is a model, a mock too: still a try-out, on the sample's prompts
    base = ModelSpec(name="mock-baseline", model="mock/baseline")
    assert tryout_spec(_settings(benchmark="arena_hard", baseline=base), spec)[1] is not None
    real = tryout_spec(_settings(benchmark="arena_hard", baseline=REAL), spec)
    assert real[0] is spec and real[1] is None


def test_a_spec_whose_data_is_local_needs_no_sample() -> None:
    spec = load_spec(REPO / "benchmarks" / "heartbench_en")
    assert spec.data.url is None and tryout_spec(_settings(benchmark="heartbench_en"), spec) == (spec, None)


def test_the_sample_is_not_part_of_the_spec_hash() -> None:
    spec = load_spec(REPO / "benchmarks" / "mt_bench")
    assert "sample" not in spec.resolved()["data"]
    bare = spec.model_copy(update={"data": spec.data.model_copy(update={"sample": None})})
    assert bare.resolved() == spec.resolved()


def test_a_sample_outside_the_spec_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A stranger's spec cannot make a try-out read a file of this machine into a prompt: the sample is confined
    as data.path is (the spec's directories and the package's data/)."""
    bench = edited_spec(REPO / "benchmarks" / "mt_bench", tmp_path / "mt", "path: ../../data/mt_bench_sample.jsonl",
                        "path: /etc/hostname")
    with pytest.raises(SpecError, match="data.sample.path: the path leads outside the spec's directory"):
        tryout_spec(_settings(benchmark=str(bench)), load_spec(bench))


def test_baseline_answers_in_the_sample_of_a_spec_that_is_not_pairwise_are_refused(tmp_path: Path) -> None:
    bench = edited_spec(REPO / "benchmarks" / "mt_bench", tmp_path / "mt", "path: ../../data/mt_bench_sample.jsonl",
                        "path: ../../data/mt_bench_sample.jsonl\n    baseline_answers: answers.jsonl")
    with pytest.raises(SpecError, match="data.sample.baseline_answers: baseline answers are only read by"):
        load_spec(bench)
