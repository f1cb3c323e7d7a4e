"""Shared fixtures: real processes only (an OPA server, the sidecar itself)."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import settings

from tests.forks import Forked, Process
from tests.loops import close_loop_left_behind, loop_set
from tests.models import minilm as minilm  # the real small embedding model (a fixture)
from tests.ports import PortTaken as PortTaken
from tests.ports import free_port as free_port
from tests.ports import free_ports as free_ports
from tests.ports import says_port_taken, until_ports_hold
from tests.qdrant_server import SKIP_REASON, QdrantNode, qdrant_binary, start_node

# Hypothesis profiles: "ci" (the default, what `make test` runs, sized so the suite fits
# in 12 minutes on two cores) and "long" (thousands of worlds and examples), chosen by
# WHOSE_HYPOTHESIS_PROFILE=long or `pytest --hypothesis-profile=long` (CONTRIBUTING.md).
# Tests that set max_examples themselves size it with `examples(ci=..., long=...)`.
settings.register_profile("ci", max_examples=150, deadline=None)
settings.register_profile("long", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("WHOSE_HYPOTHESIS_PROFILE") or "ci")

# mem0 and Haystack read these when first imported (by the integration tests and the
# README's snippets): nothing is sent off the machine, and mem0 keeps its files in a
# folder of the run's own, removed when the run ends (not in /tmp for good). Made once,
# by the process that starts the run: xdist's workers and the pytest runs a test starts
# inherit it, and a worker, which ends without running its exit handlers, made one of
# its own that stayed behind.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"
_MEM0_DIR: tempfile.TemporaryDirectory[str] | None = None
if "MEM0_DIR" not in os.environ:
    _MEM0_DIR = tempfile.TemporaryDirectory(prefix="whose-mem0-")
    os.environ["MEM0_DIR"] = _MEM0_DIR.name


def examples(ci: int, long: int) -> int:
    """A property's number of examples under the current Hypothesis profile: `ci` in
    `make test`, `long` for a deep run. (Read where the test module is collected,
    after --hypothesis-profile took effect.)"""
    return long if settings.get_current_profile_name() == "long" else ci


REPO = Path(__file__).resolve().parent.parent
# Every sidecar the tests start inherits this: the gRPC listener's default port is a
# fixed 6334, which two sidecars at once (several per module, two xdist workers) cannot
# share. A test that speaks gRPC asks for it (`start_sidecar(..., grpc=True)`: a free port).
os.environ.setdefault("WHOSE_GRPC_PORT", "off")
OPA_BINARY = REPO / "bin" / "opa"
# OPA's evaluator as a shared library (`make install`), for the linked evaluator.
OPA_LIBRARY = REPO / "bin" / "libwhoseopa.so"
POLICY_DIR = REPO / "rego"

# Lines for the end of the test output: how much was checked (leak oracle, fuzzing,
# policy coverage), so the numbers are in every CI log.
REPORT: list[str] = []


# Each folder holds one kind of test, and is marked with it: `pytest -m unit` runs the
# tests that start no process, `-m "not load"` everything but the load runs, and so on.
KINDS = {
    "unit": "pure: no process, no network",
    "integration": "one part against real OPA, Redis or Qdrant",
    "acceptance": "a user story over HTTP against a served sidecar",
    "oracle": "the leak oracle: random worlds against a reference model",
    "noninterference": "two stores differing only by hidden records, every route compared",
    "fuzz": "schemathesis against the served OpenAPI",
    "deploy": "manifests, compose, bundles and docs, validated offline",
    "load": "short locust runs against a served sidecar",
}


def pytest_configure(config: pytest.Config) -> None:
    for kind, meaning in KINDS.items():
        config.addinivalue_line("markers", f"{kind}: {meaning}")


# The longest kinds run first: under `make test`'s workers each file goes to one, in
# collection order (the Makefile turns off xdist's own reordering, which sends the files
# with the most tests first and left the properties, minutes each but few tests, for
# last while the other workers idled). Unit tests come last to fill the gaps. Within a
# file the order is kept.
FIRST = ("oracle", "noninterference", "load", "deploy", "integration", "acceptance", "fuzz")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = item.path.relative_to(REPO / "tests").parts[0]
        if folder in KINDS:
            item.add_marker(getattr(pytest.mark, folder))

    def rank(item: pytest.Item) -> int:
        folder = item.path.relative_to(REPO / "tests").parts[0]
        return FIRST.index(folder) if folder in FIRST else len(FIRST)

    items.sort(key=rank)


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Here, not at interpreter exit: a process stopped by a signal runs no finalizers.
    if _MEM0_DIR is not None:
        _MEM0_DIR.cleanup()
    # Under pytest-xdist (`make test` runs two workers) each worker checks part of the
    # suite: its lines travel to the controller, which prints them all.
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["whose_report"] = json.dumps(REPORT)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller: a worker finished; keep what it checked."""
    REPORT.extend(json.loads(getattr(node, "workeroutput", {}).get("whose_report", "[]")))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if REPORT:
        terminalreporter.section("whose: what was checked")
        for line in REPORT:
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _no_loop_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """A sync test ends with no event loop of its own left set and open (tests/loops.py:
    LlamaIndex leaves one, and its collection later fails another test). Async tests run
    on pytest-asyncio's loop, which it closes itself."""
    if inspect.iscoroutinefunction(getattr(request.node, "obj", None)):
        yield
        return
    before = loop_set()
    yield
    close_loop_left_behind(before)


@pytest.fixture(autouse=True)
def _client_checks_finished() -> Iterator[None]:
    """Each test ends once the qdrant-client instances it made have checked the server's
    version: the client does it in a thread of its own (`_check_compatibility`), which on
    a loaded machine ran after the module's sidecar had stopped and failed the test at
    teardown ("Failed to obtain server version", connection refused)."""
    yield
    for thread in threading.enumerate():
        if thread.name.endswith("(_check_compatibility)"):
            thread.join(timeout=READY_TIMEOUT_S)


# How long a process a test starts may take to become ready. Sized for a loaded 2-core
# machine (a sidecar that starts in 3 s alone took over 30 s beside another heavy job);
# a ready process ends the wait at once, so only a broken one waits this long.
READY_TIMEOUT_S = float(os.environ.get("WHOSE_TEST_READY_S", "180"))


# `opa test`'s limit per test case (its default, 5 s, failed a case on a loaded machine).
OPA_TEST_TIMEOUT = f"{READY_TIMEOUT_S:.0f}s"


def wait_until_ready(
    url: str, process: Process, log: Path, timeout: float = READY_TIMEOUT_S
) -> None:
    """Poll `url` until it answers 200; on failure the process is reaped before raising."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            process.wait()
            said = log.read_text(errors="replace")[-3000:]
            if says_port_taken(said):
                raise PortTaken(f"process exited early:\n{said}")
            raise RuntimeError(f"process exited early:\n{said}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    stop(process)
    raise RuntimeError(f"not ready after {timeout}s:\n{log.read_text(errors='replace')[-3000:]}")


def stop(process: Process) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def start_opa(
    policy_dir: Path | None, log: Path, port: int | None = None, extra: tuple[str, ...] = ()
) -> tuple[str, subprocess.Popen[bytes]]:
    """A real `opa run --server` on loopback, loading policy_dir (if any) as files; on
    `port`, else on a drawn one (drawn again if another process takes it first)."""
    if not OPA_BINARY.exists():
        pytest.fail(f"{OPA_BINARY} is missing: run the tests with `make test`")

    def on(port: int) -> tuple[str, subprocess.Popen[bytes]]:
        command = [str(OPA_BINARY), "run", "--server", "--addr", f"127.0.0.1:{port}"]
        command += ["--skip-version-check", "--log-level", "error", "--ignore", "*_test.rego"]
        command += [*extra, *([str(policy_dir)] if policy_dir else [])]
        with log.open("ab") as out:  # the child keeps its own copy of the descriptor
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        wait_until_ready(f"{url}/health", process, log)
        return url, process

    return on(port) if port else until_ports_hold(lambda: on(free_port()))


@pytest.fixture(scope="session")
def opa_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real OPA server with the project's policies and demo directory."""
    url, process = start_opa(POLICY_DIR, tmp_path_factory.mktemp("opa") / "opa.log")
    yield url
    stop(process)


# The operations listener (health, readiness, metrics) of each sidecar a test started,
# by the sidecar's API address.
OPS: dict[str, str] = {}
# The gRPC port of a sidecar started with `grpc=True`, by its API address.
GRPC: dict[str, int] = {}


def ops(base: str) -> str:
    """The operations listener of the sidecar at `base` (see start_sidecar)."""
    return OPS[base]


def start_sidecar(
    data_dir: Path, env: dict[str, str] | None = None, dev: bool = True, grpc: bool = False
) -> tuple[str, Process]:
    """`whose serve` on loopback; `dev=False` takes verified tokens only (set WHOSE_JWT_*).
    Started again on new ports when the sidecar says one it was given is in use
    (tests/ports.py)."""
    return until_ports_hold(lambda: _start_sidecar(data_dir, env, dev, grpc))


def _start_sidecar(
    data_dir: Path, env: dict[str, str] | None, dev: bool, grpc: bool = False
) -> tuple[str, Process]:
    port, ops_port, *more = free_ports(3 if grpc else 2)
    grpc_port = more[0] if grpc else None
    log = data_dir / "sidecar.log"
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = ["serve", *(["--dev"] if dev else [])]
    argv += ["--port", str(port), "--ops-port", str(ops_port), "--data-dir", str(data_dir)]
    argv += ["--grpc-port", str(grpc_port)] if grpc_port else []
    process = Forked(argv, {**os.environ, **(env or {})}, REPO, log)
    base = f"http://127.0.0.1:{port}"
    OPS[base] = f"http://127.0.0.1:{ops_port}"
    if grpc_port:
        GRPC[base] = grpc_port
    try:
        wait_until_ready(f"{OPS[base]}/healthz", process, log)
        # `GET /` (what qdrant-client reads first) answers once the lifespan has run;
        # /openapi.json would have the first request build the whole schema (~0.3 s).
        wait_until_ready(f"{base}/", process, log)
    except RuntimeError as failed:
        ports = [port, ops_port, *([grpc_port] if grpc_port else [])]
        taken = any(f"{p} is in use" in str(failed) for p in ports)
        if taken and process.poll() is not None:
            raise PortTaken(str(failed)) from None
        raise
    return base, process


@pytest.fixture(scope="module")
def sidecar_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data directory of the module's sidecar (store, audit.sqlite3, sidecar.log)."""
    return tmp_path_factory.mktemp("sidecar")


@pytest.fixture(scope="module")
def sidecar(sidecar_dir: Path) -> Iterator[str]:
    """`whose serve --dev` on embedded defaults: edge store on disk, its own OPA.

    One per test module, so what one story stores cannot show up in another.
    """
    base, process = start_sidecar(sidecar_dir)
    yield base
    stop(process)


@pytest.fixture(scope="module")
def sidecar_on(tmp_path_factory: pytest.TempPathFactory, store_backend: Backend) -> Iterator[str]:
    """`whose serve --dev` on the module's store backend (`store_backend`: each module
    that asks for it runs once on the embedded engine and once on a Qdrant server)."""
    base, process = start_sidecar(tmp_path_factory.mktemp("sidecar"), env=store_backend.env())
    yield base
    stop(process)


@pytest.fixture(scope="module")
def http(sidecar: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sidecar, timeout=10) as client:
        yield client


def as_(who: str, tenant: str = "acme", groups: str = "", roles: str = "") -> dict[str, str]:
    """Dev-mode identity headers."""
    headers = {"X-Whose-Asker": who, "X-Whose-Tenant": tenant}
    if groups:
        headers["X-Whose-Groups"] = groups
    if roles:
        headers["X-Whose-Roles"] = roles
    return headers


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server on a free loopback port, no persistence."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is missing: run the tests with `make test`")
    url, process = start_redis(binary, tmp_path_factory.mktemp("redis"))
    yield url
    stop(process)


def start_redis(
    binary: str, folder: Path, port: int | None = None
) -> tuple[str, subprocess.Popen[bytes]]:
    """redis-server on loopback, on `port`, else on a drawn one (drawn again if another
    process takes it first)."""

    def on(port: int) -> tuple[str, subprocess.Popen[bytes]]:
        command = [binary, "--port", str(port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no"]
        log = folder / "redis.log"
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=folder)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            # Its own word, not a connection: whatever else took the port would accept one.
            said = log.read_text(errors="replace")
            if "Ready to accept connections" in said:
                return f"redis://127.0.0.1:{port}/0", process
            if process.poll() is not None:
                if says_port_taken(said):
                    raise PortTaken(said)
                break
            time.sleep(0.05)
        stop(process)
        raise RuntimeError(f"redis-server did not start:\n{log.read_text(errors='replace')}")

    return on(port) if port else until_ports_hold(lambda: on(free_port()))


def metric(base: str, name: str, **labels: str) -> float:
    """A sample from the sidecar's /metrics (0 if absent), e.g. whose_decision_cache_total."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(httpx.get(f"{ops(base)}/metrics").text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


# --- the store backend a sidecar runs on ----------------------------------------------
#
# Tests that matter on both backends take the `store_backend` fixture and start their
# sidecar with `store_backend.env()`: "edge" (the embedded default) and "server" (a
# real Qdrant server this session starts, `qdrant_server`; skipped with SKIP_REASON
# where there is no binary). WHOSE_TEST_BACKENDS=edge (or =server) runs one of them.
STORE_BACKENDS = tuple(
    b for b in os.environ.get("WHOSE_TEST_BACKENDS", "edge,server").split(",") if b.strip()
)


@dataclass
class Backend:
    name: str  # "edge" or "server"
    folder: Path | None = None  # where the server backend's Qdrant nodes keep their data
    nodes: list[QdrantNode] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        """Settings for one more sidecar on this backend. On the server, a Qdrant server
        of its own (started now, stopped with the module), just as each embedded
        sidecar has a store of its own: sidecars share nothing, and each keeps the
        default collection name the Qdrant dialect is reached by."""
        if self.name == "edge":
            return {}
        assert self.folder is not None
        node = start_node(self.folder / f"qdrant-{len(self.nodes)}")
        self.nodes.append(node)
        return {"WHOSE_STORE": "server", "WHOSE_QDRANT_URL": node.url}

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


@pytest.fixture(scope="session")
def qdrant_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QdrantNode]:
    """One real Qdrant server (single node) for the session; tests use their own
    collections on it."""
    if qdrant_binary() is None:
        pytest.skip(SKIP_REASON)
    node = start_node(tmp_path_factory.mktemp("qdrant"))
    yield node
    node.stop()


@pytest.fixture(scope="module", params=STORE_BACKENDS)
def store_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    if request.param == "edge":
        yield Backend("edge")
        return
    if qdrant_binary() is None:
        pytest.skip(SKIP_REASON)
    backend = Backend("server", tmp_path_factory.mktemp("qdrant-nodes"))
    yield backend
    backend.stop()
