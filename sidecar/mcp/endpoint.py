"""Streamable HTTP on the sidecar, at /mcp: every request authenticated like any API
request, then handed to the SDK; RFC 9728 metadata naming the resource and its issuer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from sidecar.auth.identity import (
    Identity,
)
from sidecar.errors import NotFound, Unauthenticated, WhoseError
from sidecar.services import Services
from sidecar.settings import Settings, is_loopback

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"
# Where the HTTP endpoint leaves the verified identity for the tools.
IDENTITY = "whose.identity"
# How the app answers a refusal on a path (http/refusals.py), headers added.
RefusalAnswer = Callable[[str, WhoseError, Mapping[str, str]], Response]


async def from_http_request(ctx: Context[Any, Any]) -> Identity:
    request = ctx.request_context.request
    who = request.scope.get(IDENTITY) if isinstance(request, Request) else None
    if not isinstance(who, Identity):
        # Fail closed: a request that did not come through the endpoint has nobody.
        raise Unauthenticated("missing_token")
    return who


def http_manager(server: MCPServer[Any], settings: Settings) -> StreamableHTTPSessionManager:
    """Stateless, JSON answers; the SDK's DNS-rebinding protection on a loopback host,
    where a web page could otherwise reach the sidecar through the user's browser."""
    from mcp.server.transport_security import TransportSecuritySettings

    security = None
    if is_loopback(settings.host):
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        json_response=True,
        transport_security=security,
        max_request_body_size=settings.max_body_bytes,
    )
    return server.session_manager


class Sessions:
    """The SDK's session manager, built and started on the first MCP request.

    The `mcp` package takes about half a second to import; a sidecar that no agent
    reaches over MCP (most of them behind a RAG stack) never pays it, and every start
    is that much quicker. The manager runs in a task of its own, as the SDK requires
    (entered and left in one task), until the application stops (`aclose`)."""

    def __init__(self, build: Callable[[], StreamableHTTPSessionManager]) -> None:
        self._build = build
        self._manager: StreamableHTTPSessionManager | None = None
        self._starting = asyncio.Lock()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def manager(self) -> StreamableHTTPSessionManager:
        if self._manager is not None:
            return self._manager
        async with self._starting:
            if self._manager is None:
                manager = self._build()
                started = asyncio.get_running_loop().create_future()
                self._task = asyncio.create_task(self._run(manager, started))
                await started
                self._manager = manager
        return self._manager

    async def _run(
        self, manager: StreamableHTTPSessionManager, started: asyncio.Future[None]
    ) -> None:
        try:
            async with manager.run():
                started.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    async def aclose(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class Endpoint:
    """ASGI app at /mcp: every HTTP request is authenticated like any API request (the
    same Authenticator, refused the same way), then handed to the SDK with the
    identity in its scope."""

    def __init__(self, sessions: Sessions, settings: Settings, respond: RefusalAnswer) -> None:
        self.sessions = sessions
        self.settings = settings
        self.respond = respond

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        services: Services = request.app.state.services
        try:
            who = await services.authenticate(request)
        except Unauthenticated as exc:
            # RFC 9728 §5.1: tell an MCP host where to learn which issuer's token to get.
            challenge = "Bearer"
            if self.settings.jwt_issuer is not None:
                challenge += f' resource_metadata="{metadata_url(request, self.settings)}"'
            response = self.respond(request.url.path, exc, {"WWW-Authenticate": challenge})
            await response(scope, receive, send)
            return
        manager = await self.sessions.manager()
        await manager.handle_request({**scope, IDENTITY: who}, receive, send)


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def resource_url(request: Request, settings: Settings) -> str:
    """The MCP endpoint's own URL, as hosts know it: configured (behind a proxy), else
    the request's Host only where the sidecar checks it (a loopback bind, the names
    the DNS-rebinding protection admits), else the bind address. Never a Host that
    nothing checked: the metadata would name whatever resource a caller wrote there."""
    if settings.mcp_resource_url:
        return settings.mcp_resource_url
    if is_loopback(settings.host):
        name, _, port = request.headers.get("host", "").rpartition(":")
        if name in LOOPBACK_NAMES and port.isdigit():
            return f"{request.url.scheme}://{name}:{port}{PATH}"
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"http://{host}:{settings.port}{PATH}"


def metadata_url(request: Request, settings: Settings) -> str:
    base = resource_url(request, settings).removesuffix(PATH)
    return base + METADATA_PATH + PATH


async def protected_resource(request: Request) -> JSONResponse:
    """RFC 9728 protected-resource metadata: the issuer whose tokens the sidecar takes.

    Served only when an issuer is configured (WHOSE_JWT_ISSUER): without one there is
    no authorization server to name, and a host must be given a token by hand."""
    services: Services = request.app.state.services
    settings = services.settings
    if settings.jwt_issuer is None:
        raise NotFound("metadata")
    return JSONResponse(
        {
            "resource": resource_url(request, settings),
            "authorization_servers": [settings.jwt_issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "whose",
        }
    )
