"""Every native route of the HTTP API as data: what to send, and how to read what comes
back. Pure: no I/O (the clients in clients.py send these).

A `Call` carries the route's method and path, the body as the server's own model dumps
it, and the model the answer is read into, so a route is one small function here and
one line in each client. `read` says whether the call may be sent again: a read may, a
write may not once it could have reached the server (clients.py, `may_retry`).

A refusal is read back into the error tree's own class (errors.py), by its code, so a
caller catches what the core raised: WriteRefused with every reason, NotFound,
PolicyUnavailable with the decision it cut short, and so on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote
from uuid import UUID

from pydantic import BaseModel

from sidecar.audit.model import AuditPurpose, Outcome
from sidecar.errors import WhoseError, refusal_class
from sidecar.messages import (
    AuditPage,
    ConversationOpening,
    ErasureProgress,
    ErasureRequest,
    ErasureResponse,
    ExplainRequest,
    ExplainResponse,
    ForgetRule,
    ForgetRuleRequest,
    ForgetRules,
    ForgetRuleSet,
    Grant,
    GrantList,
    GrantRequest,
    HistoryResponse,
    ImpactReport,
    ImpactWindow,
    MembershipChanges,
    MembershipEvents,
    MemoryResponse,
    Observation,
    PropositionResponse,
    RecallRequest,
    RecallResponse,
    StoredRecords,
    WitnessedEvent,
)
from sidecar.record import MemoryWrite, iso

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
Method = Literal["GET", "POST", "DELETE"]


@dataclass(frozen=True)
class Route:
    """A route as the server declares it (method, path template)."""

    method: Method
    template: str

    def path(self, **parts: object) -> str:
        return self.template.format(**{name: _segment(str(v)) for name, v in parts.items()})


# Every route a call is built for (tests/unit/test_client_calls.py holds it to the server's).
ROUTES: list[Route] = []


def _route(method: Method, template: str) -> Route:
    route = Route(method, template)
    ROUTES.append(route)
    return route


MEMORIES = _route("POST", "/v1/memories")
OBSERVATIONS = _route("POST", "/v1/observations")
WITNESSED = _route("POST", "/v1/witnessed")
CONVERSATIONS = _route("POST", "/v1/conversations")
MEMBERSHIP = _route("POST", "/v1/conversations/{source_id}/membership")
MEMORY = _route("GET", "/v1/memories/{record_id}")
DELETE_MEMORY = _route("DELETE", "/v1/memories/{record_id}")
HISTORY = _route("GET", "/v1/memories/{record_id}/history")
RECALL = _route("POST", "/v1/recall")
PROPOSITION = _route("GET", "/v1/propositions/{key}")
AUDIT = _route("GET", "/v1/audit")
EXPLAIN = _route("POST", "/v1/explain")
IMPACT = _route("POST", "/v1/policy/impact")
ERASURES = _route("POST", "/v1/erasures")
ERASURE = _route("GET", "/v1/erasures/{request_id}")
GRANTS = _route("POST", "/v1/grants")
LIST_GRANTS = _route("GET", "/v1/grants")
REVOKE_GRANT = _route("DELETE", "/v1/grants/{grant_id}")
FORGET_RULES = _route("POST", "/v1/forget-rules")
LIST_FORGET_RULES = _route("GET", "/v1/forget-rules")
FORGET_RULE = _route("DELETE", "/v1/forget-rules/{rule_id}")
# Not native: the Qdrant dialect's listing (see `scroll`).
SCROLL = _route("POST", "/collections/{collection}/points/scroll")


@dataclass(frozen=True)
class Call(Generic[T]):
    method: Method
    path: str
    read_answer: Callable[[bytes], T]
    json: Any = None
    params: Sequence[tuple[str, str]] = field(default_factory=tuple)
    # A read can be sent again; a write only if it never left (clients.py).
    read: bool = True
    # A body that is not JSON, and its type.
    content: bytes | None = None
    content_type: str = "application/octet-stream"


def _model(model: type[M]) -> Callable[[bytes], M]:
    return model.model_validate_json


def _nothing(_: bytes) -> None:
    return None


def as_model(model: type[M], value: M | Mapping[str, Any]) -> M:
    """The model itself, or a mapping validated into it here, before anything is sent
    (the same model the server validates with)."""
    return value if isinstance(value, model) else model.model_validate(value)


def _body(value: BaseModel) -> Any:
    # What the caller set, as JSON: the server applies the same defaults to the rest.
    return value.model_dump(mode="json", exclude_unset=True)


def _segment(value: str) -> str:
    # A path segment that survives URL normalisation: `/`, `?`, `#` and dots escaped
    # (a key `..` must not climb out of /v1/propositions/); the server decodes them.
    return quote(value, safe="").replace(".", "%2E")


# --- writes -------------------------------------------------------------------------


def remember(records: Sequence[MemoryWrite]) -> Call[StoredRecords]:
    """POST /v1/memories: every record, or none (WriteRefused with every reason)."""
    body = [_body(record) for record in records]
    return Call("POST", MEMORIES.path(), _model(StoredRecords), json=body, read=False)


def observe(observation: Observation) -> Call[StoredRecords]:
    """POST /v1/observations: what a speaker said, as the speaker's own views."""
    body = _body(observation)
    return Call("POST", OBSERVATIONS.path(), _model(StoredRecords), json=body, read=False)


def open_conversation(opening: ConversationOpening) -> Call[MembershipEvents]:
    """POST /v1/conversations: a conversation opened with its first members."""
    body = _body(opening)
    return Call("POST", CONVERSATIONS.path(), _model(MembershipEvents), json=body, read=False)


def change_membership(source_id: str, changes: MembershipChanges) -> Call[MembershipEvents]:
    """POST /v1/conversations/{source_id}/membership: joins, leaves and corrections."""
    path = MEMBERSHIP.path(source_id=source_id)
    return Call("POST", path, _model(MembershipEvents), json=_body(changes), read=False)


def witness(event: WitnessedEvent) -> Call[StoredRecords]:
    """POST /v1/witnessed: an event seen together, as each witness's view."""
    return Call("POST", WITNESSED.path(), _model(StoredRecords), json=_body(event), read=False)


def delete(
    record_id: UUID, *, history: bool = False, reason: str | None = None
) -> Call[ErasureResponse]:
    """DELETE /v1/memories/{id}: erase one record (`history`: every version of its
    chain) if the erasure policy lets the asker (ErasureRefused, every reason,
    otherwise); NotFound when missing or not the asker's to see (the same answer).
    `reason` goes to the audit log. A sidecar without the route answers 405, read back
    as MethodNotAllowed."""
    params = [("history", "true")] if history else []
    if reason is not None:
        params.append(("reason", reason))
    path = DELETE_MEMORY.path(record_id=record_id)
    return Call("DELETE", path, _model(ErasureResponse), params=params, read=False)


def request_erasure(request: ErasureRequest) -> Call[ErasureProgress]:
    """POST /v1/erasures (an erasure officer): every record about a subject, from a
    source, or of the tenant, erased in bounded steps; the first runs before it answers."""
    body = _body(request)
    return Call("POST", ERASURES.path(), _model(ErasureProgress), json=body, read=False)


def grant(request: GrantRequest) -> Call[Grant]:
    """POST /v1/grants: let a reader see a subject's records of some categories
    (ConsentRefused, every reason, when the consent policy says no)."""
    return Call("POST", GRANTS.path(), _model(Grant), json=_body(request), read=False)


def revoke_grant(grant_id: UUID) -> Call[Grant]:
    """DELETE /v1/grants/{id}: take a grant back (NotFound for one the asker may not
    revoke and is no party to)."""
    return Call("DELETE", REVOKE_GRANT.path(grant_id=grant_id), _model(Grant), read=False)


def list_grants() -> Call[GrantList]:
    """GET /v1/grants: the grants in force the asker gave, is the subject of, or reads by."""
    return Call("GET", LIST_GRANTS.path(), _model(GrantList))


# --- reads --------------------------------------------------------------------------


def recall(request: RecallRequest) -> Call[RecallResponse]:
    """POST /v1/recall: a read (nothing is stored), so it may be asked again."""
    return Call("POST", RECALL.path(), _model(RecallResponse), json=_body(request))


def get(record_id: UUID, as_of: datetime | None = None) -> Call[MemoryResponse]:
    params = [] if as_of is None else [("as_of", iso(as_of))]
    path = MEMORY.path(record_id=record_id)
    return Call("GET", path, _model(MemoryResponse), params=params)


def history(record_id: UUID) -> Call[HistoryResponse]:
    return Call("GET", HISTORY.path(record_id=record_id), _model(HistoryResponse))


def views(
    key: str,
    audience: Sequence[str] = (),
    as_of: datetime | None = None,
    *,
    depth: int | None = None,
    observer: str | None = None,
    observed: str | Sequence[str] = (),
) -> Call[PropositionResponse]:
    """GET /v1/propositions/{key}: every view of one proposition, grouped by mind (nested
    to `depth`; with `observed`, only the views of that chain of minds)."""
    params = [("audience", name) for name in audience]
    if as_of is not None:
        params.append(("as_of", iso(as_of)))
    if depth is not None:
        params.append(("depth", str(depth)))
    if observer is not None:
        params.append(("observer", observer))
    chain = [observed] if isinstance(observed, str) else list(observed)
    params += [("observed", name) for name in chain]
    return Call("GET", PROPOSITION.path(key=key), _model(PropositionResponse), params=params)


def audit(
    *,
    asker: str | None = None,
    record: str | UUID | None = None,
    outcome: Outcome | None = None,
    purpose: AuditPurpose | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int | None = None,
) -> Call[AuditPage]:
    """GET /v1/audit (role `auditor`): the caller's tenant's entries, newest first."""
    given = {
        "asker": asker,
        "record": None if record is None else str(record),
        "outcome": outcome,
        "purpose": purpose,
        "since": None if since is None else iso(since),
        "until": None if until is None else iso(until),
        "limit": None if limit is None else str(limit),
    }
    params = [(name, value) for name, value in given.items() if value is not None]
    return Call("GET", AUDIT.path(), _model(AuditPage), params=params)


def set_forget_rule(request: ForgetRuleRequest) -> Call[ForgetRuleSet]:
    """POST /v1/forget-rules: never keep a value, key or pattern about a subject; what
    matches now is erased with the asker's reach (ErasureRefused when the policy
    refuses the rule)."""
    body = request.model_dump(mode="json", exclude_none=True)
    return Call("POST", FORGET_RULES.path(), _model(ForgetRuleSet), json=body, read=False)


def forget_rules() -> Call[ForgetRules]:
    """GET /v1/forget-rules: the rules about the asker or that they set."""
    return Call("GET", LIST_FORGET_RULES.path(), _model(ForgetRules))


def lift_forget_rule(rule_id: UUID) -> Call[ForgetRule]:
    """DELETE /v1/forget-rules/{id}: lift a standing rule (NotFound for one the asker
    may not see)."""
    return Call("DELETE", FORGET_RULE.path(rule_id=rule_id), _model(ForgetRule), read=False)


def erasure_status(request_id: UUID) -> Call[ErasureProgress]:
    """GET /v1/erasures/{id}: how far an erasure request has got (its requester, or an
    officer; NotFound otherwise)."""
    return Call("GET", ERASURE.path(request_id=request_id), _model(ErasureProgress))


def policy_impact(bundle: bytes, window: ImpactWindow) -> Call[ImpactReport]:
    """POST /v1/policy/impact (role `policy-admin`): a candidate policy's flips over the
    reads audited in the window. Audited; it changes nothing: a read."""
    given = window.model_dump(mode="json", exclude_unset=True)
    params = [(name, str(value)) for name, value in given.items() if value is not None]
    return Call(
        "POST",
        IMPACT.path(),
        _model(ImpactReport),
        params=params,
        content=bundle,
        content_type="application/gzip",
    )


def explain(request: ExplainRequest) -> Call[ExplainResponse]:
    """POST /v1/explain (role `policy-admin`): one decision with each rule's reasons.
    Audited, but it changes no record: a read."""
    return Call("POST", EXPLAIN.path(), _model(ExplainResponse), json=_body(request))


# --- the Qdrant dialect's scroll: the one listing the sidecar serves -------------------


@dataclass(frozen=True)
class ScrolledPoint:
    """A disclosed record as the Qdrant dialect serves it: the stored record with
    `content` the attribution sentence, `as_written` the writer's wording, and `whose`
    (attribution, usable_as, obligations, status)."""

    id: UUID
    payload: dict[str, Any]


@dataclass(frozen=True)
class ScrollPage:
    points: list[ScrolledPoint]
    # Where the next page starts; None at the end.
    next: UUID | None


def scroll(
    collection: str, match: Mapping[str, str], limit: int, after: UUID | None = None
) -> Call[ScrollPage]:
    """POST /collections/{c}/points/scroll: disclosable current records in id order,
    each field of `match` equal to its value (indexed fields only, see store/schema.py).
    Not a native route: the native API lists nothing, and the LangGraph store needs a
    listing (sidecar/client/langgraph.py)."""
    must = [{"key": key, "match": {"value": value}} for key, value in match.items()]
    body: dict[str, Any] = {
        "filter": {"must": must},
        "limit": limit,
        "with_payload": True,
        "with_vector": False,
    }
    if after is not None:
        body["offset"] = str(after)
    return Call("POST", SCROLL.path(collection=collection), _page, json=body)


def _page(content: bytes) -> ScrollPage:
    result = json.loads(content)["result"]
    points = [ScrolledPoint(UUID(str(p["id"])), dict(p["payload"])) for p in result["points"]]
    following = result.get("next_page_offset")
    return ScrollPage(points, None if following is None else UUID(str(following)))


# --- refusals -----------------------------------------------------------------------


def refusal(content: bytes) -> WhoseError | None:
    """The error tree's refusal a body names by its code (`error`: a native problem, or
    a Qdrant-shaped refusal of the dialect's scroll, which names it too), or None for a
    body outside the tree (the client then raises httpx's own HTTPStatusError)."""
    try:
        body = json.loads(content)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    cls = refusal_class(body.get("error"))
    return None if cls is None else cls.from_body(body)
