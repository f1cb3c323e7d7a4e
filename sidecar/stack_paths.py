"""Each stack collection's read and write paths, built on first use over its store.

A stack collection (store/stacks.py: a RAG stack's own collection, with its own
vectors, in the caller's tenant) holds whose records like the whose collection, so it
is read and written by the same parts: a `Reader` over its store for the query engine
(points.py), and the writer, eraser and versions for the documents the dialect writes
(memory.py). They are made here, once per collection, sharing the policy, gate,
locks and audit log of the whose collection's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from qdrant_client.http import models as qm

from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.door import door
from sidecar.embed import Embedder
from sidecar.errors import CollectionForbidden, CollectionRefused
from sidecar.policy.contract import CollectionAction
from sidecar.policy.engine import PolicyEngine
from sidecar.reads.query import whose
from sidecar.reads.query.collection import Dense, Schema
from sidecar.reads.reader import Reader
from sidecar.store.layout import VectorLayout
from sidecar.store.stacks import OWN_INDEX_TYPES, StackCollections, StackInfo, missing
from sidecar.writes.eraser import Eraser
from sidecar.writes.forget_rules import Rules
from sidecar.writes.locks import ChainLocks
from sidecar.writes.retention import Sweeper, SweepReport
from sidecar.writes.versions import Versions
from sidecar.writes.writer import Writer


@dataclass(frozen=True)
class StackPaths:
    info: StackInfo
    reader: Reader
    versions: Versions
    sweeper: Sweeper

    @property
    def schema(self) -> Schema:
        return schema(self.info.layout, self.info.own_indexes)


def merged(report: SweepReport, more: SweepReport) -> SweepReport:
    """Two sweeps' counts as one run's."""
    return replace(
        report,
        horizon_days=more.horizon_days,
        tenants=report.tenants + more.tenants,
        examined=report.examined + more.examined,
        expired=report.expired + more.expired,
        erased=report.erased + more.erased,
        held=report.held + more.held,
        stopped_by_bound=report.stopped_by_bound or more.stopped_by_bound,
        erased_ids=report.erased_ids + more.erased_ids,
    )


def schema(layout: VectorLayout, own: Mapping[str, qm.PayloadSchemaType] | None = None) -> Schema:
    """A stack collection's schema: its own vectors, the record fields' indexes and the
    stack's own (on its documents' metadata, store/stacks.py)."""
    indexes: dict[str, qm.PayloadSchemaType] = dict(whose.schema(1).indexes) | dict(own or {})
    return Schema(
        dense={n: Dense(s.size, s.distance) for n, s in layout.dense.items()},
        sparse=frozenset(layout.sparse),
        indexes=indexes,
    )


@door
class Stacks:
    """The stack collections of every tenant, and their paths."""

    def __init__(
        self,
        collections: StackCollections,
        reader: Reader,
        policy: PolicyEngine,
        embedder: Embedder,
        locks: ChainLocks,
        audit: AuditLog,
        rules: Rules | None = None,
    ) -> None:
        self.collections = collections
        # Standing forget rules: a stack's documents carry a subject like any record.
        self._rules = rules
        self._reader = reader
        self._policy = policy
        self._embedder = embedder
        self._locks = locks
        self._audit = audit
        self._paths: dict[str, StackPaths] = {}
        self._lock = asyncio.Lock()
        # What "now" is to the retention sweep and its erasures (`whose sweep --now`).
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    async def paths(self, tenant: str, name: str) -> StackPaths | None:
        """The paths of the tenant's collection `name`, or None if it has none."""
        info = await self.collections.get(tenant, name)
        if info is None:
            return None
        async with self._lock:
            made = self._paths.get(info.physical)
            if made is not None and made.info == info:
                return made
            store = await self.collections.store(tenant, name)
            reader = Reader(store, self._reader.gate, self._reader.bounds)
            writer = Writer(
                store, self._policy, self._embedder, self._locks, self._audit, self._rules
            )
            eraser = Eraser(store, self._policy, self._locks, reader, self._audit, self._now)
            versions = Versions(store, reader, writer, eraser, self._locks)
            sweeper = Sweeper(store, self._policy, eraser, self._locks, self._now)
            made = StackPaths(info, reader, versions, sweeper)
            self._paths[info.physical] = made
            return made

    def _now(self) -> datetime:
        return self.clock()

    async def sweep(
        self,
        *,
        max_erased: int,
        max_examined: int,
        tenants: Sequence[str] | None = None,
        dry_run: bool = False,
    ) -> SweepReport:
        """The retention sweep over every stack collection (of `tenants`, else all), as
        over whose's own (writes/retention.py): the same policy, one bound for them all."""
        report = SweepReport(now=self.clock())
        for info in await self.collections.every():
            if tenants is not None and info.tenant not in tenants:
                continue
            room_erased = max_erased - report.erased
            room_examined = max_examined - report.examined
            if room_erased <= 0 or room_examined <= 0:
                report.stopped_by_bound = True
                break
            paths = await self.paths(info.tenant, info.name)
            if paths is None:
                continue  # dropped meanwhile
            done = await paths.sweeper.sweep(
                max_erased=room_erased,
                max_examined=room_examined,
                tenants=[info.tenant],
                dry_run=dry_run,
            )
            report = merged(report, done)
            if done.horizon_days is None:
                break  # no retention rule: nothing expires anywhere
        return report

    # --- the collections themselves (the Qdrant dialect's collection routes) ---------

    async def names(self, who: Identity) -> list[str]:
        return await self.collections.names(who.tenant)

    async def info(self, who: Identity, name: str) -> StackInfo | None:
        return await self.collections.get(who.tenant, name)

    async def create(self, who: Identity, name: str, body: Any) -> StackInfo:
        """A new collection of the asker's tenant with the vectors a Qdrant
        create-collection body asks for (settings whose cannot honour refused by name),
        if the collections policy lets the asker make one."""
        layout = VectorLayout.from_create_body(body)
        await self._allowed(who, "create", name, None)
        return await self.collections.create(who.tenant, name, layout, who.id)

    async def drop(self, who: Identity, name: str) -> bool:
        """Remove the collection and every document in it, if the collections policy
        lets the asker (its creator, or a role it names); False if there was none."""
        info = await self.collections.get(who.tenant, name)
        if info is None:
            return False
        await self._allowed(who, "drop", name, info)
        async with self._lock:
            self._paths.pop(info.physical, None)
        return await self.collections.drop(who.tenant, name)

    async def index(
        self,
        who: Identity,
        name: str,
        action: CollectionAction,
        path: str | None,
        kind: qm.PayloadSchemaType | None = None,
    ) -> None:
        """A payload index made or dropped, if the collections policy allows it: on
        `path`, the stack's own metadata key (store/stacks.py), made on the collection
        and recorded with it, so filters, groupings, orderings and facets may read it;
        None: a record field whose indexes already (nothing to do)."""
        info = await self.collections.get(who.tenant, name)
        if info is None:
            raise missing(name)
        await self._allowed(who, action, name, info)
        if path is None:
            return
        if action == "create_index":
            if kind not in OWN_INDEX_TYPES:
                raise CollectionRefused(
                    "index_type", f"not supported by whose: a `{kind}` index on `{path}`"
                )
            await self.collections.create_index(who.tenant, name, path, kind)
        else:
            await self.collections.drop_index(who.tenant, name, path)

    async def _allowed(
        self, who: Identity, action: CollectionAction, name: str, info: StackInfo | None
    ) -> None:
        decision = await self._policy.collection_action(
            who,
            action,
            name,
            info.creator if info is not None else None,
            created_at=info.created if info is not None else None,
        )
        if not decision.allow:
            raise CollectionForbidden(f"{action} refused", list(decision.reasons))
