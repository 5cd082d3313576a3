"""A coroutine run to its end from synchronous code, whether or not an event loop already runs in this thread.

Why: `asyncio.run` refuses to start inside a running loop ("asyncio.run() cannot be called from a running event
loop"), which is where a Jupyter cell, an async web handler or a test's async body calls a sync function. So
`run_sync` runs the coroutine on a loop of its own: in this thread when none runs here (the command line's case),
else on a worker thread while this one waits (the caller's loop is blocked for that time, as any sync call blocks
it; `await` the async form instead to keep it turning). In this thread it does not take over SIGINT as
`asyncio.run` does (Python 3.11's Runner turns Ctrl-C into a cancellation delivered only at the next `await`):
a Ctrl-C while a run loads its spec and data stops it there, as it always did, and while calls are made the
run's own handler (models/interrupt.SignalStop) waits for the calls in flight. On a worker thread no signal
reaches the loop: a KeyboardInterrupt in the waiting thread (a notebook's interrupt button) cancels the
coroutine, waits until it has closed its files (the run resumes later), then is raised.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync", "loop_running"]

T = TypeVar("T")


def loop_running() -> bool:
    """True when an event loop runs in this thread (a Jupyter cell, an `async def` body)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to its end on a new event loop and return its result (or raise its exception)."""
    if not loop_running():
        return _run_here(coro)
    return _run_on_thread(coro)


def _run_here(coro: Coroutine[Any, Any, T]) -> T:
    """`coro` on a new loop in this thread, closed afterwards as asyncio.run closes its own (tasks left are
    cancelled, async generators and the default executor shut down), without replacing the SIGINT handler."""
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        try:
            left = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _run_on_thread(coro: Coroutine[Any, Any, T]) -> T:
    """`coro` on a new loop in a worker thread while this thread waits; a KeyboardInterrupt here cancels it.
    The wait is on an Event, never Thread.join: a join interrupted by KeyboardInterrupt (Python 3.11) may mark the
    thread ended while it still runs, and the run would then go on after the caller was told it stopped."""
    done: dict[str, Any] = {}
    started, ended = threading.Event(), threading.Event()

    async def main() -> T:
        done["loop"], done["task"] = asyncio.get_running_loop(), asyncio.current_task()
        started.set()
        return await coro

    def work() -> None:
        try:
            done["result"] = _run_here(main())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, raised there
            done["error"] = exc
        finally:
            started.set()
            ended.set()

    threading.Thread(target=work, name="rubric-engine-run", daemon=True).start()
    try:
        while not ended.wait(0.1):
            pass
    except KeyboardInterrupt:
        started.wait()
        if not ended.is_set():
            try:
                done["loop"].call_soon_threadsafe(done["task"].cancel)
            except RuntimeError:  # its loop closed meanwhile: the coroutine has ended
                pass
        ended.wait()
        raise
    if "error" in done:
        raise done["error"]
    return done["result"]
