"""`rubric-engine view [DIR ...]`: write the index of past runs (report/index_page.py), open it, or serve it.

Why a module of its own: besides parsing it owns the one small web server of the command line (stdlib
http.server, bound to 127.0.0.1 only), which serves the index and the runs' report.html files and nothing else of
the run directories (no samples, no logs), until Ctrl-C or SIGTERM. A run directory is data anyone with write
access may have shaped, and any web page the user opens can send requests to 127.0.0.1, so the server answers
only GET and HEAD, only with a `Host:` naming its own address (a page reaching it by DNS rebinding names
another), and only from regular files inside the roots it was given, opened without following a symlink.
"""

from __future__ import annotations

import http.server
import os
import signal
import sys
import webbrowser
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rubric_engine.cli.args import COMMANDS, as_bool, as_int, parse
from rubric_engine.errors import ConfigError

__all__ = ["view_main", "DEFAULT_DIRS"]

DEFAULT_DIRS = ("outputs", "multirun")


def _roots(positionals: Sequence[str]) -> list[Path]:
    if positionals:
        return [Path(p).expanduser() for p in positionals]
    found = [Path(d) for d in DEFAULT_DIRS if Path(d).is_dir()]
    if not found:
        raise ConfigError(f"view: no {' or '.join(d + '/' for d in DEFAULT_DIRS)} in {Path.cwd()}; run it where your "
                          "runs are, or pass the directories holding them: rubric-engine view DIR [DIR ...]")
    return found


def _open(target: str) -> None:
    """Open the page in a browser, only when a person is at a terminal (never in a pipe, a CI log or a test) and a
    graphical browser can be reached: on Linux without a display (or $BROWSER) Python would start a text browser
    inside this terminal, so the address is printed for the user to open instead."""
    if not sys.stdout.isatty():
        return
    headless = sys.platform.startswith("linux") and not any(os.environ.get(v) for v in ("DISPLAY", "WAYLAND_DISPLAY",
                                                                                          "BROWSER"))
    if headless or not webbrowser.open(target):
        print(f"open {target} in a browser", flush=True)


def view_main(argv: Sequence[str]) -> int:
    """Scan, write (or serve) the index, print where it is."""
    from rubric_engine.report.index_page import relative_link, render_index
    from rubric_engine.results.runindex import STATES, scan_runs
    from rubric_engine.store.layout import write_text

    parsed = parse(COMMANDS["view"], argv)
    roots = _roots(parsed.positionals)
    entries = scan_runs(roots)
    counts = ", ".join(f"{n} {s}" for s in STATES if (n := sum(e.state == s for e in entries)))
    open_it = as_bool(parsed.get("open", "true"), "open", "view")
    if as_bool(parsed.get("serve", "false"), "serve", "view"):
        files = {f"/runs/{i}/report.html": e.report for i, e in enumerate(entries) if e.report is not None}
        boards = {e.sweep / "report.html" for e in entries if e.sweep is not None and (e.sweep / "report.html").is_file()}
        files.update({f"/sweeps/{i}/report.html": p for i, p in enumerate(sorted(boards))})
        href = {path: url for url, path in files.items()}
        page = render_index(entries, roots, lambda p: href.get(p, "#"))
        return _serve(page, files, roots, as_int(parsed.get("port", "8000"), "port", "view", 0), len(entries), counts,
                      open_it)
    out = Path(parsed.get("out", "runs.html") or "runs.html").expanduser()
    if out.is_dir():
        out = out / "runs.html"
    write_text(out, render_index(entries, roots, relative_link(out)))
    print(f"index of {len(entries)} run(s){': ' + counts if counts else ''}: {out}", flush=True)
    if open_it:
        _open(out.resolve().as_uri())
    return 0


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    """Whether `path`, every symlink of its directories resolved, lies inside one of the roots (resolved too)."""
    real = Path(os.path.realpath(path.parent)) / path.name
    return any(real.is_relative_to(os.path.realpath(r)) for r in roots)


def read_served(path: Path, roots: Sequence[Path]) -> bytes | None:
    """A report's bytes when it is a regular file inside the roots, opened without following a symlink (a
    `report.html` planted as a link to a secret is not read); None otherwise."""
    import stat

    if not _inside(path, roots):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return fh.read()


def _serve(page: str, files: dict[str, Path], roots: Sequence[Path], port: int, n: int, counts: str,
           open_it: bool) -> int:
    """Serve the page at / and each listed report at its own path on 127.0.0.1; anything else is 404, a foreign
    Host 403, a method other than GET / HEAD 405."""
    body = page.encode("utf-8")
    hosts: set[str] = set()  # filled once the port is known

    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = 30  # an idle client's connection is closed, never held open

        def _page(self) -> bytes | None:
            from urllib.parse import urlsplit

            if self.headers.get("Host", "").lower() not in hosts:
                self.send_error(403, "Host is not this server's address")
                return None
            path = urlsplit(self.path).path
            target = files.get(path)
            data = body if path in ("/", "/index.html") else (read_served(target, roots) if target else None)
            if data is None:
                self.send_error(404, "not a page of this index")
                return None
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            return data

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            data = self._page()
            if data is not None:
                self.wfile.write(data)

        def do_HEAD(self) -> None:  # noqa: N802
            self._page()

        def _read_only(self) -> None:
            self.send_response(405, "read-only")
            self.send_header("Allow", "GET, HEAD")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _read_only  # noqa: N815

        def log_message(self, *args: Any) -> None:  # no access log on the terminal
            return

    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        raise ConfigError(f"view: cannot listen on 127.0.0.1:{port} ({exc.strerror or exc}); choose another "
                          "port=N (0: any free port)") from None

    def stop(*_: Any) -> None:
        raise KeyboardInterrupt

    # both set explicitly: a process started in the background by a non-interactive shell inherits SIGINT
    # ignored, and Python then installs no KeyboardInterrupt for it (Ctrl-C / kill -INT would do nothing)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    bound = server.server_address[1]
    hosts.update({f"127.0.0.1:{bound}", f"localhost:{bound}"})
    url = f"http://127.0.0.1:{bound}/"
    print(f"index of {n} run(s){': ' + counts if counts else ''}: serving {url} (Ctrl-C stops)", flush=True)
    if open_it:
        _open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
