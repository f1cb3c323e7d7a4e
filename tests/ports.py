"""Free loopback ports for the processes tests start."""

from __future__ import annotations

import contextlib
import socket


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free when chosen (bound together, so never the same one
    twice, as two free_port() calls in a row may be). Another process may still take
    one before it is bound: a test that starts a server tries again on new ports when
    the server says its port is in use (conftest.start_sidecar, QdrantNode.start)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
