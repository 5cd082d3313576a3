"""Trust on first use: a data URL without a pinned sha256 is hashed at the first download, the hash is
recorded in the data cache and checked on every later use; a changed file is an error."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rubric_engine.dataset.load import fetch, sha256_file
from rubric_engine.errors import DataError


@pytest.fixture
def served(tmp_path: Path):
    root = tmp_path / "www"
    root.mkdir()
    (root / "rows.jsonl").write_text('{"a": 1}\n')
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/rows.jsonl", root
    srv.shutdown()


def test_first_download_is_recorded_and_checked_later(tmp_path: Path, served) -> None:
    url, root = served
    warnings: list[str] = []
    path, digest = fetch(url, None, tmp_path / "cache", warnings)
    record = path.with_name(path.name + ".sha256")
    assert record.read_text().strip() == digest == sha256_file(root / "rows.jsonl")
    assert any("trusted on first use" in w for w in warnings)
    (root / "rows.jsonl").write_text('{"a": 2}\n')  # upstream changes: the cached, trusted copy is used
    assert fetch(url, None, tmp_path / "cache") == (path, digest)
    path.write_text('{"a": 3}\n')  # the cached file changes behind our back: an error, not a new number
    with pytest.raises(DataError, match="trust on first use"):
        fetch(url, None, tmp_path / "cache")
