"""Erasure requests: every record about a subject, from a source, or of a whole tenant,
or by content (a proposition key, the records nearest a text, what a forget rule
names), erased a bounded step at a time (docs/design.md §6, "Erasure requests";
docs/forgetting.md).

A request is an erasure officer's (the `whose.erasure` policy says who is one:
`needs_erasure_officer` otherwise), for the officer's tenant. It is kept in a small
request store (Redis when configured, so every replica sees it; else a file per
request under the data directory) and run in steps. A step reads at most `step`
records the request names, in store order from where the last step stopped: for a
subject, the records they hold, the ones about their mind, the ones they said, and
the world-state claims they wrote; for a source, its records; for a tenant, all of
them. The policy decides each record again (a legal
hold keeps one), the eraser erases those it allows (writes/eraser.py), and the
request's progress is saved: a restarted sidecar goes on where it stopped, and a
step cut short is run again (erasing twice erases nothing more). Records written
after a scan passed them are not erased: make the request again for those.

The first step runs before the request is answered, so a small request is done when
`POST /v1/erasures` answers; a larger one goes on in the background, and
`GET /v1/erasures/{id}` says how far it is.

A request by content is anyone's: the policy says whether it is `unrestricted` (an
officer's, reaching every record of the tenant, found by store scans as above) or
not. One that is not reaches only records the requester may see, found through the
one disclosed-read path (reads/reader.py: the scroll, or the nearest search for a
query) as a `get` would find them, so nothing it answers (counts, steps, when it is
done) depends on a record they may not see; of those the policy erases the ones
they may erase (their own). A query request finds its records once, at its first
step (at most `max_records`, down to `min_score` cosine similarity of the query's
embedding), keeps their ids and erases them in steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import redis.asyncio as aioredis
from pydantic import ValidationError
from redis.exceptions import RedisError

from sidecar.auth.identity import Identity
from sidecar.embed import Embedder
from sidecar.errors import ErasureRefused, ErasureRequestsUnavailable, NotFound, Unavailable
from sidecar.messages import ErasureProgress, ErasureRequest, ForgetRule
from sidecar.policy.contract import DisclosureQuestion, ErasureRequestView
from sidecar.policy.engine import PolicyEngine
from sidecar.reads.reader import Reader
from sidecar.record import Stored
from sidecar.store import Store
from sidecar.store.scope import Absent, Either, Match, Scope
from sidecar.writes.eraser import Eraser
from sidecar.writes.forgetting import Matcher
from sidecar.writes.locks import ChainLocks

log = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Requests(Protocol):
    async def save(self, progress: ErasureProgress) -> None: ...

    async def load(self, tenant: str, request_id: uuid.UUID) -> ErasureProgress | None: ...

    async def running(self) -> list[ErasureProgress]: ...


class FileRequests:
    """One JSON file per request under a folder (one process owns the data dir)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, request_id: uuid.UUID) -> Path:
        return self.folder / f"{request_id}.json"

    async def save(self, progress: ErasureProgress) -> None:
        await asyncio.to_thread(self._write, progress)

    def _write(self, progress: ErasureProgress) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(progress.request_id)
        partial = path.with_suffix(".part")
        partial.write_text(_dumped(progress))
        partial.replace(path)  # whole or not at all

    async def load(self, tenant: str, request_id: uuid.UUID) -> ErasureProgress | None:
        path = self._path(request_id)
        text = await asyncio.to_thread(lambda: path.read_text() if path.exists() else None)
        found = _loaded(text)
        return found if found is not None and found.tenant == tenant else None

    async def running(self) -> list[ErasureProgress]:
        def read() -> list[str]:
            if not self.folder.exists():
                return []
            return [p.read_text() for p in sorted(self.folder.glob("*.json"))]

        found = [_loaded(text) for text in await asyncio.to_thread(read)]
        return [p for p in found if p is not None and p.status == "running"]


class RedisRequests:
    """Requests in Redis, seen by every replica."""

    def __init__(self, client: aioredis.Redis, prefix: str = "whose:erasure") -> None:
        self.client = client
        self.prefix = prefix

    async def save(self, progress: ErasureProgress) -> None:
        key = f"{self.prefix}:{progress.request_id}"
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.set(key, _dumped(progress))
                if progress.status == "running":
                    pipe.sadd(f"{self.prefix}s:running", str(progress.request_id))
                else:
                    pipe.srem(f"{self.prefix}s:running", str(progress.request_id))
                await pipe.execute()
        except RedisError as exc:
            raise ErasureRequestsUnavailable(str(exc)) from exc

    async def load(self, tenant: str, request_id: uuid.UUID) -> ErasureProgress | None:
        try:
            text = await self.client.get(f"{self.prefix}:{request_id}")
        except RedisError as exc:
            raise ErasureRequestsUnavailable(str(exc)) from exc
        found = _loaded(text.decode() if isinstance(text, bytes) else None)
        return found if found is not None and found.tenant == tenant else None

    async def running(self) -> list[ErasureProgress]:
        try:
            ids = await self.client.smembers(f"{self.prefix}s:running")
            names = sorted(i.decode() if isinstance(i, bytes) else str(i) for i in ids)
            texts = [await self.client.get(f"{self.prefix}:{name}") for name in names]
        except RedisError as exc:
            raise ErasureRequestsUnavailable(str(exc)) from exc
        found = [_loaded(t.decode() if isinstance(t, bytes) else None) for t in texts]
        return [p for p in found if p is not None and p.status == "running"]


def _dumped(progress: ErasureProgress) -> str:
    hidden = {"asker": progress.asker, "match": progress.match, "targets": progress.targets}
    return json.dumps(progress.model_dump(mode="json") | hidden)


def _loaded(text: str | None) -> ErasureProgress | None:
    if text is None:
        return None
    try:
        return ErasureProgress.model_validate_json(text)
    except ValidationError:
        log.warning("an erasure request file is not readable; left alone")
        return None


def _scans(progress: ErasureProgress) -> list[Scope]:
    """The store scans a request reads, one after another (a query request's first
    step searches instead)."""
    tenant = progress.tenant
    if progress.kind in ("tenant", "query"):
        return [Scope(tenant=tenant)]
    if progress.kind == "source":
        return [Scope(tenant=tenant, source_id=progress.source)]
    if progress.kind == "proposition":
        return [Scope(tenant=tenant, about=progress.key)]
    if progress.kind == "forget" and progress.match.get("kind") == "value":
        # A forgotten value is its subject's secret in any record (whose.forgetting).
        return [Scope(tenant=tenant)]
    about = _about(progress.subject or "")
    # A forgotten key or pattern: the subject's records (of that key).
    if progress.kind == "forget":
        return [Scope(tenant=tenant, about=progress.key, extra=(about,))]
    return [Scope(tenant=tenant, extra=(about,))]


def _about(subject: str) -> Either:
    """The records a subject holds, said, is observed in, or wrote without holder."""
    return Either(
        (
            (Match("observer_id", subject),),
            (Match("observed_id", subject),),
            (Match("source.speaker", subject),),
            # A claim without holder or speaker is its writer's (rego/whose/lib/subjects/).
            (
                Match("provenance.writer", subject),
                Absent("observer_id"),
                Absent("source.speaker"),
            ),
        )
    )


def _request_view(progress: ErasureProgress) -> ErasureRequestView:
    """A request as the erasure policy sees it: never a query's text or a value."""
    rule_kind = progress.match.get("kind") if progress.kind == "forget" else None
    return ErasureRequestView(
        kind=progress.kind,
        subject=progress.subject,
        source=progress.source,
        key=progress.key,
        rule_kind=rule_kind if rule_kind in ("value", "key", "pattern") else None,
    )


def _matcher(progress: ErasureProgress) -> Matcher | None:
    """A forget request's rule, as matched against each record its scan finds."""
    if progress.kind != "forget":
        return None
    match = progress.match

    def text(name: str) -> str | None:
        value = match.get(name)
        return value if isinstance(value, str) else None

    return Matcher(
        rule_id=str(progress.rule_id),
        kind=text("kind") or "",
        subject=progress.subject or "",
        value=text("value"),
        key=progress.key,
        pattern=text("pattern"),
    )


class ErasureRequests:
    def __init__(
        self,
        store: Store,
        policy: PolicyEngine,
        eraser: Eraser,
        requests: Requests,
        locks: ChainLocks,
        step: int = 200,
        clock: Callable[[], datetime] = _utcnow,
        *,
        reader: Reader | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.store = store
        self.policy = policy
        self.eraser = eraser
        self.requests = requests
        self.locks = locks
        self.step_size = step
        self.clock = clock
        # What requests by content need: the read path a restricted one finds records
        # through, and the embedder a query's text is embedded by.
        self.reader = reader or eraser.reader
        self.embedder = embedder
        self._wake = asyncio.Event()

    async def submit(self, who: Identity, request: ErasureRequest) -> ErasureProgress:
        """Start a request (ErasureRefused when the asker may not make it), run its first
        step, and answer how far it got."""
        now = self.clock()
        match: dict[str, str | float | int] = {}
        if request.query is not None:
            match = {
                "query": request.query,
                "min_score": request.min_score,
                "max_records": request.max_records,
            }
        progress = ErasureProgress(
            request_id=uuid.uuid4(),
            tenant=who.tenant,
            requested_by=who.id,
            kind=request.kind,
            subject=request.subject,
            source=request.source,
            key=request.key,
            reason=request.reason,
            status="running",
            created_at=now,
            updated_at=now,
            asker=who.policy_view(),
            match=match,
        )
        return await self._started(who, progress)

    async def forget(self, who: Identity, rule: ForgetRule) -> ErasureProgress:
        """Erase what a forget rule (writes/forget_rules.py) names now, with the
        setter's reach; the same steps as any request."""
        now = self.clock()
        match: dict[str, str | float | int] = {"kind": rule.kind}
        if rule.value is not None:
            match["value"] = rule.value
        if rule.pattern is not None:
            match["pattern"] = rule.pattern
        progress = ErasureProgress(
            request_id=uuid.uuid4(),
            tenant=who.tenant,
            requested_by=who.id,
            kind="forget",
            subject=rule.subject,
            key=rule.key,
            rule_id=rule.rule_id,
            reason=rule.reason,
            status="running",
            created_at=now,
            updated_at=now,
            asker=who.policy_view(),
            match=match,
        )
        return await self._started(who, progress)

    async def _started(self, who: Identity, progress: ErasureProgress) -> ErasureProgress:
        answer, _ = await self.policy.erasure(who, _request_view(progress), [], self.clock())
        if not answer.request.allow:
            raise ErasureRefused("erasure request refused", sorted(answer.request.reasons))
        progress.unrestricted = answer.request.unrestricted
        await self.requests.save(progress)
        progress = await self.step(progress)
        if progress.status == "running":
            self._wake.set()
        return progress

    async def status(self, who: Identity, request_id: uuid.UUID) -> ErasureProgress:
        """A request of the asker's tenant that the asker made, or that an officer asks
        about; NotFound otherwise (as for a request that does not exist)."""
        found = await self.requests.load(who.tenant, request_id)
        if found is None:
            raise NotFound("erasure request")
        if found.requested_by != who.id:
            view = ErasureRequestView(kind="tenant")
            answer, _ = await self.policy.erasure(who, view, [], self.clock())
            if not answer.request.allow:
                raise NotFound("erasure request")
        return found

    async def step(self, progress: ErasureProgress) -> ErasureProgress:
        """One bounded step of a running request; its progress saved."""
        async with self.locks.hold([f"erasure-request\x00{progress.request_id}"]):
            fresh = await self.requests.load(progress.tenant, progress.request_id)
            if fresh is None or fresh.status != "running":
                return fresh or progress
            progress = fresh
            scans = _scans(progress)
            who = _identity(progress)
            view = _request_view(progress)
            before = self.clock()
            found, examined, next_cursor = await self._page(progress, who, scans)
            try:
                if found:
                    done = await self.eraser.erase_decided(
                        who,
                        view,
                        found,
                        "erasures",
                        reason=progress.reason,
                        request_id=str(progress.request_id),
                        all_or_nothing=False,
                    )
                    progress.erased += len(done.erased)
                    progress.kept += len(done.refused)
                    for reasons in done.refused.values():
                        for reason in reasons:
                            progress.kept_because[reason] = progress.kept_because.get(reason, 0) + 1
            except ErasureRefused as refused:
                # The asker is no longer an officer (a role revoked): stop, say why.
                progress.status, progress.error = "failed", ",".join(map(str, refused.reasons))
            progress.examined += examined
            progress.steps += 1
            progress.cursor = next_cursor
            if progress.cursor is None and progress.status == "running":
                progress.scan += 1
                if progress.scan >= len(scans):
                    progress.status, progress.finished_at = "done", self.clock()
            progress.updated_at = max(before, self.clock())
            await self.requests.save(progress)
        return progress

    async def _page(
        self, progress: ErasureProgress, who: Identity, scans: list[Scope]
    ) -> tuple[list[Stored], int, str | None]:
        """One step's records to decide, how many were examined, and where the next
        step starts (None: this scan is done)."""
        if progress.kind == "query":
            return await self._query_page(progress, who)
        scope = scans[progress.scan]
        # A request by subject, source or tenant is an officer's (the policy's
        # `needs_erasure_officer`), and one saved before `unrestricted` was is too.
        if progress.unrestricted or progress.kind in ("subject", "source", "tenant"):
            page = await self.store.find(scope, self.step_size, offset=progress.cursor)
            records, next_cursor = page.records, page.next_offset
        else:
            answer = await self.reader.scroll(
                self._question(who), "erasures", scope, self.step_size, progress.cursor
            )
            records = await self._stored(progress.tenant, [s.record.id for s in answer.shown])
            next_cursor = answer.next_offset
        rule = _matcher(progress)
        found = [r for r in records if rule is None or rule.carried_by(r.payload)]
        return found, len(records), next_cursor

    async def _query_page(
        self, progress: ErasureProgress, who: Identity
    ) -> tuple[list[Stored], int, str | None]:
        """A query request: its records found at the first step (ids kept), then
        erased a step at a time (the cursor is how many were taken)."""
        if progress.targets is None:
            text = str(progress.match.get("query", ""))
            limit = int(progress.match.get("max_records", 1))
            threshold = float(progress.match.get("min_score", 1.0))
            if self.embedder is None:
                raise RuntimeError("query erasure requests need the embedder")
            [vector] = await self.embedder.embed_batch([text], "query")
            scope = Scope(tenant=progress.tenant)
            if progress.unrestricted:
                hits = await self.store.search(vector, scope, limit, score_threshold=threshold)
                ids = [r.id for r in hits]
            else:
                answer = await self.reader.nearest(
                    self._question(who),
                    "erasures",
                    vector,
                    scope,
                    limit,
                    score_threshold=threshold,
                    adaptive=False,
                )
                ids = [s.record.id for s in answer.shown]
            progress.targets = sorted(ids)
        start = int(progress.cursor or 0)
        batch = progress.targets[start : start + self.step_size]
        end = start + len(batch)
        records = await self._stored(progress.tenant, batch)
        return records, len(batch), str(end) if end < len(progress.targets) else None

    def _question(self, who: Identity) -> DisclosureQuestion:
        """What a restricted request may reach: what the requester may `get`."""
        return DisclosureQuestion(asker=who, audience=[], purpose="get", now=self.clock())

    async def _stored(self, tenant: str, ids: list[str]) -> list[Stored]:
        """The records as stored (a read answer trims links), in the order named."""
        found = {r.id: r for r in await self.store.get(tenant, [uuid.UUID(i) for i in ids])}
        return [found[i] for i in ids if i in found]

    async def run(self, poll_s: float) -> None:
        """Run every running request to its end, step by step, for as long as the
        sidecar runs (woken by a new request, else every `poll_s`)."""
        while True:
            try:
                for progress in await self.requests.running():
                    while progress.status == "running":
                        progress = await self.step(progress)
                        await asyncio.sleep(0)  # let requests in between
            except Unavailable:
                log.exception("erasure requests: a step failed; trying again later")
            except Exception:
                # A bug must not stop every later request: logged, tried again later.
                log.exception("erasure requests: a step failed unexpectedly")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=poll_s)
            self._wake.clear()


def _identity(progress: ErasureProgress) -> Identity:
    asker = progress.asker

    def names(key: str) -> tuple[str, ...]:
        value = asker.get(key, [])
        return tuple(value) if isinstance(value, list) else ()

    return Identity(
        id=progress.requested_by,
        tenant=progress.tenant,
        groups=names("groups"),
        roles=names("roles"),
        scopes=names("scopes"),
    )
