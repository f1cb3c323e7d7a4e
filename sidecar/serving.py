"""Running the sidecar: the API listener and the operations listener, one process.

Both are uvicorn servers on one event loop. The API server owns the process's
signals and the application's lifespan (store, OPA, Redis); the operations
server (ops.py) stops when it does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import uvicorn

from sidecar.app import create_app
from sidecar.ops import create_ops_app
from sidecar.settings import Settings


class _Quiet(uvicorn.Server):
    """A server that leaves signals to the API server beside it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(settings: Settings) -> None:
    """Serve until a signal stops the API server. Raises ValueError on a bad
    configuration, OSError when the operations port cannot be bound."""
    api = create_app(settings)
    ops = _Quiet(
        uvicorn.Config(
            create_ops_app(api),
            host=settings.ops_host or settings.host,
            port=settings.ops_port,
            log_config=None,
            lifespan="off",
        )
    )
    ops_task = asyncio.create_task(ops.serve())
    while not ops.started:
        if ops_task.done():
            ops_task.result()  # raises the reason it stopped
            raise OSError(f"operations listener on port {settings.ops_port} did not start")
        await asyncio.sleep(0.01)
    server = uvicorn.Server(
        uvicorn.Config(api, host=settings.host, port=settings.port, log_config=None)
    )
    try:
        await server.serve()
    finally:
        ops.should_exit = True
        await ops_task
