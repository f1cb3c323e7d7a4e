"""Lineage: a record derived from a premise that changed is marked, and never served
as current again (docs/design.md §4, "Stale propagation").

A derived record names its premises in `provenance.derived_from`. When a premise is
superseded (a new version of its chain), erased, withdrawn (its valid time ended
without a successor) or narrowed (re-issued for fewer readers), every record derived
from it gets a `premise_changes` entry: which premise, what became of it, and when.
Its status is then `stale` (record.py), and the disclosure policy notes why
(rego/whose/lib/lineage/lineage.rego) or withholds it (config.stale.withhold). A record
derived from a marked one is marked in turn (`stale`), at most MAX_DEPTH levels and
MAX_MARKED records deep.

A mark goes to the records that could see the premise change: a derived record may
reach no one its premises could not (the write policy's `derived_audience_wider`),
and every version of a chain is told to the same people, so the readers of a
derived record could see the premise, its successor and its end.

`marked` is the pure part: what a record's marks become. Marking takes one lock per
tenant (marks are rare; a read-modify-write of the list must not lose one), after
the change it reports.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from uuid import UUID

from sidecar.record import Payload, PremiseChange, Stored, iso
from sidecar.store import Store
from sidecar.store.scope import AnyOf, Scope
from sidecar.writes.locks import ChainLocks
from sidecar.writes.supersession import chain_of, predecessor_lock_key

MAX_DEPTH = 8
MAX_MARKED = 1000
# The bound of the record field (record.py); the newest marks are kept.
_MAX_MARKS = 1000
# Ids per lookup (one match-any condition) and records per page.
_CHUNK = 1000


def lineage_lock_key(tenant: str) -> str:
    return f"lineage\x00{tenant}"


def chain_lock_key(record: Payload) -> str:
    """The lock that guards a record's links and end: its chain's, or for a keyless
    record the one a successor naming it takes (writes/supersession.py)."""
    chain = chain_of(record)
    return chain.lock_key() if chain is not None else predecessor_lock_key(str(record["id"]))


def marked(
    record: Payload, changes: Mapping[str, PremiseChange], at: datetime
) -> list[Payload] | None:
    """The record's `premise_changes` with each change of one of its premises added
    (premise id -> what became of it), or None when that adds nothing."""
    premises = {str(i) for i in (record.get("provenance") or {}).get("derived_from", [])}
    existing = [c for c in record.get("premise_changes") or () if isinstance(c, dict)]
    known = {(str(c.get("premise")), c.get("change")) for c in existing}
    new = [
        {"premise": premise, "change": change, "recorded_at": iso(at)}
        for premise, change in sorted(changes.items())
        if premise in premises and (premise, change) not in known
    ]
    if not new:
        return None
    return (existing + new)[-_MAX_MARKS:]


async def derived_from(
    store: Store, tenant: str, premises: Collection[str], limit: int = MAX_MARKED
) -> list[Stored]:
    """Stored records of the tenant that name one of `premises` as a premise (at most
    `limit`), any version."""
    found: dict[str, Stored] = {}
    ids = sorted(premises)
    for start in range(0, len(ids), _CHUNK):
        chunk = tuple(ids[start : start + _CHUNK])
        scope = Scope(tenant=tenant, extra=(AnyOf("provenance.derived_from", chunk),))
        offset: str | None = None
        while len(found) < limit:
            page = await store.find(scope, min(_CHUNK, limit - len(found)), offset=offset)
            found |= {r.id: r for r in page.records}
            if (offset := page.next_offset) is None:
                break
    return list(found.values())[:limit]


class Lineage:
    def __init__(self, store: Store, locks: ChainLocks) -> None:
        self.store = store
        self.locks = locks

    async def propagate(
        self,
        tenant: str,
        changes: Mapping[str, PremiseChange],
        at: datetime,
        *,
        withdraw: Collection[str] = (),
        skip: Collection[str] = (),
    ) -> tuple[list[str], list[str]]:
        """Mark every record derived from the changed premises, then the records
        derived from those (as `stale`), level by level within the bounds.

        `withdraw`: premises whose derived records also end their valid time at `at`
        (an erasure whose policy chose `withdraw`); `skip`: records not to touch (being
        erased). Returns the ids marked and the ids withdrawn."""
        done: set[str] = set(skip)
        flagged: list[str] = []
        withdrawn: list[str] = []
        level: dict[str, PremiseChange] = dict(changes)
        ending = set(withdraw)
        for _ in range(MAX_DEPTH):
            room = MAX_MARKED - len(flagged) - len(withdrawn)
            if not level or room <= 0:
                break
            derived = [
                r for r in await derived_from(self.store, tenant, level, room) if r.id not in done
            ]
            if not derived:
                break
            ends = [r for r in derived if _derives_from_any(r.payload, ending)]
            keys = [lineage_lock_key(tenant)] + [chain_lock_key(r.payload) for r in ends]
            async with self.locks.hold(keys) as held:
                # Read again under the locks: a mark added meanwhile must not be lost.
                fresh = await self.store.get(tenant, [UUID(r.id) for r in derived])
                updates: list[tuple[str, Payload]] = []
                for record in fresh:
                    fields: Payload = {}
                    marks = marked(record.payload, level, at)
                    if marks is not None:
                        fields["premise_changes"] = marks
                    if _derives_from_any(record.payload, ending) and not record.ended_by(at):
                        fields["invalid_at"] = iso(max(at, record.valid_at))
                    if fields:
                        updates.append((record.id, fields))
                await held.confirm()
                for record_id, fields in updates:
                    await self.store.update(tenant, UUID(record_id), fields)
            done |= {r.id for r in derived}
            next_level: dict[str, PremiseChange] = {}
            for record_id, fields in updates:
                if "invalid_at" in fields:
                    withdrawn.append(record_id)
                    next_level[record_id] = "withdrawn"
                else:
                    flagged.append(record_id)
                    next_level[record_id] = "stale"
            level, ending = next_level, set()
        return flagged, withdrawn


def _derives_from_any(record: Payload, premises: Collection[str]) -> bool:
    if not premises:
        return False
    named = (record.get("provenance") or {}).get("derived_from", [])
    return any(str(p) in premises for p in named)
