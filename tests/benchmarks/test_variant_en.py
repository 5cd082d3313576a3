"""The heartbench_en cultural variant: it loads, inherits what it should, and its English sample is sound."""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import MINI
from rich.console import Console

from fakeserver import FakeServer, Reply
from rubric_engine.dataset.load import load_dataset
from rubric_engine.errors import SpecError
from rubric_engine.judge.prompts import candidate_messages, judge_messages
from rubric_engine.spec.load import load_spec
from rubric_engine.spec.schema import BenchmarkSpec

from conftest import REPO as ROOT
EN_DIR = ROOT / "benchmarks" / "heartbench_en"
SAMPLE = ROOT / "data" / "heartbench_en_sample.jsonl"
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


@pytest.fixture(scope="module")
def en() -> BenchmarkSpec:
    return load_spec("heartbench_en", [ROOT / "benchmarks"])


@pytest.fixture(scope="module")
def base() -> BenchmarkSpec:
    return load_spec("heartbench", [ROOT / "benchmarks"])


def test_variant_overrides_only_locale_prompts_and_data(en: BenchmarkSpec, base: BenchmarkSpec) -> None:
    assert (en.name, en.locale, en.extends, en.dir) == ("heartbench_en", "en", "heartbench", EN_DIR)
    assert en.files == [ROOT / "benchmarks" / "heartbench" / "benchmark.yaml", EN_DIR / "benchmark.yaml"]
    for key in ("taxonomy", "failure_rules", "scoring", "report"):
        assert getattr(en, key) == getattr(base, key), key
    assert en.data.fields == base.data.fields and en.data.roles == base.data.roles
    assert en.data.subsets == base.data.subsets and en.judge.model == base.judge.model
    assert en.candidate.mode == base.candidate.mode and en.judge.max_reasks == base.judge.max_reasks
    assert en.data.url is None and en.data_path() is not None
    assert en.data_path().resolve() == SAMPLE.resolve()
    for field in ("candidate.template", "judge.template", "judge.system"):
        assert en.template_path(field).parent == EN_DIR, field


def test_sample_sha256_is_pinned(en: BenchmarkSpec) -> None:
    assert en.data.sha256 == hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
    ds = load_dataset(en)
    assert ds.sha256 == en.data.sha256
    assert not [w for w in ds.warnings if "sha256" in w]


def test_sample_counts_and_schema(en: BenchmarkSpec) -> None:
    qs = load_dataset(en).questions
    assert len(qs) == 15
    assert Counter(q.subset for q in qs) == {"normal": 10, "hard": 5}
    assert Counter(q.scenario for q in qs) == {s: 3 for s in en.report.scenarios}
    assert len({q.id for q in qs}) == 15 and all(len(q.id) == 6 for q in qs)
    assert set(en.ability_ids()) == {c.ability for q in qs for c in q.criteria if c.ability}
    for q in qs:
        assert 4 <= len(q.criteria) <= 12, q.id
        assert 1 <= len(q.dialogue) <= 9 and en.data.roles[q.dialogue[-1].role] == "user"
        rules = [c for c in q.criteria if c.rule]
        assert [c.rule for c in rules] == ["role_confusion"] and rules[0].weight is None
        for c in q.criteria:
            assert c.rule or (float(c.weight).is_integer() and -10 <= c.weight <= 10 and c.weight != 0)
    same_schema = json.loads(MINI.open(encoding="utf-8").readline())  # HeartBench's row shape
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        assert list(row) == list(same_schema)


def test_sample_is_english_and_original(en: BenchmarkSpec) -> None:
    qs = load_dataset(en).questions
    for q in qs:
        for text in [t.content for t in q.dialogue] + [c.text for c in q.criteria]:
            assert not CJK.search(text), (q.id, text)


def test_sample_ids_are_not_upstream_ids(en: BenchmarkSpec, heartbench_file: Path) -> None:
    upstream = {json.loads(line)["question_id"] for line in heartbench_file.open(encoding="utf-8")}
    assert upstream and not upstream & {q.id for q in load_dataset(en).questions}


def test_prompts_render_in_english(en: BenchmarkSpec) -> None:
    q = next(q for q in load_dataset(en).questions if q.id == "enq003")
    cand = candidate_messages(en, q)
    assert len(cand) == 1 and "A: I've been wearing the same hoodie" in cand[0]["content"]
    assert not CJK.search(cand[0]["content"]) and "Markdown" in cand[0]["content"]
    judge = judge_messages(en, q, "I'm here.")
    assert [m["role"] for m in judge] == ["system", "user"]
    text = judge[1]["content"]
    assert "Rubric (10 items)" in text and "1. [Emotional Perception][4] The AI picks up" in text
    assert "10. [Role Confusion][-] The AI does not respond to the user" in text
    assert not CJK.search(judge[0]["content"] + text)


def test_validate_command_counts(en: BenchmarkSpec) -> None:
    from rubric_engine.cli.commands import validate_command

    buf = io.StringIO()
    assert validate_command("heartbench_en", [str(ROOT / "benchmarks")], None, None,
                            Console(file=buf, width=200)) == 0
    out = buf.getvalue()
    assert "15 questions (5 hard, 10 normal)" in out and "Personal Growth" in out and "ok" in out


def write_variant(tmp_path: Path, text: str, name: str = "tweak") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "benchmark.yaml").write_text(text, encoding="utf-8")
    return d


def test_one_key_override_inherits_the_rest(tmp_path: Path, en: BenchmarkSpec) -> None:
    d = write_variant(tmp_path, "extends: heartbench_en\nname: tweak\nscoring:\n  formula: linear\n")
    spec = load_spec(d, [ROOT / "benchmarks"])
    assert spec.scoring.formula == "linear" and spec.scoring.scale == en.scoring.scale
    assert spec.locale == "en" and spec.taxonomy == en.taxonomy and spec.failure_rules == en.failure_rules
    # paths stay relative to the file that declared them, not to the new variant's directory
    assert spec.data_path().resolve() == SAMPLE.resolve()
    assert spec.template_path("judge.template") == EN_DIR / "judge.j2"
    assert len(load_dataset(spec).questions) == 15


@pytest.mark.parametrize("text, key, hint", [
    ("extends: heartbench_en\nname: bad\nlocalee: en\n", "localee", "locale"),
    ("extends: heartbench_en\nname: bad\njudge:\n  templat: judge.j2\n", "judge.templat", "template"),
])
def test_unknown_key_names_file_and_key(tmp_path: Path, text: str, key: str, hint: str) -> None:
    d = write_variant(tmp_path, text, "bad")
    with pytest.raises(SpecError) as info:
        load_spec(d, [ROOT / "benchmarks"])
    msg = str(info.value)
    assert str(d / "benchmark.yaml") in msg and key in msg and "unknown key" in msg and repr(hint) in msg


def _script(body: dict[str, Any]) -> Reply:
    text = "\n".join(str(m.get("content", "")) for m in body["messages"])
    m = re.search(r"## Rubric \((\d+) items\)", text)
    if m is None:
        return Reply(text="That sounds like a lot to carry. I'm here, tell me more?")
    n = int(m.group(1))
    verdict = {"criteria": [{"id": i, "reasoning": "checked", "met": i % 2 == 1 and i != n} for i in range(1, n + 1)]}
    return Reply(text=json.dumps(verdict))


def _expected_overall() -> float:
    """Eq. 1 written out from the sample file's raw rows and the script's verdicts (odd items met, not the last);
    '其他' marks the role-confusion items."""
    per_label: dict[str, list[float]] = {}
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        rubric = json.loads(line)["rubric"]
        n = len(rubric)
        met = [i % 2 == 1 and i != n for i in range(1, n + 1)]
        zeroed = any(m for m, it in zip(met, rubric) if it["dimension"] == "其他")
        groups: dict[str, list[tuple[bool, float]]] = {}
        for m, it in zip(met, rubric):
            if it["dimension"] != "其他":
                groups.setdefault(it["dimension"], []).append((m, it["score"]))
        for label, items in groups.items():
            raw = sum(w for m, w in items if m)
            lo = sum(w for _, w in items if w < 0)
            hi = sum(w for _, w in items if w > 0)
            score = 0.0 if zeroed or hi == lo else math.log(raw - lo + 1) / math.log(hi - lo + 1)
            per_label.setdefault(label, []).append(score)
    return 100 * sum(sum(v) / len(v) for v in per_label.values()) / len(per_label)


def test_end_to_end_through_the_console_script(tmp_path: Path, env: dict[str, str]) -> None:
    exe = Path(sys.executable).with_name("rubric-engine")
    with FakeServer(_script) as srv:
        models = [f"{role}={x}" for role in ("candidate", "judge")
                  for x in ("openai_compatible",)] + \
                 [f"{role}.{k}={v}" for role in ("candidate", "judge")
                  for k, v in (("model", "openai/fake-model"), ("api_base", srv.url), ("api_key_env", "FAKE_KEY"),
                               ("name", role))]
        res = subprocess.run([str(exe), "benchmark=heartbench_en", "progress=plain", "concurrency=4",
                              f"hydra.run.dir={tmp_path / 'run'}", *models],
                             env=env, capture_output=True, text=True, timeout=300)
        n_requests = len(srv.requests)
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
    assert summary["counts"]["questions"] == 15 and summary["counts"]["scored"] == 15
    assert summary["counts"]["judge_errors"] == 0 and summary["counts"]["catastrophic"] == 0
    assert summary["benchmark"] == "heartbench_en"
    assert summary["overall"] == pytest.approx(_expected_overall(), abs=1e-9)
    assert set(summary["scenarios"]) == {"个人成长", "人际与社会化发展", "职场心理", "家庭关系", "亲密关系"}
    assert n_requests == 30
    out = res.stderr + res.stdout
    assert "Overall" in out and "Verbal Expression" in out and "言语表达" not in out  # English labels only
