"""Benchmark data files from upstream: download once, pinned by sha256 (or trusted on first use).

Why apart from parsing (dataset/load.py): downloading is network and cache-directory work; parsing and
validating rows is not, and neither needs the other's imports.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from rubric_engine.errors import DataError
from rubric_engine.spec.checks import fetchable_url

__all__ = ["default_data_cache_dir", "fetch", "sha256_file"]


def default_data_cache_dir() -> Path:
    """$XDG_CACHE_HOME/rubric-engine/data (default ~/.cache/rubric-engine/data)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rubric-engine" / "data"


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(url: str, sha256: str | None, cache_dir: str | Path | None = None,
          warnings: list[str] | None = None, timeout: float = 60.0) -> tuple[Path, str]:
    """Download `url` once into `<cache_dir>/<sha256>/<filename>`; return (path, sha256).

    Written to a temp file and renamed, so an interrupted download never leaves a half file behind; a
    pinned sha256 is checked on every use, and a bad file is deleted rather than kept.
    """
    warnings = warnings if warnings is not None else []
    if not fetchable_url(url):  # a spec's URLs are checked when it loads; this holds for every other caller too
        raise DataError(url, "only https:// URLs (or http:// to 127.0.0.1 / localhost) are downloaded",
                        fix="give a local file as a path (data.path=FILE) instead of a file:// URL")
    name = Path(urllib.parse.urlparse(url).path).name or "data"
    sub = sha256 or "unverified-" + hashlib.sha256(url.encode()).hexdigest()[:16]
    target = Path(cache_dir or default_data_cache_dir()).expanduser() / sub / name
    first_use = target.with_name(target.name + ".sha256")  # trust on first use, when nothing is pinned
    if target.is_file():
        digest = sha256_file(target)
        if sha256 is None and first_use.is_file() and first_use.read_text().strip() != digest:
            raise DataError(str(target), f"sha256 {digest} differs from {first_use.read_text().strip()} recorded when "
                            "it was first downloaded (trust on first use): the cached file changed",
                            fix=f"delete {target.parent} to download and trust it again, or pin data.sha256")
        if sha256 is None and not first_use.is_file():  # killed between the rename and the record: record it now
            _record(url, digest, first_use, warnings)
        if sha256 is None or digest == sha256:
            return target, digest
        target.unlink()
        warnings.append(f"cached copy {target} had sha256 {digest}, expected {sha256}: deleted and downloaded again")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        h, size = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            for chunk in iter(lambda: resp.read(1 << 20), b""):
                h.update(chunk)
                out.write(chunk)
                size += len(chunk)
            announced = resp.headers.get("Content-Length")
        if announced is not None and announced.strip().isdigit() and size < int(announced):
            # http.client ends a chunked read of a short body quietly instead of raising IncompleteRead
            raise DataError(url, f"download cut off: {size} of {int(announced)} bytes arrived (the server closed "
                            "the connection early)",
                            fix="run the same command again, or download the file and pass data.path=<file>")
        digest = h.hexdigest()
        if sha256 and digest != sha256:
            raise DataError(url, f"downloaded file has sha256 {digest} but the spec expects {sha256} "
                            "(data.sha256); the bad file was deleted",
                            fix="the upstream file changed or the download was corrupted: check data.url and "
                                "data.sha256, or download the file yourself and pass data.path=<file>")
        os.replace(tmp, target)
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DataError(url, f"download failed: {reason}",
                        fix="check the network / data.url, or download the file and pass data.path=<file>") from exc
    finally:
        tmp.unlink(missing_ok=True)
    if not sha256:
        _record(url, digest, first_use, warnings)
    return target, digest


def _record(url: str, digest: str, first_use: Path, warnings: list[str]) -> None:
    """Trust on first use: the digest is kept beside the file and checked on every later use."""
    first_use.write_text(digest + "\n")
    warnings.append(f"the spec pins no data.sha256: {url} was trusted on first use; its sha256 {digest} is "
                    f"recorded in {first_use} and checked on every later use")
