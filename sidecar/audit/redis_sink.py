"""The audit log in a Redis Stream, shared by replicas.

A stream cannot be indexed by tenant, asker or record: a query reads it newest
first within its `since`/`until` range, filters as it reads (tenant first), and
stops at `limit` matches or after `scan` entries of all tenants, so its cost is
bounded however long the stream is. Older entries are reached by narrowing `until`.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import redis.asyncio as aioredis
from pydantic import ValidationError

from sidecar.audit.model import AuditEntry, AuditQuery

log = logging.getLogger(__name__)

# Stream entries fetched per XREVRANGE round trip while a query scans.
_PAGE = 500
# Time bounds are widened by this much before the exact filter applies: a stream id
# is Redis's clock when the entry was appended, not the sidecar's when it was decided.
_SLACK_S = 60.0
# The largest sequence part of a stream id ("<ms>-<seq>").
_MAX_SEQ = 2**64 - 1


class RedisSink:
    """A Redis Stream, trimmed to about `maxlen` entries (approximate trim is O(1))."""

    def __init__(self, client: aioredis.Redis, stream: str, maxlen: int) -> None:
        self.client = client
        self.stream = stream
        self.maxlen = maxlen

    async def ping(self) -> None:
        await self.client.ping()

    async def append(self, entries: list[AuditEntry]) -> None:
        async with self.client.pipeline(transaction=False) as pipe:
            for entry in entries:
                pipe.xadd(
                    self.stream,
                    {"entry": entry.model_dump_json()},
                    maxlen=self.maxlen,
                    approximate=True,
                )
            await pipe.execute()

    async def newest_first(self, query: AuditQuery, scan: int) -> list[AuditEntry]:
        # Not in time order: a replay after an outage appends old entries at its
        # own time. So no stop at `since`; the stream range bounds the scan instead.
        selection = _Selection(query, scan)
        high, low = _stream_range(query)
        while selection.left > 0:
            count = min(_PAGE, selection.left)
            rows = await self.client.xrevrange(self.stream, max=high, min=low, count=count) or []
            for _, fields in rows:
                if not selection.offer(fields.get(b"entry") if fields else None):
                    return selection.result()
            below = _id_before(rows[-1][0]) if len(rows) == count else None
            if below is None:
                break
            high = below
        return selection.result()

    async def close(self) -> None:
        """Nothing to close: the client belongs to the app (locks and cache share it)."""


class _Selection:
    """One query's pass over the stream, newest first: keeps what matches and says
    when to stop (the limit reached, or `scan` entries read)."""

    def __init__(self, query: AuditQuery, scan: int) -> None:
        self.query = query
        self.left = scan
        self.found: list[AuditEntry] = []
        self.unreadable = 0

    def offer(self, raw: bytes | str | None) -> bool:
        """Consider the next older entry; False once the scan should stop."""
        self.left -= 1
        fields = _json_object(raw)
        if fields is None:
            self.unreadable += 1
        elif fields.get("tenant") == self.query.tenant:
            # Tenant first: another tenant's entry costs a JSON parse, never a model.
            self._consider(fields)
        return self.left > 0 and len(self.found) < self.query.limit

    def result(self) -> list[AuditEntry]:
        if self.unreadable:
            # Skipped, not fatal: one bad entry must not hide every tenant's log.
            log.warning("audit log: %d unreadable entries skipped", self.unreadable)
        return self.found

    def _consider(self, fields: dict[str, Any]) -> None:
        try:
            entry = AuditEntry.model_validate(fields)
        except ValidationError:
            self.unreadable += 1
            return
        if self.query.matches(entry):
            self.found.append(entry)


def _json_object(raw: bytes | str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        fields = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return fields if isinstance(fields, dict) else None


def _stream_range(query: AuditQuery) -> tuple[str, str]:
    """XREVRANGE's max and min for the query's time range.

    A stream id starts with Redis's clock (ms) when the entry was appended: never
    before the entry's own time, clock skew aside, so `since` less the slack is a
    safe lower bound. An entry replayed after an outage carries the replay's time,
    so `until` finds it only if the replay came before `until` plus the slack.
    Times before 1970 clamp to the start of the stream: ids are never negative.
    """
    high = _ms(query.until.timestamp() + _SLACK_S) if query.until else "+"
    low = _ms(query.since.timestamp() - _SLACK_S) if query.since else "-"
    return high, low


def _ms(seconds: float) -> str:
    return str(max(0, int(seconds * 1000)))


def _id_before(stream_id: bytes | str | None) -> str | None:
    """The greatest stream id below this one; None below the first possible id.

    (XREVRANGE's exclusive "(" bound would do it, but needs Redis 6.2.)"""
    if stream_id is None:
        return None
    text = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
    ms_text, _, seq_text = text.partition("-")
    ms, seq = int(ms_text), int(seq_text or 0)
    if seq > 0:
        return f"{ms}-{seq - 1}"
    if ms > 0:
        return f"{ms - 1}-{_MAX_SEQ}"
    return None
