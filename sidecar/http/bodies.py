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

import inspect
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import routing
from fastapi.dependencies.models import Dependant
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

    Its endpoint is an `async def` taking its path's parameters (plain `str`), one
    JSON body, `svc: Svc` and `who: Asker` (http/deps.py), and returning a `Response`;
    any other endpoint, or one the including router gives further dependencies, is
    refused (TypeError) when FastAPI builds its handler. A request with
    `Content-Type: application/json` is answered in FastAPI's order: its body parsed
    (pydantic-core), the caller authenticated (a refusal raised into the same exception
    handlers), the body validated by its own FastAPI field, the endpoint called. A body
    that does not parse or validate, another content type, a body that failed to
    arrive, dependency overrides, FastAPI's native telemetry: handed to FastAPI's own
    handling with what reading the body gave, so the answer is FastAPI's."""

    def get_route_handler(self) -> Handler:
        # FastAPI's own handler, for the route as included (with the including
        # router's settings: APIRoute's constructor and include_router call this).
        handle = APIRoute.get_route_handler(self)
        route = _as_included(self)
        dependant = route.dependant
        if not _callable_directly(dependant):
            raise TypeError(
                f"{self.path}: a DirectRoute endpoint is async and takes plain str path "
                "parameters, a body, Svc and Asker, and nothing else"
            )
        [field] = dependant.body_params
        endpoint, path = self.endpoint, self.path
        path_names = [p.name for p in dependant.path_params]
        svc_name, who_name = (str(d.name) for d in dependant.dependencies)
        overrides = route.dependency_overrides_provider

        async def direct(request: Request, sent: bytes) -> Response | None:
            """The endpoint's answer, or None for FastAPI's own handling to answer."""
            try:
                read = from_json(sent)
            except ValueError:  # not JSON to pydantic-core: FastAPI's own parse decides
                return None
            svc = await services(request)
            who = await asker(request, svc)
            value, errors = field.validate(read, loc=("body",))
            if errors:  # FastAPI refuses it (authenticating again, as it does)
                return None
            arguments = {name: request.path_params[name] for name in path_names}
            arguments |= {field.name: value, svc_name: svc, who_name: who}
            answer = await endpoint(**arguments)
            if not isinstance(answer, Response):
                raise TypeError(f"{path}: a DirectRoute endpoint returns a Response")
            return answer

        async def handler(request: Request) -> Response:
            receive = request.receive
            if (
                request.headers.get("content-type") == "application/json"
                and not getattr(overrides, "dependency_overrides", None)
                and request.scope.get("fastapi.telemetry") is None
            ):
                try:
                    sent = await request.body()
                except Exception as failed:  # FastAPI decides what that answers
                    receive = _replay(failed, request)
                else:
                    answer = await direct(request, sent)
                    if answer is not None:
                        return answer
                    receive = _replay(sent, request)
            # Outside any `except`, and one frame deep as JsonRoute's: a refusal is
            # raised with the same context, and a body deep enough to exhaust the
            # stack exhausts it at the same depth.
            return await handle(_JsonRequest(request.scope, receive))

        return handler


def _as_included(route: APIRoute) -> Any:
    """The route with the settings of the router that includes it, as FastAPI's own
    handler sees it (FastAPI passes them in a context variable while it builds it)."""
    included = routing._effective_route_context_var.get()
    return included if included is not None and included.original_route is route else route


def _callable_directly(dependant: Dependant) -> bool:
    """Whether `DirectRoute` may call the endpoint: async; plain `str` path parameters
    under their own names; one body, not embedded; the dependencies `services` and
    `asker` exactly as http/deps.py declares them; nothing else FastAPI would supply."""
    if len(dependant.dependencies) != 2 or len(dependant.body_params) != 1:
        return False
    svc_dep, who_dep = dependant.dependencies
    return (
        inspect.iscoroutinefunction(dependant.call)
        and not getattr(dependant.body_params[0].field_info, "embed", False)
        and svc_dep.call is services
        and who_dep.call is asker
        and _only_request(svc_dep, [])
        and _only_request(who_dep, [services])
        and all(
            p.field_info.annotation is str and p.alias == p.name and not p.field_info.metadata
            for p in dependant.path_params
        )
        and _only_request(dependant, [services, asker], body=True, path=True)
        and dependant.request_param_name is None
    )


def _only_request(
    dependant: Dependant, calls: list[Any], *, body: bool = False, path: bool = False
) -> bool:
    """`dependant` takes nothing but what is named: the request (unless it is the
    endpoint), these dependencies, and a body and path parameters where allowed."""
    return (
        [d.call for d in dependant.dependencies] == calls
        and (body or not dependant.body_params)
        and (path or not dependant.path_params)
        and not dependant.query_params
        and not dependant.header_params
        and not dependant.cookie_params
        and dependant.websocket_param_name is None
        and dependant.http_connection_param_name is None
        and dependant.response_param_name is None
        and dependant.background_tasks_param_name is None
        and dependant.security_scopes_param_name is None
    )


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
