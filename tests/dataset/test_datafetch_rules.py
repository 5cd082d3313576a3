"""datafetch: the download path against a server on 127.0.0.1 (a stalled body, a cut-off body, a pinned copy
re-checked, a trust-on-first-use record), the cache layout and what is left on disk after a failure. Written
against survivors of `python bench/mutation.py datafetch`; the files served are our own."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dataset.fetch import fetch, sha256_file
from rubric_engine.errors import DataError

BODY = b'{"question_id": "a"}\n' * 3


class Server:
    """Routes on 127.0.0.1: "ok" serves BODY, "stall" sends headers then nothing, "cut" half the announced body.

    http.client does not raise IncompleteRead when a body read in chunks ends short (it only stops), so the
    cut-off case has to be caught by the engine."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.asked = threading.Event()  # set once a request arrived (the client has made its temp file by then)
        self.release = threading.Event()
        self.body = BODY
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server.requests.append(self.path)
                server.asked.set()
                kind = self.path.strip("/").split("/")[0]
                if kind == "big":
                    body = bytes(range(256)) * (10 << 10)  # 2.5 MiB: more than one read of the download loop
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if kind in ("nolength", "badlength"):  # the body ends when the connection closes
                    self.send_response(200)
                    if kind == "badlength":
                        self.send_header("Content-Length", "about 60")
                    self.end_headers()
                    self.wfile.write(server.body)
                    self.close_connection = True
                    return
                if kind not in ("ok", "stall", "cut"):
                    self.send_error(404, "Nothing here")
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(server.body) * (2 if kind == "cut" else 1)))
                self.end_headers()
                if kind == "stall":
                    server.release.wait(30)
                    return
                self.wfile.write(server.body)
                self.wfile.flush()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    srv = Server()
    threading.Thread(target=srv.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield srv
    finally:
        srv.release.set()
        srv.httpd.shutdown()
        srv.httpd.server_close()


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_stalled_download_ends_at_the_timeout_and_leaves_no_part_file(server: Server, tmp_path: Path) -> None:
    url = f"{server.base}/stall/rows.jsonl"
    with pytest.raises(DataError) as err:
        fetch(url, None, tmp_path / "c", [], timeout=0.3)
    assert str(err.value) == (f"{url}: download failed: timed out; check the network / data.url, or download the "
                              "file and pass data.path=<file>")
    assert files_under(tmp_path / "c") == []


def test_a_cut_off_download_fails_and_leaves_nothing(server: Server, tmp_path: Path) -> None:
    url = f"{server.base}/cut/rows.jsonl"
    with pytest.raises(DataError) as err:
        fetch(url, None, tmp_path / "c", [])
    assert str(err.value) == (f"{url}: download cut off: {len(BODY)} of {2 * len(BODY)} bytes arrived (the "
                              "server closed the connection early); run the same command again, or download the "
                              "file and pass data.path=<file>")
    assert files_under(tmp_path / "c") == []  # above all no half file trusted on first use


def test_a_cut_off_pinned_download_is_reported_as_cut_off(server: Server, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="download cut off"):
        fetch(f"{server.base}/cut/rows.jsonl", hashlib.sha256(BODY * 2).hexdigest(), tmp_path / "c", [])
    assert files_under(tmp_path / "c") == []


def test_a_pinned_mismatch_keeps_neither_the_file_nor_a_part_file(server: Server, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="the bad file was deleted"):
        fetch(f"{server.base}/ok/rows.jsonl", "0" * 64, tmp_path / "c", [])
    assert files_under(tmp_path / "c") == []


def test_a_pinned_download_is_stored_under_its_hash_and_then_served_from_the_cache(server: Server,
                                                                                     tmp_path: Path) -> None:
    pin = hashlib.sha256(BODY).hexdigest()
    warnings: list[str] = []
    path, digest = fetch(f"{server.base}/ok/rows.jsonl", pin, tmp_path / "c", warnings)
    assert (path, digest, warnings) == (tmp_path / "c" / pin / "rows.jsonl", pin, [])
    assert path.read_bytes() == BODY and files_under(tmp_path / "c") == [f"{pin}/rows.jsonl"]  # no record when pinned
    server.body = b"changed upstream"
    assert fetch(f"{server.base}/ok/rows.jsonl", pin, tmp_path / "c", warnings) == (path, pin)
    assert server.requests == ["/ok/rows.jsonl"] and warnings == []


def test_a_damaged_pinned_copy_is_replaced_in_its_directory_with_a_warning(server: Server, tmp_path: Path) -> None:
    pin = hashlib.sha256(BODY).hexdigest()
    path, _ = fetch(f"{server.base}/ok/rows.jsonl", pin, tmp_path / "c", [])
    path.write_bytes(b"damaged")
    bad = hashlib.sha256(b"damaged").hexdigest()
    warnings: list[str] = []
    assert fetch(f"{server.base}/ok/rows.jsonl", pin, tmp_path / "c", warnings) == (path, pin)
    assert warnings == [f"cached copy {path} had sha256 {bad}, expected {pin}: deleted and downloaded again"]
    assert path.read_bytes() == BODY and len(server.requests) == 2


def test_a_damaged_pinned_copy_that_cannot_be_fetched_again_is_gone(server: Server, tmp_path: Path) -> None:
    pin = hashlib.sha256(BODY).hexdigest()
    path, _ = fetch(f"{server.base}/ok/rows.jsonl", pin, tmp_path / "c", [])
    path.write_bytes(b"damaged")
    server.body = b"also wrong"
    with pytest.raises(DataError, match="downloaded file has sha256"):
        fetch(f"{server.base}/ok/rows.jsonl", pin, tmp_path / "c", [])
    assert files_under(tmp_path / "c") == []  # never the damaged copy for the next run to trust


def test_the_cache_dir_may_start_with_a_tilde(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    pin = hashlib.sha256(BODY).hexdigest()
    path, _ = fetch(f"{server.base}/ok/rows.jsonl", pin, "~/cache", [])
    assert path == tmp_path / "cache" / pin / "rows.jsonl" and path.is_file()


def test_without_a_cache_dir_the_default_one_is_used(server: Server, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    pin = hashlib.sha256(BODY).hexdigest()
    path, _ = fetch(f"{server.base}/ok/rows.jsonl", pin)
    assert path == tmp_path / "xdg" / "rubric-engine" / "data" / pin / "rows.jsonl"


def test_the_first_use_record_is_checked_against_the_file_not_upstream(server: Server, tmp_path: Path) -> None:
    url = f"{server.base}/ok/rows.jsonl"
    path, digest = fetch(url, None, tmp_path / "c", [])
    record = path.with_name("rows.jsonl.sha256")
    assert record.read_text() == digest + "\n" and digest == sha256_file(path)
    record.write_text(f"  {digest}\n\n")  # whitespace around the recorded hash is not a change
    warnings: list[str] = []
    assert fetch(url, None, tmp_path / "c", warnings) == (path, digest) and warnings == []
    assert server.requests == ["/ok/rows.jsonl"]


def test_a_cached_unpinned_file_without_its_record_is_recorded_then_checked(server: Server, tmp_path: Path) -> None:
    """A kill between the rename and the record leaves a file nobody recorded: it is recorded at its next use,
    with the trust-on-first-use warning, so a later change is still caught."""
    url = f"{server.base}/ok/rows.jsonl"
    path, digest = fetch(url, None, tmp_path / "c", [])
    record = path.with_name("rows.jsonl.sha256")
    record.unlink()
    warnings: list[str] = []
    assert fetch(url, None, tmp_path / "c", warnings) == (path, digest)
    assert record.read_text() == digest + "\n"
    assert warnings == [f"the spec pins no data.sha256: {url} was trusted on first use; its sha256 {digest} is "
                        f"recorded in {record} and checked on every later use"]
    path.write_bytes(b"changed")
    with pytest.raises(DataError, match="the cached file changed"):
        fetch(url, None, tmp_path / "c", [])


def test_a_download_in_progress_is_a_hidden_part_file_beside_its_target(server: Server, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Beside the target, so the final rename stays on one file system (atomic); never in the system temp dir."""
    import tempfile

    elsewhere = tmp_path / "system-tmp"
    elsewhere.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    pin = hashlib.sha256(BODY).hexdigest()
    failed: list[BaseException] = []

    def download() -> None:
        try:
            fetch(f"{server.base}/stall/rows.jsonl", pin, tmp_path / "c", [], timeout=30)
        except DataError as exc:
            failed.append(exc)

    worker = threading.Thread(target=download)
    worker.start()
    try:
        assert server.asked.wait(30)
        (part,) = (tmp_path / "c" / pin).iterdir()
        assert part.name.startswith(".rows.jsonl.") and part.name.endswith(".part") and part.name != ".rows.jsonl..part"
        assert list(elsewhere.iterdir()) == []
    finally:
        server.release.set()
        worker.join(30)
    assert [str(e).split(": ", 1)[1][:16] for e in failed] == ["download cut off"]
    assert files_under(tmp_path / "c") == []


def test_a_download_larger_than_one_read_is_whole(server: Server, tmp_path: Path) -> None:
    body = bytes(range(256)) * (10 << 10)
    path, digest = fetch(f"{server.base}/big/blob.bin", None, tmp_path / "c", [])
    assert path.read_bytes() == body and digest == hashlib.sha256(body).hexdigest() == sha256_file(path)


@pytest.mark.parametrize("kind", ["nolength", "badlength"])
def test_a_body_without_a_usable_length_is_read_to_the_end(server: Server, tmp_path: Path, kind: str) -> None:
    path, digest = fetch(f"{server.base}/{kind}/rows.jsonl", None, tmp_path / "c", [])
    assert path.read_bytes() == BODY and digest == hashlib.sha256(BODY).hexdigest()


@pytest.mark.slow
def test_data_fetch_of_a_cut_off_download_is_one_line_and_exit_2(server: Server, tmp_path: Path) -> None:
    """The same failure through the console script: one line saying what to do, nothing left in the cache."""
    from conftest import REPO, clean_env, run_cli

    bench = tmp_path / "remote_bench"
    bench.mkdir()
    (bench / "benchmark.yaml").write_text(f"extends: heartbench\nname: remote_bench\ndata:\n  url: {server.base}/cut/"
                                          f"rows.jsonl\n  sha256: {hashlib.sha256(BODY * 2).hexdigest()}\n",
                                          encoding="utf-8")
    env = dict(clean_env(tmp_path), no_proxy="127.0.0.1", NO_PROXY="127.0.0.1")
    res = run_cli(["data", "fetch", f"benchmark={bench}", f"benchmark_dirs=[{REPO / 'benchmarks'}]",
                   f"data.cache_dir={tmp_path / 'dc'}"], env, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("rubric-engine: error:")]
    assert len(errors) == 1 and "Traceback" not in res.stderr, res.stderr
    assert errors[0] == (f"rubric-engine: error: {server.base}/cut/rows.jsonl: download cut off: {len(BODY)} of "
                         f"{2 * len(BODY)} bytes arrived (the server closed the connection early); run the same "
                         "command again, or download the file and pass data.path=<file>")
    assert files_under(tmp_path / "dc") == []
