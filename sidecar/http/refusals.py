"""Every HTTP refusal, answered in one place: the error tree (errors.py) to a response.

Each HTTP dialect the app serves says once how it answers the tree: the native API
here (`NATIVE`: problem bodies, `{"error", "reasons"}`), the Qdrant dialect in
http/qdrant/dialect.py (Qdrant's own error body). Which one answers a request is
chosen once, by the path's prefix (`Refusals`), for every refusal on the way: the
core's, the token check's (auth/tokens.py raises Unauthenticated), the body limit's
(http/limits.py's RequestTooLarge), and what the framework refuses itself,
read into the tree first: a body that does not validate or does not parse (the same
answer, however deep or broken it is), a path nothing serves, a method a route does
not take. Handlers only raise. Each dialect's table names every class of the tree
(tests/unit/test_refusals.py fails for a class a dialect does not map).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from sidecar.errors import (
    AuditUnavailable,
    CandidateRefused,
    CollectionExists,
    CollectionForbidden,
    CollectionRefused,
    ConsentRefused,
    EmbeddingUnavailable,
    ErasureRefused,
    ErasureRequestsUnavailable,
    FilterRefused,
    Forbidden,
    GrantsUnavailable,
    InvalidRequest,
    LockUnavailable,
    MethodNotAllowed,
    NotFound,
    PolicyUnavailable,
    QueryMissing,
    QueryRefused,
    QueryTooCostly,
    RequestTooLarge,
    StoreUnavailable,
    Unauthenticated,
    Unavailable,
    WhoseError,
    WriteRefused,
    validation_reasons,
)
from sidecar.http.allowed import methods_on

log = logging.getLogger("whose")

# The native API's status for each refusal (OpenAPI: the `responses` of each route).
NATIVE_STATUS: Mapping[type[WhoseError], int] = {
    WhoseError: 500,
    InvalidRequest: 422,
    NotFound: 404,
    Forbidden: 403,
    CollectionForbidden: 403,
    FilterRefused: 400,
    QueryRefused: 400,
    QueryTooCostly: 400,
    QueryMissing: 404,
    CollectionRefused: 400,
    CollectionExists: 409,
    Unauthenticated: 401,
    MethodNotAllowed: 405,
    RequestTooLarge: 413,
    WriteRefused: 422,
    ErasureRefused: 403,
    ConsentRefused: 403,
    CandidateRefused: 422,
    Unavailable: 503,
    EmbeddingUnavailable: 503,
    PolicyUnavailable: 503,
    StoreUnavailable: 503,
    LockUnavailable: 503,
    AuditUnavailable: 503,
    ErasureRequestsUnavailable: 503,
    GrantsUnavailable: 503,
}


class Dialect(Protocol):
    """How one HTTP dialect answers a refusal of the tree."""

    @property
    def statuses(self) -> Mapping[type[WhoseError], int]:
        """The status of every class of the tree."""
        ...

    def body(self, error: WhoseError) -> dict[str, Any]:
        """The refusal in the dialect's own body shape."""
        ...


class Native:
    """The native API's problems: the tree's own body (errors.py, messages.Problem)."""

    statuses = NATIVE_STATUS

    def body(self, error: WhoseError) -> dict[str, Any]:
        return error.body()


NATIVE = Native()


def status_of(dialect: Dialect, error: WhoseError) -> int:
    # A class the table misses (the table test says so) answers as its parent does.
    for cls in type(error).__mro__:
        if cls in dialect.statuses:
            return dialect.statuses[cls]
    return 500


def respond(
    dialect: Dialect, error: WhoseError, headers: Mapping[str, str] | None = None
) -> Response:
    """`error` as `dialect` answers it, with the headers HTTP asks of its status."""
    extra = dict(headers or {})
    if isinstance(error, Unauthenticated):
        # RFC 9110 §11.6.1: a 401 says how to authenticate.
        extra.setdefault("WWW-Authenticate", "Bearer")
    return JSONResponse(dialect.body(error), status_code=status_of(dialect, error), headers=extra)


# A dialect's own refusal (not the tree's: a route the dialect does not serve, say),
# already in its words, and how it is answered.
OwnRefusal = Callable[[Any], Response]


@dataclass(frozen=True)
class Refusals:
    """Which dialect answers a path: the native API, unless a prefix names another;
    and the dialects' own refusals, if they have any."""

    native: Dialect = NATIVE
    by_prefix: Mapping[str, Dialect] = field(default_factory=dict)
    own: Mapping[type[Exception], OwnRefusal] = field(default_factory=dict)

    def dialect(self, path: str) -> Dialect:
        for prefix, dialect in self.by_prefix.items():
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return dialect
        return self.native

    def respond(
        self, path: str, error: WhoseError, headers: Mapping[str, str] | None = None
    ) -> Response:
        return respond(self.dialect(path), error, headers)


def framework_refusal(request: Request, exc: HTTPException) -> tuple[WhoseError, dict[str, str]]:
    """What Starlette or FastAPI refused, as the tree's refusal (and its headers)."""
    cause = exc.__cause__
    if isinstance(cause, WhoseError):
        # FastAPI turns whatever fails while it reads a body into a 400: the body
        # limit's RequestTooLarge, raised by http/limits.py as the body arrives.
        return cause, {}
    if exc.status_code == 400:
        # A body FastAPI could not parse (nested too deep, not UTF-8): malformed, like
        # any other body that is not JSON.
        deep = isinstance(cause, RecursionError)
        problem = {
            "loc": ["body"],
            "type": "json_invalid",
            "msg": "JSON nested too deep" if deep else "JSON decode error",
        }
        return InvalidRequest("malformed body", [problem]), {}
    if exc.status_code == 404:
        return NotFound("route"), {}
    if exc.status_code == 405:
        # Starlette names the methods of the first route on the path only; a path
        # served by several (GET and DELETE /v1/memories/{id}) names them all.
        served = methods_on(request.app.routes, request.url.path)
        return MethodNotAllowed(request.method), {"Allow": ", ".join(served)}
    log.error("unmapped framework refusal %s: %s", exc.status_code, exc.detail)
    return WhoseError(str(exc.detail)), {}


def install(app: FastAPI, refusals: Refusals) -> None:
    """Answer every refusal on `app` the way its path's dialect does."""

    async def tree(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, WhoseError)
        return refusals.respond(request.url.path, exc)

    async def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        sent = getattr(exc, "body", None)
        reasons = validation_reasons(exc.errors(), sent, within="body")
        return refusals.respond(request.url.path, InvalidRequest("invalid request", reasons))

    async def framework(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        error, headers = framework_refusal(request, exc)
        return refusals.respond(request.url.path, error, headers)

    app.add_exception_handler(WhoseError, tree)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, framework)
    for kind, words in refusals.own.items():

        async def own(_: Request, exc: Exception, words: OwnRefusal = words) -> Response:
            return words(exc)

        app.add_exception_handler(kind, own)
