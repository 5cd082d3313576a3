"""The reward's own event loop (reward/loop.py), in-process: every judge call of a reward runs on one loop on a
daemon thread of its own, whichever thread or loop calls it; a caller that leaves (Ctrl-C, a cancelled await)
cancels its work there; a closed reward and a call from inside its own judge calls are one line each; closing
runs the last coroutine (the clients' close), cancels what libraries left running, and ends thread and loop.
"""

from __future__ import annotations

import asyncio
import inspect
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from rubric_engine.reward.loop import LoopThread


@pytest.fixture()
def lt() -> Iterator[LoopThread]:
    loop_thread = LoopThread()
    yield loop_thread
    loop_thread.close()


async def _where() -> tuple[threading.Thread, asyncio.AbstractEventLoop]:
    return threading.current_thread(), asyncio.get_running_loop()


def test_run_runs_on_the_loop_thread_and_returns_its_result(lt: LoopThread) -> None:
    thread, loop = lt.run(_where())
    assert thread is not threading.current_thread()
    assert loop is lt.loop
    assert thread.name == "rubric-reward" and thread.daemon  # a training script's exit never waits for it
    other = LoopThread("other-name")
    try:
        assert other.run(_where())[0].name == "other-name"
    finally:
        other.close()


def test_an_exception_reaches_the_caller(lt: LoopThread) -> None:
    async def boom() -> None:
        raise ValueError("judge said no")

    with pytest.raises(ValueError, match="judge said no"):
        lt.run(boom())
    assert lt.run(_where())[1] is lt.loop  # the loop still serves the next call


def test_call_awaits_from_another_loop_and_runs_on_the_reward_loop(lt: LoopThread) -> None:
    async def caller() -> tuple[Any, asyncio.AbstractEventLoop]:
        got = await lt.call(_where())
        return got, asyncio.get_running_loop()

    (thread, loop), callers_loop = asyncio.run(caller())
    assert loop is lt.loop and callers_loop is not lt.loop and thread.name == "rubric-reward"


def test_two_callers_share_one_loop(lt: LoopThread) -> None:
    """TRL's sync thread, TRL's async loop and the server's handler threads: all on one loop."""
    seen: list[asyncio.AbstractEventLoop] = []
    workers = [threading.Thread(target=lambda: seen.append(lt.run(_where())[1])) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert seen == [lt.loop] * 3


def test_cancelling_an_await_cancels_the_coroutine_on_the_loop(lt: LoopThread) -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def caller() -> None:
        task = asyncio.ensure_future(lt.call(forever()))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(caller())
    assert cancelled.wait(30)


class _Interrupted(Exception):
    pass


def _waits_for_a_future(frame: Any) -> bool:
    """Whether a thread's stack holds concurrent.futures' Future.result (the caller blocked in `run`)."""
    while frame is not None:
        if frame.f_code.co_name == "result" and frame.f_code.co_filename.endswith(("_base.py",)):
            return True
        frame = frame.f_back
    return False


def test_an_interrupted_caller_cancels_its_coroutine(lt: LoopThread) -> None:
    """Ctrl-C while `run` waits: the exception reaches the caller and nothing keeps running on the loop."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    started, cancelled = threading.Event(), threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    def interrupt(signum: int, frame: Any) -> None:
        raise _Interrupted

    main = threading.main_thread().ident
    assert main is not None

    def kick() -> None:  # once the caller waits inside Future.result (not before: that is not `run` waiting)
        started.wait(30)
        while not _waits_for_a_future(sys._current_frames().get(main)):
            time.sleep(0.005)
        signal.pthread_kill(main, signal.SIGUSR1)

    kicker = threading.Thread(target=kick)
    old = signal.signal(signal.SIGUSR1, interrupt)
    try:
        kicker.start()
        with pytest.raises(_Interrupted):
            lt.run(forever())
    finally:
        kicker.join()
        signal.signal(signal.SIGUSR1, old)
    assert cancelled.wait(30)


def test_a_call_from_inside_its_own_judge_calls_is_one_line(lt: LoopThread) -> None:
    inner = _where()

    async def reenter() -> None:
        lt.run(inner)  # would wait forever for the loop it blocks

    with pytest.raises(RuntimeError) as e:
        lt.run(reenter())
    assert str(e.value) == "a reward cannot be called from inside its own judge calls"
    assert inspect.getcoroutinestate(inner) == inspect.CORO_CLOSED  # closed, never left un-awaited


def test_close_runs_the_last_coroutine_then_ends_thread_and_loop() -> None:
    lt = LoopThread()
    thread = lt.run(_where())[0]
    ran: list[asyncio.AbstractEventLoop] = []

    async def last() -> None:
        ran.append(asyncio.get_running_loop())

    lt.close(last())
    assert ran == [lt.loop]
    assert not thread.is_alive() and lt.loop.is_closed()


def test_close_without_a_last_coroutine() -> None:
    lt = LoopThread()
    thread = lt.run(_where())[0]
    lt.close()
    assert not thread.is_alive() and lt.loop.is_closed()


def test_a_closed_reward_refuses_and_closes_what_it_was_given() -> None:
    lt = LoopThread()
    lt.close()
    coro = _where()
    with pytest.raises(RuntimeError) as e:
        lt.run(coro)
    assert str(e.value) == "this reward was closed; build a new one"
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED

    async def refused() -> None:
        with pytest.raises(RuntimeError, match="this reward was closed; build a new one"):
            await lt.call(_where())

    asyncio.run(refused())


def test_close_is_idempotent_and_closes_a_second_last_coroutine() -> None:
    lt = LoopThread()
    lt.close()
    ran: list[int] = []

    async def last() -> None:
        ran.append(1)

    coro = last()
    lt.close(coro)  # a second close: no error, nothing run
    assert ran == [] and inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED
    lt.close()


def test_close_cancels_what_libraries_left_running() -> None:
    """LiteLLM leaves a logging worker task on the loop: close cancels it (and finishes async generators)
    before the loop ends, so no task is destroyed pending."""
    lt = LoopThread()
    cancelled, finalised = threading.Event(), threading.Event()

    async def worker() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def gen() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            finalised.set()

    agen = gen()

    async def leave_running() -> list[asyncio.Task[None]]:
        await agen.__anext__()  # an async generator suspended on the loop
        return [asyncio.get_running_loop().create_task(worker())]

    tasks = lt.run(leave_running())

    async def last() -> None:
        await asyncio.sleep(0)  # the worker is started before the close
        assert not tasks[0].done()

    lt.close(last())
    assert cancelled.is_set() and finalised.is_set()
    assert tasks[0].cancelled() and lt.loop.is_closed()


def test_close_ends_the_loop_even_when_the_last_coroutine_fails() -> None:
    lt = LoopThread()
    thread = lt.run(_where())[0]

    async def last() -> None:
        raise OSError("client close failed")

    with pytest.raises(OSError, match="client close failed"):
        lt.close(last())
    assert not thread.is_alive() and lt.loop.is_closed()
    with pytest.raises(RuntimeError, match="this reward was closed"):
        lt.run(_where())


def test_close_waits_for_the_cancelled_tasks_to_finish() -> None:
    """A task that needs a few turns of the loop to clean up after its cancellation finishes before the loop ends
    (no async generator on the loop to give it those turns by chance)."""
    lt = LoopThread()
    finished = threading.Event()

    async def worker() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            for _ in range(5):
                await asyncio.sleep(0)
            finished.set()
            raise

    async def leave_running() -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(worker())
        await asyncio.sleep(0)
        return task

    task = lt.run(leave_running())
    lt.close()
    assert finished.is_set() and task.cancelled()
