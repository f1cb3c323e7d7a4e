"""Every gRPC refusal, answered in one place: the error tree (errors.py) and the Qdrant
dialect's own refusals (http/qdrant/dialect.py `QdrantError`) to a status code.

The message is the REST dialect's (what to fix, in Qdrant's words where Qdrant has
them), led by the machine-readable code (`write_refused: …`), so a client that only
prints the status still shows the reason; trailing metadata carries the code and the
reasons as JSON (`whose-error`, `whose-reasons`) for a client that reads them. Each
class of the tree is in `GRPC_STATUS` (tests/unit/test_refusals.py fails otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
import orjson

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
)
from sidecar.http.qdrant.dialect import QDRANT, QdrantError

# The status of each refusal of the tree, as Qdrant's own gRPC server answers the like
# (a body it will not run: INVALID_ARGUMENT; a missing collection or point: NOT_FOUND).
GRPC_STATUS: Mapping[type[WhoseError], grpc.StatusCode] = {
    WhoseError: grpc.StatusCode.INTERNAL,
    InvalidRequest: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    Forbidden: grpc.StatusCode.PERMISSION_DENIED,
    CollectionForbidden: grpc.StatusCode.PERMISSION_DENIED,
    FilterRefused: grpc.StatusCode.INVALID_ARGUMENT,
    QueryRefused: grpc.StatusCode.INVALID_ARGUMENT,
    QueryTooCostly: grpc.StatusCode.INVALID_ARGUMENT,
    QueryMissing: grpc.StatusCode.NOT_FOUND,
    CollectionRefused: grpc.StatusCode.INVALID_ARGUMENT,
    CollectionExists: grpc.StatusCode.ALREADY_EXISTS,
    CandidateRefused: grpc.StatusCode.INVALID_ARGUMENT,
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    MethodNotAllowed: grpc.StatusCode.UNIMPLEMENTED,
    RequestTooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,
    # A document the policies refuse: the request is well formed, the state of the
    # world (its labels, the policy) refuses it.
    WriteRefused: grpc.StatusCode.FAILED_PRECONDITION,
    ErasureRefused: grpc.StatusCode.PERMISSION_DENIED,
    ConsentRefused: grpc.StatusCode.PERMISSION_DENIED,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    EmbeddingUnavailable: grpc.StatusCode.UNAVAILABLE,
    PolicyUnavailable: grpc.StatusCode.UNAVAILABLE,
    StoreUnavailable: grpc.StatusCode.UNAVAILABLE,
    LockUnavailable: grpc.StatusCode.UNAVAILABLE,
    AuditUnavailable: grpc.StatusCode.UNAVAILABLE,
    ErasureRequestsUnavailable: grpc.StatusCode.UNAVAILABLE,
    GrantsUnavailable: grpc.StatusCode.UNAVAILABLE,
}

# The dialect's own refusals carry an HTTP status (what the REST route answers).
_BY_HTTP_STATUS: Mapping[int, grpc.StatusCode] = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    405: grpc.StatusCode.UNIMPLEMENTED,
    409: grpc.StatusCode.ALREADY_EXISTS,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    422: grpc.StatusCode.FAILED_PRECONDITION,
    503: grpc.StatusCode.UNAVAILABLE,
}


class Unserved(Exception):
    """A method whose does not serve over gRPC, and why (UNIMPLEMENTED)."""

    def __init__(self, method: str, why: str) -> None:
        super().__init__(f"not supported by whose: {method}: {why}")
        self.method = method


def status_of(error: WhoseError) -> grpc.StatusCode:
    # A class the table misses (the table test says so) answers as its parent does.
    for cls in type(error).__mro__:
        if cls in GRPC_STATUS:
            return GRPC_STATUS[cls]
    return grpc.StatusCode.INTERNAL


class Refusal:
    """A refusal as gRPC answers it: a status code, a message, trailing metadata."""

    def __init__(self, code: grpc.StatusCode, message: str, error: str | None, reasons: Any = None):
        self.code = code
        self.message = message
        self.metadata: tuple[tuple[str, str], ...] = ()
        if error is not None:
            self.metadata += (("whose-error", error),)
        if reasons:
            self.metadata += (("whose-reasons", orjson.dumps(reasons).decode()),)


def refusal(exc: Exception) -> Refusal:
    """`exc` as gRPC answers it. Anything not a refusal is an internal error, said as
    its code only (its message may name internals: the caller logs it)."""
    if isinstance(exc, WhoseError):
        body = QDRANT.body(exc)
        said = str(body["status"]["error"])
        message = said if said.startswith(exc.code) else f"{exc.code}: {said}"
        return Refusal(status_of(exc), message, exc.code, body.get("reasons"))
    if isinstance(exc, QdrantError):
        code = _BY_HTTP_STATUS.get(exc.status_code, grpc.StatusCode.INTERNAL)
        message = f"{exc.code}: {exc.message}" if exc.code else exc.message
        return Refusal(code, message, exc.code, exc.reasons)
    if isinstance(exc, Unserved):
        return Refusal(grpc.StatusCode.UNIMPLEMENTED, str(exc), "not_supported")
    return Refusal(grpc.StatusCode.INTERNAL, WhoseError.code, WhoseError.code)
