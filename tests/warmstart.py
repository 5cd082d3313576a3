"""Warm starts of the console script for the test suite: the same `main()`, without paying the imports.

Why: most of the suite's CPU went to starting `rubric-engine`, and most of each start to importing LiteLLM
(about 3.3 s of CPU a process on the development machine, against well under a second for a whole run
against the fake server). Here one process per pytest process (the zygote) imports the engine's command
line and LiteLLM once, the way the console script would (through the engine's own LiteLLM runtime), and
then forks a fresh child for each run. The child takes the caller's argv, environment, working directory, umask, resource limits
and standard streams, runs `rubric_engine.cli.main.main` and exits with its status: the run itself is the
real one (Hydra, the fake server over HTTP, the run directory, the report worker in its own process).

`EXE` in conftest.py is then a small launcher script named `rubric-engine` that starts in milliseconds
(no site packages) and speaks to the zygote over a Unix socket: it hands over its standard streams,
forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to the child and exits as the child did (the
same code, or killed by the same signal). If the launcher is killed outright (SIGKILL), the zygote
kills the child too; `settle(proc)` waits until that has happened, so a test that kills a run and then
resumes it never sees two writers.

The run's report worker (report/worker.py starts `sys.executable -I -m rubric_engine.report.worker` once a
run has passed its checks) is started the same way: a second zygote has imported matplotlib and the report
modules and drawn the worker's warm-up figure, and a warm run's `sys.executable` is a second launcher, named
`python`, that hands exactly that start to it (any other start, a model worker's say, execs the real
interpreter). The worker is then the real one, over the same pipes, without its ~0.6 s of CPU a run.

The launcher runs the real console script instead (exec, same process) whenever a warm start could differ
from a cold one: no zygote yet or any more, `TESTS_COLD_START=1`, an environment that differs from the
zygote's in a variable read while modules are imported (Python's own, locale, LiteLLM's, TLS and proxy
settings, temporary directories, HOME), or a sweep through one of Hydra's parallel launchers (joblib's loky
and Ray start interpreters of their own, which re-import the parent's `__main__`: here, this file). Tests
about start-up itself run `sys.executable` directly.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

SOCKET_ENV = "TESTS_WARM_SOCKET"  # the zygote's socket; unset: the launcher execs the real script
REPORT_SOCKET_ENV = "TESTS_WARM_REPORT_SOCKET"  # the report workers' zygote's socket
OFF_ENV = "TESTS_COLD_START"  # "1": every start is a real one
REPORT_WORKER_ARGS = ["-I", "-m", "rubric_engine.report.worker"]  # how report/worker.py starts its worker
# environment variables read while modules are imported (or cached at first use by the stdlib), per zygote: a
# start asking for another value than its zygote had is a cold one
_IMPORT_TIME = {"run": ("PYTHON", "LC_", "LANG", "LITELLM", "MAX_BASE64", "SSL_", "REQUESTS_CA", "CURL_CA", "TMP",
                        "TEMP", "HOME", "TZ", "AIOHTTP", "HTTPX", "TIKTOKEN", "OPENAI_LOG"),
                # the worker runs isolated (-I: no PYTHON* variable is read); matplotlib and its fonts read these
                # (XDG_CACHE_HOME only places matplotlib's font-list cache, which changes no page: not counted)
                "report": ("LC_", "LANG", "MPL", "HOME", "TMP", "TEMP", "TZ", "FONTCONFIG")}
_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")

LAUNCHER = r'''#!{python} -IS
"""A warm launcher of the test suite (tests/warmstart.py): a zygote runs it, or this execs the real program."""
import json, os, resource, signal, socket, struct, sys
REAL = {real!r}
SIGNALS = {signals!r}
ONLY = {only!r}  # None: every start; else the one argument list served warm (the report worker's)

def cold():
    os.execv(REAL, [REAL, *sys.argv[1:]])

def main():
    path = os.environ.get({socket_env!r})
    if not path or os.environ.get({off_env!r}) == "1" or (ONLY is not None and sys.argv[1:] != ONLY):
        cold()
    pending, child = [], []
    def forward(num, _frame):
        if child:
            os.kill(child[0], num)
        else:
            pending.append(num)
    for name in SIGNALS:
        signal.signal(getattr(signal, name), forward)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        mask = os.umask(0)
        os.umask(mask)
        limits = {{name: resource.getrlimit(getattr(resource, name)) for name in dir(resource)
                  if name.startswith("RLIMIT_")}}
        body = json.dumps({{"argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd(), "umask": mask,
                           "limits": limits}}).encode()
        socket.send_fds(sock, [struct.pack("!I", len(body)) + body], [0, 1, 2])
    except OSError:
        cold()
    answers = sock.makefile("rb")
    first = answers.readline().split()
    if first[:1] != [b"pid"]:
        sock.close()
        cold()
    child.append(int(first[1]))
    for num in pending:
        os.kill(child[0], num)
    last = answers.readline().split()
    if last[:1] == [b"signal"]:
        num = int(last[1])
        signal.signal(num, signal.SIG_DFL)
        os.kill(os.getpid(), num)
    os._exit(int(last[1]) if last[:1] == [b"exit"] else 1)

main()
'''


def _differing(env: dict[str, str], base: dict[str, str], kind: str) -> list[str]:
    """The variables a `kind` zygote read at import time for which `env` asks for another value than `base`."""
    keys = set(env) | set(base)
    return sorted(k for k in keys if (k.upper().startswith(_IMPORT_TIME[kind]) or "PROXY" in k.upper())
                  and env.get(k) != base.get(k))


class Warm:
    """One pytest process's launcher scripts and zygotes (started by `start()`, ended by `stop()`): `exe` for the
    console script, `python` for the report worker a warm run starts."""

    def __init__(self, real: str) -> None:
        self.real = real
        self.dir = Path(tempfile.mkdtemp(prefix="rubric-engine-warm-"))
        self.socket, self.report_socket = self.dir / "zygote.sock", self.dir / "report.sock"
        self.exe, self.python = self.dir / "rubric-engine", self.dir / "python"
        for path, target, env, only in ((self.exe, real, SOCKET_ENV, None),
                                        (self.python, sys.executable, REPORT_SOCKET_ENV, REPORT_WORKER_ARGS)):
            path.write_text(LAUNCHER.format(python=sys.executable, real=target, signals=_SIGNALS, socket_env=env,
                                            off_env=OFF_ENV, only=only))
            path.chmod(0o755)
        self.procs: list[subprocess.Popen] = []
        atexit.register(shutil.rmtree, self.dir, True)

    def start(self) -> None:
        """Start the zygotes in the background; until a socket appears, its launcher starts cold."""
        if os.environ.get(OFF_ENV) == "1" or self.procs:
            return
        for kind, sock, name in (("run", self.socket, "zygote.log"), ("report", self.report_socket, "report.log")):
            log = self.dir / name  # the zygote's own errors and each start it served, for a failing test
            with open(log, "wb") as out:
                self.procs.append(subprocess.Popen([sys.executable, __file__, kind, str(sock), self.real,
                                                    str(os.getpid()), str(log), str(self.python)],
                                                   stdin=subprocess.DEVNULL, stdout=out, stderr=out))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)

    def settle(self, launcher_pid: int, timeout: float = 30) -> None:
        """Wait until the run that launcher `launcher_pid` started has ended (nothing if it ran cold)."""
        marker = self.dir / f"run-{launcher_pid}"
        deadline = time.monotonic() + timeout
        while marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not marker.exists(), f"the warm run of launcher {launcher_pid} outlived it by {timeout:.0f} s"


# ------------------------------------------------------------------------------------------ the zygote

def _preload(real: str) -> None:
    """Import what the console script imports before its first call, the way it does."""
    sys.path[0] = str(Path(real).parent)  # the console script's own sys.path[0], not tests/
    import rubric_engine.cli.main  # noqa: F401, PLC0415
    from rubric_engine.models.litellm_runtime import RUNTIME  # noqa: PLC0415

    RUNTIME.module()
    # LiteLLM sets TIKTOKEN_CACHE_DIR when it first counts tokens, not when imported: a test process that
    # counted tokens in-process passes it on, so the zygote counts that value among what the engine sets
    with contextlib.suppress(ImportError):  # a LiteLLM that moved the module: such a run starts cold
        importlib.import_module("litellm.litellm_core_utils.default_encoding")
    _settle_heap()


def _preload_report() -> None:
    """Import what the report worker imports and draw its warm-up figure, the way the worker does first."""
    sys.path.pop(0)  # tests/: the worker runs isolated (-I), its sys.path holds no script directory
    from rubric_engine.report import worker  # noqa: PLC0415

    worker._warm_up()  # noqa: SLF001 - the worker's own first step, done once here
    _settle_heap()


def _settle_heap() -> None:
    gc.collect()
    gc.freeze()  # the children's refcount updates then copy fewer shared pages


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    (size,) = struct.unpack("!I", msg[:4])
    body = msg[4:]
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            raise ConnectionError("launcher gone")
        body += more
    return json.loads(body), fds


def _exit_code(code: Any) -> int:
    """The status `sys.exit(code)` gives a process, printing a message code as Python does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _child(request: dict[str, Any], fds: list[int], close: list[int], kind: str, python: str) -> None:
    """In the forked child: become the launcher's process, run the command line (or the report worker), exit
    with its status."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for fd in close:
        os.close(fd)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    for name, limit in request["limits"].items():  # a test's preexec_fn limits (a small RLIMIT_FSIZE) hold
        if hasattr(resource, name) and resource.getrlimit(getattr(resource, name)) != tuple(limit):
            resource.setrlimit(getattr(resource, name), tuple(limit))
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    if kind == "report":
        from rubric_engine.report.worker import _serve as serve_reports  # noqa: PLC0415

        serve_reports(sys.stdin, sys.stdout)  # ends the process when the run closes its input
    sys.executable = python  # the run's report worker is started through the warm launcher
    from rubric_engine.cli.main import main  # noqa: PLC0415

    code = 1
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        _flush_and_exit_by(signal.SIGINT)
    except BaseException:  # noqa: BLE001 - as the interpreter would: a traceback and status 1
        traceback.print_exc()
    _flush()
    os._exit(code)


def _flush() -> None:
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def _flush_and_exit_by(num: int) -> None:
    _flush()
    signal.signal(num, signal.SIG_DFL)
    os.kill(os.getpid(), num)
    os._exit(128 + num)


class _Zygote:
    def __init__(self, kind: str, path: Path, python: str, parent: int, imported_with: dict[str, str],
                 defaults: dict[str, str]) -> None:
        self.kind, self.path, self.python, self.parent = kind, path, python, parent
        self.imported_with, self.defaults = imported_with, defaults
        self.runs: dict[int, tuple[socket.socket, Path]] = {}  # child pid -> (its launcher's socket, marker)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ready = path.with_suffix(".new")
        self.listener.bind(str(ready))
        self.listener.listen(64)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        os.rename(ready, path)  # from here on, launchers start runs warm

    def serve(self) -> None:
        while os.getppid() == self.parent:
            socks = [self.listener, *(s for s, _ in self.runs.values())]
            readable, _, _ = select.select([*socks, self.wake_r], [], [], 1.0)
            if self.wake_r in readable:
                os.read(self.wake_r, 4096)
            self._reap()
            for sock in readable:
                if sock is self.listener:
                    self._accept()
                elif sock is not self.wake_r:
                    self._launcher_readable(sock)

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        try:
            request, fds = _receive(conn)
        except (OSError, ValueError, ConnectionError, struct.error):
            conn.close()
            return
        # What the preload's imports set (the engine's setdefaults before LiteLLM's import, LiteLLM's tokenizer
        # directory) is in a cold run's environment once it imported the same: the warm run starts with it
        env = request["env"] = {**self.defaults, **request["env"]}
        launcher_arg = [a for a in request["argv"] if a.lstrip("+").startswith("hydra/launcher=")]
        differing = _differing(env, self.imported_with, self.kind)
        if len(fds) != 3 or differing or launcher_arg:
            print("cold start:", len(fds), "streams;", differing, launcher_arg, flush=True)
            for fd in fds:
                os.close(fd)
            _send(conn, "cold")
            conn.close()
            return
        launcher = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
        marker = self.path.parent / f"{self.kind}-{launcher}"
        close = [self.listener.fileno(), self.wake_r, self.wake_w, conn.fileno(),
                 *(s.fileno() for s, _ in self.runs.values())]
        pid = os.fork()
        if pid == 0:
            try:
                _child(request, fds, close, self.kind, self.python)
            finally:
                os._exit(1)
        for fd in fds:
            os.close(fd)
        marker.with_suffix(".new").write_text(str(pid))
        marker.with_suffix(".new").replace(marker)  # a reader never sees it empty
        print(f"warm start: launcher {launcher}, run {pid}", flush=True)
        self.runs[pid] = (conn, marker)
        _send(conn, f"pid {pid}")

    def _launcher_readable(self, conn: socket.socket) -> None:
        """A launcher's socket is readable only when the launcher is gone: its run goes with it."""
        for pid, (sock, _) in self.runs.items():
            if sock is conn:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return

    def _reap(self) -> None:
        while self.runs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn, marker = self.runs.pop(pid, (None, None))
            if conn is None:
                continue
            if os.WIFSIGNALED(status):
                _send(conn, f"signal {os.WTERMSIG(status)}")
            else:
                _send(conn, f"exit {os.waitstatus_to_exitcode(status)}")
            conn.close()
            marker.unlink(missing_ok=True)


def _send(conn: socket.socket, line: str) -> None:
    try:
        conn.sendall(line.encode() + b"\n")
    except OSError:
        pass  # the launcher is gone


def _serve(kind: str, path: str, real: str, parent: str, log: str, python: str) -> None:
    base_env = dict(os.environ)
    if kind == "report":
        _preload_report()
    else:
        _preload(real)
    if Path(log).stat().st_size:  # the imports printed something a cold start would show the user: none warm
        sys.exit("the imports wrote to stdout/stderr (above): every run starts cold")
    # The variables the preload's imports set (the engine's setdefaults before LiteLLM's import, LiteLLM's
    # tokenizer directory): a run's environment that holds them with those values (a test process that
    # imported LiteLLM in-process passes them on) or lacks them imports exactly what the zygote did.
    defaults = {k: v for k, v in os.environ.items() if k not in base_env}
    imported_with = dict(os.environ)
    os.environ.clear()
    os.environ.update(base_env)  # the runs get it back under their own environment (_Zygote._accept)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    _Zygote(kind, Path(path), python, int(parent), imported_with, defaults).serve()


if __name__ == "__main__":
    _serve(*sys.argv[1:7])
