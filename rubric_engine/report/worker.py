"""report.html built by a helper process that loads its libraries while the run waits on the network.

Why: building a run's report.html costs about 2 s of CPU at the end of a run (matplotlib's import and
first figure, our report modules, the leaderboard's bootstrap, the charts), all of it after the last
reply, on the one core the run's process uses. The command line starts this worker once a run has
passed its checks (`start()`, cli/startup.report_worker_for); it imports matplotlib and the report
modules and draws one throw-away figure on the machine's other core while the run is busy with
requests, then builds the page when the run has
written its files (`build(run_dir)`), and the run waits for it: report.html exists when the process
exits. Any failure of the worker (it could not start, it died, it answered nonsense) falls back to
building the page in the run's own process, where a failure is one warning line as before, so the
worker can never cost the run its report, let alone its scores. Python callers of `run_benchmark`
get the in-process build unless they `start()` a worker themselves.

Protocol: one JSON object per line. The run sends {"run_dir": ..., "n_boot": ..., "trust_code": ..., "path":
[the run's sys.path]} (the worker, started isolated, appends the entries it lacks, so a plugin's or a trusted
module's scoring formula resolves there as in the run); the worker answers
{"ok": "<path>"} or {"error": "<type>: <message>"}. End of input ends the worker (also when the run's
process dies), so it never outlives the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from rubric_engine.store.layout import REPORT_FILE

__all__ = ["start", "stop", "active", "build", "build_report", "WorkerFailed"]

# A page of REPORT_MAX_QUESTIONS questions takes well under a minute; a worker silent for this long is
# hung, and the run builds its page itself rather than wait for ever.
ANSWER_TIMEOUT = 600.0


def build_report(run_dir: Path, *, n_boot: int = 1000, trust_code: bool = False) -> Path:
    """report.html in run_dir from its finished files, here or in the worker (raises on failure: the caller
    words the warning, run_report.write_run_report)."""
    from rubric_engine.report import html_views
    from rubric_engine.report.leaderboard import write_leaderboard
    from rubric_engine.results.leaderboard import build_leaderboard
    from rubric_engine.store.layout import write_text
    from rubric_engine.store.runs import load_run

    lb = build_leaderboard([load_run(run_dir, trust_code)], n_boot=n_boot)
    with tempfile.TemporaryDirectory(prefix="rubric-engine-report-") as tmp:
        built = write_leaderboard(lb, Path(tmp), agreement=html_views.find_agreement([run_dir]),
                                  chart_formats=("png",))["html"]  # only the embedded PNGs
        target = run_dir / REPORT_FILE
        write_text(target, built.read_text(encoding="utf-8"))  # atomic: a full disk leaves no half page
    return target


class WorkerFailed(Exception):
    """The worker gave no usable answer; the caller builds the report itself."""


class _Worker:
    def __init__(self) -> None:
        # -I: the working directory (a benchmark checkout, anything) never shadows a module the worker imports.
        # Its own process group: Ctrl-C at the terminal is for the run, which then closes the worker's input.
        self.proc = subprocess.Popen([sys.executable, "-I", "-m", "rubric_engine.report.worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     encoding="utf-8", close_fds=True,
                                     **({"process_group": 0} if os.name == "posix" else {}))

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            if os.name == "posix":  # (one answer line per request: nothing is buffered before it)
                import select

                if not select.select([self.proc.stdout], [], [], ANSWER_TIMEOUT)[0]:
                    raise WorkerFailed(f"report worker silent for {ANSWER_TIMEOUT:.0f} s")
            line = self.proc.stdout.readline()
        except (OSError, ValueError) as exc:
            raise WorkerFailed(f"report worker gone ({exc})") from None
        if not line:
            raise WorkerFailed(f"report worker ended (exit {self.proc.poll()})")
        try:
            answer = json.loads(line)
        except ValueError:
            raise WorkerFailed("report worker answered something that is not JSON") from None
        if not isinstance(answer, dict) or not ({"ok", "error"} & answer.keys()):
            raise WorkerFailed("report worker answered without ok or error")
        return answer

    def close(self) -> None:
        """End the worker at once: it holds nothing unsaved between requests (each answer is read before
        the next), and one still warming up must not hold back the exit of a run that failed early."""
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


_WORKER: _Worker | None = None


def start() -> bool:
    """Start the worker (idempotent); False when it cannot be started (the in-process build is used)."""
    global _WORKER
    if _WORKER is None:
        try:
            _WORKER = _Worker()
        except (OSError, ValueError, TypeError):  # no interpreter or no pipes: the run builds its page itself
            return False
    return True


def active() -> bool:
    return _WORKER is not None and _WORKER.proc.poll() is None


def stop() -> None:
    """End the worker and reap it (idempotent)."""
    global _WORKER
    if _WORKER is not None:
        worker, _WORKER = _WORKER, None
        worker.close()


def build(run_dir: Path, n_boot: int, trust_code: bool = False) -> dict[str, Any]:
    """Ask the worker for run_dir's report.html: {"ok": path} or {"error": reason}; WorkerFailed when it
    cannot answer (then it is stopped, and the caller builds the page itself)."""
    if _WORKER is None:
        raise WorkerFailed("no report worker")
    try:
        return _WORKER.ask({"run_dir": str(run_dir), "n_boot": n_boot, "trust_code": trust_code,
                            "path": [p for p in sys.path if p]})
    except WorkerFailed:
        stop()
        raise


def _warm_up() -> None:
    """Import what a report needs and draw one small figure with text (font loading), off the run's core."""
    import io

    from rubric_engine.report import charts, html_page, html_views, leaderboard  # noqa: F401
    from rubric_engine.results import leaderboard as _ranking  # noqa: F401
    from rubric_engine.store import runs  # noqa: F401

    from rubric_engine.report.fonts import chart_fonts

    chart_fonts()  # the CJK face registered with matplotlib's font manager once, here
    fig, ax = charts._figure(2, 2)  # noqa: SLF001 - the same canvas the charts use
    ax.set_title("warm-up")
    ax.plot([0, 1], [0, 1])
    fig.savefig(io.BytesIO(), format="png")


def _serve(inp: IO[str], out: IO[str]) -> None:
    try:
        _warm_up()
    except Exception:  # noqa: BLE001 - the real build below reports its own failure
        pass
    for line in inp:
        try:
            request = json.loads(line)
            sys.path.extend(p for p in request.get("path", ()) if p not in sys.path)  # after its own: no shadowing
            path = build_report(Path(request["run_dir"]), n_boot=int(request["n_boot"]),
                                trust_code=bool(request.get("trust_code")))
            answer: dict[str, Any] = {"ok": str(path)}
        except Exception as exc:  # noqa: BLE001 - one line back to the run, which prints it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    os._exit(0)  # the run has closed our input: nothing left to flush, skip the interpreter's teardown


if __name__ == "__main__":
    _serve(sys.stdin, sys.stdout)
