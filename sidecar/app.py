"""The FastAPI application: wiring of store, policy and identity, and error shapes.

Start-up opens the store and reaches OPA (starting a local one on embedded
defaults); shutdown closes both. Routes live in api.py (native), proxy.py
(Qdrant's dialect) and admin.py (audit, explain); health and metrics are served
on the operations listener (ops.py).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager

import redis.asyncio as aioredis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from sidecar import __version__, admin, api, mcp_server, metrics, proxy
from sidecar.allow_rate import LocalAllowRates, RedisAllowRates
from sidecar.audit import AuditLog, RedisSink, SqliteSink
from sidecar.cache import DecisionCache, LocalCache, RedisCache
from sidecar.disclosure import Gate
from sidecar.embed import HashingEmbedder
from sidecar.filters import FilterRefused
from sidecar.identity import Authenticator
from sidecar.limits import BodySizeLimit
from sidecar.local_opa import LocalOpa
from sidecar.locks import ChainLocks, LocalLocks, LockUnavailable, RedisLocks
from sidecar.messages import Problem
from sidecar.opa import PolicyClient, PolicyUnavailable
from sidecar.qdrant_dialect import QdrantError, error_response
from sidecar.reads import Bounds, Reader
from sidecar.request_metrics import RequestTimer, Traffic
from sidecar.services import Services
from sidecar.settings import Settings
from sidecar.store import Search, Store, StoreUnavailable
from sidecar.store.edge import EdgeStore
from sidecar.store.measured import MeasuredStore
from sidecar.store.server import Layout, ServerStore
from sidecar.writes import Writer, WriteRefused

log = logging.getLogger("whose")


def open_store(settings: Settings, traffic: Traffic | None = None) -> Store:
    search = Search(settings.search_exact_below, settings.search_hnsw_ef)
    if settings.store == "server":
        if not settings.qdrant_url:
            raise ValueError("WHOSE_STORE=server needs WHOSE_QDRANT_URL")
        if settings.qdrant_write_consistency > settings.qdrant_replication:
            raise ValueError("WHOSE_QDRANT_WRITE_CONSISTENCY exceeds WHOSE_QDRANT_REPLICATION")
        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return ServerStore.connect(
            [url.strip() for url in settings.qdrant_url.split(",") if url.strip()],
            settings.collection,
            settings.vector_size,
            api_key=api_key,
            timeout_s=settings.qdrant_timeout_s,
            layout=Layout(
                settings.qdrant_shards,
                settings.qdrant_replication,
                settings.qdrant_write_consistency,
            ),
            retries=settings.qdrant_retries,
            search=search,
        )
    path = settings.data_dir / "store" / settings.collection
    quiet_for = traffic.quiet_for if traffic is not None else None
    return EdgeStore(path, settings.vector_size, settings.optimize_interval_s, quiet_for, search)


async def _start_policy(settings: Settings, stack: AsyncExitStack) -> PolicyClient:
    if settings.opa_url:
        policy = PolicyClient(settings.opa_url, settings.opa_timeout_s)
    else:
        opa = LocalOpa(
            settings.opa_binary,
            settings.policy_dir,
            settings.data_dir / "opa.log",
            settings.data_dir / "opa-bundle",
        )
        await opa.start()
        stack.push_async_callback(opa.stop)
        policy = PolicyClient(opa.url, settings.opa_timeout_s, unix_socket=str(opa.socket_path))
    await policy.start()
    stack.push_async_callback(policy.close)
    return policy


@asynccontextmanager
async def open_redis(settings: Settings) -> AsyncIterator[aioredis.Redis | None]:
    """One client for locks, cache and audit; None on embedded defaults."""
    if not settings.redis_url:
        yield None
        return
    # Short socket timeouts: a hung Redis must cost a request little, never hang it.
    # A pooled connection left dead by a Redis restart fails its next command: retry
    # once at once (a fresh connection) on connection errors, never on timeouts.
    client = aioredis.from_url(
        settings.redis_url,
        socket_timeout=0.5,
        socket_connect_timeout=0.5,
        retry=Retry(NoBackoff(), retries=1, supported_errors=(RedisConnectionError,)),
    )
    try:
        yield client
    finally:
        await client.aclose()


def chain_locks(settings: Settings, redis: aioredis.Redis | None) -> ChainLocks:
    if redis is None:
        return LocalLocks()
    return RedisLocks(redis, settings.lock_ttl_s, settings.lock_wait_s)


def decision_cache(settings: Settings, redis: aioredis.Redis | None) -> DecisionCache:
    if redis is None:
        return LocalCache(settings.cache_size, ttl_s=2 * settings.cache_bucket_s)
    return RedisCache(redis)


def audit_log(settings: Settings, redis: aioredis.Redis | None) -> AuditLog:
    if redis is None:
        local = SqliteSink(settings.data_dir / "audit.sqlite3", settings.audit_max_entries)
        return AuditLog(local, None, settings.audit_queue)
    sink = RedisSink(redis, settings.audit_stream, settings.audit_maxlen)
    # Where entries wait while Redis is down: never rotated, bounded by its own setting.
    spill = settings.data_dir / "audit-spill.jsonl"
    return AuditLog(
        sink, spill, settings.audit_queue, spill_max_bytes=settings.audit_spill_max_bytes
    )


@asynccontextmanager
async def open_services(
    settings: Settings, authenticate: Authenticator, traffic: Traffic
) -> AsyncIterator[Services]:
    """Everything a request handler reaches, opened in order (OPA, store, Redis, audit)
    and closed in reverse: the API's lifespan and `whose mcp` over stdio share it."""
    async with AsyncExitStack() as stack:
        policy = await _start_policy(settings, stack)
        store = MeasuredStore(open_store(settings, traffic))
        await store.open()
        stack.push_async_callback(store.close)
        redis = await stack.enter_async_context(open_redis(settings))
        audit = audit_log(settings, redis)
        await audit.start()
        stack.push_async_callback(audit.close)
        gate = Gate(
            policy,
            decision_cache(settings, redis),
            audit,
            settings.cache_bucket_s,
            rates=RedisAllowRates(redis) if redis is not None else LocalAllowRates(),
            pushdown=settings.pushdown,
        )
        # Bookkeeping in flight (allow-rate updates) finishes before Redis closes.
        stack.push_async_callback(gate.idle)
        bounds = Bounds(
            settings.overfetch_factor,
            settings.max_rounds,
            settings.max_candidates,
            settings.max_count_scan,
        )
        embedder = HashingEmbedder(settings.vector_size)
        yield Services(
            settings=settings,
            store=store,
            policy=policy,
            gate=gate,
            audit=audit,
            redis=redis,
            reader=Reader(store, gate, bounds),
            writer=Writer(store, policy, embedder, chain_locks(settings, redis), audit),
            embedder=embedder,
            authenticate=authenticate,
        )


def create_app(settings: Settings) -> FastAPI:
    # Fails before serving anything if no identity provider is configured.
    authenticate = Authenticator(settings)
    traffic = Traffic()
    mcp = mcp_server.build(lambda: app.state.services, mcp_server.from_http_request)
    mcp_sessions = mcp_server.http_manager(mcp, settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            open_services(settings, authenticate, traffic) as services,
            mcp_sessions.run(),
        ):
            app.state.services = services
            # What exists now (modules, routes, schemas: ~160k objects) lives as long as
            # the process: keep it out of the cyclic GC, whose full passes over it
            # stalled a request for ~130 ms (bench p99). Today's garbage is collected
            # first; a frozen object that becomes garbage later is never reclaimed.
            gc.collect()
            gc.freeze()
            yield
            del app.state.services

    app = FastAPI(
        title="whose",
        version=__version__,
        summary="Policy-as-code authorization sidecar for agent memory.",
        lifespan=lifespan,
    )
    app.include_router(api.router)
    app.include_router(admin.router)
    app.include_router(proxy.router)
    # The MCP endpoint (streamable HTTP) and where a host learns which issuer to ask.
    app.router.routes.append(
        Route(mcp_server.PATH, mcp_server.Endpoint(mcp_sessions, settings), methods=["POST"])
    )
    for path in (mcp_server.METADATA_PATH, mcp_server.METADATA_PATH + mcp_server.PATH):
        app.add_route(path, mcp_server.protected_resource, methods=["GET"], include_in_schema=False)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestTimer, traffic=traffic)
    _install_error_shapes(app)
    return app


def _problem(status: int, error: str, reasons: Sequence[object] = ()) -> JSONResponse:
    return JSONResponse(
        Problem(error=error, reasons=list(reasons)).model_dump(), status_code=status
    )


def _install_error_shapes(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        # Echoing the input back is pointless for the caller and may log secrets.
        reasons = [
            {"loc": list(e.get("loc", ())), "type": e.get("type"), "msg": e.get("msg")}
            for e in exc.errors()
        ]
        return _problem(422, "invalid_request", reasons)

    @app.exception_handler(WriteRefused)
    async def write_refused(_: Request, exc: WriteRefused) -> JSONResponse:
        return _problem(422, "write_refused", exc.problems)

    @app.exception_handler(StoreUnavailable)
    async def store_unavailable(_: Request, exc: StoreUnavailable) -> JSONResponse:
        log.error("store unavailable: %s", exc)
        return _problem(503, "store_unavailable")

    @app.exception_handler(PolicyUnavailable)
    async def policy_unavailable(_: Request, exc: PolicyUnavailable) -> JSONResponse:
        metrics.POLICY_UNAVAILABLE.inc()
        log.error("policy unavailable: %s", exc)
        return _problem(503, "policy_unavailable")

    @app.exception_handler(LockUnavailable)
    async def lock_unavailable(_: Request, exc: LockUnavailable) -> JSONResponse:
        log.error("chain lock unavailable: %s", exc)
        return _problem(503, "lock_unavailable")

    @app.exception_handler(QdrantError)
    async def qdrant_error(_: Request, exc: QdrantError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(FilterRefused)
    async def filter_refused(_: Request, exc: FilterRefused) -> JSONResponse:
        # A filter only the engine could tell was bad (filters.py admits the rest).
        return error_response(QdrantError(400, str(exc), reasons=[exc.reason]))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc.detail, dict):
            body = exc.detail
        else:
            body = {"error": str(exc.detail).lower().replace(" ", "_")}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)
