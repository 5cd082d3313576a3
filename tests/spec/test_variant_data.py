"""A variant spec (`new NAME extends=PARENT`) with its own data does not inherit the parent's data pin.

Why: `extends` merges mappings key by key, so a child whose `data:` names only its own `path` kept the parent's
`sha256`, and every run of the variant warned that its data differed from a pin that was never its own. The rule
(docs/authoring.md): a `data:` that names a source (`path` or `url`) replaces the parent's whole source (`url`,
`path`, `sha256`); a child that names no source keeps the parent's data and its pin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO, run_cli

pytestmark = pytest.mark.slow

SAMPLE = REPO / "data" / "heartbench_en_sample.jsonl"


def _variant(tmp_path: Path, env: dict[str, str], data_block: str) -> Path:
    res = run_cli(["new", "heartbench_es", "extends=heartbench_en"], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    spec = tmp_path / "benchmarks" / "heartbench_es"
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    (spec / "data.jsonl").write_text("".join(lines[:3]), encoding="utf-8")  # its own data: other bytes
    with (spec / "benchmark.yaml").open("a", encoding="utf-8") as fh:
        fh.write(data_block)
    return spec


def _run(tmp_path: Path, env: dict[str, str], name: str):
    return run_cli(["benchmark=heartbench_es", "candidate=mock", "judge=mock", "limit=2", "progress=none",
                    f"hydra.run.dir={tmp_path / name}"], env, cwd=tmp_path)


def test_a_variant_with_its_own_data_does_not_inherit_the_parents_pin(tmp_path: Path, env: dict[str, str]) -> None:
    _variant(tmp_path, env, "\ndata:\n  path: data.jsonl\n")
    res = _run(tmp_path, env, "own")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "differs from the spec's pinned" not in res.stderr, res.stderr[-2000:]


def test_a_variant_that_pins_its_own_data_is_still_checked(tmp_path: Path, env: dict[str, str]) -> None:
    _variant(tmp_path, env, "\ndata:\n  path: data.jsonl\n  sha256: " + "a" * 64 + "\n")
    res = _run(tmp_path, env, "pinned")
    assert "differs from the spec's pinned " + "a" * 64 in res.stderr, res.stderr[-2000:]


def test_a_variant_without_a_data_source_keeps_the_parents_data_and_pin(tmp_path: Path, env: dict[str, str]) -> None:
    spec = _variant(tmp_path, env, "")
    (spec / "data.jsonl").unlink()
    res = _run(tmp_path, env, "inherited")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "differs from the spec's pinned" not in res.stderr, res.stderr[-2000:]
