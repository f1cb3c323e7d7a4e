"""The processes a benchmark serves: the sidecar, the passthrough, a Qdrant server,
Redis; each on free loopback ports until its block ends, with its CPU time readable.

The sidecar is ready when its operations listener (WHOSE_OPS_PORT, sidecar/http/ops.py)
answers /healthz; its metrics are read there too, never on the API port.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from sidecar.settings import REPO_ROOT


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free when chosen (bound together: two free_port() calls
    in a row may give the same port)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]


def _proc_table() -> dict[int, tuple[int, float]]:
    """Every live process: pid -> (parent pid, CPU seconds user + system). Linux /proc;
    empty elsewhere (the CPU figures are then zeros)."""
    if not Path("/proc/self/stat").exists():
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    table: dict[int, tuple[int, float]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # Fields after the command name: state, ppid, ... utime (12th), stime.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            table[int(stat.parent.name)] = (
                int(fields[1]),
                (int(fields[11]) + int(fields[12])) / tick,
            )
    return table


@dataclass(frozen=True)
class Proc:
    """A served process: its API base URL, and where its health and metrics are
    (the sidecar's operations listener; the API base for the others)."""

    process: subprocess.Popen[bytes]
    base: str
    ops: str

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu(self) -> float:
        """CPU seconds of the process and all its live descendants (workers, OPA)."""
        table = _proc_table()
        total = 0.0
        for pid, (_, seconds) in table.items():
            walk = pid
            while walk not in (0, 1) and walk != self.pid:
                walk = table.get(walk, (0, 0.0))[0]
            if walk == self.pid:
                total += seconds
        return total

    def cpu_split(self) -> tuple[float, float]:
        """CPU seconds of the process itself and of its live children (the sidecar's
        local OPA)."""
        own = children = 0.0
        for pid, (parent, seconds) in _proc_table().items():
            if pid == self.pid:
                own += seconds
            elif parent == self.pid:
                children += seconds
        return own, children


@contextlib.contextmanager
def process(
    command: list[str],
    env: dict[str, str],
    log: Path,
    ready: tuple[str, ...],
    base: str,
    ops: str,
    wait_s: float,
    cwd: Path = REPO_ROOT,
) -> Iterator[Proc]:
    """`command` until the block ends, once every URL in `ready` answers 200, in turn
    (within `wait_s`)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        started = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            cwd=cwd,
        )
    try:
        deadline = time.monotonic() + wait_s
        for url in ready:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url, timeout=2).status_code == 200:
                        break
                if started.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{command[0]} did not start: {log.read_text()[-2000:]}")
                time.sleep(0.1)
        yield Proc(started, base, ops)
    finally:
        started.send_signal(signal.SIGTERM)
        try:
            started.wait(timeout=60)
        except subprocess.TimeoutExpired:
            started.kill()
            started.wait()


def sidecar(
    data: Path,
    workers: int = 1,
    env: dict[str, str] | None = None,
    log_level: str = "WARNING",
    source: Path = REPO_ROOT,
) -> contextlib.AbstractContextManager[Proc]:
    """`whose serve --dev` on `data` (header identity, loopback), from the source tree
    `source` (default: this one). Start-up includes indexing whatever the store holds
    unindexed (store/edge.py), hence the long wait."""
    port, ops_port = free_ports(2)
    command = [sys.executable, "-m", "sidecar", "serve", "--dev", "--data-dir", str(data)]
    command += ["--port", str(port), "--ops-port", str(ops_port), "--workers", str(workers)]
    # No gRPC listener: the bench measures HTTP, and two sidecars (variants, or another
    # on the machine) would both claim Qdrant's default gRPC port.
    env = {"WHOSE_LOG_LEVEL": log_level, "WHOSE_GRPC_PORT": "off", **(env or {})}
    base, ops = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{ops_port}"
    log = data / "bench-sidecar.log"
    # Up (/healthz), then ready (/readyz: store and policy open, the API serving), both
    # on the operations listener.
    ready = (f"{ops}/healthz", f"{ops}/readyz")
    return process(command, env, log, ready, base, ops, 3600, cwd=source)


def passthrough(data: Path) -> contextlib.AbstractContextManager[Proc]:
    """The plain-store baseline (passthrough.py) on the sidecar's embedded store."""
    port = free_port()
    command = [sys.executable, "-m", "sidecar.bench.passthrough", "--data-dir", str(data)]
    command += ["--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    return process(
        command, {}, data / "bench-passthrough.log", (f"{base}/healthz",), base, base, 3600
    )


def peer(data: Path) -> contextlib.AbstractContextManager[Proc]:
    """wardowl's HTTP service on its own store (peer.py)."""
    port = free_port()
    command = [sys.executable, "-m", "sidecar.bench.peer", "--data-dir", str(data)]
    command += ["--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    log = data.with_name(data.name + "-peer.log")
    return process(command, {}, log, (f"{base}/healthz",), base, base, 600)


def qdrant(binary: Path, folder: Path) -> contextlib.AbstractContextManager[Proc]:
    port, grpc_port = free_ports(2)
    env = {
        "QDRANT__SERVICE__HOST": "127.0.0.1",
        "QDRANT__SERVICE__HTTP_PORT": str(port),
        "QDRANT__SERVICE__GRPC_PORT": str(grpc_port),
        "QDRANT__STORAGE__STORAGE_PATH": str(folder / "storage"),
        "QDRANT__STORAGE__SNAPSHOTS_PATH": str(folder / "snapshots"),
        "QDRANT__TELEMETRY_DISABLED": "true",
        "QDRANT__LOG_LEVEL": "WARN",
    }
    base = f"http://127.0.0.1:{port}"
    log = folder / "qdrant.log"
    # In its own folder: the server writes files of its own where it starts.
    return process([str(binary)], env, log, (f"{base}/readyz",), base, base, 60, cwd=folder)


@contextlib.contextmanager
def redis(folder: Path) -> Iterator[str]:
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    binary = shutil.which("redis-server") or "redis-server"
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    command += ["--appendonly", "no"]
    started = subprocess.Popen(command, stdout=subprocess.DEVNULL, cwd=folder)
    try:
        time.sleep(0.5)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        started.terminate()
        started.wait()
