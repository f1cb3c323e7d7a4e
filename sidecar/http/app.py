"""The FastAPI application: wiring of store, policy and identity, and which dialect
answers a refusal where (http/refusals.py: the native API, Qdrant's under
/collections).

Start-up opens the store and reaches OPA (starting a local one on embedded
defaults); shutdown closes both. Routes live in http/api.py (native), http/qdrant/routes.py
(Qdrant's dialect) and http/admin.py (audit, explain); health and metrics are served
on the operations listener (http/ops.py).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI
from starlette.routing import Route

from sidecar import __version__
from sidecar.auth.tokens import Authenticator
from sidecar.http import admin, api, console, erasures, grants, refusals
from sidecar.http.limits import BodySizeLimit
from sidecar.http.qdrant import routes as proxy
from sidecar.http.qdrant import writes as proxy_writes
from sidecar.http.qdrant.dialect import QDRANT, QdrantError, error_response
from sidecar.http.request_metrics import RequestTimer, Traffic
from sidecar.mcp import endpoint as mcp_endpoint
from sidecar.services import open_services
from sidecar.settings import Settings

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger("whose")


def create_app(settings: Settings) -> FastAPI:
    # Fails before serving anything if no identity provider is configured.
    authenticate = Authenticator(settings)
    traffic = Traffic()
    # Qdrant's dialect answers every refusal on its paths, the native API the rest.
    answers = refusals.Refusals(
        by_prefix={"/collections": QDRANT}, own={QdrantError: error_response}
    )

    def mcp_manager() -> StreamableHTTPSessionManager:
        from sidecar.mcp.tools import build as mcp_tools  # on first use: mcp_endpoint.Sessions

        tools = mcp_tools(lambda: app.state.services, mcp_endpoint.from_http_request)
        return mcp_endpoint.http_manager(tools, settings)

    mcp_sessions = mcp_endpoint.Sessions(mcp_manager)

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
            stack.push_async_callback(mcp_sessions.aclose)
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
    app.include_router(erasures.router)
    app.include_router(grants.router)
    app.include_router(admin.router)
    if settings.console == "api":
        # Off the schema, and behind the same token check as every route.
        app.include_router(console.router(lambda: getattr(app.state, "services", None)))
    # The dialect's writes before its routes: those end with the catch-all refusal.
    app.include_router(proxy_writes.router)
    app.include_router(proxy.router)
    # The MCP endpoint (streamable HTTP) and where a host learns which issuer to ask.
    app.router.routes.append(
        Route(
            mcp_endpoint.PATH,
            mcp_endpoint.Endpoint(mcp_sessions, settings, answers.respond),
            methods=["POST"],
        )
    )
    for path in (mcp_endpoint.METADATA_PATH, mcp_endpoint.METADATA_PATH + mcp_endpoint.PATH):
        app.add_route(
            path, mcp_endpoint.protected_resource, methods=["GET"], include_in_schema=False
        )
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes, respond=answers.respond)
    app.add_middleware(RequestTimer, traffic=traffic)
    refusals.install(app, answers)
    return app
