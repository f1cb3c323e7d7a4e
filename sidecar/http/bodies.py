"""JSON request bodies, parsed by pydantic-core's parser (Rust) instead of the standard
library's.

A recall's body is mostly its query vector: 384 numbers the standard library's parser
read in ~90 µs, about a tenth of a served recall's event-loop time by profile
(docs/performance.md, "Request bodies"); pydantic-core reads them in ~15 µs. Every
router of the sidecar takes its routes from `JsonRoute`, the way FastAPI's manual
customises a route's request.

What that parser refuses, the standard library reads again and decides, as it did
before: its errors (a position, "nested too deep", not UTF-8) are the ones the refusal
mapping (http/refusals.py) already answers, and what it alone accepts (a lone surrogate
escape, a UTF-16 body, nesting past 200) is still accepted. Both parsers take NaN and
Infinity as Python's `json` module writes them; the models refuse them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from pydantic_core import from_json
from starlette.requests import Request
from starlette.responses import Response


def parsed(body: bytes) -> Any:
    """`body` as JSON: the same value the standard library reads, or its error."""
    try:
        return from_json(body)
    except ValueError:
        return json.loads(body)


class _JsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_parsed"):
            self._parsed = parsed(await self.body())
        return self._parsed


class JsonRoute(APIRoute):
    """A FastAPI route whose request reads its JSON body with `parsed`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handler(request: Request) -> Response:
            return await handle(_JsonRequest(request.scope, request.receive))

        return handler
