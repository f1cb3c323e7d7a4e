"""What a request handler can reach: built once at start-up by app.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import redis.asyncio as aioredis
from fastapi import Depends, Request

from sidecar.audit import AuditLog
from sidecar.disclosure import Gate
from sidecar.embed import HashingEmbedder
from sidecar.identity import Authenticator, Identity
from sidecar.opa import PolicyClient
from sidecar.reads import Reader
from sidecar.settings import Settings
from sidecar.store import Store
from sidecar.writes import Writer


@dataclass
class Services:
    settings: Settings
    store: Store
    policy: PolicyClient
    gate: Gate
    audit: AuditLog
    redis: aioredis.Redis | None
    reader: Reader
    writer: Writer
    embedder: HashingEmbedder
    authenticate: Authenticator


# Both are `async def` so FastAPI calls them on the event loop: a plain `def`
# dependency costs every request two hops through the thread pool.
async def services(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]


async def asker(request: Request, svc: Annotated[Services, Depends(services)]) -> Identity:
    """The verified identity of whoever sent the request (or 401)."""
    return await svc.authenticate(request)


# Route parameters: `svc: Svc` reaches the services, `who: Asker` is the caller.
Svc = Annotated[Services, Depends(services)]
Asker = Annotated[Identity, Depends(asker)]
