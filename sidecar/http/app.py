"""The FastAPI application: wiring of store, policy and identity, and error shapes.

Start-up opens the store and reaches OPA (starting a local one on embedded
defaults); shutdown closes both. Routes live in http/api.py (native), http/qdrant/routes.py
(Qdrant's dialect) and http/admin.py (audit, explain); health and metrics are served
on the operations listener (http/ops.py).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from sidecar import __version__, metrics
from sidecar.auth.tokens import Authenticator
from sidecar.errors import FilterRefused, Unavailable, WhoseError, validation_reasons
from sidecar.http import admin, api
from sidecar.http.limits import BodySizeLimit
from sidecar.http.qdrant import routes as proxy
from sidecar.http.qdrant.dialect import QdrantError, error_response
from sidecar.http.request_metrics import RequestTimer, Traffic
from sidecar.mcp import endpoint as mcp_endpoint
from sidecar.mcp.tools import build as mcp_tools
from sidecar.messages import Problem
from sidecar.policy.opa import PolicyUnavailable
from sidecar.services import open_services
from sidecar.settings import Settings

log = logging.getLogger("whose")


def create_app(settings: Settings) -> FastAPI:
    # Fails before serving anything if no identity provider is configured.
    authenticate = Authenticator(settings)
    traffic = Traffic()
    mcp = mcp_tools(lambda: app.state.services, mcp_endpoint.from_http_request)
    mcp_sessions = mcp_endpoint.http_manager(mcp, settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            try:
                services = await stack.enter_async_context(
                    open_services(settings, authenticate, traffic.quiet_for)
                )
            except ValueError as exc:
                # A configuration that cannot serve (a store made for another embedding
                # model, a model that will not load): serving.serve says it in one line.
                app.state.startup_error = exc
                raise
            await stack.enter_async_context(mcp_sessions.run())
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
        Route(mcp_endpoint.PATH, mcp_endpoint.Endpoint(mcp_sessions, settings), methods=["POST"])
    )
    for path in (mcp_endpoint.METADATA_PATH, mcp_endpoint.METADATA_PATH + mcp_endpoint.PATH):
        app.add_route(
            path, mcp_endpoint.protected_resource, methods=["GET"], include_in_schema=False
        )
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
        return _problem(422, "invalid_request", validation_reasons(exc.errors()))

    @app.exception_handler(WhoseError)
    async def refused(_: Request, exc: WhoseError) -> JSONResponse:
        # The one error tree (errors.py): its code and status, its reasons.
        if isinstance(exc, Unavailable):
            if isinstance(exc, PolicyUnavailable):
                metrics.POLICY_UNAVAILABLE.inc()
            log.error("%s: %s", exc.code, exc)
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(QdrantError)
    async def qdrant_error(_: Request, exc: QdrantError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(FilterRefused)
    async def filter_refused(_: Request, exc: FilterRefused) -> JSONResponse:
        # A filter only the engine could tell was bad (the proxy's checks,
        # http/qdrant/caller_filter.py, admit the rest).
        return error_response(QdrantError(400, str(exc), reasons=[exc.reason]))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc.detail, dict):
            body = exc.detail
        else:
            body = {"error": str(exc.detail).lower().replace(" ", "_")}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)
