"""One event loop on a thread of its own, where every judge call of a reward runs.

Why: a reward is called from a training loop's thread (TRL's and verl's sync functions), from another
event loop (TRL's async reward loop) and from an HTTP server's handler threads. The model clients'
semaphores, rate limiters and LiteLLM's HTTP clients belong to one event loop; running all calls on this
one keeps the concurrency cap global (not per caller) and lets the clients be closed before their loop ends
(litellm #13251).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """A daemon thread running an event loop; `run` (blocking) and `call` (awaitable from any other loop)
    submit a coroutine to it. A caller interrupted while waiting (Ctrl-C) cancels its coroutine."""

    def __init__(self, name: str = "rubric-reward") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._closed = False

    def _submit(self, coro: Coroutine[Any, Any, T]) -> "concurrent.futures.Future[T]":
        if self._closed:
            coro.close()
            raise RuntimeError("this reward was closed; build a new one")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a reward cannot be called from inside its own judge calls")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop and wait for its result in this thread."""
        fut = self._submit(coro)
        try:
            return fut.result()
        except BaseException:
            fut.cancel()  # Ctrl-C while waiting: nothing keeps running for a caller that left
            raise

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro`, run on the loop, from another event loop (cancelling this awaits cancels it there)."""
        return await asyncio.wrap_future(self._submit(coro))

    async def _cancel_rest(self) -> None:
        """Cancel what libraries left running on the loop (LiteLLM's logging worker), so no task is destroyed
        pending when the loop closes."""
        me = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not me]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)
        await self.loop.shutdown_asyncgens()

    def close(self, last: Coroutine[Any, Any, Any] | None = None) -> None:
        """Run `last` (closing the clients) on the loop, then stop the loop and its thread. Idempotent."""
        if self._closed:
            if last is not None:
                last.close()
            return
        try:
            if last is not None:
                self.run(last)
            self.run(self._cancel_rest())
        finally:
            self._closed = True
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
            if not self._thread.is_alive():
                self.loop.close()
