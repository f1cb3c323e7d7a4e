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

`DirectRoute` is for the hot routes, the native recall and the Qdrant dialect's
searches: a well-formed request (a JSON body that parses and validates) goes straight
to the endpoint, without FastAPI's per-request dependency solving (docs/performance.md,
"Round ten": recall p50 about 5 % lower). Any other request takes FastAPI's own way,
so every refusal is FastAPI's, word for word.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from pydantic_core import from_json
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive

from sidecar.http.deps import asker, services

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


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

    def get_route_handler(self) -> Handler:
        handle = super().get_route_handler()

        async def handler(request: Request) -> Response:
            return await handle(_JsonRequest(request.scope, request.receive))

        return handler


class DirectRoute(JsonRoute):
    """A JSON route whose well-formed requests skip FastAPI's dependency solving.

    Its endpoint takes its path's parameters (as `str`), one JSON body, `svc: Svc` and
    `who: Asker` (http/deps.py), and returns a `Response`; any other endpoint is
    refused when the route is made. A request with `Content-Type: application/json`
    whose body pydantic-core parses and the body's own field (FastAPI's, so its
    validation) accepts is answered as FastAPI would answer it: the caller
    authenticated (a refusal raised into the same exception handlers), then the
    endpoint called. FastAPI reads the JSON before it solves dependencies and
    validates the body after, so for a body that parses and validates the order
    makes no difference. Every other request is handed to FastAPI's own handling,
    with what reading its body gave."""

    def get_route_handler(self) -> Handler:
        # APIRoute's constructor calls this once its dependant is known.
        handle = super().get_route_handler()
        dependant = self.dependant
        calls = [(str(d.name), d.call) for d in dependant.dependencies]
        if (
            len(dependant.body_params) != 1
            or getattr(dependant.body_params[0].field_info, "embed", False)
            or [call for _, call in calls] != [services, asker]
            or any(p.field_info.annotation is not str for p in dependant.path_params)
            or dependant.query_params
            or dependant.header_params
            or dependant.cookie_params
            or dependant.request_param_name
            or dependant.response_param_name
            or dependant.background_tasks_param_name
        ):
            raise TypeError(
                f"{self.path}: a DirectRoute endpoint takes str path parameters, a body, "
                "Svc and Asker"
            )
        [field] = dependant.body_params
        endpoint, path = self.endpoint, self.path
        path_names = [p.name for p in dependant.path_params]
        (svc_name, _), (who_name, _) = calls

        async def handler(request: Request) -> Response:
            if request.headers.get("content-type") != "application/json":
                return await handle(request)
            try:
                sent = await request.body()
            except Exception as failed:  # FastAPI decides what that answers
                return await handle(Request(request.scope, _replay(failed, request)))
            try:
                read = from_json(sent)
            except ValueError:  # not JSON to pydantic-core: FastAPI's own parse decides
                return await handle(Request(request.scope, _replay(sent, request)))
            value, errors = field.validate(read, loc=("body",))
            if errors:
                return await handle(Request(request.scope, _replay(sent, request)))
            svc = await services(request)
            arguments = {name: request.path_params[name] for name in path_names}
            arguments |= {field.name: value, svc_name: svc, who_name: await asker(request, svc)}
            answer = await endpoint(**arguments)
            if not isinstance(answer, Response):
                raise TypeError(f"{path}: a DirectRoute endpoint returns a Response")
            return answer

        return handler


def _replay(read: bytes | Exception, request: Request) -> Receive:
    """A `receive` for FastAPI's own way: what reading the body gave this route (the
    body, or the exception it raised) once more, then the connection's next message."""
    replayed = False

    async def receive() -> Message:
        nonlocal replayed
        if replayed:
            return await request.receive()
        replayed = True
        if isinstance(read, Exception):
            raise read
        return {"type": "http.request", "body": read, "more_body": False}

    return receive
