"""The servers the tests start come up on ports of their own, even when another
process takes a port drawn for them before they bind it (tests/ports.py): that
race failed CI runs, once for a sidecar (its two listeners drawn the same port),
and can for a Qdrant node (its HTTP and gRPC ports drawn one after the other).
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import httpx
import pytest

from tests.conftest import PortTaken, start_redis
from tests.ports import free_ports
from tests.qdrant_server import SKIP_REASON, QdrantNode, qdrant_binary


def test_ports_drawn_together_are_distinct() -> None:
    for _ in range(200):
        ports = free_ports(3)
        assert len(set(ports)) == 3, ports


def test_a_qdrant_node_whose_port_was_taken_starts_on_new_ports(tmp_path: Path) -> None:
    binary = qdrant_binary()
    if binary is None:
        pytest.skip(SKIP_REASON)
    node = QdrantNode(binary, tmp_path / "qdrant")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", node.http_port))
        taken.listen()
        try:
            node.start()
            assert node.http_port != taken.getsockname()[1]
            assert httpx.get(f"{node.url}/readyz", timeout=10).status_code == 200
        finally:
            node.stop()


def test_a_redis_on_a_port_another_process_holds_is_not_taken_for_ready(tmp_path: Path) -> None:
    # Readiness was a connection accepted on the port: whatever held it accepted one,
    # and the tests were handed that process while their Redis had exited.
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is missing: run the tests with `make test`")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(PortTaken, match=r"(?i)address already in use"):
            start_redis(binary, tmp_path, port=taken.getsockname()[1])
