"""The package's layers, read from its imports (docs/design.md §5).

Every import a module makes counts, at the top, inside a function or under
`if TYPE_CHECKING:` (an annotation's import is a dependency too: a cycle of them is a
cycle of concepts). The core decides and stores; the transports (HTTP, MCP, the Qdrant
dialect) call it through one door: the surface (memory.py, and oversight.py for the
security team). So: no module reaches itself through its imports, nothing the core
imports, directly or through another module, is a web framework or a transport, and a
transport imports, of the sidecar, only the surface, the vocabulary it speaks (models,
errors, identity) and the wiring that serves it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "sidecar"

# What decides, reads, writes, stores and words answers: free of every transport.
CORE = (
    "sidecar.policy",
    "sidecar.reads",
    "sidecar.writes",
    "sidecar.store",
    "sidecar.answers",
    "sidecar.embed",
    "sidecar.record",
    "sidecar.messages",
    "sidecar.auth.identity",
    "sidecar.memory",
    "sidecar.points",
    "sidecar.stack_paths",
    "sidecar.door",
    "sidecar.errors",
)
TRANSPORTS = (
    "fastapi",
    "starlette",
    "uvicorn",
    "mcp",
    "grpc",
    "sidecar.http",
    "sidecar.mcp",
    "sidecar.grpc_api",
)
# What a transport may import of the sidecar (besides other transport modules): the
# surface, the words and models it parses and serialises, and the wiring that serves it.
SURFACE = (
    "sidecar.memory",
    "sidecar.oversight",
    "sidecar.points",
)
VOCABULARY = (
    "sidecar.messages",
    "sidecar.record",
    "sidecar.errors",
    "sidecar.auth.identity",
    "sidecar.audit.model",  # the audit log's outcome and purpose names (GET /v1/audit)
    "sidecar.audit",  # the same, re-exported
    "sidecar.answers.readout",  # an answer as the text a model reads (MCP)
    "sidecar.answers",  # the package readout is imported from
    "sidecar.reads.query.legacy",  # the older Qdrant routes' bodies, as the queries they mean
    "sidecar.reads.query",  # the package legacy is imported from
)
WIRING = (
    "sidecar",  # __version__
    "sidecar.services",
    "sidecar.settings",
    "sidecar.auth.tokens",  # the Authenticator the app is built with
    "sidecar.metrics",  # request latency (http/request_metrics.py)
)
# The Qdrant dialect's reads still call the read path themselves, and its modules name
# what the core does; issue 37 moves them onto the surface and empties this list
# (an entry no longer needed fails the test, so it only shrinks).
PENDING = {
    "sidecar.http.qdrant.caller_filter": {"sidecar.store.schema"},
    "sidecar.http.qdrant.dialect": {"sidecar.reads.reader", "sidecar.store.schema"},
    "sidecar.http.qdrant.writes": {
        "sidecar.store.scope",
        "sidecar.writes.eraser",
        "sidecar.writes.versions",
    },
}

# The Python client (sidecar/client/) reads the server's models and words, and nothing of
# the machinery that serves them: no transport, composition root, read or write path,
# store, policy client, audit sink, nor their libraries.
SERVER = (
    *TRANSPORTS,
    "sidecar.services",
    "sidecar.serving",
    "sidecar.workers",
    "sidecar.memory",
    "sidecar.points",
    "sidecar.stack_paths",
    "sidecar.reads",
    "sidecar.store",
    "sidecar.embed",
    "sidecar.settings",
    "sidecar.metrics",
    "sidecar.auth.tokens",
    "sidecar.auth.jwks",
    "sidecar.policy.opa",
    "sidecar.policy.local_opa",
    "sidecar.policy.pushdown",
    "sidecar.policy.cache",
    "sidecar.writes.writer",
    "sidecar.writes.supersession",
    "sidecar.writes.locks",
    "sidecar.writes.repair",
    "sidecar.audit.writer",
    "sidecar.audit.redis_sink",
    "sidecar.audit.sqlite_sink",
    "sidecar.audit.spill",
    "qdrant_client",
    "qdrant_edge",
    "redis",
    "aiohttp",
    "prometheus_client",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(node: ast.AST, here: str, is_package: bool) -> Iterator[str]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import):
            yield from (alias.name for alias in child.names)
        elif isinstance(child, ast.ImportFrom):
            base = child.module or ""
            if child.level:
                anchor = here.split(".")
                anchor = anchor[: len(anchor) - child.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            yield base
            # `from sidecar.http import api` imports the module sidecar.http.api
            yield from (f"{base}.{alias.name}" for alias in child.names)
        yield from _imports(child, here, is_package)


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        found = set(_imports(tree, name, path.name == "__init__.py"))
        internal = {m for m in found if m in modules and m != name}
        external = {m for m in found if not m.startswith("sidecar")}
        edges[name] = internal | external
    return edges


GRAPH = graph()


def reachable(start: str) -> dict[str, list[str]]:
    """Every module `start` imports, directly or not, with one path to it."""
    paths: dict[str, list[str]] = {start: [start]}
    todo = [start]
    while todo:
        current = todo.pop()
        for target in sorted(GRAPH.get(current, ())):
            if target not in paths:
                paths[target] = [*paths[current], target]
                todo.append(target)
    return paths


def test_the_graph_is_read() -> None:
    # The reader must see what it checks, or the checks below pass on nothing.
    assert "sidecar.http.app" in GRAPH
    assert "sidecar.reads.gate" in GRAPH["sidecar.reads.reader"]
    assert "fastapi" in GRAPH["sidecar.http.api"]
    assert any(module.startswith(CORE) for module in GRAPH)
    # Imports made for annotations only count as well.
    assert "fastembed" in GRAPH["sidecar.embed.onnx"]


def test_no_module_reaches_itself() -> None:
    cycles = []
    for module in GRAPH:
        for target in GRAPH[module]:
            back = reachable(target)
            if module in back:
                cycles.append(" -> ".join([module, *back[module]]))
                break
    assert not cycles, "import cycles:\n" + "\n".join(sorted(cycles))


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith(CORE)))
def test_the_core_imports_no_transport(module: str) -> None:
    leaks = [
        " -> ".join(path)
        for target, path in reachable(module).items()
        if any(target == t or target.startswith(t + ".") for t in TRANSPORTS)
    ]
    assert not leaks, "\n".join(leaks)


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith("sidecar.mcp")))
def test_mcp_reaches_the_core_not_the_http_routes(module: str) -> None:
    # Both transports call memory.py; neither goes through the other's routes.
    leaks = [" -> ".join(p) for t, p in reachable(module).items() if t.startswith("sidecar.http")]
    assert not leaks, "\n".join(leaks)


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith("sidecar.grpc_api")))
def test_grpc_goes_through_the_rest_dialects_handlers_not_around_them(module: str) -> None:
    # One surface, two transports: gRPC reaches the core only through the Qdrant
    # dialect's handlers (http/qdrant/), never the native API's routes or the MCP tools.
    http = {t for t in GRAPH[module] if t.startswith("sidecar.http")}
    assert all(t.startswith("sidecar.http.qdrant") for t in http), sorted(http)
    assert not any(t.startswith("sidecar.mcp") for t in GRAPH[module])


def test_the_graph_sees_the_grpc_transport() -> None:
    assert "grpc" in GRAPH["sidecar.grpc_api.server"]
    assert "sidecar.http.qdrant.routes" in GRAPH["sidecar.grpc_api.services"]


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith("sidecar.client")))
def test_the_client_imports_none_of_the_server(module: str) -> None:
    leaks = [
        " -> ".join(path)
        for target, path in reachable(module).items()
        if any(target == t or target.startswith(t + ".") for t in SERVER)
    ]
    assert not leaks, "\n".join(leaks)


def test_the_client_reads_the_server_models() -> None:
    # One source of truth: the client sends and reads these very modules' models.
    reached = reachable("sidecar.client.clients")
    for model in ("sidecar.messages", "sidecar.record"):
        assert model in reached, model


def _is_transport(module: str) -> bool:
    return module.startswith(("sidecar.http", "sidecar.mcp", "sidecar.grpc_api"))


def _beyond_the_surface(module: str) -> set[str]:
    allowed = {*SURFACE, *VOCABULARY, *WIRING}
    return {
        target
        for target in GRAPH[module]
        if target.startswith("sidecar") and not _is_transport(target) and target not in allowed
    }


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _is_transport(m)))
def test_a_transport_calls_the_surface(module: str) -> None:
    beyond = _beyond_the_surface(module) - PENDING.get(module, set())
    assert not beyond, f"{module} reaches past the surface: {sorted(beyond)}"


def test_pending_exceptions_are_still_needed() -> None:
    stale = {m: sorted(p - _beyond_the_surface(m)) for m, p in PENDING.items()}
    assert not any(stale.values()), f"no longer needed, drop from PENDING: {stale}"
