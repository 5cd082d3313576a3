"""The first SIGINT / SIGTERM stops paying: no new request leaves, the calls in flight are waited for (bounded).

Why a module of its own: asyncio's own Ctrl-C handling only cancels the main task, and a cancellation a
library swallows (Python 3.11's `asyncio.wait_for` loses one when its call finishes at the same moment)
leaves a worker taking question after question while the user waits. Here the signal is a fact every
caller can read (`stopped()`), checked before each request and before each question is taken, so a lost
cancellation still sends nothing.

Why wait for the calls in flight: a request already sent is completed (and billed) by the provider whether or not
we still listen; cancelled on our side, its answer is lost and the resumed run pays for it again. So the first
signal lets them finish (`SignalStop(grace=...)`: at most `grace` seconds, the models' longest timeout, with a
countdown on stderr); their answers reach the cache as any answer does, and the task is cancelled once none is in
flight or the grace period is over. Calls count as in flight inside `sending()`. SIGTERM (what batch schedulers
send) is treated like Ctrl-C; a second signal ends the process at once. The exit code is 128 + the signal's
number (130, 143).

A full disk stops the same way (`SignalStop.halt`): the run cannot journal what it pays for, so it sends nothing
more, waits for the calls in flight (their answers reach the call cache, which may live on another disk), and
`check_stopped` then raises the `DiskFull` error naming the file instead of `Interrupted`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

__all__ = ["Interrupted", "SignalStop", "stopped", "disk_filled", "check_stopped", "handlers", "exit_code",
           "install_sigterm", "sending", "RESUME_HINT"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)
RESUME_HINT = "finished questions are saved and completed calls are cached"
# signum: the first signal this process received while calls were being made (0: none); calls: requests in flight;
# full: the first DiskFull of the run (None: the disk did not fill)
_state: dict[str, Any] = {"signum": 0, "calls": 0, "full": None}


@contextlib.contextmanager
def sending() -> Iterator[None]:
    """Around one request in flight (sent, its answer not yet read): the first signal waits for it."""
    _state["calls"] += 1
    try:
        yield
    finally:
        _state["calls"] -= 1


class Interrupted(KeyboardInterrupt):
    """The run stopped on a signal; `exit_code` is 128 + its number (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def stopped() -> bool:
    """True once a signal (or a full disk) asked this process to stop making calls."""
    return bool(_state["signum"] or _state["full"])


def disk_filled(exc: BaseException) -> None:
    """Note a full disk met outside the calls (closing the run's files): `check_stopped` raises it."""
    if _state["full"] is None:
        _state["full"] = exc


def handlers() -> dict[int, Any]:
    """The process's current SIGINT / SIGTERM handlers, for `check_stopped` to put back."""
    return {sig: signal.getsignal(sig) for sig in SIGNALS}


def check_stopped(saved: dict[int, Any] | None = None) -> None:
    """Raise `Interrupted` (the first signal's) when a signal stopped the calls, the `DiskFull` error when the
    disk filled; nothing otherwise. Before raising, the handlers in `saved` are put back (after an interruption a
    second signal exits at once until the journal is closed; a Python caller then gets its own handlers again)."""
    if not stopped():
        return
    for sig, old in (saved or {}).items():
        try:
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        except (ValueError, TypeError):  # not the main thread
            pass
    if _state["signum"]:
        raise Interrupted(_state["signum"])
    raise _state["full"]


def exit_code(exc: BaseException) -> int:
    """The exit code of an interruption: 128 + its signal's number, 130 for a plain KeyboardInterrupt."""
    return exc.exit_code if isinstance(exc, Interrupted) else 130


def _exit_now(signum: int, frame: FrameType | None = None, resume: str | None = None) -> None:
    """A second signal: leave at once, without waiting for anything (the cache holds every finished call). `resume`:
    the command that resumes the run, when the caller knows it."""
    how = f"resume with: {resume}" if resume else \
        "run the same command with hydra.run.dir= naming this run's directory to resume"
    try:
        sys.stderr.write(f"rubric-engine: {signal.Signals(signum).name} again: exiting now; {RESUME_HINT}; {how}\n")
        sys.stderr.flush()
    finally:
        os._exit(128 + signum)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def install_sigterm() -> None:
    """Outside the calls (loading, writing results) SIGTERM raises `Interrupted` as Ctrl-C raises
    KeyboardInterrupt, so it ends with a message and the journal closed, not a silent kill."""
    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread: the embedding program owns its signals
        pass


class SignalStop:
    """Installed on the running event loop while calls are made: the first SIGINT / SIGTERM marks the
    process stopped (no request leaves after it), waits up to `grace` seconds for the calls in flight, saying
    so on `say` once a second, then cancels the task it was installed in (the pipeline, whose task group cancels
    whatever is left: backoff waits, calls still unanswered). `grace=0`: cancel at once. `resume`: the command
    that resumes the run, named by the line a second signal prints."""

    def __init__(self, grace: float = 0.0, say: Callable[[str], None] | None = None,
                 resume: str | None = None) -> None:
        self.signum = 0  # the first signal's number (a full disk leaves it 0)
        self.grace, self._say, self._resume = max(0.0, float(grace)), say, resume
        self._old: dict[int, Any] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._drain: asyncio.Task[None] | None = None

    def install(self) -> "SignalStop":
        _state["signum"], _state["full"] = 0, None
        self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        for sig in SIGNALS:
            try:
                old = signal.getsignal(sig)
                self._loop.add_signal_handler(sig, self._on_signal, sig)
            except (ValueError, RuntimeError, NotImplementedError):  # not the main thread, or no such support
                continue
            self._old[sig] = old
        return self

    def _on_signal(self, sig: int) -> None:
        if self.signum or _state["full"] is not None:  # a second signal, or one while a full disk drains: now
            _exit_now(sig, resume=self._resume)
        self.signum = _state["signum"] = sig
        name = signal.Signals(sig).name
        self._stop(name, f"{name} again exits now")

    def halt(self, exc: BaseException) -> None:
        """A full disk (`exc`, a DiskFull): stop as the first signal does (no new request, the calls in flight
        waited for so their answers are cached); `check_stopped` raises `exc` afterwards. Later ones are noted
        only: the first names the file."""
        if stopped():
            return
        _state["full"] = exc
        self._stop("disk full", "Ctrl-C exits now")

    def _stop(self, name: str, again: str) -> None:
        """The first stop, whatever asked for it: mark the process stopped, drain the calls in flight, cancel."""
        # LiteLLM builds each request's coroutine on a worker thread; one finished after its caller was
        # cancelled is dropped unstarted (no request sent), and Python would warn that it was never awaited
        warnings.filterwarnings("ignore", message=r"coroutine '\S*acompletion' was never awaited",
                                category=RuntimeWarning)
        if self._task is None:
            return
        if self.grace <= 0 or not _state["calls"] or self._loop is None:
            self._task.cancel()
            return
        self._drain = self._loop.create_task(self._wait_for_calls(name, again))

    async def _wait_for_calls(self, name: str, again: str) -> None:
        """The drain: until no call is in flight or `grace` is over, a countdown line each second; then cancel."""
        end = time.monotonic() + self.grace
        said = -1
        while _state["calls"] and time.monotonic() < end:
            left = math.ceil(end - time.monotonic())
            if self._say is not None and (said < 0 or left <= said - 1):
                said = left
                self._say(f"{name}: stopping: no new call is sent; waiting for {_state['calls']} call(s) in flight to "
                          f"answer (up to {left} s more, so they are not paid twice); {again}")
            await asyncio.sleep(0.05)
        if self._say is not None and _state["calls"]:
            self._say(f"{name}: {_state['calls']} call(s) still unanswered after {self.grace:g} s: cancelled")
        if self._task is not None:
            self._task.cancel()

    def restore(self) -> None:
        """Give the signals back to what handled them before; after an interruption a second signal, even
        while results are being written, ends the process at once."""
        assert self._loop is not None
        if self._drain is not None:
            self._drain.cancel()
        for sig, old in self._old.items():
            self._loop.remove_signal_handler(sig)
            signal.signal(sig, functools.partial(_exit_now, resume=self._resume) if self.signum else
                          old if old is not None else signal.SIG_DFL)
        self._old.clear()
