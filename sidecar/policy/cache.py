"""The decision cache: OPA's answers, keyed by everything that could change them.

A key names the policy revision (the bundle revisions OPA reported), the asker
(id, tenant, groups, roles), the audience, the purpose, the as-of instant, a
time bucket, and the record: its id and a digest of exactly the attributes the
policy reads, which changes with every version of the record — or, when the policy
declares what it reads, the record's shape (policy/shape.py), which many records
share. A new policy or directory is a new bundle revision, so a new key: nothing
decided under the old one can be served after OPA answers under the new one.

Time: a decision may depend on `now` (validity, authority of a world-state
record). Within one bucket it is reused only for records with no time boundary
(valid_at, invalid_at, evidence times) inside that bucket, so the
comparisons the policy makes cannot flip while the entry lives. Policies must
read the time from `input.now`, never `time.now_ns()` (a test checks this).

Redis when configured (shared by replicas); otherwise a bounded in-process map.
Either way a cache failure is a miss, never an error: OPA is asked instead.
"""

from __future__ import annotations

import hashlib
import time
from datetime import datetime
from typing import Any, Protocol

import orjson
import redis.asyncio as aioredis
from cachetools import TTLCache
from redis.exceptions import RedisError

from sidecar.policy.contract import DisclosureQuestion, policy_view
from sidecar.policy.shape import Instants
from sidecar.record import iso

_KEY_PREFIX = "whose:decision:"


class CacheUnavailable(Exception):
    pass


class DecisionCache(Protocol):
    async def get_many(self, keys: list[str]) -> list[bytes | None]: ...

    async def set_many(self, entries: dict[str, bytes], ttl_s: float) -> None: ...


class LocalCache:
    """Bounded, expiring, one process. Right for the embedded default."""

    def __init__(self, max_entries: int, ttl_s: float) -> None:
        # max_entries 0 turns caching off.
        self._entries: TTLCache[str, bytes] = TTLCache(maxsize=max(max_entries, 1), ttl=ttl_s)
        self._enabled = max_entries > 0

    async def get_many(self, keys: list[str]) -> list[bytes | None]:
        return [self._entries.get(key) for key in keys]

    async def set_many(self, entries: dict[str, bytes], ttl_s: float) -> None:
        if self._enabled:
            self._entries.update(entries)


class RedisCache:
    """One MGET per batch, one pipelined SET round trip for the misses.

    After a failure Redis is left alone for `retry_after_s`, so an outage costs
    one failed round trip per interval rather than one per request.
    """

    def __init__(self, client: aioredis.Redis, retry_after_s: float = 1.0) -> None:
        self.client = client
        self.retry_after_s = retry_after_s
        self._down_until = 0.0

    async def get_many(self, keys: list[str]) -> list[bytes | None]:
        self._check_breaker()
        try:
            values = await self.client.mget(keys)
        except (RedisError, OSError) as exc:
            self._trip()
            raise CacheUnavailable(str(exc)) from exc
        # The client does not decode responses: values are bytes or None.
        return [v if isinstance(v, bytes) else None for v in values]

    async def set_many(self, entries: dict[str, bytes], ttl_s: float) -> None:
        self._check_breaker()
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for key, value in entries.items():
                    pipe.set(key, value, px=max(1, int(ttl_s * 1000)))
                await pipe.execute()
        except (RedisError, OSError) as exc:
            self._trip()
            raise CacheUnavailable(str(exc)) from exc

    def _check_breaker(self) -> None:
        if time.monotonic() < self._down_until:
            raise CacheUnavailable("redis marked down")

    def _trip(self) -> None:
        self._down_until = time.monotonic() + self.retry_after_s


class Keys:
    """Cache keys for one question under one policy revision."""

    def __init__(self, question: DisclosureQuestion, revision: str, bucket_s: float) -> None:
        self.bucket_s = bucket_s
        now = question.now.timestamp()
        self.bucket_start = now - now % bucket_s
        # Everything the policy sees of the asker (id, tenant, groups, roles, scopes).
        asker = {
            k: sorted(v) if isinstance(v, list) else v
            for k, v in question.asker.policy_view().items()
        }
        parts = {
            "revision": revision,
            "asker": asker,
            "audience": sorted(set(question.audience)),
            "purpose": question.purpose,
            # An explicit as-of is part of the question; without one it is `now`.
            "as_of": iso(question.as_of) if question.as_of else None,
            "bucket": self.bucket_start,
        }
        self.instants = Instants(
            question.as_of.timestamp() if question.as_of else None,
            self.bucket_start,
            self.bucket_start + bucket_s,
        )
        prefix = hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).digest()
        # Every key of the question starts from this state: copied, not rebuilt.
        self._hashed_prefix = hashlib.sha256(prefix)

    def key(self, record: dict[str, Any]) -> str | None:
        """The record's key, or None when its decision may change within the bucket."""
        return self.key_of_view(policy_view(record))

    def key_of_view(self, view: dict[str, Any]) -> str | None:
        """`key`, from the record's policy view (decisions.policy_view)."""
        if _has_boundary(view, self.bucket_start, self.bucket_start + self.bucket_s):
            return None
        digest = self._hashed_prefix.copy()
        digest.update(orjson.dumps(view, option=orjson.OPT_SORT_KEYS))
        return _KEY_PREFIX + digest.hexdigest()

    def key_of_shape(self, digest: bytes) -> str:
        """The key of a decision shared by every record of one shape (policy/shape.py)."""
        key = self._hashed_prefix.copy()
        # Set apart from record keys: a shape's digest is not a view's serialisation.
        key.update(b"shape:" + digest)
        return _KEY_PREFIX + key.hexdigest()

    @property
    def ttl_s(self) -> float:
        # Entries outlive their bucket only by a little: the bucket is in the key.
        return 2 * self.bucket_s


def _has_boundary(view: dict[str, Any], start: float, end: float) -> bool:
    # recorded_at is left out: it is set when the record is stored, so it is
    # already past whenever a decision about the record is made.
    raw: list[Any] = [view.get("valid_at"), view.get("invalid_at")]
    evidence = view.get("evidence")
    if isinstance(evidence, list):
        raw += [e.get("at") for e in evidence if isinstance(e, dict)]
    for value in raw:
        if value is None:
            continue
        try:
            at = datetime.fromisoformat(value).timestamp()
        except (TypeError, ValueError):
            # A time the policy may read but we cannot: never cache around it.
            return True
        if start <= at <= end:
            return True
    return False
