"""One error tree: every refusal the core gives, with its machine-readable code.

The core raises these and nothing else about a request; each transport maps the tree
once (HTTP, the Qdrant routes included, in http/app.py; MCP in mcp/tools.py), so a
refusal reads the same whichever way it was asked. The Python client (sidecar/client/)
reads a refusal back into the same class, so a caller catches what the core raised.
`status` is the HTTP status the code stands for, kept with the code so that the two
never drift apart. Pure: no transport types here.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar


class WhoseError(Exception):
    """A request whose refused; `reasons` say what to change (machine-readable)."""

    code: ClassVar[str] = "internal_error"
    status: ClassVar[int] = 500

    def __init__(self, message: str = "", reasons: Sequence[object] = ()) -> None:
        super().__init__(message or self.code)
        self.reasons: list[object] = list(reasons)

    def body(self) -> dict[str, Any]:
        """The refusal as the HTTP API serves it (the Problem model's shape)."""
        return {"error": self.code, "reasons": self.reasons}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> WhoseError:
        """The refusal a served body stands for (what a client reads back): `body()`
        read the other way, by the class whose code the body names."""
        reasons = _listed(body.get("reasons"))
        return cls(f"{cls.code}: {reasons}" if reasons else cls.code, reasons)


def refusal_class(code: object) -> type[WhoseError] | None:
    """The class of the tree that serves `code`, if any."""
    todo: list[type[WhoseError]] = [WhoseError]
    while todo:
        cls = todo.pop()
        if cls.code == code:
            return cls
        todo.extend(cls.__subclasses__())
    return None


def _listed(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


class InvalidRequest(WhoseError):
    """A request the sidecar will not run as asked, with every reason."""

    code = "invalid_request"
    status = 422


class NotFound(WhoseError):
    """No such record, or one the asker may not see: the two answer alike."""

    code = "not_found"
    status = 404

    def body(self) -> dict[str, Any]:
        # Nothing but the code: whatever else it said could tell forbidden from missing.
        return {"error": self.code}


class Forbidden(WhoseError):
    """The caller's role does not allow the route at all (never about one record)."""

    code = "forbidden"
    status = 403


class FilterRefused(WhoseError):
    """A caller's Qdrant filter the sidecar will not run (http/qdrant/caller_filter.py),
    or one the engine refused; `reason` is machine-readable."""

    code = "invalid_filter"
    status = 400

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, [reason])
        self.reason = reason

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> WhoseError:
        reasons = _listed(body.get("reasons"))
        reason = str(reasons[0]) if reasons else cls.code
        return cls(reason, reason)


class QueryRefused(WhoseError):
    """A Qdrant query the engine will not run as asked (reads/query/): an input Qdrant
    itself refuses (`reason` `bad_request`, the message Qdrant's own words), or a query
    kind whose does not serve (`unsupported`, naming it). Decided on the request and
    the collection's schema alone, before the store or the policy is asked."""

    code = "query_refused"
    status = 400

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, [reason])
        self.reason = reason
        self.message = message

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> WhoseError:
        reasons = _listed(body.get("reasons"))
        reason = str(reasons[0]) if reasons else cls.code
        return cls(reason, reason)


class QueryTooCostly(QueryRefused):
    """A query over one of the engine's bounds (WHOSE_QUERY_*: prefetch depth and
    count, a level's limit, candidates in all, examples, batch size, groups, facet
    limit); `reason` names the bound. Checked before the store is asked."""

    code = "query_too_costly"


class QueryMissing(WhoseError):
    """A point a query names (by id, as its vector) or a collection it looks up in
    (`lookup_from`, `with_lookup`) is missing, or is one the asker may not see: the two
    answer alike (the message is Qdrant's for a missing one). `reason`: `point`,
    `vector` or `collection`."""

    code = "query_not_found"
    status = 404

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, [reason])
        self.reason = reason
        self.message = message

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> WhoseError:
        reasons = _listed(body.get("reasons"))
        reason = str(reasons[0]) if reasons else cls.code
        return cls(reason, reason)


class Unauthenticated(WhoseError):
    """No verified identity: a missing, expired or unverifiable token, or dev headers
    that are not accepted (auth/tokens.py). `reason` says which."""

    code = "unauthenticated"
    status = 401

    def __init__(self, reason: str) -> None:
        super().__init__(reason, [reason])
        self.reason = reason

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "reason": self.reason}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> WhoseError:
        return cls(str(body.get("reason", "")))


class MethodNotAllowed(WhoseError):
    """The route does not take this method (Starlette's refusal, worded in http/app.py):
    a client asking a sidecar that does not serve that route yet."""

    code = "method_not_allowed"
    status = 405


class RequestTooLarge(WhoseError):
    """A request body above WHOSE_MAX_BODY_BYTES (http/limits.py), refused unread."""

    code = "body_too_large"
    status = 413


class WriteRefused(WhoseError):
    """Every reason, per record index; nothing was stored."""

    code = "write_refused"
    status = 422

    def __init__(self, problems: list[dict[str, Any]]) -> None:
        super().__init__(f"write refused: {problems}", problems)
        self.problems = problems

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> WhoseError:
        return cls([p for p in _listed(body.get("reasons")) if isinstance(p, dict)])


class Unavailable(WhoseError):
    """A dependency failed: nothing was disclosed or stored. Reasons stay empty (the
    message, for the log, may name internals a caller has no use for)."""

    code = "unavailable"
    status = 503


class EmbeddingUnavailable(Unavailable):
    """The embedder could not embed (sidecar/embed/): nothing was searched or stored.
    `reasons` name what failed in words a caller can act on (`timeout`, `unreachable`,
    `http_503`, ...)."""

    code = "embedding_unavailable"

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "reasons": self.reasons}


class PolicyUnavailable(Unavailable):
    """OPA could not be asked, or answered nothing usable: nothing is disclosed."""

    code = "policy_unavailable"
    reason = "policy_unavailable"
    # The read it cut short (set by reads/gate.py), so a refusal can name it.
    decision_id: uuid.UUID | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> WhoseError:
        # Recall fails closed with an abstention that names its decision (http/api.py).
        refused = cls(cls.code, _listed(body.get("reasons")))
        with contextlib.suppress(KeyError, ValueError):
            refused.decision_id = uuid.UUID(str(body["decision_id"]))
        return refused


class StoreUnavailable(Unavailable):
    """The vector store failed or could not be reached."""

    code = "store_unavailable"


class LockUnavailable(Unavailable):
    """The lock could not be taken in time (or Redis is down): refuse the write."""

    code = "lock_unavailable"


class AuditUnavailable(Unavailable):
    """The audit log cannot be queried now (entries are still written or spilled)."""

    code = "audit_unavailable"

    def body(self) -> dict[str, Any]:
        return {"error": self.code}


def validation_reasons(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Where and what, for each problem pydantic found (`exc.errors()`); never the input
    echoed back (pointless for the caller, and it may carry secrets into logs)."""
    return [
        {"loc": list(e.get("loc", ())), "type": e.get("type"), "msg": e.get("msg")} for e in errors
    ]


class ErasureRequestsUnavailable(Unavailable):
    """The erasure requests' store (Redis) failed: no request was started or read."""

    code = "erasure_requests_unavailable"


class ErasureRefused(WhoseError):
    """The erasure policy refused the request, or a record it names: nothing was
    erased. Only ever about records the asker may see (others answer as missing)."""

    code = "erasure_refused"
    status = 403
