"""The write path: prepare each record, ask the write policy about the whole batch, then
link it into its chains and store it whole or not at all.

The tenant and the writer come from the verified identity. The write policy
(Rego, `whose.ingest`) decides whether each record keeps its point of view;
this module enforces what must hold for any policy: ids, vectors, and a
consistent supersession chain (writes/supersession.py), under a chain lock.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from sidecar.audit import AuditEntry, WriteOutcome, WriteRoute, audited_write, write_entry
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.embed import Embedder, EmbeddingUnavailable
from sidecar.embed.indexed import indexed_text
from sidecar.errors import ErasureRequestsUnavailable, PolicyUnavailable
from sidecar.errors import WriteRefused as WriteRefused
from sidecar.policy.engine import PolicyEngine
from sidecar.record import MemoryRecord, MemoryWrite, PremiseChange, Provenance, iso
from sidecar.store import Store, StoreUnavailable, Vectors
from sidecar.store.layout import VectorLayout
from sidecar.store.scope import Scope
from sidecar.store.vectors import DENSE
from sidecar.writes.forget_rules import Rules
from sidecar.writes.lineage import Lineage
from sidecar.writes.locks import ChainLocks, LockUnavailable
from sidecar.writes.supersession import (
    Chain,
    Version,
    chain_of,
    of_chain,
    plan,
    possibly_left_open,
    predecessor_lock_key,
    versions_of,
)

log = logging.getLogger(__name__)

# Bounds one chain lookup; more open versions than this means something else is wrong.
_MAX_OPEN_VERSIONS = 16
# Ids per successor lookup (one `supersedes` match-any condition) and records per page.
_LOOKUP_CHUNK = 1000
# Records per write request, through every write path.
MAX_BATCH = 1000
# Where the ids writers choose live (see new_record_id).
_CHOSEN_IDS = uuid.UUID("3d3c1a52-8f0b-4f7e-9a55-2b8e6c1d7f40")
# What a chain sets on a keyed version (writes/supersession.py).
_CHAIN_FIELDS = ("supersedes", "superseded_by", "invalid_at")


@dataclass
class Prepared:
    payload: dict[str, Any]
    # The writer's own vectors by name ({"": its embedding} through the native API), or
    # None until the embedder makes one (`_embedded`; the whose collection only).
    vectors: Vectors | None


@dataclass(frozen=True)
class _Snapshot:
    """The stored versions a batch is placed among, read once under its locks."""

    open_versions: dict[Chain, list[Version]]
    around: list[Version]
    named: dict[str, Version]
    successors: list[Version]


def _stamp(bodies: list[MemoryWrite], payloads: list[dict[str, Any]]) -> set[str]:
    """Record the commit time; the ids given no valid_at, which start then too.

    Stamped under the locks, so concurrent updates of one belief line up in lock order
    instead of one being refused for starting before the other."""
    committed = iso(datetime.now(UTC))
    undated = set()
    for body, payload in zip(bodies, payloads, strict=True):
        payload["recorded_at"] = committed
        if body.valid_at is None:
            payload["valid_at"] = committed
            undated.add(payload["id"])
    return undated


class Writer:
    def __init__(
        self,
        store: Store,
        policy: PolicyEngine,
        embedder: Embedder,
        locks: ChainLocks,
        audit: AuditLog | None = None,
        rules: Rules | None = None,
    ) -> None:
        self.store = store
        self.policy = policy
        self.embedder = embedder
        self.locks = locks
        self.audit = audit
        self.lineage = Lineage(store, locks)
        # Standing forget rules (writes/forget_rules.py), in front of every write.
        self.rules = rules

    async def write(
        self,
        bodies: list[MemoryWrite],
        writer: Identity,
        now: datetime,
        route: WriteRoute = "memories",
        *,
        chosen: Sequence[UUID | None] | None = None,
    ) -> list[MemoryRecord]:
        """Store every record of the batch, or none (WriteRefused, with every reason).

        Every write and every refusal is audited: who wrote, which records and whose
        they are, stored or refused and why, under which policy revision; never the
        claim itself."""
        attempt = _Attempt([b.model_dump(mode="json", exclude={"id", "vector"}) for b in bodies])
        try:
            stored = await self._write(bodies, writer, now, attempt, chosen)
        except WriteRefused as refused:
            attempt.refused(refused.problems)
            raise
        except (
            PolicyUnavailable,
            LockUnavailable,
            StoreUnavailable,
            EmbeddingUnavailable,
            ErasureRequestsUnavailable,  # the forget rules could not be read: nothing stored
        ) as exc:
            attempt.failed(exc.code)
            raise
        finally:
            if self.audit is not None:
                self.audit.record(attempt.entry(writer, route))
        return stored

    async def _write(
        self,
        bodies: list[MemoryWrite],
        writer: Identity,
        now: datetime,
        attempt: _Attempt,
        chosen: Sequence[UUID | None] | None = None,
    ) -> list[MemoryRecord]:
        prepared = self._checked(bodies, writer, now, attempt, chosen)
        payloads = [p.payload for p in prepared]
        if self.rules is not None:
            # Before the write policy and the embedder: a masked record is decided,
            # embedded and indexed as masked, so no vector or term carries the value.
            supplied = [p.vectors is not None for p in prepared]
            attempt.reasons |= await self.rules.enforce(writer, payloads, supplied)
        blind = await self._decided(payloads, writer, attempt)
        # Embedded once the policy has let the batch through, before any lock is taken
        # (a remote embedder may take its whole timeout): a failure stores nothing.
        vectors = await self._embedded(prepared)
        chains = {chain for p in payloads if (chain := chain_of(p)) is not None}
        named = [p["supersedes"] for p in payloads if chain_of(p) is None and p.get("supersedes")]
        # New ids are locked too: two writers choosing one id must not both find it free.
        fresh_ids = [f"id\x00{writer.tenant}\x00{p['id']}" for p in payloads]
        keys = [c.lock_key() for c in chains] + [predecessor_lock_key(n) for n in named]
        async with self.locks.hold(keys + fresh_ids) as held:
            undated = _stamp(bodies, payloads)
            await self._refuse_taken_ids(payloads, writer.tenant)
            new = versions_of(payloads)
            snapshot = await self._snapshot(writer.tenant, new, chains, named)
            linked = plan(
                new,
                snapshot.open_versions,
                snapshot.named,
                undated=undated,
                successors=snapshot.successors,
                around=snapshot.around,
                blind=blind,
            )
            _refuse_if(linked.problems, payloads)
            await held.confirm()
            await self._commit(writer.tenant, payloads, vectors, linked.updates)
        attempt.outcome = "stored"
        await self._mark_derivations(writer.tenant, linked.updates, now)
        return [_as_told(p, p["id"] in blind) for p in payloads]

    async def _mark_derivations(
        self, tenant: str, updates: list[tuple[str, dict[str, Any]]], now: datetime
    ) -> None:
        """Records derived from a version this write superseded are stale now
        (writes/lineage.py). After the write, outside its locks: a failure here leaves
        the write stored, and is logged, not answered as a failed write."""
        closed: dict[str, PremiseChange] = {
            record_id: "superseded" for record_id, f in updates if f.get("superseded_by")
        }
        if not closed:
            return
        try:
            await self.lineage.propagate(tenant, closed, now)
        except (LockUnavailable, StoreUnavailable):
            log.exception("derivations of %d superseded versions not marked stale", len(closed))

    def _checked(
        self,
        bodies: list[MemoryWrite],
        writer: Identity,
        now: datetime,
        attempt: _Attempt,
        chosen: Sequence[UUID | None] | None = None,
    ) -> list[Prepared]:
        """Each body prepared (tenant, writer, id, embedding), or the batch refused.

        `chosen`: for a new version of a record the writer named by an id it chose
        (writes/versions.py), that id, per body; the body's own id is then unset and
        the new version gets a fresh one. Otherwise a body's id is the chosen id."""
        _refuse_if(_body_problems(bodies, writer, now), [b.model_dump(mode="json") for b in bodies])
        ids = list(chosen) if chosen is not None else [body.id for body in bodies]
        prepared = [
            self._prepare(body, writer, now, chosen_id)
            for body, chosen_id in zip(bodies, ids, strict=True)
        ]
        attempt.records = [p.payload for p in prepared]
        _refuse_if(_prepared_problems(prepared, self.store.vectors), attempt.records)
        return prepared

    async def _decided(
        self, payloads: list[dict[str, Any]], writer: Identity, attempt: _Attempt
    ) -> set[str]:
        """The write policy's word on the whole batch (refused with every reason), and
        the ids the writer may not read: never shown to it, nor let it name a version."""
        premises = await self._premises(payloads, writer.tenant)
        decisions, answer = await self.policy.ingest(writer, payloads, premises)
        attempt.revision = answer.revision
        attempt.opa_decision_ids = [answer.decision_id] if answer.decision_id else []
        _refuse_if(
            [
                (i, reason)
                for i, p in enumerate(payloads)
                for reason in sorted(decisions[p["id"]].reasons)
                if not decisions[p["id"]].allow
            ],
            payloads,
        )
        return {p["id"] for p in payloads if not decisions[p["id"]].readable}

    async def _snapshot(
        self, tenant: str, new: list[Version], chains: set[Chain], named: list[str]
    ) -> _Snapshot:
        """What `plan` needs of the store, read under the chain locks."""
        open_versions = {c: await open_versions_of(self.store, c) for c in chains}
        around = await self._around(new, open_versions)
        stored = await self.store.get(tenant, [uuid.UUID(n) for n in named])
        named_records = {r.id: Version.of(r.payload) for r in stored}
        suspects = possibly_left_open(open_versions, named_records, around)
        successors = await successors_of(self.store, tenant, suspects)
        return _Snapshot(open_versions, around, named_records, successors)

    async def _embedded(self, prepared: list[Prepared]) -> list[Vectors]:
        """Each record's vectors: the writer's own, else the embedder's dense one, of
        what is indexed for the record (embed/indexed.py), all of a batch in one call
        (a stack collection's records came with theirs: `_prepared_problems`)."""
        missing = [p for p in prepared if p.vectors is None]
        made: list[list[float]] = []
        if missing:
            texts = [indexed_text(p.payload) for p in missing]
            made = await self.embedder.embed_batch(texts, "document")
        supplied = iter(made)
        return [p.vectors if p.vectors is not None else {DENSE: next(supplied)} for p in prepared]

    async def _commit(
        self,
        tenant: str,
        payloads: list[dict[str, Any]],
        vectors: list[Vectors],
        updates: list[tuple[str, dict[str, Any]]],
    ) -> None:
        # New versions first: if we stop half-way, each names its predecessor,
        # which still looks current until `plan` is next given both.
        await self.store.put(tenant, list(zip(payloads, vectors, strict=True)))
        for record_id, fields in updates:
            await self.store.update(tenant, uuid.UUID(record_id), fields)

    async def _around(
        self, new: list[Version], open_versions: dict[Chain, list[Version]]
    ) -> list[Version]:
        """The stored versions around each place a version is put: the start of each new
        version that starts before its chain's head, and of each open version left
        behind a later one. Around each: the versions that applied then, the version
        after each, and the chain's first; for a version left behind, also the one it
        names, whose successors show what was written after it (docs/design.md §4)."""
        starts: dict[Chain, set[datetime]] = defaultdict(set)
        named: dict[Chain, set[str]] = defaultdict(set)
        for version in new:
            chain = version.chain
            heads = open_versions.get(chain, []) if chain is not None else []
            if chain is not None and any(h.valid_at > version.valid_at for h in heads):
                starts[chain].add(version.valid_at)
        for chain, heads in open_versions.items():
            # All but the latest are left behind; which is latest is `plan`'s to say.
            for left in heads if len(heads) > 1 else ():
                starts[chain].add(left.valid_at)
                if left.supersedes:
                    named[chain].add(left.supersedes)
        found: dict[str, Version] = {}
        for chain, instants in starts.items():
            nearby = (await self.store.find(chain.firsts(), _MAX_OPEN_VERSIONS)).records
            for start in sorted(instants):
                then = await self.store.find(chain.applying_at(start), _MAX_OPEN_VERSIONS)
                following = [UUID(n) for r in then.records if (n := r.superseded_by)]
                nearby += then.records + await self.store.get(chain.tenant, following)
            if named[chain]:
                names = [UUID(n) for n in sorted(named[chain])]
                nearby += await self.store.get(chain.tenant, names)
            ours = of_chain(chain, (r.payload for r in nearby))
            found |= {str(p["id"]): Version.of(p) for p in ours}
        return list(found.values())

    async def _premises(self, payloads: list[dict[str, Any]], tenant: str) -> list[dict[str, Any]]:
        ids = {
            source
            for p in payloads
            for source in (p.get("provenance") or {}).get("derived_from", [])
        }
        if not ids:
            return []
        found = await self.store.get(tenant, [uuid.UUID(i) for i in sorted(ids)])
        return [r.payload for r in found]

    def _prepare(
        self, body: MemoryWrite, writer: Identity, now: datetime, chosen: UUID | None
    ) -> Prepared:
        provenance = body.provenance or Provenance()
        record = MemoryRecord.model_validate(
            {
                **body.model_dump(exclude={"vector", "provenance"}),
                "id": new_record_id(writer, body.id),
                "tenant": writer.tenant,
                "recorded_at": now,
                "valid_at": body.valid_at or now,
                "provenance": provenance.model_copy(
                    update={"writer": writer.id, "chosen_id": chosen}
                ),
            }
        )
        return Prepared(record.payload(), _given(body))

    async def _refuse_taken_ids(self, payloads: list[dict[str, Any]], tenant: str) -> None:
        taken = await self.store.get(tenant, [uuid.UUID(p["id"]) for p in payloads])
        taken_ids = {r.id for r in taken}
        _refuse_if(
            [(i, "id_exists") for i, p in enumerate(payloads) if p["id"] in taken_ids], payloads
        )


@dataclass
class _Attempt:
    """What one write request did, for its audit entry (built whatever happens)."""

    records: list[dict[str, Any]]
    revision: str | None = None
    opa_decision_ids: list[str] = field(default_factory=list)
    outcome: WriteOutcome = "refused"
    reasons: dict[int, list[str]] = field(default_factory=dict)
    error: str | None = None

    def refused(self, problems: list[dict[str, Any]]) -> None:
        self.reasons = {p["index"]: list(p["reasons"]) for p in problems}

    def failed(self, code: str) -> None:
        self.error = code
        self.reasons = {i: [code] for i in range(len(self.records))}

    def entry(self, writer: Identity, route: WriteRoute) -> AuditEntry:
        written = [
            audited_write(i, record, self.outcome, self.reasons.get(i, ()))
            for i, record in enumerate(self.records)
        ]
        return write_entry(
            uuid.uuid4(),
            (writer.id, writer.tenant),
            route,
            self.revision,
            written,
            error=self.error,
            opa_decision_ids=self.opa_decision_ids,
        )


def new_record_id(writer: Identity, chosen: UUID | None) -> UUID:
    """A new record's id. An id the writer chose names the record in the writer's own
    namespace: the stored id is derived from it, the writer and the tenant, so a
    writer retrying a write meets its own record (`id_exists`), and nobody's write
    can meet, or learn of, a record someone else stored."""
    if chosen is None:
        return uuid.uuid4()
    return uuid.uuid5(_CHOSEN_IDS, f"{writer.tenant}\x00{writer.id}\x00{chosen}")


def _as_told(payload: dict[str, Any], blind: bool) -> MemoryRecord:
    """A stored record as its writer is told it: a writer that may not read the record
    (a relay) is not told which versions it sits beside, or when the next begins."""
    if blind and chain_of(payload) is not None:
        payload = {k: v for k, v in payload.items() if k not in _CHAIN_FIELDS}
    return MemoryRecord.model_validate(payload)


async def open_versions_of(store: Store, chain: Chain) -> list[Version]:
    page = await store.find(chain.open_versions(), _MAX_OPEN_VERSIONS)
    return versions_of(of_chain(chain, (r.payload for r in page.records)))


async def successors_of(store: Store, tenant: str, ids: list[str]) -> list[Version]:
    """Stored records whose `supersedes` names one of `ids` (no store call for none)."""
    found: list[Version] = []
    for start in range(0, len(ids), _LOOKUP_CHUNK):
        scope = Scope(tenant=tenant, supersedes_any_of=tuple(ids[start : start + _LOOKUP_CHUNK]))
        found += await find_all(store, scope)
    return found


async def find_all(store: Store, scope: Scope) -> list[Version]:
    records: list[Version] = []
    offset: str | None = None
    while True:
        page = await store.find(scope, _LOOKUP_CHUNK, offset=offset)
        records += versions_of(r.payload for r in page.records)
        if (offset := page.next_offset) is None:
            return records


def _body_problems(
    bodies: list[MemoryWrite], writer: Identity, now: datetime
) -> list[tuple[int, str]]:
    problems: list[tuple[int, str]] = []
    for i, body in enumerate(bodies):
        if body.tenant is not None and body.tenant != writer.tenant:
            problems.append((i, "tenant_not_writers"))
        if body.superseded_by is not None:
            problems.append((i, "superseded_by_is_set_by_the_sidecar"))
        if body.provenance is not None and body.provenance.chosen_id is not None:
            problems.append((i, "chosen_id_is_set_by_the_sidecar"))
        if body.premise_changes is not None:
            problems.append((i, "premise_changes_are_set_by_the_sidecar"))
        if body.invalid_at is not None and body.proposition and body.proposition.key:
            # A keyed version ends when its holder's next version supersedes it.
            problems.append((i, "invalid_at_is_set_by_supersession"))
        elif body.valid_at is None and body.invalid_at is not None and body.invalid_at < now:
            # valid_at defaults to now, which would put the end before the start.
            problems.append((i, "invalid_at_before_valid_at"))
    return problems


def _given(body: MemoryWrite) -> Vectors | None:
    """The vectors the writer sent: named, or its embedding as the unnamed one."""
    if body.named_vectors:
        return dict(body.named_vectors)
    return None if body.vector is None else {DENSE: body.vector}


def _prepared_problems(prepared: list[Prepared], layout: VectorLayout) -> list[tuple[int, str]]:
    problems: list[tuple[int, str]] = []
    seen: set[str] = set()
    for i, p in enumerate(prepared):
        if p.vectors is not None:
            problems += [(i, reason) for reason in layout.problems(p.vectors)]
        if p.vectors is None and not layout.embeds:
            # A stack collection holds the stack's own vectors; whose makes none.
            problems.append((i, "vector_required"))
        if p.payload["id"] in seen:
            problems.append((i, "duplicate_id_in_batch"))
        seen.add(p.payload["id"])
    return problems


def _refuse_if(problems: list[tuple[int, str]], payloads: list[dict[str, Any]]) -> None:
    """Raise with every reason, grouped by record, if there is any."""
    if not problems:
        return
    by_index: dict[int, list[str]] = {}
    for index, reason in problems:
        by_index.setdefault(index, []).append(reason)
    raise WriteRefused(
        [
            {"index": i, "id": payloads[i].get("id"), "reasons": reasons}
            for i, reasons in sorted(by_index.items())
        ]
    )
