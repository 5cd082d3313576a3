"""ResultCache details that the end-to-end tests cannot see: stored text, unreadable entries, exact errors,
`cache clear` on a broken store. Written against survivors of `python bench/mutation.py cache`."""

from __future__ import annotations

from pathlib import Path

import pytest

from rubric_engine.models.cache import CacheError, ResultCache, default_cache_dir


def test_values_are_stored_as_sorted_readable_json_text(tmp_path: Path) -> None:
    with ResultCache(tmp_path / "c") as cache:
        cache.set("k", {"text": "你好", "a": 1})
        # inspectable with sqlite3: UTF-8 text (not \\u escapes), keys sorted, one JSON object
        assert cache._cache.get("k") == '{"a": 1, "text": "你好"}'


def test_unreadable_or_non_object_entries_read_as_absent(tmp_path: Path) -> None:
    import diskcache

    with diskcache.Cache(str(tmp_path / "c")) as plain:  # diskcache's own Disk pickles what is not text
        plain.set("native", {"text": "stored by diskcache itself"})
        plain.set(("pickled", "key"), "a value under a pickled key")
        plain.set("number", 5)
    warned: list[str] = []
    with ResultCache(tmp_path / "c", warn=warned.append) as cache:
        cache._cache.set("broken", "{not json")  # what a torn write or another tool could leave
        cache._cache.set("list", "[1, 2]")
        cache._cache.set("bytes", b'{"text": "ok"}')
        with pytest.raises(TypeError):
            cache._cache.set("object", {"text": "would be pickled"})  # this store never writes a pickle
        assert cache.get("broken") is None
        assert cache.get("list") is None
        assert cache.get("bytes") == {"text": "ok"}
        assert warned == []
        assert cache.get("native") is None and cache.get("native") is None  # a pickle is never loaded
        assert cache.get("number") is None
        assert "broken" in cache and "missing" not in cache
        assert len(warned) == 1 and "not data" in warned[0] and str(tmp_path / "c") in warned[0]
        cache.set("native", {"text": "asked again"})  # the miss, answered, replaces the pickled row
        assert cache.get("native") == {"text": "asked again"}


def test_the_cache_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    import stat

    with ResultCache(tmp_path / "c") as cache:
        cache.set("k", {"text": "x" * 100_000})  # a large value goes to a file of its own
    assert stat.S_IMODE((tmp_path / "c").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "c" / "cache.db").stat().st_mode) == 0o600


def test_store_settings_never_evict_and_wait_for_locks(tmp_path: Path) -> None:
    with ResultCache(tmp_path / "c") as cache:
        assert cache._cache.eviction_policy == "none"
        assert cache._cache.size_limit == 2**62
        assert cache._cache.timeout == 60.0  # a lock held by another process: wait, then raise (never drop)


def test_set_errors_name_directory_and_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ResultCache(tmp_path / "c")
    key = "0123456789abcdef-rest-of-the-key"
    with pytest.raises(CacheError) as err:
        cache.set(key, {"nan": float("nan")})
    assert str(err.value).startswith(f"{tmp_path / 'c'}: value for key 0123456789abcdef... is not JSON-serialisable (")
    monkeypatch.setattr(cache._cache, "set", lambda *a, **k: False)
    with pytest.raises(CacheError) as err:
        cache.set(key, {"text": "x"})
    assert str(err.value) == (f"{tmp_path / 'c'}: the cache refused a write (key 0123456789abcdef...); "
                              "check free disk space and that the directory is on a local disk")
    cache.close()


def test_read_clear_and_info_failures_are_one_cache_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ResultCache(tmp_path / "c")

    def boom(*a: object, **k: object) -> None:
        raise OSError("disk gone")

    for name in ("get", "clear", "volume", "set"):
        monkeypatch.setattr(cache._cache, name, boom)
    with pytest.raises(CacheError) as err:
        cache.get("k")
    assert str(err.value) == (f"{tmp_path / 'c'}: cannot read the result cache (OSError: disk gone); "
                              "check disk space and permissions, and keep the cache on a local disk")
    with pytest.raises(CacheError, match=r": cannot clear the result cache \(OSError: disk gone\)"):
        cache.clear()
    with pytest.raises(CacheError, match=r": cannot read the result cache \(OSError: disk gone\)"):
        cache.info()
    with pytest.raises(CacheError, match=r": cannot write the result cache \(OSError: disk gone\)"):
        cache.set("k", {"a": 1})
    monkeypatch.undo()
    cache.close()


def test_unopenable_directory_message(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(CacheError) as err:
        ResultCache(tmp_path / "file" / "sub")
    assert str(err.value).startswith(f"{tmp_path / 'file' / 'sub'}: cannot open the result cache (NotADirectoryError: ")
    assert str(err.value).endswith("choose a writable local directory with cache.dir= or $RUBRIC_ENGINE_CACHE "
                                   "(a corrupt cache: `rubric-engine cache clear`)")


def test_directory_expands_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with ResultCache("~/calls") as cache:
        assert cache.directory == tmp_path / "calls" and (tmp_path / "calls" / "cache.db").is_file()
        assert repr(cache) == f"ResultCache({str(tmp_path / 'calls')!r})"
    monkeypatch.setenv("RUBRIC_ENGINE_CACHE", "~/explicit")
    assert default_cache_dir() == tmp_path / "explicit"
    monkeypatch.setenv("RUBRIC_ENGINE_CACHE", "")  # empty means unset
    monkeypatch.setenv("XDG_CACHE_HOME", "~/xdg")
    assert default_cache_dir() == tmp_path / "xdg" / "rubric-engine" / "calls"


def test_info_counts_entries_and_bytes(tmp_path: Path) -> None:
    with ResultCache(tmp_path / "c") as cache:
        cache.set("a", {"text": "x" * 5000})
        info = cache.info()
        assert info["entries"] == 1 and isinstance(info["size_bytes"], int) and info["size_bytes"] >= 5000
        assert len(cache) == 1 and cache.clear() == 1 and len(cache) == 0


def test_remove_files_deletes_only_the_stores_own_files(tmp_path: Path) -> None:
    store = tmp_path / "c"
    with ResultCache(store) as cache:
        cache.set("big", {"text": "y" * 200_000})  # large values live in a two-hex-digit sub-directory
    (store / "cache.db-wal").write_bytes(b"")  # left by a crash
    taken = {p.name for p in store.iterdir()}
    other = next(h for h in ("ab", "cd") if h not in taken)  # diskcache's own sub-directory is random: 1 in 256 is ab
    (store / other).mkdir()
    (store / other / "value.val").write_bytes(b"x")
    (store / "notes.txt").write_text("mine")
    (store / "keepdir").mkdir()
    (store / "abc").mkdir()  # not two hex digits
    own = sorted(p.name for p in store.iterdir() if p.name.startswith("cache.db") or
                 (p.is_dir() and len(p.name) == 2))
    assert "cache.db" in own and len([n for n in own if len(n) == 2]) >= 2 and len(own) >= 4
    assert ResultCache.remove_files(store) == len(own)
    assert sorted(p.name for p in store.iterdir()) == ["abc", "keepdir", "notes.txt"]
    assert ResultCache.remove_files(tmp_path / "absent") == 0
    assert ResultCache.remove_files(store / "notes.txt") == 0  # a file, not a directory


def test_remove_files_expands_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    ResultCache(tmp_path / "c").close()
    assert ResultCache.remove_files("~/c") >= 1
    assert not (tmp_path / "c" / "cache.db").exists()


def test_nested_directories_are_created(tmp_path: Path) -> None:
    with ResultCache(tmp_path / "a" / "b" / "calls") as cache:
        cache.set("k", {"v": 1})
    assert (tmp_path / "a" / "b" / "calls" / "cache.db").is_file()
