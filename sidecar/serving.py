"""Running the sidecar: the API listener and the operations listener, one process.

Both are uvicorn servers on one event loop. The API server owns the process's
signals and the application's lifespan (store, OPA, Redis); the operations
server (http/ops.py) stops when it does.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import Iterator

import uvicorn

from sidecar.http.app import create_app
from sidecar.http.ops import create_ops_app
from sidecar.settings import Settings


class CannotListen(OSError):
    """A listener's socket could not be bound; the message names the setting."""


def listen(host: str, port: int, setting: str) -> socket.socket:
    """Bind one listener's socket before any server starts, so a port in use is one
    line naming the setting to change (uvicorn would log a traceback, then exit 3)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle off (TCP_NODELAY) only on
    # sockets whose protocol says TCP, and with Nagle on, a response written in two
    # parts waited for the client's delayed ACK: about 40 ms a request.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
        raise CannotListen(f"{host}:{port} {why}: change {setting}") from exc
    sock.set_inheritable(True)
    return sock


def listen_both(settings: Settings) -> tuple[socket.socket, socket.socket]:
    """The API's and the operations listener's sockets, or neither (CannotListen)."""
    ops = listen(settings.ops_host or settings.host, settings.ops_port, "WHOSE_OPS_PORT")
    try:
        return listen(settings.host, settings.port, "WHOSE_PORT"), ops
    except CannotListen:
        ops.close()
        raise


class _Quiet(uvicorn.Server):
    """A server that leaves signals to the API server beside it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(settings: Settings) -> None:
    """Serve until a signal stops the API server. Raises ValueError on a bad
    configuration, CannotListen when either port cannot be bound."""
    api = create_app(settings)
    api_socket, ops_socket = listen_both(settings)
    ops = _Quiet(
        uvicorn.Config(
            create_ops_app(api),
            host=settings.ops_host or settings.host,
            port=settings.ops_port,
            log_config=None,
            lifespan="off",
        )
    )
    ops_task = asyncio.create_task(ops.serve(sockets=[ops_socket]))
    while not ops.started:
        if ops_task.done():
            ops_task.result()  # raises the reason it stopped
            raise OSError(f"operations listener on port {settings.ops_port} did not start")
        await asyncio.sleep(0.01)
    server = uvicorn.Server(
        uvicorn.Config(api, host=settings.host, port=settings.port, log_config=None)
    )
    try:
        await server.serve(sockets=[api_socket])
    except SystemExit:
        # uvicorn's exit when the lifespan failed: the configuration's reason, if that
        # was it, in one line (the traceback is in the log).
        refused = getattr(api.state, "startup_error", None)
        if isinstance(refused, ValueError):
            raise refused from None
        raise
    finally:
        ops.should_exit = True
        await ops_task
