"""Retention: records erased once they outlive the longest time the policy lets them be
kept (docs/design.md §6, "Retention").

The `whose.retention` policy names maximum ages, per tenant, modality, source kind,
source or scope, and legal holds keep records whatever their age. A sweep (`whose
sweep`, and the server every WHOSE_RETENTION_INTERVAL_S) asks the policy for the
shortest maximum age first: no rule, no sweep. Then, tenant by tenant, it reads the
records stored before now minus that age (an index lookup on `recorded_at`), a page
at a time, has the policy decide each, and erases the expired ones through the
eraser (writes/eraser.py: chains closed over them, derivations flagged, withdrawn or
erased as the erasure config says, one audit entry per page, route `retention`).

A sweep is bounded: at most `max_erased` records erased and `max_examined` examined
per run. Where a tenant's scan stopped is kept for the next run, so held and
unexpired records are not read again and again from the start; a scan that reaches
the end starts over next time. With several replicas, one sweeps at a time (a lock).
The clock is injected: tests (and `whose sweep --now`) sweep as of any instant.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sidecar.audit import AuditedErasure
from sidecar.auth.identity import Identity
from sidecar.errors import Unavailable
from sidecar.policy.engine import PolicyEngine
from sidecar.store import Store
from sidecar.store.scope import NotAfter, Scope
from sidecar.writes.eraser import Eraser, Erasing
from sidecar.writes.locks import ChainLocks, LockUnavailable

log = logging.getLogger(__name__)

# Who erases what expired, in the audit log and the erasure policy's input.
SWEEPER = "whose.retention"
# Records one page reads and one policy call decides.
_PAGE = 250
# Tenants one sweep walks.
_MAX_TENANTS = 10_000


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class SweepReport:
    """What one sweep did."""

    now: datetime
    # None: no retention rule, nothing swept.
    horizon_days: float | None = None
    tenants: int = 0
    examined: int = 0
    expired: int = 0
    erased: int = 0
    held: int = 0
    # A bound stopped the sweep before every tenant was read to its end.
    stopped_by_bound: bool = False
    erased_ids: list[str] = field(default_factory=list)


class Sweeper:
    def __init__(
        self,
        store: Store,
        policy: PolicyEngine,
        eraser: Eraser,
        locks: ChainLocks,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.store = store
        self.policy = policy
        self.eraser = eraser
        self.locks = locks
        self.clock = clock
        # Where each tenant's scan stopped (a point id), for the next run.
        self._cursors: dict[str, str | None] = {}

    async def sweep(
        self,
        *,
        max_erased: int,
        max_examined: int,
        tenants: Sequence[str] | None = None,
        dry_run: bool = False,
    ) -> SweepReport:
        """One bounded sweep (see the module's docstring); `dry_run` decides and counts
        without erasing."""
        now = self.clock()
        report = SweepReport(now=now)
        report.horizon_days = await self.policy.retention_horizon_days()
        if report.horizon_days is None:
            return report
        cutoff = now - timedelta(days=report.horizon_days)
        async with self.locks.hold(["retention-sweep"]):
            names = list(tenants) if tenants is not None else await self.store.tenants(_MAX_TENANTS)
            report.tenants = len(names)
            for tenant in names:
                await self._tenant(tenant, cutoff, report, max_erased, max_examined, dry_run)
                if report.stopped_by_bound:
                    break
        return report

    async def _tenant(
        self,
        tenant: str,
        cutoff: datetime,
        report: SweepReport,
        max_erased: int,
        max_examined: int,
        dry_run: bool,
    ) -> None:
        scope = Scope(tenant=tenant, extra=(NotAfter("recorded_at", cutoff),))
        cursor = self._cursors.get(tenant)
        actor = Identity(SWEEPER, tenant)
        while True:
            room = min(_PAGE, max_examined - report.examined, max_erased - report.erased)
            if room <= 0:
                report.stopped_by_bound = True
                self._cursors[tenant] = cursor
                return
            page = await self.store.find(scope, room, offset=cursor)
            report.examined += len(page.records)
            decisions, answer = await self.policy.retention(
                [r.payload for r in page.records], report.now
            )
            expired = [r for r in page.records if decisions[r.id].expire]
            report.held += sum(decisions[r.id].held for r in page.records)
            report.expired += len(expired)
            if expired and not dry_run:
                erasing = [Erasing(r, decisions[r.id].derived, "retention") for r in expired]
                done = await self.eraser.apply(
                    actor,
                    erasing,
                    "retention",
                    AuditedErasure(kind="retention"),
                    revision=answer.revision,
                    opa_decision_ids=[answer.decision_id] if answer.decision_id else [],
                )
                report.erased += len(done.erased) + len(done.cascaded)
                report.erased_ids += done.erased + done.cascaded
            cursor = page.next_offset
            if cursor is None:
                # The end: next time, from the start again.
                self._cursors.pop(tenant, None)
                return


async def every(
    interval_s: float,
    job: Callable[[], Awaitable[object]],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Run `job` every `interval_s` for as long as the task runs; a run that fails (a
    dependency down, another replica sweeping) is logged and the next one tried."""
    while True:
        await sleep(interval_s)
        try:
            await job()
        except LockUnavailable:
            log.info("retention: another sweep is running; this one skipped")
        except Unavailable:
            log.exception("retention: the sweep failed; the next one will try again")
        except Exception:
            # A bug must not stop every later sweep: logged, the next one tried.
            log.exception("retention: the sweep failed unexpectedly")
