"""FastAPI dependencies: the services and the verified caller, as route parameters."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from sidecar.auth.identity import Identity
from sidecar.messages import Problem
from sidecar.services import Services


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


def refusals(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI: these statuses answer the error tree's body (`Problem`), so clients and
    the schema fuzzer know every answer a route gives (http/refusals.py): 422 is also
    a body that is not JSON at all, 413 one too large (http/limits.py)."""
    return {status: {"model": Problem} for status in statuses}
