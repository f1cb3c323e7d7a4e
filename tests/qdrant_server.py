"""Real Qdrant servers for the tests: one node, or a cluster, on free loopback ports.

The binary is not on any package registry. It is `$WHOSE_TEST_QDRANT` if set (the
path of a qdrant executable), else `bin/qdrant`, which `make test` unpacks from
`../shared/bin/qdrant.xz` when that exists. Without either, every test that needs
a server is skipped with one line saying so (SKIP_REASON); none passes silently.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.ports import PortTaken, free_ports, says_port_taken, until_ports_hold

REPO = Path(__file__).resolve().parent.parent


BINARY_ENV = "WHOSE_TEST_QDRANT"
SKIP_REASON = (
    "no Qdrant server binary, so the server-backend and cluster tests did not run: "
    f"set {BINARY_ENV}=/path/to/qdrant (v1.18), or put one at bin/qdrant "
    "(`make qdrant` unpacks ../shared/bin/qdrant.xz)"
)


def qdrant_binary() -> Path | None:
    """The Qdrant server to test against, or None. A path named in the environment
    that is not an executable is an error, not a skip."""
    named = os.environ.get(BINARY_ENV)
    if named:
        path = Path(named)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise RuntimeError(f"{BINARY_ENV}={named} is not an executable file")
        return path
    local = REPO / "bin" / "qdrant"
    return local if local.is_file() and os.access(local, os.X_OK) else None


@dataclass
class QdrantNode:
    """One `qdrant` process on loopback: its ports and storage survive a restart."""

    binary: Path
    folder: Path
    api_key: str | None = None
    # Distributed mode (`cluster`): this node's p2p port, and the first node's p2p URL
    # to join.
    cluster: bool = False
    bootstrap: str | None = None
    # Drawn together when the node is made (free_ports), again if one is taken before
    # the first start binds it; kept across restarts.
    http_port: int = 0
    grpc_port: int = 0
    p2p_port: int | None = None
    process: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self._draw_ports()

    def _draw_ports(self) -> None:
        ports = free_ports(3 if self.cluster else 2)
        self.http_port, self.grpc_port = ports[0], ports[1]
        self.p2p_port = ports[2] if self.cluster else None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def p2p_url(self) -> str:
        return f"http://127.0.0.1:{self.p2p_port}"

    def start(self, timeout: float = 180) -> None:
        """Start (or restart) the node; returns once it is ready. At its first start,
        a port another process took meanwhile is drawn again (tests/ports.py)."""
        if self.process is None:
            until_ports_hold(lambda: self._start(timeout), self._draw_ports)
        else:
            self._start(timeout)

    def _start(self, timeout: float) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "QDRANT__SERVICE__HOST": "127.0.0.1",
            "QDRANT__SERVICE__HTTP_PORT": str(self.http_port),
            "QDRANT__SERVICE__GRPC_PORT": str(self.grpc_port),
            "QDRANT__STORAGE__STORAGE_PATH": str(self.folder / "storage"),
            "QDRANT__STORAGE__SNAPSHOTS_PATH": str(self.folder / "snapshots"),
            "QDRANT__TELEMETRY_DISABLED": "true",
            "QDRANT__LOG_LEVEL": "WARN",
        }
        command = [str(self.binary)]
        if self.api_key:
            env["QDRANT__SERVICE__API_KEY"] = self.api_key
        if self.cluster:
            env["QDRANT__CLUSTER__ENABLED"] = "true"
            env["QDRANT__CLUSTER__P2P__PORT"] = str(self.p2p_port)
            command += ["--uri", self.p2p_url]
            if self.bootstrap:
                command += ["--bootstrap", self.bootstrap]
        log = self.folder / "qdrant.log"
        with log.open("ab") as out:
            # Its working directory too: Qdrant leaves a marker file there.
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.folder
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                said = log.read_text(errors="replace")[-3000:]
                if says_port_taken(said):
                    raise PortTaken(said)
                raise RuntimeError(f"qdrant exited:\n{said}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"qdrant not ready:\n{log.read_text(errors='replace')[-3000:]}")

    def headers(self) -> dict[str, str]:
        return {"api-key": self.api_key} if self.api_key else {}

    def kill(self) -> None:
        """SIGKILL: a node that dies, not one that shuts down."""
        self._end(signal.SIGKILL)

    def stop(self) -> None:
        self._end(signal.SIGTERM)

    def _end(self, how: signal.Signals) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(how)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_node(folder: Path, api_key: str | None = None) -> QdrantNode:
    binary = qdrant_binary()
    if binary is None:
        pytest.skip(SKIP_REASON)
    node = QdrantNode(binary, folder, api_key=api_key)
    node.start()
    return node


def start_cluster(folder: Path, size: int = 3, timeout: float = 90) -> list[QdrantNode]:
    """`size` nodes in distributed mode; returns once every node sees all peers."""
    binary = qdrant_binary()
    assert binary is not None, SKIP_REASON
    nodes: list[QdrantNode] = []
    try:
        first = QdrantNode(binary, folder / "node-0", cluster=True)
        nodes.append(first)
        first.start()
        for i in range(1, size):
            node = QdrantNode(binary, folder / f"node-{i}", cluster=True, bootstrap=first.p2p_url)
            nodes.append(node)
            node.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(peers(node) == size for node in nodes):
                return nodes
            time.sleep(0.2)
        raise RuntimeError(f"the cluster did not form in {timeout} s")
    except BaseException:
        for node in nodes:  # those started so far, on every way out
            node.kill()
        raise


def peers(node: QdrantNode) -> int:
    try:
        answer = httpx.get(f"{node.url}/cluster", timeout=2).json()["result"]
    except (httpx.HTTPError, KeyError, ValueError):
        return 0
    return len(answer.get("peers", {}))


def remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
