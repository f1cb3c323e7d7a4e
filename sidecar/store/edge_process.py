"""The embedded store in a process of its own: the same engine (store/edge.py), so
that its calls stop that process's interpreter, never the sidecar's.

qdrant-edge 0.9 holds the GIL for the whole of every call, so in the sidecar's
process each search stopped the event loop (and every other request's Python) for
as long as it ran, and a background optimize stopped the whole sidecar. Here the
sidecar talks to `python -m sidecar.store.edge_process` over a socket pair: each
Store call is one length-prefixed pickled message each way, matched by a call
number, so calls from concurrent requests are in flight together. The child runs
an `EdgeStore` on its own event loop, and dies with the sidecar (PR_SET_PDEATHSIG on
Linux, and at the end of the socket).

Only the sidecar's own child is at the other end (a socket pair, never a path or a
port), so the pickled messages come from no one else. If the child dies, every call
in flight and every later one fails with StoreUnavailable (503): no restart, since a
store that died mid-write is for an operator to look at.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import logging
import os
import pickle
import signal
import socket
import struct
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any
from uuid import UUID

from sidecar.errors import FilterRefused
from sidecar.record import Stored
from sidecar.store import Page, Search, StoreUnavailable
from sidecar.store.scope import Scope

log = logging.getLogger(__name__)

_HEADER = struct.Struct("!I")
# Calls the child answers; anything else is refused there.
_CALLS = frozenset({"ping", "search", "get", "find", "put", "update"})
# How long the child may take to open the store (it indexes what is unindexed first).
_OPEN_TIMEOUT_S = 3600.0


async def _send(writer: asyncio.StreamWriter, message: Any) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    writer.write(_HEADER.pack(len(body)) + body)
    await writer.drain()


async def _receive(reader: asyncio.StreamReader) -> Any:
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    # Only the two ends of our own socket pair write here (see the module docstring).
    return pickle.loads(await reader.readexactly(size))  # noqa: S301


class EdgeProcessStore:
    """The Store protocol, answered by an EdgeStore in a child process."""

    def __init__(
        self,
        path: Path,
        vector_size: int,
        optimize_interval_s: float = 10.0,
        search: Search | None = None,
    ) -> None:
        self.config = (str(path), vector_size, optimize_interval_s, search or Search())
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._numbers = itertools.count()
        self._listener: asyncio.Task[None] | None = None
        self._lost: str | None = None

    async def open(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "sidecar.store.edge_process",
                str(theirs.fileno()),
                pass_fds=[theirs.fileno()],
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        finally:
            theirs.close()
        self._reader, self._writer = await asyncio.open_unix_connection(sock=ours)
        await _send(self._writer, self.config)
        self._listener = asyncio.create_task(self._listen(), name="edge-process-listener")
        try:
            await asyncio.wait_for(self._call("open"), _OPEN_TIMEOUT_S)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(StoreUnavailable, ConnectionError):
                await self._call_on(writer, "close")
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        process, self._process = self._process, None
        if process is not None:
            try:
                await asyncio.wait_for(process.wait(), 60)
            except TimeoutError:
                process.kill()
                await process.wait()

    async def ping(self) -> None:
        await self._call("ping")

    async def search(
        self,
        vector: list[float],
        scope: Scope,
        limit: int,
        exclude: Collection[str] = (),
        *,
        score_threshold: float | None = None,
        with_vector: bool = False,
    ) -> list[Stored]:
        result: list[Stored] = await self._call(
            "search",
            vector,
            scope,
            limit,
            tuple(exclude),
            score_threshold=score_threshold,
            with_vector=with_vector,
        )
        return result

    async def get(
        self, tenant: str, record_ids: list[UUID], *, with_vector: bool = False
    ) -> list[Stored]:
        result: list[Stored] = await self._call("get", tenant, record_ids, with_vector=with_vector)
        return result

    async def find(
        self, scope: Scope, limit: int, *, offset: str | None = None, with_vector: bool = False
    ) -> Page:
        result: Page = await self._call(
            "find", scope, limit, offset=offset, with_vector=with_vector
        )
        return result

    async def put(self, tenant: str, items: list[tuple[dict[str, Any], list[float]]]) -> None:
        await self._call("put", tenant, items)

    async def update(self, tenant: str, record_id: UUID, fields: dict[str, Any]) -> None:
        await self._call("update", tenant, record_id, fields)

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self._writer is None:
            raise StoreUnavailable("store is not open")
        return await self._call_on(self._writer, name, *args, **kwargs)

    async def _call_on(
        self, writer: asyncio.StreamWriter, name: str, *args: Any, **kwargs: Any
    ) -> Any:
        if self._lost is not None:
            raise StoreUnavailable(self._lost)
        number = next(self._numbers)
        answer = asyncio.get_running_loop().create_future()
        self._pending[number] = answer
        try:
            await _send(writer, (number, name, args, kwargs))
            ok, value = await answer
        except ConnectionError as exc:
            raise StoreUnavailable(f"store process unreachable: {exc}") from exc
        finally:
            self._pending.pop(number, None)
        if ok:
            return value
        raise _refusal(value)

    async def _listen(self) -> None:
        assert self._reader is not None
        try:
            while True:
                number, ok, value = await _receive(self._reader)
                answer = self._pending.get(number)
                if answer is not None and not answer.done():
                    answer.set_result((ok, value))
        except (asyncio.IncompleteReadError, ConnectionError, pickle.UnpicklingError) as exc:
            self._lost = f"store process gone: {type(exc).__name__}"
            if self._writer is not None:
                log.error("the embedded store's process ended; store calls fail until restart")
        for answer in self._pending.values():
            if not answer.done():
                answer.set_exception(StoreUnavailable(self._lost or "store process gone"))


def _refusal(value: tuple[str, str, str | None]) -> Exception:
    """The child's refusal as the error the sidecar maps (errors.py)."""
    kind, message, reason = value
    if kind == "FilterRefused" and reason is not None:
        return FilterRefused(reason, message)
    return StoreUnavailable(message)


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


# --- the child ---------------------------------------------------------------------


async def _serve(fd: int) -> None:
    from sidecar.store.edge import EdgeStore

    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    path, vector_size, optimize_interval_s, search = await _receive(reader)
    store = EdgeStore(Path(path), vector_size, optimize_interval_s, search=search)
    opened = False
    busy: set[asyncio.Task[None]] = set()
    lock = asyncio.Lock()

    async def answer(number: int, name: str, args: Any, kwargs: Any) -> None:
        nonlocal opened
        try:
            if name == "open":
                await store.open()
                opened = True
                value: Any = None
            elif name in _CALLS and opened:
                value = await getattr(store, name)(*args, **kwargs)
            else:
                raise StoreUnavailable(f"no such store call: {name}")
            reply: tuple[Any, ...] = (number, True, value)
        except FilterRefused as exc:
            reply = (number, False, ("FilterRefused", str(exc), exc.reason))
        except Exception as exc:  # every failure is the caller's 503
            if not isinstance(exc, StoreUnavailable):
                log.exception("store call %s failed", name)
            reply = (number, False, (type(exc).__name__, str(exc), None))
        async with lock:  # one message at a time on the socket
            await _send(writer, reply)

    try:
        while True:
            number, name, args, kwargs = await _receive(reader)
            if name == "close":
                await asyncio.gather(*busy)
                await store.close()
                async with lock:
                    await _send(writer, (number, True, None))
                return
            task = asyncio.create_task(answer(number, name, args, kwargs))
            busy.add(task)
            task.add_done_callback(busy.discard)
    except (asyncio.IncompleteReadError, ConnectionError):
        # The sidecar went away: close the store cleanly (flushed) and end.
        await asyncio.gather(*busy, return_exceptions=True)
        await store.close()


def main() -> None:
    logging.basicConfig(level=os.environ.get("WHOSE_LOG_LEVEL", "INFO"))
    asyncio.run(_serve(int(sys.argv[1])))


if __name__ == "__main__":
    main()
