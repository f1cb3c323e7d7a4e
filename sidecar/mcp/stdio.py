"""`whose mcp`: the tools over stdin/stdout, for a host that starts the sidecar itself.
Identity: a token from the environment, verified at start and on every call, or a dev
identity held to the rules of a token's claims."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import Context

from sidecar.auth.identity import (
    GROUP_PREFIX,
    MAX_LIST_ENTRIES,
    Identity,
    Refused,
    is_name,
    is_principal,
)
from sidecar.auth.tokens import Authenticator
from sidecar.mcp.tools import Unauthenticated, build
from sidecar.services import open_services
from sidecar.settings import Settings


def dev_identity(
    asker: str, tenant: str, groups: Sequence[str] = (), roles: Sequence[str] = ()
) -> Identity:
    """A dev identity, held to the rules of a token's claims (auth/identity.py)."""
    names = [tenant, *groups, *roles]
    if not is_principal(asker) or not all(is_name(n) for n in names):
        raise ValueError("invalid dev identity: names are 1..200 characters, unpadded")
    if len(groups) > MAX_LIST_ENTRIES or len(roles) > MAX_LIST_ENTRIES:
        raise ValueError(f"invalid dev identity: at most {MAX_LIST_ENTRIES} groups and roles")
    bare = tuple(g.removeprefix(GROUP_PREFIX) for g in groups)
    if not all(is_name(g) for g in bare):
        raise ValueError("invalid dev identity: a group needs a name")
    return Identity(id=asker, tenant=tenant, groups=bare, roles=tuple(roles))


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
    async with open_services(settings, authenticate) as services:
        server = build(lambda: services, identity_of)
        await server.run_stdio_async()
