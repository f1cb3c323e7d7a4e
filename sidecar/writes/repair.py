"""`whose repair`: finish writes that were cut short, for a whole tenant.

A write stores new versions before it closes the ones they replace (writes/writer.py),
so a process that dies in between leaves a stored version naming a predecessor
that still looks current. The next write to that chain closes it; this closes
every such version of a tenant at once, under the same locks writers take.
"""

from __future__ import annotations

import uuid
from typing import Any

from sidecar.store import Store
from sidecar.store.scope import Scope
from sidecar.writes.locks import ChainLocks
from sidecar.writes.supersession import (
    Chain,
    Plan,
    Version,
    chains,
    plan,
    possibly_left_open,
    predecessor_lock_key,
    versions_of,
)
from sidecar.writes.writer import find_all, successors_of


async def repair(store: Store, locks: ChainLocks, tenant: str) -> int:
    """Finish every write of a tenant that was cut short before closing what it replaced.

    Relinks each version whose stored successor it skips (an append or an
    insertion cut short, keyed or keyless), then closes whatever a keyed chain
    still has open twice. Returns the
    number of field updates made. Each chain, and each keyless version, is fixed
    under the lock its writers take, so this is safe to run beside live writers
    that share the same locks.
    """
    records = await find_all(store, Scope(tenant=tenant))
    fixes = 0
    for chain, versions in chains(records).items():
        if _needs_repair(chain, versions):
            fixes += await _repair_chain(store, locks, chain)
    keyless = [r.id for r in records if r.chain is None and r.is_open]
    named = sorted({str(s.supersedes) for s in await successors_of(store, tenant, keyless)})
    for record_id in named:
        fixes += await _repair_keyless(store, locks, tenant, record_id)
    return fixes


def _needs_repair(chain: Chain, versions: list[Version]) -> bool:
    """Whether the whole chain, as read without its lock, has anything to repair."""
    # On copies: planning sets links on the versions it is given.
    return bool(_whole_chain_plan(chain, versions_of(dict(v.payload) for v in versions)).updates)


def _whole_chain_plan(chain: Chain, versions: list[Version]) -> Plan:
    still_open = [v for v in versions if v.is_open]
    return plan([], {chain: still_open}, {}, successors=versions, around=versions)


async def _repair_chain(store: Store, locks: ChainLocks, chain: Chain) -> int:
    async with locks.hold([chain.lock_key()]) as held:
        # Read again under the lock: a writer may have moved on since the scan.
        # A filter matches which minds a nested view's chain holds, not their order.
        versions = [v for v in await find_all(store, chain.versions()) if v.chain == chain]
        linked = _whole_chain_plan(chain, versions)
        await held.confirm()
        return await _apply(store, chain.tenant, linked.updates)


async def _repair_keyless(store: Store, locks: ChainLocks, tenant: str, record_id: str) -> int:
    async with locks.hold([predecessor_lock_key(record_id)]) as held:
        # Read again under the lock: a writer may have moved on since the scan.
        stored = await store.get(tenant, [uuid.UUID(record_id)])
        named = {r.id: Version.of(r.payload) for r in stored}
        successors = await successors_of(store, tenant, possibly_left_open({}, named))
        linked = plan([], {}, named, successors=successors)
        await held.confirm()
        return await _apply(store, tenant, linked.updates)


async def _apply(store: Store, tenant: str, updates: list[tuple[str, dict[str, Any]]]) -> int:
    for record_id, fields in updates:
        await store.update(tenant, uuid.UUID(record_id), fields)
    return len(updates)
