"""The Python client, sync and async, on httpx: the native API's routes as methods that
take and return the server's own models (sidecar/messages.py, record.py, writes/).

Both clients send `Call`s (calls.py) through one `send`, which adds who is asking
(a bearer token, or dev identity headers), bounds the time, retries what may be retried
and reads a refusal into the error tree's class (errors.py). Retries never repeat a
write that may have been applied: a write is sent again only when it never left
(connecting failed); a read also when the sidecar answered 503 (nothing was decided).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar
from uuid import UUID

import httpx
import jwt
from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

import sidecar.client.calls as calls
from sidecar.audit.model import AuditPurpose, Outcome
from sidecar.client.calls import Call, ScrollPage
from sidecar.errors import Unavailable
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
from sidecar.record import MemoryWrite

T = TypeVar("T")

# Connecting is quick or the sidecar is not there; a recall under load can take a while.
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
DEFAULT_COLLECTION = "whose_memories"


@dataclass(frozen=True)
class DevIdentity:
    """Who is asking, as `whose serve --dev` reads it from headers (loopback only)."""

    asker: str
    tenant: str
    groups: Sequence[str] = ()
    roles: Sequence[str] = ()

    def headers(self) -> dict[str, str]:
        headers = {"X-Whose-Asker": self.asker, "X-Whose-Tenant": self.tenant}
        if self.groups:
            headers["X-Whose-Groups"] = ",".join(self.groups)
        if self.roles:
            headers["X-Whose-Roles"] = ",".join(self.roles)
        return headers


# A bearer token, or a function that returns the current one (a token per user or per
# request, refreshed as it expires): it is asked before every request.
Token = str | Callable[[], str]


@dataclass(frozen=True)
class Retries:
    """How often a call is tried in all, and the first wait between tries (doubled
    each time, with jitter, at most `max_wait_s`)."""

    attempts: int = 3
    wait_s: float = 0.2
    max_wait_s: float = 2.0


DEFAULT_RETRIES = Retries()


def may_retry(call: Call[Any], error: BaseException) -> bool:
    """Whether `call` may be sent again after `error`. A request that never left
    (connecting failed) was not applied: any call. A 503 decided nothing and stored
    nothing, but a write is still not sent twice; a read is. Nothing else: a timeout or
    a dropped connection after sending may have been applied."""
    if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
        return True
    return call.read and isinstance(error, Unavailable)


@dataclass(frozen=True)
class Connection:
    """Where the sidecar is and who asks it: what both clients share."""

    base_url: str
    token: Token | None = None
    dev: DevIdentity | None = None
    timeout: httpx.Timeout | float = field(default_factory=lambda: DEFAULT_TIMEOUT)
    retries: Retries = DEFAULT_RETRIES
    # The Qdrant collection the sidecar serves (WHOSE_COLLECTION), for `scroll`.
    collection: str = DEFAULT_COLLECTION

    def __post_init__(self) -> None:
        if (self.token is None) == (self.dev is None):
            raise ValueError("give exactly one of token (a bearer token) or dev (DevIdentity)")

    def headers(self) -> dict[str, str]:
        if self.dev is not None:
            return self.dev.headers()
        token = self.token() if callable(self.token) else self.token
        return {"Authorization": f"Bearer {token}"}

    @property
    def tenant(self) -> str | None:
        """The tenant this identity names: dev identity's, or the current token's
        `tenant` claim, read without verifying it (the sidecar verifies; this only
        tells a caller which tenant its answers are about)."""
        if self.dev is not None:
            return self.dev.tenant
        token = self.token() if callable(self.token) else self.token
        try:
            claims = jwt.decode(token or "", options={"verify_signature": False})
        except jwt.PyJWTError:
            return None
        tenant = claims.get("tenant")
        return tenant if isinstance(tenant, str) else None

    def request(self, call: Call[Any]) -> dict[str, Any]:
        """The keyword arguments of httpx's `request` for `call`."""
        sent: dict[str, Any] = {
            "method": call.method,
            "url": call.path,
            "params": list(call.params),
            "json": call.json,
            "headers": self.headers(),
        }
        if call.content is not None:  # a body that is not JSON (a policy bundle)
            sent |= {"json": None, "content": call.content}
            sent["headers"] = sent["headers"] | {"content-type": call.content_type}
        return sent

    def retrying(self, call: Call[Any]) -> dict[str, Any]:
        """tenacity's arguments for `call`: the last error is raised as it was."""
        return {
            "stop": stop_after_attempt(max(1, self.retries.attempts)),
            "wait": wait_exponential_jitter(
                multiplier=self.retries.wait_s,
                max=self.retries.max_wait_s,
                jitter=self.retries.wait_s,
            ),
            "retry": retry_if_exception(lambda error: may_retry(call, error)),
            "reraise": True,
        }


def answer(call: Call[T], response: httpx.Response) -> T:
    """The answer of a sent call, or its refusal raised as the error tree's class (else
    httpx's HTTPStatusError for a body outside the tree)."""
    if response.is_success:
        return call.read_answer(response.content)
    refused = calls.refusal(response.content)
    if refused is not None:
        raise refused
    response.raise_for_status()
    raise AssertionError("unreachable: an unsuccessful response raises")  # pragma: no cover


# What `remember` takes: one record or several, as models or as their JSON.
Records = MemoryWrite | Mapping[str, Any] | Sequence[MemoryWrite | Mapping[str, Any]]


def _as_list(records: Records) -> list[MemoryWrite]:
    if isinstance(records, MemoryWrite | Mapping):
        return [calls.as_model(MemoryWrite, records)]
    return [calls.as_model(MemoryWrite, record) for record in records]


def _as_recall(request: RecallRequest | Mapping[str, Any] | str) -> RecallRequest:
    if isinstance(request, str):
        return RecallRequest(query=request)
    return calls.as_model(RecallRequest, request)


class WhoseClient:
    """The native API, blocking. `token=` a bearer token (or a function returning the
    current one), or `dev=DevIdentity(...)` against `whose serve --dev`.

    Each method is one route; answers are the server's models, refusals the error
    tree's exceptions (`from sidecar.client import WriteRefused, NotFound, ...`).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: Token | None = None,
        dev: DevIdentity | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retries: Retries = DEFAULT_RETRIES,
        collection: str = DEFAULT_COLLECTION,
        http: httpx.Client | None = None,
    ) -> None:
        self.connection = Connection(base_url, token, dev, timeout, retries, collection)
        # `http`: your own httpx client (proxies, certificates, event hooks); its
        # base_url is set to the sidecar's.
        self.http = http or httpx.Client(timeout=timeout)
        self.http.base_url = httpx.URL(base_url)

    def send(self, call: Call[T]) -> T:
        """The one place a request leaves: identity, time bound, retries, refusals."""
        for attempt in Retrying(**self.connection.retrying(call)):
            with attempt:
                response = self.http.request(**self.connection.request(call))
                return answer(call, response)
        raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover

    @property
    def tenant(self) -> str | None:
        return self.connection.tenant

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    # --- writes (never sent twice once they may have been applied) ---------------------

    def remember(self, records: Records) -> StoredRecords:
        """Store one record or several: all, or none (WriteRefused, every reason)."""
        return self.send(calls.remember(_as_list(records)))

    def observe(self, observation: Observation | Mapping[str, Any]) -> StoredRecords:
        """What a speaker said, stored as the speaker's own views."""
        return self.send(calls.observe(calls.as_model(Observation, observation)))

    def open_conversation(
        self, opening: ConversationOpening | Mapping[str, Any]
    ) -> MembershipEvents:
        """A conversation opened with its first members (who hear what is said in it)."""
        return self.send(calls.open_conversation(calls.as_model(ConversationOpening, opening)))

    def change_membership(
        self, source_id: str, changes: MembershipChanges | Mapping[str, Any]
    ) -> MembershipEvents:
        """Who joined or left a conversation, when; or corrections of earlier events."""
        body = calls.as_model(MembershipChanges, changes)
        return self.send(calls.change_membership(source_id, body))

    def witness(self, event: WitnessedEvent | Mapping[str, Any]) -> StoredRecords:
        """An event seen together, stored as each witness's view."""
        return self.send(calls.witness(calls.as_model(WitnessedEvent, event)))

    def delete(
        self, record_id: UUID | str, *, history: bool = False, reason: str | None = None
    ) -> ErasureResponse:
        """Erase one record (`history`: every version of its chain): ErasureRefused
        with the policy's reasons, NotFound when missing or not yours to see."""
        return self.send(calls.delete(UUID(str(record_id)), history=history, reason=reason))

    def request_erasure(self, request: ErasureRequest | Mapping[str, Any]) -> ErasureProgress:
        """An erasure request: an officer's by subject, source or tenant (role
        `data_protection` by default; ErasureRefused otherwise), anyone's by content
        (`proposition`, `query`) over the records they may erase."""
        return self.send(calls.request_erasure(calls.as_model(ErasureRequest, request)))

    def grant(self, request: GrantRequest | Mapping[str, Any]) -> Grant:
        """Let a reader see a subject's records of some categories, until an end
        (docs/consent.md); ConsentRefused when the consent policy says no."""
        return self.send(calls.grant(calls.as_model(GrantRequest, request)))

    def revoke_grant(self, grant_id: UUID | str) -> Grant:
        """Take a grant back: from the next read on it discloses nothing."""
        return self.send(calls.revoke_grant(UUID(str(grant_id))))

    def grants(self) -> GrantList:
        """The grants in force you gave, that are about you, or that name you."""
        return self.send(calls.list_grants())

    def set_forget_rule(self, request: ForgetRuleRequest | Mapping[str, Any]) -> ForgetRuleSet:
        """Never keep a value, key or pattern about a subject (you, unless an officer):
        erased now with your reach, refused or masked in every later write."""
        return self.send(calls.set_forget_rule(calls.as_model(ForgetRuleRequest, request)))

    def forget_rules(self) -> ForgetRules:
        """The rules about you or that you set (an officer: the tenant's)."""
        return self.send(calls.forget_rules())

    def lift_forget_rule(self, rule_id: UUID | str) -> ForgetRule:
        """Lift a standing rule (NotFound for one you may not see)."""
        return self.send(calls.lift_forget_rule(UUID(str(rule_id))))

    # --- reads ------------------------------------------------------------------------

    def recall(self, request: RecallRequest | Mapping[str, Any] | str) -> RecallResponse:
        """Attributed beliefs, an answer, a conflict or an abstention; a string is
        the query."""
        return self.send(calls.recall(_as_recall(request)))

    def get(self, record_id: UUID | str, *, as_of: datetime | None = None) -> MemoryResponse:
        """One record (NotFound when missing or not yours to see: the same answer)."""
        return self.send(calls.get(UUID(str(record_id)), as_of))

    def history(self, record_id: UUID | str) -> HistoryResponse:
        """The versions of a record's chain you may see, oldest first."""
        return self.send(calls.history(UUID(str(record_id))))

    def views(
        self,
        key: str,
        *,
        audience: Sequence[str] = (),
        as_of: datetime | None = None,
        depth: int | None = None,
        observer: str | None = None,
        observed: str | Sequence[str] = (),
    ) -> PropositionResponse:
        """Every view of one proposition you may see, the fact if any, and `minds` (nested
        to `depth`; with `observed`, only the views of that chain of minds)."""
        call = calls.views(key, audience, as_of, depth=depth, observer=observer, observed=observed)
        return self.send(call)

    def audit(
        self,
        *,
        asker: str | None = None,
        record: str | UUID | None = None,
        outcome: Outcome | None = None,
        purpose: AuditPurpose | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
    ) -> AuditPage:
        """The audit log of your tenant, newest first (role `auditor`)."""
        return self.send(
            calls.audit(
                asker=asker,
                record=record,
                outcome=outcome,
                purpose=purpose,
                since=since,
                until=until,
                limit=limit,
            )
        )

    def explain(self, request: ExplainRequest | Mapping[str, Any]) -> ExplainResponse:
        """One decision for one asker and record, with each rule's reasons (role
        `policy-admin`)."""
        return self.send(calls.explain(calls.as_model(ExplainRequest, request)))

    def erasure_status(self, request_id: UUID | str) -> ErasureProgress:
        """How far an erasure request has got (its requester, or an officer)."""
        return self.send(calls.erasure_status(UUID(str(request_id))))

    def policy_impact(
        self, bundle: bytes, window: ImpactWindow | Mapping[str, Any] | None = None
    ) -> ImpactReport:
        """What a candidate policy (a gzipped tar bundle) would change about the reads
        audited in `window` (role `policy-admin`)."""
        return self.send(calls.policy_impact(bundle, calls.as_model(ImpactWindow, window or {})))

    def scroll(
        self, match: Mapping[str, str], *, limit: int = 100, after: UUID | None = None
    ) -> ScrollPage:
        """A page of disclosable current records in id order, through the Qdrant
        dialect (the native API has no listing)."""
        return self.send(calls.scroll(self.connection.collection, match, limit, after))


class AsyncWhoseClient:
    """The native API, for asyncio: the same methods as WhoseClient, awaited."""

    def __init__(
        self,
        base_url: str,
        *,
        token: Token | None = None,
        dev: DevIdentity | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retries: Retries = DEFAULT_RETRIES,
        collection: str = DEFAULT_COLLECTION,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.connection = Connection(base_url, token, dev, timeout, retries, collection)
        self.http = http or httpx.AsyncClient(timeout=timeout)
        self.http.base_url = httpx.URL(base_url)

    async def send(self, call: Call[T]) -> T:
        async for attempt in AsyncRetrying(**self.connection.retrying(call)):
            with attempt:
                response = await self.http.request(**self.connection.request(call))
                return answer(call, response)
        raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover

    @property
    def tenant(self) -> str | None:
        return self.connection.tenant

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def remember(self, records: Records) -> StoredRecords:
        return await self.send(calls.remember(_as_list(records)))

    async def observe(self, observation: Observation | Mapping[str, Any]) -> StoredRecords:
        return await self.send(calls.observe(calls.as_model(Observation, observation)))

    async def open_conversation(
        self, opening: ConversationOpening | Mapping[str, Any]
    ) -> MembershipEvents:
        call = calls.open_conversation(calls.as_model(ConversationOpening, opening))
        return await self.send(call)

    async def change_membership(
        self, source_id: str, changes: MembershipChanges | Mapping[str, Any]
    ) -> MembershipEvents:
        body = calls.as_model(MembershipChanges, changes)
        return await self.send(calls.change_membership(source_id, body))

    async def witness(self, event: WitnessedEvent | Mapping[str, Any]) -> StoredRecords:
        return await self.send(calls.witness(calls.as_model(WitnessedEvent, event)))

    async def delete(
        self, record_id: UUID | str, *, history: bool = False, reason: str | None = None
    ) -> ErasureResponse:
        return await self.send(calls.delete(UUID(str(record_id)), history=history, reason=reason))

    async def request_erasure(self, request: ErasureRequest | Mapping[str, Any]) -> ErasureProgress:
        return await self.send(calls.request_erasure(calls.as_model(ErasureRequest, request)))

    async def grant(self, request: GrantRequest | Mapping[str, Any]) -> Grant:
        return await self.send(calls.grant(calls.as_model(GrantRequest, request)))

    async def revoke_grant(self, grant_id: UUID | str) -> Grant:
        return await self.send(calls.revoke_grant(UUID(str(grant_id))))

    async def grants(self) -> GrantList:
        return await self.send(calls.list_grants())

    async def set_forget_rule(
        self, request: ForgetRuleRequest | Mapping[str, Any]
    ) -> ForgetRuleSet:
        return await self.send(calls.set_forget_rule(calls.as_model(ForgetRuleRequest, request)))

    async def forget_rules(self) -> ForgetRules:
        return await self.send(calls.forget_rules())

    async def lift_forget_rule(self, rule_id: UUID | str) -> ForgetRule:
        return await self.send(calls.lift_forget_rule(UUID(str(rule_id))))

    async def recall(self, request: RecallRequest | Mapping[str, Any] | str) -> RecallResponse:
        return await self.send(calls.recall(_as_recall(request)))

    async def get(self, record_id: UUID | str, *, as_of: datetime | None = None) -> MemoryResponse:
        return await self.send(calls.get(UUID(str(record_id)), as_of))

    async def history(self, record_id: UUID | str) -> HistoryResponse:
        return await self.send(calls.history(UUID(str(record_id))))

    async def views(
        self,
        key: str,
        *,
        audience: Sequence[str] = (),
        as_of: datetime | None = None,
        depth: int | None = None,
        observer: str | None = None,
        observed: str | Sequence[str] = (),
    ) -> PropositionResponse:
        call = calls.views(key, audience, as_of, depth=depth, observer=observer, observed=observed)
        return await self.send(call)

    async def audit(
        self,
        *,
        asker: str | None = None,
        record: str | UUID | None = None,
        outcome: Outcome | None = None,
        purpose: AuditPurpose | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
    ) -> AuditPage:
        return await self.send(
            calls.audit(
                asker=asker,
                record=record,
                outcome=outcome,
                purpose=purpose,
                since=since,
                until=until,
                limit=limit,
            )
        )

    async def explain(self, request: ExplainRequest | Mapping[str, Any]) -> ExplainResponse:
        return await self.send(calls.explain(calls.as_model(ExplainRequest, request)))

    async def erasure_status(self, request_id: UUID | str) -> ErasureProgress:
        return await self.send(calls.erasure_status(UUID(str(request_id))))

    async def policy_impact(
        self, bundle: bytes, window: ImpactWindow | Mapping[str, Any] | None = None
    ) -> ImpactReport:
        return await self.send(
            calls.policy_impact(bundle, calls.as_model(ImpactWindow, window or {}))
        )

    async def scroll(
        self, match: Mapping[str, str], *, limit: int = 100, after: UUID | None = None
    ) -> ScrollPage:
        return await self.send(calls.scroll(self.connection.collection, match, limit, after))
