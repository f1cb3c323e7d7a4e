"""`whose mcp`: the tools over stdin/stdout, for a host that starts the sidecar itself.
Identity: a token from the environment, verified at start and on every call, or a dev
identity held to the rules of a token's claims."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sidecar.auth.identity import (
    Identity,
    Refused,
)
from sidecar.auth.tokens import Authenticator
from sidecar.errors import Unauthenticated
from sidecar.settings import Settings

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context


async def serve_stdio(settings: Settings, token: str | None, dev: Identity | None) -> None:
    """Serve the tools over stdin/stdout until the host closes them.

    With a token, it is verified now (a bad one fails the start) and again on every
    call, so an expired or revoked key stops the session's access as it would an HTTP
    caller's. Raises ValueError when there is no identity to serve."""
    authenticate = Authenticator(settings)
    if dev is not None:
        fixed = dev

        async def identity_of(_: Context[Any, Any]) -> Identity:
            return fixed

    elif token:
        try:
            await authenticate.verify(token)
        except Refused as refused:
            raise ValueError(f"WHOSE_TOKEN is not accepted: {refused.reason}") from None

        async def identity_of(_: Context[Any, Any]) -> Identity:
            try:
                return await authenticate.verify(token)
            except Refused as refused:
                raise Unauthenticated(refused.reason) from None

    else:
        raise ValueError("no identity: set WHOSE_TOKEN to a token, or use --dev with --asker")
    # Imported once the identity holds: the SDK, the store's client and the services
    # take seconds to load (about 5 s on two busy cores), and a host started without an
    # identity should hear so at once.
    from sidecar.mcp.tools import build
    from sidecar.services import open_services

    async with open_services(settings, authenticate) as services:
        server = build(lambda: services, identity_of)
        await server.run_stdio_async()
