"""Which routes, and methods, the app serves on a path: what a 405 names in `Allow`
(RFC 9110), for the native routes (http/refusals.py) and the Qdrant dialect's catch-all
refusal (http/qdrant/routes.py) alike. FastAPI keeps included routers nested; this
walks them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from starlette.routing import Route


def routes_on(routes: Sequence[Any], path: str) -> Iterator[Route]:
    """Every route (included routers walked) whose path template matches `path`."""
    for route in routes:
        if isinstance(route, Route):
            if route.path_regex.match(path):
                yield route
        elif hasattr(route, "original_router"):  # an included router
            prefix = route.include_context.prefix
            if path.startswith(prefix):
                yield from routes_on(route.original_router.routes, path[len(prefix) :])


def methods_on(routes: Sequence[Any], path: str) -> list[str]:
    return sorted({m for route in routes_on(routes, path) for m in route.methods or ()})
