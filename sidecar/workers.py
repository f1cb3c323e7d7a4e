"""`whose serve --workers N`: N worker processes behind one API and one operations socket.

One process serves one event loop, and the GIL keeps it on one core; N workers use
N. The parent binds both sockets once and hands them to the workers; uvicorn's own
supervisor (`uvicorn.supervisors.Multiprocess`) starts them, checks on each every
half second, and replaces one that dies or stops answering. A worker that fails
while starting (a bad configuration, OPA missing) stops them all: the same start
would fail on every restart, so `whose serve` exits with status 2 instead.

Each worker is one uvicorn server on both sockets. A request goes to the operations
app (health, readiness, metrics: http/ops.py) when it came in on the operations socket,
else to the API: the socket's own address decides, never anything a caller sends.

What workers must share lives outside them: records in a Qdrant server, chain locks,
the decision cache, allow rates and the audit stream in Redis. So N > 1 needs
WHOSE_STORE=server and WHOSE_REDIS_URL (the embedded store belongs to one process;
in-process locks would let two workers fork a chain). What each keeps to itself, a
local OPA and the audit spill file while Redis is down, is under
`<data dir>/worker-<slot>/`; a worker takes the lowest free slot (a file lock the
kernel releases when the process dies), so a replacement replays what the worker
it replaces spilled. Metrics are prometheus-client's multiprocess mode: every
worker writes its samples under PROMETHEUS_MULTIPROC_DIR and each scrape sums them
(a dead worker's counts stay in the sums).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess

from sidecar.serving import listen_both
from sidecar.settings import Settings

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# The slot lock stays open (and held) for the worker's life.
_SLOT: list[int] = []


def check(settings: Settings, workers: int) -> None:
    """Raise ValueError if `workers` processes cannot share what this configuration keeps."""
    if workers <= 1:
        return
    if "grpc_port" in settings.model_fields_set and settings.grpc_port is not None:
        # One process serves gRPC (serving.py); workers share the HTTP sockets only.
        raise ValueError(
            f"--workers {workers} serves no gRPC listener: set WHOSE_GRPC_PORT=off (or run"
            " one worker for gRPC)"
        )
    if settings.store != "server":
        raise ValueError(
            f"--workers {workers} needs WHOSE_STORE=server: the embedded store belongs to"
            " one process (run one worker, or use a Qdrant server)"
        )
    if not settings.redis_url:
        raise ValueError(
            f"--workers {workers} needs WHOSE_REDIS_URL: chain locks, the decision cache"
            " and the audit log must be shared by the workers"
        )


def serve_workers(settings: Settings, workers: int) -> int:
    """Serve with `workers` processes until a signal stops them; the exit status."""
    check(settings, workers)
    api = uvicorn.Config(
        "sidecar.workers:worker_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=workers,
        log_config=None,
    )
    api_socket, ops_socket = listen_both(settings)
    # Workers rebuild their settings from the environment: flags go through it too.
    os.environ.update(
        {
            "WHOSE_HOST": settings.host,
            "WHOSE_PORT": str(api_socket.getsockname()[1]),
            "WHOSE_OPS_HOST": settings.ops_host or settings.host,
            "WHOSE_OPS_PORT": str(ops_socket.getsockname()[1]),
            "WHOSE_DATA_DIR": str(settings.data_dir.resolve()),
            "WHOSE_DEV": "true" if settings.dev else "false",
        }
    )
    with _metrics_folder():
        supervisor = Multiprocess(api, sockets=[api_socket, ops_socket])
        supervisor.run()
    failed = [p.pid for p in supervisor.processes if p.exitcode == STARTUP_FAILURE]
    return 2 if failed else 0


@contextlib.contextmanager
def _metrics_folder() -> Iterator[None]:
    given = os.environ.get(MULTIPROC_ENV)
    folder = Path(given) if given else Path(tempfile.mkdtemp(prefix="whose-metrics-"))
    # Samples of an earlier run are not this one's (prometheus-client's advice).
    for stale in folder.glob("*.db"):
        stale.unlink()
    os.environ[MULTIPROC_ENV] = str(folder)
    try:
        yield
    finally:
        if not given:
            shutil.rmtree(folder, ignore_errors=True)


class Listeners:
    """One worker's API and operations apps on one uvicorn server, by socket."""

    def __init__(self, api: ASGIApp, ops: ASGIApp, ops_port: int) -> None:
        self.api = api
        self.ops = ops
        self.ops_port = ops_port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # `server` is the address of the socket the connection came in on.
        server = scope.get("server")
        on_ops = scope["type"] != "lifespan" and server is not None and server[1] == self.ops_port
        await (self.ops if on_ops else self.api)(scope, receive, send)


def worker_app() -> ASGIApp:
    """Run in each worker by uvicorn (an import string, so the workers can be spawned)."""
    from sidecar import logs
    from sidecar.http.app import create_app
    from sidecar.http.ops import create_ops_app

    settings = Settings()
    logs.configure(settings)
    own = settings.data_dir / f"worker-{_claim_slot(settings.data_dir)}"
    settings = settings.model_copy(update={"data_dir": own})
    api = create_app(settings)
    return Listeners(api, create_ops_app(api, settings.console == "ops"), settings.operations_port)


def _claim_slot(data_dir: Path) -> int:
    """The lowest slot no live worker holds; held until this process ends."""
    data_dir.mkdir(parents=True, exist_ok=True)
    for slot in itertools.count():
        fd = os.open(data_dir / f"worker-{slot}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _SLOT.append(fd)
        return slot
    raise AssertionError("unreachable")
