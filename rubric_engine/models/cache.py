"""A durable on-disk store of model-call results, shared safely by threads and processes.

Why our own store and not LiteLLM's cache: LiteLLM's disk-cache key ignores `api_base`, it evicts
silently at 1 GiB and it does blocking I/O inside async calls. A benchmark's answers are expensive
data, so this store never evicts (`eviction_policy="none"`), never drops a write silently
(`set` raises), and keeps values as JSON text so the database stays inspectable with sqlite3.

Keys are built by `rubric_engine.models.entries.cache_key`; this module only stores and reads.

Why a Disk of our own (`_DataDisk`): diskcache unpickles any value stored as a pickle, so anyone who can write
to the cache would run code in every process reading it. Ours stores only text and bytes and never loads a
pickle: such a row (planted, or written by another tool through diskcache's own Disk) is a cache miss, warned about once
per cache opened, and asked again. The directory is made readable by its owner only (0700, cache.db 0600):
it holds prompts and replies.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import sys
from typing import Any, Callable

import diskcache

from rubric_engine.errors import CacheError, DiskFull, disk_full

__all__ = ["ResultCache", "CacheError", "default_cache_dir"]

_SIZE_LIMIT = 2**62  # effectively unlimited: eviction is also disabled below
_TIMEOUT = 60.0  # seconds SQLite waits for a lock held by another process before raising
_DB_FILES = ("cache.db", "cache.db-wal", "cache.db-shm")


class _NotData(Exception):
    """A row whose value (or key) diskcache would unpickle: never loaded."""


def _full(exc: BaseException) -> bool:
    """A write refused for want of space: the OS's ENOSPC / EDQUOT, or SQLite's SQLITE_FULL."""
    import sqlite3

    return disk_full(exc) or getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL


class _DataDisk(diskcache.Disk):
    """diskcache's Disk with pickling removed: values are str or bytes, a pickled row raises _NotData."""

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> Any:
        if not read and not isinstance(value, (str, bytes)):
            raise TypeError(f"the result cache stores text or bytes, not {type(value).__name__}")
        return super().store(value, read, key=key)

    def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> Any:
        if mode == diskcache.core.MODE_PICKLE:
            raise _NotData
        return super().fetch(mode, filename, value, read)

    def put(self, key: Any) -> Any:
        if not isinstance(key, (str, bytes)):
            raise TypeError(f"the result cache's keys are text, not {type(key).__name__}")
        return super().put(key)

    def get(self, key: Any, raw: bool) -> Any:
        if not raw:
            raise _NotData
        return super().get(key, raw)


def _private(directory: Path) -> None:
    """The cache directory 0700 and its database files 0600 (created so before SQLite opens them; SQLite gives
    its -wal / -shm files the database's mode). Best effort on a directory the user does not own."""
    try:
        directory.chmod(0o700)
        for name in _DB_FILES:
            path = directory / name
            if name == "cache.db":
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
            if path.exists():
                path.chmod(0o600)
    except PermissionError:
        pass


def _stderr(line: str) -> None:
    print(f"rubric-engine: warning: {line}", file=sys.stderr, flush=True)


def default_cache_dir() -> Path:
    """$RUBRIC_ENGINE_CACHE, else $XDG_CACHE_HOME/rubric-engine/calls (XDG default ~/.cache)."""
    explicit = os.environ.get("RUBRIC_ENGINE_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "rubric-engine" / "calls"


class ResultCache:
    """Key -> JSON-object store on diskcache.Cache. Values must be JSON-serialisable dicts."""

    def __init__(self, directory: str | Path, warn: Callable[[str], None] | None = None) -> None:
        """`warn` says once that a row is not data (default: one line on stderr)."""
        self.directory = Path(directory).expanduser()
        self._warn = warn or _stderr
        self._warned = False
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            _private(self.directory)
            self._cache = diskcache.Cache(str(self.directory), eviction_policy="none", disk=_DataDisk,
                                          size_limit=_SIZE_LIMIT, timeout=_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - any failure here means "cannot use this directory"
            raise CacheError(f"{self.directory}: cannot open the result cache ({type(exc).__name__}: {exc}); "
                             "choose a writable local directory with cache.dir= or $RUBRIC_ENGINE_CACHE (a corrupt cache: `rubric-engine cache clear`)") from exc

    # -- read / write ----------------------------------------------------------------------
    def get(self, key: str) -> dict[str, Any] | None:
        """The stored dict, or None when absent. An unreadable entry is treated as absent."""
        try:
            raw = self._cache.get(key, default=None, retry=True)
        except _NotData:
            self._not_data()
            return None
        except Exception as exc:  # noqa: BLE001
            raise self._error("read", exc) from exc
        if raw is None:
            return None
        try:
            value = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def set(self, key: str, value: dict[str, Any]) -> None:
        """Store `value`; raises CacheError instead of ever dropping a write."""
        try:
            text = json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise CacheError(f"{self.directory}: value for key {key[:16]}... is not JSON-serialisable ({exc})") from exc
        try:
            ok = self._cache.set(key, text, retry=True)
        except UnicodeEncodeError as exc:  # a lone surrogate: the text is at fault, not the disk
            raise CacheError(f"{self.directory}: value for key {key[:16]}... is not valid Unicode ({exc.reason} at "
                             f"character {exc.start}); the text came from a model or a data file") from exc
        except Exception as exc:  # noqa: BLE001
            if _full(exc):  # the run stops like the first Ctrl-C and names the cache (models/interrupt.py)
                raise DiskFull(self.directory / "cache.db") from exc
            raise self._error("write", exc) from exc
        if not ok:
            raise CacheError(f"{self.directory}: the cache refused a write (key {key[:16]}...); "
                             "check free disk space and that the directory is on a local disk")

    def _not_data(self) -> None:
        if not self._warned:
            self._warned = True
            self._warn(f"the call cache {self.directory} holds a row that is not data (a pickled Python object, "
                       "written by another program): it is never loaded, the call is made again "
                       "(`rubric-engine cache clear` removes such rows)")

    def __contains__(self, key: object) -> bool:
        return key in self._cache

    def __len__(self) -> int:
        return len(self._cache)

    # -- maintenance -----------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """{'directory', 'entries', 'size_bytes'} for `rubric-engine cache info`."""
        try:
            return {"directory": str(self.directory), "entries": len(self._cache),
                    "size_bytes": int(self._cache.volume())}
        except Exception as exc:  # noqa: BLE001
            raise self._error("read", exc) from exc

    def clear(self) -> int:
        """Delete every entry; returns how many were removed."""
        try:
            return int(self._cache.clear(retry=True))
        except Exception as exc:  # noqa: BLE001
            raise self._error("clear", exc) from exc

    @staticmethod
    def remove_files(directory: str | Path) -> int:
        """Delete the store's own files (cache.db*, its value sub-directories) when it cannot even be
        opened (a corrupt database): `cache clear` must work exactly when the cache is broken."""
        import re
        import shutil

        directory, removed = Path(directory).expanduser(), 0
        for entry in directory.iterdir() if directory.is_dir() else []:
            if entry.is_file() and entry.name.startswith("cache.db"):
                entry.unlink()
                removed += 1
            elif entry.is_dir() and re.fullmatch(r"[0-9a-f]{2}", entry.name):
                shutil.rmtree(entry)
                removed += 1
        return removed

    def close(self) -> None:
        self._cache.close()

    def __enter__(self) -> "ResultCache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResultCache({str(self.directory)!r})"

    def _error(self, what: str, exc: Exception) -> CacheError:
        return CacheError(f"{self.directory}: cannot {what} the result cache ({type(exc).__name__}: {exc}); "
                          "check disk space and permissions, and keep the cache on a local disk")
