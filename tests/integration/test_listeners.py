"""The listeners `whose serve` binds itself (serving.listen): each holds its port from
the moment it is bound, and connections accepted on them get what uvicorn's own sockets
get, Nagle's algorithm off.

With it on, a response written in two parts (head, then body) waited for the client's
delayed ACK: every request took about 40 ms more over loopback.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from sidecar.serving import CannotListen, listen


def test_a_bound_listener_holds_its_port_before_it_serves() -> None:
    # Bound with SO_REUSEADDR but not listening, a socket shared its port with any
    # other such socket: a second sidecar's listener (or this one's other) bound there
    # while the store opened, and the API then could not start.
    held = listen("127.0.0.1", 0, "WHOSE_PORT")
    try:
        port = held.getsockname()[1]
        with pytest.raises(
            CannotListen, match=f"127.0.0.1:{port} is in use: change WHOSE_OPS_PORT"
        ):
            listen("127.0.0.1", port, "WHOSE_OPS_PORT").close()
        with socket.socket() as other:  # nor can another process's ordinary bind
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError, match="in use"):
                other.bind(("127.0.0.1", port))
    finally:
        held.close()


async def test_accepted_connections_send_without_delay() -> None:
    listener = listen("127.0.0.1", 0, "WHOSE_PORT")
    port = listener.getsockname()[1]
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(accepted, 10) != 0
        writer.close()
        await writer.wait_closed()
    finally:
        server.close()
        await server.wait_closed()
