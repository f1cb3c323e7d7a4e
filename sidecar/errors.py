"""One error tree: every refusal the core gives, with its machine-readable code.

The core raises these and nothing else about a request; each transport maps the tree
once, in one place, every class of it (a test holds each table to this module): the
native HTTP API and the Qdrant dialect in http/refusals.py (the dialect's own body
shape in http/qdrant/dialect.py), MCP in mcp/tools.py. `body()` is the refusal as a
problem (`{"error", "reasons"}`), the one shape the native API and the MCP tools serve;
the Python client (sidecar/client/) reads it back into the same class (`from_body`), so
a caller catches what the core raised. Pure: no transport types here.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar


class WhoseError(Exception):
    """A request whose refused; `reasons` say what to change (machine-readable)."""

    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str = "", reasons: Sequence[object] = ()) -> None:
        super().__init__(message or self.code)
        self.reasons: list[object] = list(reasons)

    def body(self) -> dict[str, Any]:
        """The refusal as a problem (messages.Problem): the code, and what to change."""
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


class NotFound(WhoseError):
    """No such record, or one the asker may not see: the two answer alike."""

    code = "not_found"

    def body(self) -> dict[str, Any]:
        # Nothing but the code: whatever else it said could tell forbidden from missing.
        return {"error": self.code, "reasons": []}


class Forbidden(WhoseError):
    """The caller's role does not allow the route at all (never about one record)."""

    code = "forbidden"


class CollectionForbidden(Forbidden):
    """The collections policy (rego/whose/collections) refused an action on a stack
    collection of the caller's tenant: creating or dropping it, or one of its payload
    indexes. Nothing was changed; `reasons` are the policy's (`not_collection_creator`,
    `role_required:<role>`, ...). A 403 as Forbidden is, for one collection rather
    than a whole route."""

    code = "collection_forbidden"


class FilterRefused(WhoseError):
    """A caller's Qdrant filter the sidecar will not run (http/qdrant/caller_filter.py),
    or one the engine refused; `reason` is machine-readable."""

    code = "invalid_filter"

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

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, [reason])
        self.reason = reason
        self.message = message

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> WhoseError:
        reasons = _listed(body.get("reasons"))
        reason = str(reasons[0]) if reasons else cls.code
        return cls(reason, reason)


class CollectionRefused(WhoseError):
    """A stack collection the sidecar will not create or keep as asked (store/layout.py,
    store/stacks.py): a setting whose cannot honour (`reason` names it: `multivector_config`,
    `datatype`, `sharding_method`, `init_from`, ...), a name Qdrant would refuse
    (`collection_name`), or one collection more than a tenant may have
    (`too_many_collections`). Decided before anything is created."""

    code = "collection_refused"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, [reason])
        self.reason = reason
        self.message = message

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> WhoseError:
        reasons = _listed(body.get("reasons"))
        reason = str(reasons[0]) if reasons else cls.code
        return cls(reason, reason)


class CollectionExists(WhoseError):
    """The caller's tenant already has a collection of that name (Qdrant answers 409).
    Only ever about the caller's own tenant: another tenant's `kb` is another collection."""

    code = "collection_exists"


class Unauthenticated(WhoseError):
    """No verified identity: a missing, expired or unverifiable token, or dev headers
    that are not accepted (auth/tokens.py). `reason` says which."""

    code = "unauthenticated"

    def __init__(self, reason: str) -> None:
        super().__init__(reason, [reason])
        self.reason = reason

    def body(self) -> dict[str, Any]:
        # `reason` too: the one reason, as clients before `reasons` read it.
        return {"error": self.code, "reasons": [self.reason], "reason": self.reason}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> WhoseError:
        reasons = _listed(body.get("reasons"))
        return cls(str(reasons[0] if reasons else body.get("reason", "")))


class MethodNotAllowed(WhoseError):
    """The route does not take this method (Starlette's refusal, read into the tree in
    http/refusals.py): a client asking a sidecar that does not serve that route yet."""

    code = "method_not_allowed"


class RequestTooLarge(WhoseError):
    """A request body above WHOSE_MAX_BODY_BYTES (http/limits.py), refused unread."""

    code = "body_too_large"


class WriteRefused(WhoseError):
    """Every reason, per record index; nothing was stored."""

    code = "write_refused"

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


class EmbeddingUnavailable(Unavailable):
    """The embedder could not embed (sidecar/embed/): nothing was searched or stored.
    `reasons` name what failed in words a caller can act on (`timeout`, `unreachable`,
    `http_503`, ...)."""

    code = "embedding_unavailable"


class PolicyUnavailable(Unavailable):
    """OPA could not be asked, or answered nothing usable: nothing is disclosed.

    Its answer is the fail-closed one: an abstention (`verdict: abstain`, no items)
    beside the problem, whichever route or tool was asked, so a caller that reads
    only the verdict still abstains, and a recall's refusal names the decision it cut
    short (in the audit log under that id)."""

    code = "policy_unavailable"
    reason = "policy_unavailable"
    # The read it cut short (set by reads/gate.py), so a refusal can name it.
    decision_id: uuid.UUID | None = None

    def body(self) -> dict[str, Any]:
        body = super().body() | {"verdict": "abstain", "items": [], "reason": self.reason}
        if self.decision_id is not None:
            body["decision_id"] = str(self.decision_id)
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> WhoseError:
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


_UNSENT = object()


def validation_reasons(
    errors: Sequence[Mapping[str, Any]], sent: object = _UNSENT, *, within: str | None = None
) -> list[dict[str, Any]]:
    """Where and what, for each problem pydantic found (`exc.errors()`); never the input
    echoed back (pointless for the caller, and it may carry secrets into logs).

    `sent`: the document validated (parsed JSON). Each `loc` is then a path through
    it, as the caller wrote it: pydantic also names the union branch it tried at a
    step (`function-after[_shape(), MemoryWrite]`, `list[constrained-str]`, a tag),
    which is no key of what was sent and is left out. `within`: the `loc`s of the
    document start with this part (FastAPI's `body`; its `query` and `path` are not
    the document, and are kept as they are)."""
    return [
        {
            "loc": _where(list(e.get("loc", ())), sent, within, e.get("type")),
            "type": e.get("type"),
            "msg": e.get("msg"),
        }
        for e in errors
    ]


def _where(loc: list[Any], sent: object, within: str | None, kind: object) -> list[Any]:
    if sent is _UNSENT or kind == "json_invalid":  # nothing parsed: where it broke
        return loc
    under = 0
    if within is not None:
        if loc[:1] != [within]:
            return loc
        under = 1
    path, here = loc[:under], sent
    for at, part in enumerate(loc[under:], start=under):
        if _holds(here, part):
            path.append(part)
            here = here[part]  # type: ignore[index]
        elif kind == "missing" and at == len(loc) - 1:
            path.append(part)  # a field that was not sent at all
    return path


def _holds(document: object, part: object) -> bool:
    """Whether `part` is a key (or an index) of `document`, as JSON parsed it."""
    if isinstance(document, dict):
        return part in document
    if isinstance(document, list) and type(part) is int:
        return -len(document) <= part < len(document)
    return False


class ErasureRequestsUnavailable(Unavailable):
    """The erasure requests' store (Redis) failed: no request was started or read."""

    code = "erasure_requests_unavailable"


class CandidateRefused(InvalidRequest):
    """A candidate policy for impact analysis (policy/candidate.py) that cannot be read
    (not a gzipped tar bundle, a path outside it, too large) or that OPA cannot load
    (a compile error, in `reasons`). Nothing was replayed."""

    code = "candidate_refused"


class ErasureRefused(WhoseError):
    """The erasure policy refused the request, or a record it names: nothing was
    erased. Only ever about records the asker may see (others answer as missing)."""

    code = "erasure_refused"


class ConsentRefused(WhoseError):
    """The consent policy (rego/whose/consent) refused a grant or a revocation:
    nothing changed. `reasons` say why (`not_subject_or_agent`, `unknown_category:x`,
    `ends_before_now`, ...)."""

    code = "consent_refused"


class GrantsUnavailable(Unavailable):
    """The grants' store (Redis) failed: no grant was given, revoked or listed."""

    code = "grants_unavailable"
