"""Running the sidecar: the API listener and the operations listener, one process.

Both are uvicorn servers on one event loop, started here with the application's
lifespan (store, OPA, Redis) around the API server; a signal stops both. Each
listener's address is logged once it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from types import FrameType

import grpc
import uvicorn
from fastapi import FastAPI

from sidecar.grpc_api import server as grpc_server
from sidecar.http.app import create_app
from sidecar.http.ops import create_ops_app
from sidecar.mcp.endpoint import PATH as MCP_PATH
from sidecar.settings import Settings

log = logging.getLogger("whose")


# uvicorn's default; asyncio listens again with uvicorn's own when the server starts.
_BACKLOG = 2048


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
        # Listening at once holds the port: with SO_REUSEADDR, a socket bound but not
        # listening shares its port with any other such socket, so another listener
        # bound there (this sidecar's other one, another process's) took it while the
        # store opened, and the API then failed to start with a bare EADDRINUSE.
        # Connections made before the API serves wait in the backlog.
        sock.listen(_BACKLOG)
    except (OSError, OverflowError) as exc:
        sock.close()
        if isinstance(exc, OverflowError):
            why = "is not a port (0..65535)"
        elif exc.errno == errno.EADDRINUSE:
            why = "is in use"
        else:
            why = f"cannot be bound ({exc.strerror or exc})"
        raise CannotListen(f"{host}:{port} {why}: change {setting}") from exc
    sock.set_inheritable(True)
    return sock


def listen_both(settings: Settings) -> tuple[socket.socket, socket.socket]:
    """The API's and the operations listener's sockets, or neither (CannotListen)."""
    # Named as the person set it: WHOSE_OPS_PORT, or the default it was derived from.
    ops_setting = (
        "WHOSE_OPS_PORT" if settings.ops_port is not None else "WHOSE_OPS_PORT or WHOSE_PORT"
    )
    api = listen(settings.host, settings.port, "WHOSE_PORT")
    try:
        return api, listen(
            settings.ops_host or settings.host, settings.operations_port, ops_setting
        )
    except CannotListen:
        api.close()
        raise


def url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def log_listeners(api: socket.socket, ops: socket.socket, pid: int) -> None:
    """Where each listener is, one line each (uvicorn's own "Started server process"
    lines, one per server in this one process, are dropped by `_Unlabelled`)."""
    where = {"api": url(api), "mcp": url(api) + MCP_PATH, "operations": url(ops)}
    log.info(
        "API on %s (pid %d)", where["api"], pid, extra={"listener": "api", "url": where["api"]}
    )
    log.info(
        "MCP on %s (streamable HTTP)", where["mcp"], extra={"listener": "mcp", "url": where["mcp"]}
    )
    log.info(
        "operations on %s (/healthz, /readyz, /metrics)",
        where["operations"],
        extra={"listener": "operations", "url": where["operations"]},
    )


class _Unlabelled(logging.Filter):
    """Drops uvicorn's per-server start and stop lines: two servers share this process,
    so they said the same thing twice without saying which listener they were (what
    `serve` logs instead: where each listener is, and the signal it stops on)."""

    UNLABELLED = ("Started server process", "Finished server process", "Shutting down")

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(self.UNLABELLED))


class _Quiet(uvicorn.Server):
    """A uvicorn server that leaves signals to `serve`, which stops both servers."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class _Signals:
    """SIGINT and SIGTERM stop every server (a second one forces the exit); once the
    lifespan has closed, the signal is raised again, as uvicorn does, so the exit
    status says what stopped the process."""

    def __init__(self) -> None:
        self.servers: list[uvicorn.Server] = []
        self.captured: list[signal.Signals] = []

    @property
    def stopping(self) -> bool:
        return bool(self.captured)

    def handle(self, sig: int, _: FrameType | None) -> None:
        force = self.stopping
        self.captured.append(signal.Signals(sig))
        for server in self.servers:
            server.should_exit = True
            server.force_exit = server.force_exit or force

    @contextlib.contextmanager
    def captured_while(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        originals = {sig: signal.signal(sig, self.handle) for sig in _HANDLED}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)
        for captured in reversed(self.captured):
            signal.raise_signal(captured)


_HANDLED = (signal.SIGINT, signal.SIGTERM)


def _log_grpc(settings: Settings, port: int) -> None:
    where = "grpcs" if settings.grpc_tls_cert_file else "grpc"
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"{where}://{host}:{port}"
    log.info(
        "Qdrant gRPC API on %s (Points, Collections, HealthCheck)",
        url,
        extra={"listener": "grpc", "url": url},
    )


async def _started(server: uvicorn.Server, task: asyncio.Task[None], what: str) -> None:
    while not server.started:
        if task.done():
            task.result()  # raises the reason it stopped
            raise OSError(f"the {what} listener did not start")
        await asyncio.sleep(0.01)


def _grpc(settings: Settings, api: FastAPI) -> tuple[grpc.aio.Server, int] | None:
    """Qdrant's gRPC API bound (WHOSE_GRPC_PORT), or None when it is off."""
    if settings.grpc_port is None:
        return None
    try:
        return grpc_server.bind(settings, lambda: api.state.services)
    except grpc_server.CannotBind as exc:
        raise CannotListen(str(exc)) from exc


async def serve(settings: Settings) -> None:
    """Serve until a signal stops the API server. Raises ValueError on a bad
    configuration, CannotListen when either port cannot be bound, StoreInUse when
    another process holds the embedded store.

    The application's lifespan (opening the store, OPA, Redis) runs here, not inside
    uvicorn: uvicorn logs a failed lifespan as a traceback, and a start-up refusal is
    one line for a person to read (cli.py prints it)."""
    api = create_app(settings)
    api_socket, ops_socket = listen_both(settings)
    try:
        grpc_listener = _grpc(settings, api)
    except (CannotListen, ValueError):  # a port; the TLS files (grpc_api/server.py)
        api_socket.close()
        ops_socket.close()
        raise
    signals = _Signals()
    unlabelled = _Unlabelled()
    logging.getLogger("uvicorn.error").addFilter(unlabelled)
    try:
        with signals.captured_while():
            await _serve_on(settings, api, api_socket, ops_socket, signals, grpc_listener)
    finally:
        api_socket.close()
        ops_socket.close()
        logging.getLogger("uvicorn.error").removeFilter(unlabelled)


async def _serve_on(
    settings: Settings,
    api: FastAPI,
    api_socket: socket.socket,
    ops_socket: socket.socket,
    signals: _Signals,
    grpc_listener: tuple[grpc.aio.Server, int] | None = None,
) -> None:
    ops = _Quiet(
        uvicorn.Config(
            create_ops_app(api, settings.console == "ops"),
            host=settings.ops_host or settings.host,
            port=settings.operations_port,
            log_config=None,
            lifespan="off",
        )
    )
    signals.servers.append(ops)
    # Health answers while the store opens; readiness waits for it (http/ops.py).
    ops_task = asyncio.create_task(ops.serve(sockets=[ops_socket]))
    try:
        await _started(ops, ops_task, "operations")
        async with api.router.lifespan_context(api):
            if signals.stopping:  # stopped while the store was opening
                return
            server = _Quiet(
                uvicorn.Config(
                    api, host=settings.host, port=settings.port, log_config=None, lifespan="off"
                )
            )
            signals.servers.append(server)
            # gRPC first: once the API answers (what a readiness probe or a test waits
            # for), both transports do.
            if grpc_listener is not None:
                await grpc_listener[0].start()
            try:
                api_task = asyncio.create_task(server.serve(sockets=[api_socket]))
                await _started(server, api_task, "API")
                log_listeners(api_socket, ops_socket, os.getpid())
                if grpc_listener is not None:
                    _log_grpc(settings, grpc_listener[1])
                await api_task
            finally:
                if grpc_listener is not None:
                    # Calls under way get a moment to finish, as the API's requests do.
                    await grpc_listener[0].stop(grace=5)
            if signals.stopping:  # logged here: a signal handler must not take log locks
                log.info("stopping on %s", signals.captured[0].name)
        log.info("stopped: store, policy and audit closed")
    finally:
        ops.should_exit = True
        await ops_task
