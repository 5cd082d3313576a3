"""The first SIGINT / SIGTERM stops paying: no new request leaves, in-flight calls are cancelled.

Why a module of its own: asyncio's own Ctrl-C handling only cancels the main task, and a cancellation a
library swallows (Python 3.11's `asyncio.wait_for` loses one when its call finishes at the same moment)
leaves a worker taking question after question while the user waits. Here the signal is a fact every
caller can read (`stopped()`), checked before each request and before each question is taken, so a lost
cancellation still sends nothing. SIGTERM (what batch schedulers send) is treated like Ctrl-C; a second
signal ends the process at once. The exit code is 128 + the signal's number (130, 143).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import warnings
from types import FrameType
from typing import Any

__all__ = ["Interrupted", "SignalStop", "stopped", "check_stopped", "handlers", "exit_code", "install_sigterm", "RESUME_HINT"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)
RESUME_HINT = "finished questions are saved and completed calls are cached: run the same command to resume"
_state = {"signum": 0}  # the first signal this process received while calls were being made (0: none)


class Interrupted(KeyboardInterrupt):
    """The run stopped on a signal; `exit_code` is 128 + its number (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def stopped() -> bool:
    """True once a signal asked this process to stop making calls."""
    return bool(_state["signum"])


def handlers() -> dict[int, Any]:
    """The process's current SIGINT / SIGTERM handlers, for `check_stopped` to put back."""
    return {sig: signal.getsignal(sig) for sig in SIGNALS}


def check_stopped(saved: dict[int, Any] | None = None) -> None:
    """Raise `Interrupted` (the first signal's) when a signal stopped the calls; nothing otherwise. Before
    raising, the handlers in `saved` are put back (after an interruption a second signal exits at once
    until the journal is closed; a Python caller then gets its own handlers again)."""
    if not _state["signum"]:
        return
    for sig, old in (saved or {}).items():
        try:
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        except (ValueError, TypeError):  # not the main thread
            pass
    raise Interrupted(_state["signum"])


def exit_code(exc: BaseException) -> int:
    """The exit code of an interruption: 128 + its signal's number, 130 for a plain KeyboardInterrupt."""
    return exc.exit_code if isinstance(exc, Interrupted) else 130


def _exit_now(signum: int, frame: FrameType | None = None) -> None:
    """A second signal: leave at once, without waiting for anything (the cache holds every finished call)."""
    try:
        sys.stderr.write(f"rubric-engine: {signal.Signals(signum).name} again: exiting now; {RESUME_HINT}\n")
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
    process stopped and cancels `task` (the pipeline, whose task group cancels every call in flight)."""

    def __init__(self) -> None:
        self.signum = 0
        self._old: dict[int, Any] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None

    def install(self) -> "SignalStop":
        _state["signum"] = 0
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
        if self.signum:
            _exit_now(sig)
        self.signum = _state["signum"] = sig
        # LiteLLM builds each request's coroutine on a worker thread; one finished after its caller was
        # cancelled is dropped unstarted (no request sent), and Python would warn that it was never awaited
        warnings.filterwarnings("ignore", message=r"coroutine '\S*acompletion' was never awaited",
                                category=RuntimeWarning)
        if self._task is not None:
            self._task.cancel()

    def restore(self) -> None:
        """Give the signals back to what handled them before; after an interruption a second signal, even
        while results are being written, ends the process at once."""
        assert self._loop is not None
        for sig, old in self._old.items():
            self._loop.remove_signal_handler(sig)
            signal.signal(sig, _exit_now if self.signum else old if old is not None else signal.SIG_DFL)
        self._old.clear()
