"""`workers=N`: model calls carried by N worker processes, each running its own LiteLLM in an asyncio loop.

Why: a call through LiteLLM costs milliseconds of CPU in the calling process (request set-up, response
models, its logging payload), so one process tops out near a few hundred calls a second on one core. With
workers, the main process keeps everything that must stay in one place (the cache, the journal, retries
and their classification, rate limits, interrupts) and only the `litellm.acompletion` itself, and the
reply's cost, run in a worker: both cores of a small machine (`workers=auto`), more on larger ones.

The protocol: one socketpair per worker, frames of a 4-byte length and a pickle, both ways.
  main -> worker: ("call", id, kwargs, reply_cap) | ("cancel", id) | ("stop",) | ("ping", id)
  worker -> main: ("ok", id, reply, cost) | ("err", id, chain) | ("ready", 0) | ("pong", id)
A worker says "ready" once LiteLLM is imported: a call's `timeout` starts when a worker is ready, so start-up
never counts against it. A call that times out in a worker is followed by a ping: a worker that does not answer
it within PROBE_SECONDS is stuck (its event loop no longer runs: stopped, deadlocked, spinning), not slow; it is
retired (killed, a fresh worker started in its place) and the call fails with a WorkerStuck error saying so,
which the client retries like any transient failure, on another worker.
A reply is the few fields the engine reads (text, finish reason, usage, served model), rebuilt in the main
process as attributes, so `parse_reply` and the usage readers see what they would see in-process. A failure
travels as its exception chain's class names, message, HTTP status, body and headers, and is rebuilt as
exceptions with those class names (models/failures.py classifies by name, status, body and headers), so a
failure classifies the same with or without workers. The API key travels inside the request (never logged).

Lifetime: workers start with the run that owns the pool (each imports LiteLLM while the run loads its spec and
data) and end when that run ends (`WorkerPool.aclose`), or with the main process: the socket's end-of-file (the
main process exited, or was killed with -9) or a new parent id ends a worker. The first SIGINT / SIGTERM stops every worker's calls and no request leaves after
it (models/interrupt.py; a worker given the signal by the terminal stops by itself).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from types import SimpleNamespace
from typing import Any

from rubric_engine.models.interrupt import stopped
from rubric_engine.models.workerfailures import describe_error, rebuild_error

__all__ = ["WorkerPool", "WorkerStuck", "workers_count", "rebuild_error", "describe_error"]  # the last two: workerfailures.py

PROBE_SECONDS = 2.0  # a live worker answers a ping at once, however slow its calls' servers are
READY_SECONDS = 600.0  # a worker that has not imported LiteLLM by then is not coming

_HEADER = struct.Struct("!I")


def workers_count(value: Any) -> int:
    """`workers=` as a number of processes: a whole number >= 1, or `auto` (the machine's cores)."""
    from rubric_engine.errors import ConfigError

    if isinstance(value, str) and value.strip().lower() == "auto":
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"workers={value} is not valid; give a whole number >= 1 (1: calls in this process) or "
                          "workers=auto (one process per core)")
    return value


# -- replies ------------------------------------------------------------------------------------------------
def slim_reply(response: Any, text: str) -> dict[str, Any]:
    """What the engine reads of a reply, as plain data (`text` as parse_reply read it)."""
    from rubric_engine.models.litellm_runtime import token_logprobs  # noqa: PLC0415 - the worker's side only
    choice = (getattr(response, "choices", None) or [None])[0]
    usage = getattr(response, "usage", None)
    dump = getattr(usage, "model_dump", None)
    return {"model": getattr(response, "model", None),
            "choices": [{"finish_reason": getattr(choice, "finish_reason", None), "message": {"content": text},
                         "logprobs": {"content": [{"token": t, "logprob": next(lp for a, lp in top if a == t),
                                                   "top_logprobs": [{"token": a, "logprob": lp} for a, lp in top]}
                                                  for t, top in token_logprobs(response) or []]}}],
            "usage": dump() if callable(dump) else None}


def _as_attrs(value: Any) -> Any:
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _as_attrs(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_as_attrs(v) for v in value]
    return value


# -- the main process's side ----------------------------------------------------------------------------------
class WorkerStuck(RuntimeError):
    """A worker process stopped answering (not its provider): it was retired; the call may be retried."""


class _Worker:
    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self.proc, self.sock = proc, sock
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.alive = True
        self.ready = False  # LiteLLM imported: its calls' clocks may start
        self.loop_id: int | None = None
        self.writer: asyncio.StreamWriter | None = None
        self._ready: asyncio.Task[asyncio.StreamWriter] | None = None
        self.copies: list[socket.socket] = []  # one per event loop that talked to the worker

    async def attach(self) -> asyncio.StreamWriter:
        """This event loop's stream to the worker (a new loop gets its own, over a copy of the socket); one
        connection per loop however many calls ask for it at once (two readers would split the frames)."""
        loop = asyncio.get_running_loop()
        if self._ready is None or self.loop_id != id(loop):
            self.loop_id, self._ready = id(loop), loop.create_task(self._connect())
        return await asyncio.shield(self._ready)

    async def _connect(self) -> asyncio.StreamWriter:
        copy = socket.socket(fileno=os.dup(self.sock.fileno()))
        self.copies.append(copy)
        reader, writer = await asyncio.open_connection(sock=copy)
        self.writer = writer
        asyncio.get_running_loop().create_task(self._read(reader))
        return writer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                size = _HEADER.unpack(await reader.readexactly(_HEADER.size))[0]
                message = pickle.loads(await reader.readexactly(size))
                self.ready = self.ready or message[0] == "ready"
                future = self.pending.pop(message[1], None)
                if future is None or future.done():
                    continue
                if message[0] == "pong":
                    future.set_result(True)
                elif message[0] == "ok":
                    reply = _as_attrs(message[2])
                    reply._hidden_params = {"response_cost": message[3]}
                    future.set_result((reply, message[3]))
                else:
                    future.set_exception(rebuild_error(message[2]))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            self.alive = False
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(ConnectionResetError("a worker process ended while a call was in it"))
            self.pending.clear()


class WorkerPool:
    """One run's worker processes: `workers=N` from its settings (1: none, calls in the run's process). The run
    owns it, hands it to its clients (models/compose.py) and closes it when it ends, so two runs in one process
    never share or resize each other's workers. See the module docstring."""

    def __init__(self, workers: int = 1) -> None:
        self.size = 0 if workers <= 1 else int(workers)  # worker processes asked for (0: calls in this process)
        self._workers: list[_Worker] = []
        self._ids = itertools.count(1)
        self._stop_sent = False
        self._lock = threading.Lock()
        self._graveyard: list[_Worker] = []  # retired workers: their sockets closed and processes reaped at close

    def start(self) -> None:
        """Start the workers now (each imports LiteLLM while the run starts); idempotent."""
        with self._lock:
            if self.size <= 0 or self._workers:
                return
            for _ in range(self.size):
                self._workers.append(_spawn())
            atexit.register(self.close)

    async def ready(self) -> None:
        """Wait (untimed: not part of any call's `timeout`) until a worker has imported LiteLLM."""
        self.start()
        waited = 0.0
        while True:
            alive = [w for w in self._workers if w.alive]
            if not alive:
                raise ConnectionResetError("every worker process has ended; run again (workers=1 runs calls in "
                                           "the main process)")
            for w in alive:
                await w.attach()  # its reader runs: the "ready" message is read
            if any(w.ready for w in alive):
                return
            if waited > READY_SECONDS:
                raise WorkerStuck(f"no worker process finished starting in {READY_SECONDS:g} s; run with workers=1")
            await asyncio.sleep(0.05)
            waited += 0.05

    async def acompletion(self, kwargs: dict[str, Any], cap: int) -> tuple[Any, float | None]:
        """One `litellm.acompletion` in a worker: (reply, cost) or the worker's failure, rebuilt."""
        self.start()
        alive = [w for w in self._workers if w.alive]
        if not alive:
            raise ConnectionResetError("every worker process has ended; run again (workers=1 runs calls in the "
                                       "main process)")
        worker = min([w for w in alive if w.ready] or alive, key=lambda w: len(w.pending))
        writer = await worker.attach()
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        worker.pending[call_id] = future
        body = {k: v for k, v in kwargs.items() if k != "client"}
        writer.write(_frame(("call", call_id, body, cap)))
        try:
            return await future
        except asyncio.CancelledError:
            worker.pending.pop(call_id, None)
            if worker.alive:
                if stopped() and not self._stop_sent:  # a signal: every worker stops all its calls at once
                    self._stop_sent = True
                    for w in self._workers:
                        if w.alive and w.writer is not None and w.loop_id == worker.loop_id:
                            w.writer.write(_frame(("stop",)))
                writer.write(_frame(("cancel", call_id)))
                if not stopped() and not await self._answers(worker, writer):
                    # asyncio.wait_for's timeout cancelled this call: re-raised as this, wait_for raises it, not a
                    # TimeoutError that would blame the provider (an outer cancellation stays a cancellation)
                    raise WorkerStuck(self._retire(worker)) from None
            raise

    async def _answers(self, worker: _Worker, writer: asyncio.StreamWriter) -> bool:
        """Whether the worker answers a ping within PROBE_SECONDS (its event loop still runs)."""
        ping = next(self._ids)
        pong: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        worker.pending[ping] = pong
        writer.write(_frame(("ping", ping)))
        try:
            return bool(await asyncio.wait_for(asyncio.shield(pong), PROBE_SECONDS))
        except (TimeoutError, ConnectionError):
            return False
        finally:
            worker.pending.pop(ping, None)

    def _retire(self, worker: _Worker) -> str:
        """Kill a stuck worker, start a fresh one in its place, and say what happened (the call's error)."""
        worker.alive = False
        pid = worker.proc.pid
        worker.proc.kill()
        for future in worker.pending.values():
            if not future.done():
                future.set_exception(WorkerStuck(f"worker process {pid} stopped answering and was retired"))
        worker.pending.clear()
        with self._lock:
            if worker in self._workers:
                self._workers[self._workers.index(worker)] = _spawn()
        self._graveyard.append(worker)
        return (f"worker process {pid} stopped answering (no reply to a ping within {PROBE_SECONDS:g} s after the "
                "call's timeout): it was retired and a new one started; the call can be retried on another worker")

    async def aclose(self) -> None:
        """End the workers from the event loop that used them: its streams to them are closed in the loop first,
        then the processes are ended and reaped (`close`) off the loop, so another run on it keeps running."""
        loop = id(asyncio.get_running_loop())
        for w in self._workers + self._graveyard:
            if w.writer is not None and w.loop_id == loop:
                w.writer.close()
        if self._workers or self._graveyard:
            await asyncio.to_thread(self.close)

    def close(self) -> None:
        """End the workers (closing every copy of our end of each socket is their signal: end of file); waits
        briefly, then kills."""
        workers, self._workers = self._workers + self._graveyard, []
        self._graveyard = []
        atexit.unregister(self.close)  # a closed pool is not kept alive until the process ends (one per run)
        for w in workers:
            for sock in (w.sock, *w.copies):
                try:
                    sock.close()
                except OSError:
                    pass
        deadline = time.monotonic() + 3.0
        for w in workers:
            try:
                w.proc.wait(max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()



def _spawn() -> _Worker:
    """One worker process, talking over a socketpair (its end passed as a file descriptor)."""
    mine, theirs = socket.socketpair()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "rubric_engine.models.workers", str(theirs.fileno()),
                             str(os.getpid())], pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, env=env)
    theirs.close()
    return _Worker(proc, mine)


def _frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


# -- the worker process ---------------------------------------------------------------------------------------
def _watch_parent(parent: int) -> None:
    """Ends the worker when its parent is gone, even while LiteLLM is still importing."""
    while True:
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(0.5)


async def _serve(sock: socket.socket, litellm: Any) -> None:
    from rubric_engine.models.bodycap import openai_client, served_by_openai_client
    from rubric_engine.models.litellm_runtime import RUNTIME, parse_reply

    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(_frame(("ready", 0)))  # LiteLLM is imported: the main process may start its calls' clocks
    tasks: dict[int, asyncio.Task[Any]] = {}
    capped: dict[tuple[str, str | None], bool] = {}
    clients: dict[tuple[Any, ...], Any] = {}
    state = {"stopped": False}

    def stop() -> None:
        state["stopped"] = True
        for task in tasks.values():
            task.cancel()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)

    async def one(call_id: int, kwargs: dict[str, Any], cap: int) -> None:
        try:
            model, base = kwargs["model"], kwargs.get("api_base")
            if capped.setdefault((model, base), served_by_openai_client(litellm, model, base)):
                key = (kwargs.get("api_key"), base, kwargs.get("timeout"), cap)
                if key not in clients:
                    clients[key] = openai_client(api_key=kwargs.get("api_key"), api_base=base,
                                                 timeout=kwargs.get("timeout") or 600.0, cap=cap)
                if clients[key] is not None:
                    kwargs["client"] = clients[key]
            response, cost = await RUNTIME.acompletion(litellm, kwargs)
            text = parse_reply(response)[0]
            reply: tuple[Any, ...] = ("ok", call_id, slim_reply(response, text), cost)
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001 - every failure goes back to be classified there
            reply = ("err", call_id, describe_error(exc))
        finally:
            tasks.pop(call_id, None)
        writer.write(_frame(reply))

    try:
        while True:
            size = _HEADER.unpack(await reader.readexactly(_HEADER.size))[0]
            message = pickle.loads(await reader.readexactly(size))
            if message[0] == "call" and not state["stopped"]:
                tasks[message[1]] = loop.create_task(one(message[1], message[2], message[3]))
            elif message[0] == "ping":
                writer.write(_frame(("pong", message[1])))
            elif message[0] == "cancel" and message[1] in tasks:
                tasks[message[1]].cancel()
            elif message[0] == "stop":
                stop()
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        stop()  # the main process is gone: nothing is waiting for these calls
    finally:
        for client in clients.values():
            if client is not None:
                try:
                    await client.close()
                except Exception:  # noqa: BLE001 - best effort at exit
                    pass


def main(argv: list[str]) -> int:
    """The worker: `python -m rubric_engine.models.workers FD PARENT_PID`."""
    fd, parent = int(argv[0]), int(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # until the loop handles it: the main process decides
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    from rubric_engine.models.litellm_runtime import RUNTIME

    try:
        RUNTIME.quiet_gc = True
        litellm = RUNTIME.module()
        asyncio.run(_serve(socket.socket(fileno=fd), litellm))
    except Exception as exc:  # noqa: BLE001 - one line; the main process reports the calls it loses
        sys.stderr.write(f"rubric-engine worker {os.getpid()}: {type(exc).__name__}: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
