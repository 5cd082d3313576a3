"""`rubric-engine view`: the index of past runs, through the console script, over run directories of every state made
by real runs (tests/view_runs.py): finished and rejected sweep jobs, a run that scored nothing, a run seen running
while it hung and then interrupted with SIGINT. The typed rows (results/runindex.py) are checked on their own, the
page for what it shows and links, and `serve=true` for what it serves (the index and reports, nothing else)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from conftest import EXE
from view_runs import FAST, make_runs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("view")
    return root, make_runs(root)


def _by_name(root: Path) -> dict[str, Any]:
    from rubric_engine.results.runindex import scan_runs

    return {e.dir.name: e for e in scan_runs([root / "outputs", root / "multirun"])}


def test_states_from_what_each_directory_holds(runs) -> None:
    root, made = runs
    got = _by_name(root)
    jobs = {n: e for n, e in got.items() if e.sweep is not None}
    assert sorted(e.state for e in jobs.values()) == ["finished", "finished", "rejected", "rejected"]
    assert all(e.sweep == root / "multirun" / "sweep" for e in jobs.values())
    for name, e in jobs.items():
        if e.state == "rejected":
            assert "limit=-3" in name and "limit=-3 is not valid" in e.reason and e.overall is None
        else:
            summary = json.loads((e.dir / "summary.json").read_text())
            assert (e.overall, e.lo, e.hi) == (summary["overall"], summary["interval"]["lo"], summary["interval"]["hi"])
            assert e.wall_seconds == summary["wall_seconds"]["total"] and e.cost == 0.0 and not e.cost_partial
            assert (e.candidate, e.judge, e.benchmark) == (summary["candidate"]["name"], "mock-judge", "heartbench_en")
            assert e.report == e.dir / "report.html" and e.started == summary["created"] or e.started
            # the compare view's tables: the spec's declared titles and labels, the summary's numbers
            dims = summary["breakdowns"]["dimensions"]
            assert list(e.tables["Dimensions"].values()) == list(dims.values()) and "Personality" in e.tables["Dimensions"]
            assert e.tables["Subsets"]["Hard"] == summary["subsets"]["hard"]
    failed, stopped = got["failed"], got["stopped"]
    assert failed.state == "failed" and failed.reason.startswith("nothing was scored (3 candidate errors")
    assert failed.sweep is None and failed.candidate == "broken" and failed.overall is None
    # the first SIGINT waits for the call in flight (it answers after 90 s, inside the 120 s timeout) and the rest
    # are never sent; the question that hung is journaled when its offline judge also ran before the drain ended
    # (a race this test does not own: tests/run/test_signals.py holds the drain's rules). The view says what the
    # journal holds, whichever it is.
    journaled = sum("id" in json.loads(line) for line in (stopped.dir / "samples.jsonl").read_text().splitlines())
    assert journaled in (FAST, FAST + 1)
    assert stopped.state == "interrupted" and f"{journaled} of 5 questions in the journal" in stopped.reason
    assert (stopped.candidate, stopped.candidate_model, stopped.judge) == ("slow", "openai/slow", "mock-judge")
    assert stopped.benchmark == "heartbench_en" and stopped.report is None
    # while it hung, the same directory was seen running (its lock held by the live process)
    seen = made["running"]
    assert seen.returncode == 0, seen.stderr
    assert "1 running" in seen.stdout and "1 failed" in seen.stdout
    assert "interrupted" not in seen.stdout


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.rows: list[str] = []
        self.sections: list[str] = []
        self.urls: list[str] = []
        self._h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a":
            self.links.append(str(a.get("href")))
        if tag == "tr" and a.get("data-text") is not None:
            self.rows.append(str(a["data-text"]))
        self.urls += [str(v) for k, v in attrs if k in ("src", "href") and v and "://" in v]
        self._h2 = tag == "h2"

    def handle_data(self, data: str) -> None:
        if self._h2:
            self.sections.append(data)
            self._h2 = False


def test_index_page_lists_groups_and_links_every_report(runs) -> None:
    root, made = runs
    res = subprocess.run([EXE, "view", "open=false"], cwd=root, env=made["env"], capture_output=True, text=True,
                         timeout=120)  # default directories: outputs/ and multirun/ here
    assert res.returncode == 0, res.stderr
    assert re.fullmatch(r"index of 6 run\(s\): 2 finished, 1 interrupted, 1 failed, 2 rejected: runs\.html\n",
                        res.stdout), res.stdout
    page = (root / "runs.html").read_text(encoding="utf-8")
    p = _Page()
    p.feed(page)
    assert p.urls == []  # offline: nothing is fetched, no link leaves the disk
    assert "default-src 'none'" in page
    assert p.sections == [f"Sweep {Path('multirun') / 'sweep'}", "Single runs"]
    assert len(p.rows) == 6 and sum(r.startswith("interrupted ") for r in p.rows) == 1
    targets = [(root / unquote(h)).resolve() for h in p.links]
    assert all(t.is_file() for t in targets), p.links
    # the 2 finished jobs, the run that scored nothing (its page shows every error), the sweep's leaderboard
    assert sorted(t.parent.name for t in targets if "limit=4" not in t.parent.name) == ["failed", "sweep"]
    assert len(targets) == 4 and {t.name for t in targets} == {"report.html"}
    assert (root / "multirun" / "sweep" / "report.html").resolve() in targets
    data = json.loads(re.search(r'<script type="application/json" id="runs-data">(.*?)</script>', page, re.S).group(1))
    assert sorted(d["state"] for d in data) == ["failed", "finished", "finished", "interrupted", "rejected", "rejected"]


def test_a_missing_directory_is_one_line(runs, tmp_path: Path) -> None:
    root, made = runs
    res = subprocess.run([EXE, "view", str(tmp_path / "nowhere")], cwd=root, env=made["env"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and "nowhere is not a directory" in res.stderr and res.stdout == ""
    empty = subprocess.run([EXE, "view"], cwd=tmp_path, env=made["env"], capture_output=True, text=True, timeout=120)
    assert empty.returncode == 2 and "no outputs/ or multirun/" in empty.stderr


def test_serve_gives_the_index_and_reports_only_on_localhost(runs) -> None:
    root, made = runs
    proc = subprocess.Popen([EXE, "view", "outputs", "multirun", "serve=true", "port=0", "open=false"], cwd=root,
                            env=made["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = re.search(r"serving (http://127\.0\.0\.1:\d+/) ", line).group(1)
        index = urllib.request.urlopen(url, timeout=30).read().decode("utf-8")
        hrefs = re.findall(r'href="(/[^"]+)"', index)
        assert len(hrefs) == 4
        for h in hrefs:
            assert urllib.request.urlopen(url.rstrip("/") + h, timeout=30).read().lstrip().startswith(b"<!DOCTYPE html>")
        job = next(p for p in (root / "multirun" / "sweep").iterdir() if (p / "samples.jsonl").is_file())
        for bad in ("/samples.jsonl", f"/{job.name}/samples.jsonl", "/../../etc/passwd", "/runs/99/report.html"):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(url.rstrip("/") + bad, timeout=30)
            assert err.value.code == 404
    finally:
        proc.send_signal(signal.SIGINT)
        out, err_text = proc.communicate(timeout=60)
    assert proc.returncode == 0, err_text


def test_lock_is_read_without_taking_it(tmp_path: Path) -> None:
    """`running` means a live process holds the run's lock; reading it never takes the lock (a run starting at that
    moment must not be refused), so a lock file left by an ended run reads as not held."""
    import fcntl
    import os

    from rubric_engine.results.runindex import lock_held

    assert not lock_held(tmp_path)  # no lock file
    fd = os.open(tmp_path / ".rubric-engine.lock", os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
        assert not lock_held(tmp_path)  # the file alone, as an ended run leaves it
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert lock_held(tmp_path)
        other = os.open(tmp_path / ".rubric-engine.lock", os.O_RDWR)  # and a run could still not take it: held
        try:
            with pytest.raises(OSError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    finally:
        os.close(fd)
    assert not lock_held(tmp_path)


def _planted(root: Path) -> Path:
    """Two hand-made run directories: one with its own report.html, one whose report.html is a symlink to a
    secret outside the runs (as a hostile local user could plant)."""
    secret = root / "secret.txt"
    secret.write_text("AWS_SECRET=planted-secret-value\n", encoding="utf-8")
    for name in ("honest", "planted"):
        run = root / "outputs" / name
        run.mkdir(parents=True)
        (run / "summary.json").write_text(json.dumps({"benchmark": "b", "overall": 50.0}), encoding="utf-8")
    (root / "outputs" / "honest" / "report.html").write_text("<!DOCTYPE html><p>honest</p>", encoding="utf-8")
    (root / "outputs" / "planted" / "report.html").symlink_to(secret)
    return secret


def _request(port: int, method: str, path: str, host: str | None = None) -> tuple[int, bytes, dict[str, str]]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        res = conn.getresponse()
        return res.status, res.read(), {k.lower(): v for k, v in res.getheaders()}
    finally:
        conn.close()


def test_serve_follows_no_symlink_checks_host_and_is_read_only(tmp_path: Path) -> None:
    secret = _planted(tmp_path)
    proc = subprocess.Popen([EXE, "view", "outputs", "serve=true", "port=0", "open=false"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        port = int(re.search(r"serving http://127\.0\.0\.1:(\d+)/ ", line).group(1))
        here = f"127.0.0.1:{port}"
        status, index, _ = _request(port, "GET", "/", here)
        assert status == 200
        hrefs = re.findall(r'href="(/runs/[^"]+)"', index.decode("utf-8"))
        got = [_request(port, "GET", h, here) for h in hrefs]
        assert all(b"planted-secret-value" not in body for _, body, _ in got)
        assert len(hrefs) == 2 and sorted(s for s, _, _ in got) == [200, 404]  # the planted link is not served
        assert any(body.endswith(b"<p>honest</p>") for s, body, _ in got if s == 200)
        # DNS rebinding: a page of another origin reaches 127.0.0.1 under its own name; refused
        assert _request(port, "GET", "/", f"evil.example:{port}")[0] == 403
        assert _request(port, "GET", "/", None)[0] == 403  # no Host at all
        assert _request(port, "GET", "/", f"localhost:{port}")[0] == 200
        # read-only: GET and HEAD, nothing else
        status, body, headers = _request(port, "HEAD", "/", here)
        assert status == 200 and body == b"" and int(headers["content-length"]) == len(index)
        for method in ("POST", "PUT", "DELETE"):
            status, _, headers = _request(port, method, "/", here)
            assert status == 405 and headers.get("allow") == "GET, HEAD"
    finally:
        proc.send_signal(signal.SIGINT)
        _, err_text = proc.communicate(timeout=60)
    assert proc.returncode == 0, err_text
    assert secret.read_text(encoding="utf-8").startswith("AWS_SECRET")
