"""What the writer needs of a sink, and how a sink fails."""

from __future__ import annotations

import sqlite3
from typing import Protocol

from redis.exceptions import RedisError

from sidecar.audit.model import AuditEntry, AuditQuery

# Entries per sink write (one Redis pipeline, one SQLite transaction), including
# each piece of a replay.
BATCH = 500
# How many entries (of all tenants) one query may read where a sink has to scan
# (the Redis stream); an indexed sink reads only what it returns.
SCAN = 10_000
# A sink that cannot be reached or read raises one of these: the writer spills or
# drops (and counts) the batch, `GET /v1/audit` answers 503, nothing answers 500.
SINK_ERRORS: tuple[type[Exception], ...] = (RedisError, OSError, sqlite3.Error)


class Sink(Protocol):
    async def ping(self) -> None:
        """Raise one of SINK_ERRORS if the sink cannot take entries now."""
        ...

    async def append(self, entries: list[AuditEntry]) -> None: ...

    async def newest_first(self, query: AuditQuery, scan: int) -> list[AuditEntry]:
        """The entries that match `query`, newest first, at most `query.limit`; a
        sink that scans reads at most `scan` entries of any tenant."""
        ...

    async def close(self) -> None:
        """Release what the sink opened itself (not a client it was given)."""
        ...
