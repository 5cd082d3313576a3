"""ResultCache: durable, never evicts, never drops a write silently, safe across processes."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from rubric_engine.models.cache import CacheError, ResultCache, default_cache_dir


def test_roundtrip_and_missing(tmp_path: Path) -> None:
    with ResultCache(tmp_path / "c") as cache:
        assert cache.get("nope") is None
        value = {"text": "你好 ✓", "prompt_tokens": 3, "completion_tokens": 2, "cost": None, "model": "m"}
        cache.set("k", value)
        assert cache.get("k") == value
        assert "k" in cache and len(cache) == 1
    with ResultCache(tmp_path / "c") as again:  # durable across opens
        assert again.get("k") == value


def test_info_and_clear(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "c")
    for i in range(5):
        cache.set(f"k{i}", {"text": "x" * 100, "i": i})
    info = cache.info()
    assert info["directory"] == str(tmp_path / "c")
    assert info["entries"] == 5
    assert info["size_bytes"] > 0
    assert cache.clear() == 5
    assert cache.info()["entries"] == 0
    assert cache.clear() == 0
    cache.close()


def test_no_eviction_settings(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "c")
    assert cache._cache.eviction_policy == "none"
    assert cache._cache.size_limit >= 2**60
    cache.close()


def test_set_refuses_non_json(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "c")
    with pytest.raises(CacheError, match="JSON"):
        cache.set("k", {"bad": object()})
    with pytest.raises(CacheError):
        cache.set("k", {"nan": float("nan")})
    cache.close()


def test_set_raises_when_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ResultCache(tmp_path / "c")
    monkeypatch.setattr(cache._cache, "set", lambda *a, **k: False)
    with pytest.raises(CacheError, match="refused a write"):
        cache.set("k", {"text": "x"})

    def boom(*a: object, **k: object) -> bool:
        raise OSError("disk full")

    monkeypatch.setattr(cache._cache, "set", boom)
    with pytest.raises(CacheError, match="disk full"):
        cache.set("k", {"text": "x"})
    cache.close()


def test_unopenable_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    with pytest.raises(CacheError, match="cannot open"):
        ResultCache(blocker / "sub")


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RUBRIC_ENGINE_CACHE", str(tmp_path / "explicit"))
    assert default_cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("RUBRIC_ENGINE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "rubric-engine" / "calls"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "rubric-engine" / "calls"


def _writer(directory: str, prefix: str, n: int) -> None:
    cache = ResultCache(directory)
    for i in range(n):
        cache.set(f"{prefix}-{i}", {"text": f"{prefix}{i}", "i": i})
    cache.close()


def test_two_processes_write_one_cache(tmp_path: Path) -> None:
    directory = str(tmp_path / "shared")
    ResultCache(directory).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(directory, p, 200)) for p in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = ResultCache(directory)
    assert cache.info()["entries"] == 400
    assert all(cache.get(f"{p}-{i}") == {"text": f"{p}{i}", "i": i} for p in ("a", "b") for i in range(200))
    cache.close()
