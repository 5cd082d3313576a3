"""Data faults: a tampered cached download is re-checked against its pinned sha256; NaN/Infinity weights
are rejected. The download is served by a static HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dataset.load import load_dataset, sha256_file
from rubric_engine.errors import DataError
from rubric_engine.spec.schema import BenchmarkSpec

from conftest import MINI  # the project's own HeartBench-shaped rows
SHA = "ef14a94d29668342a4a40039c21e3cb42bba528c31181d8d61fdf6caf420af6e"


def with_data(spec: BenchmarkSpec, **changes: Any) -> BenchmarkSpec:
    return spec.model_copy(update={"data": spec.data.model_copy(update=changes)})


def test_a_tampered_cached_download_is_rechecked_and_fetched_again(
        spec: BenchmarkSpec, static_server: tuple[str, Path, list[str]], tmp_path: Path, heartbench_file: Path) -> None:
    ALL = heartbench_file  # the real file (its sha256 is the one the spec pins); skipped when absent
    base, www, seen = static_server
    (www / "question_all.jsonl").write_bytes(ALL.read_bytes())
    remote = with_data(spec, url=f"{base}/question_all.jsonl")
    cache = tmp_path / "cache"
    load_dataset(remote, cache_dir=cache)
    cached = cache / SHA / "question_all.jsonl"
    assert len(seen) == 1 and sha256_file(cached) == SHA
    cached.write_text("".join(ALL.read_text(encoding="utf-8").splitlines(keepends=True)[:3]), encoding="utf-8")

    again = load_dataset(remote, cache_dir=cache)
    assert len(seen) == 2  # the bad copy was not trusted
    assert len(again.questions) == 296 and again.sha256 == SHA and sha256_file(cached) == SHA
    assert any(w.startswith(f"cached copy {cached} had sha256 ") and "downloaded again" in w for w in again.warnings)


@pytest.mark.parametrize("token, shown", [("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf")])
def test_non_finite_weights_are_rejected(spec: BenchmarkSpec, tmp_path: Path, token: str, shown: str) -> None:
    """Python's json reads NaN/Infinity; a weight like that would poison every sum it enters."""
    with open(MINI, encoding="utf-8") as fh:
        row = json.loads(next(fh))
    row["rubric"][0]["score"] = "__W__"
    f = tmp_path / "rows.jsonl"
    f.write_text(json.dumps(row, ensure_ascii=False).replace('"__W__"', token) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_dataset(spec, f)
    msg = str(info.value)
    assert msg.startswith(f"{f}:1: ") and f"rubric[0]: score: non-numeric weight {shown};" in msg
