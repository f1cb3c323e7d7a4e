"""The decision cache: OPA's answers, keyed by everything that could change them.

A key names the policy revision (the bundle revisions OPA reported), the asker
(id, tenant, groups, roles), the audience, the purpose, the as-of instant, a
time bucket, the subjects' grants passed with the question (policy/grants.py: those
in force at its `now`, so a grant given, revoked or ended is a new key at once, with
no write at the instant it ends), and the record: its id and a digest of its policy
view, which changes with every version of the record — or, when decisions are
shared, the record's shape (policy/shape.py), which many records share. A new
policy or directory is a new bundle revision, so a new key: nothing decided under
the old one can be served after OPA answers under the new one.

Time: a decision may depend on `now` (validity, authority of a world-state
record). Within one bucket it is reused only for records with no time inside that
bucket (valid_at, invalid_at, evidence times, and every time the policy sets against
the instant asked about, policy/readset.py), so the comparisons the policy makes
cannot flip while the entry lives; except, under a shape's key, the times the shape
holds by their side of `now` (the policy's instants): the key turns when a side does,
so a record written a moment ago is cached like any other. A policy that uses the
instant otherwise (an age: arithmetic on it), or reads the clock itself
(`time.now_ns()`), gets no cache at all (policy/decider.py); the shipped policy reads
the time from `input.now` only.

Redis when configured (shared by replicas); otherwise a bounded in-process map.
Either way a cache failure is a miss, never an error: OPA is asked instead.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Protocol

import orjson
import redis.asyncio as aioredis
from cachetools import TTLCache
from redis.exceptions import RedisError

from sidecar.policy.contract import DisclosureQuestion, policy_view
from sidecar.policy.readset import STAR, Path
from sidecar.policy.shape import Instants, rfc3339_ns
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


# The times the cache knows: every record's validity and its evidence. With the times
# the policy sets against the instant asked about (policy/readset.py `compared`), each
# keeps its bucket-boundary check whatever the policy is found to read.
KNOWN_TIMES: tuple[Path, ...] = (("valid_at",), ("invalid_at",), ("evidence", STAR, "at"))


class Keys:
    """Cache keys for one question under one policy revision."""

    def __init__(
        self,
        question: DisclosureQuestion,
        revision: str,
        bucket_s: float,
        times: tuple[Path, ...] = KNOWN_TIMES,
        sided: tuple[Path, ...] = (),
    ) -> None:
        self.bucket_s = bucket_s
        self.instants = question_instants(question)
        bucket_ns = max(1, int(bucket_s * 1e9))
        now = self.instants.now_ns
        # `now` as OPA parses it: the bucket and the sides (policy/shape.py) agree.
        self.bucket_start = now - now % bucket_ns
        self.bucket_end = self.bucket_start + bucket_ns
        self.times = tuple(dict.fromkeys((*KNOWN_TIMES, *times)))
        # A shape holds each of `sided` (the policy's instants, policy/shape.py) as its
        # side of `now`, to the nanosecond: where that side may turn inside the bucket,
        # the shape's key turns with it, so those times need no boundary check there.
        self.shaped_times = tuple(path for path in self.times if path not in sided)
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
            # Its length too: replicas sharing Redis with different buckets would each
            # trust the other's boundary check.
            "bucket": [self.bucket_start, bucket_ns],
            # The grants in force at `now` that may reach a hearer: consent's revision.
            "grants": list(question.grants),
        }
        prefix = hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).digest()
        # Every key of the question starts from this state: copied, not rebuilt.
        self._hashed_prefix = hashlib.sha256(prefix)

    def cacheable(self, view: dict[str, Any], shaped: bool = False) -> bool:
        """Whether the record's decision stays the same for the whole bucket: none of its
        times falls inside it (a comparison with `now` could flip while the entry
        lives), and each is readable. Keyed by its shape (`shaped`), the times the shape
        holds by their side are not checked: the key says which side they are on."""
        for path in self.shaped_times if shaped else self.times:
            for value in _at(view, path):
                if value is None:
                    continue
                at = rfc3339_ns(value)
                if at is None or self.bucket_start <= at <= self.bucket_end:
                    return False
        return True

    def key(self, record: dict[str, Any]) -> str | None:
        """The record's key, or None when its decision may change within the bucket."""
        return self.key_of_view(policy_view(record))

    def key_of_view(self, view: dict[str, Any]) -> str | None:
        """`key`, from the record's policy view (decisions.policy_view)."""
        if not self.cacheable(view):
            return None
        digest = self._hashed_prefix.copy()
        digest.update(orjson.dumps(view, option=orjson.OPT_SORT_KEYS))
        return _KEY_PREFIX + digest.hexdigest()

    def key_of_shape(self, digest: bytes) -> str:
        """The key of a decision shared by every record of one shape (policy/shape.py);
        the caller checks each record is `cacheable`."""
        key = self._hashed_prefix.copy()
        # Set apart from record keys: a shape's digest is not a view's serialisation.
        key.update(b"shape:" + digest)
        return _KEY_PREFIX + key.hexdigest()

    @property
    def ttl_s(self) -> float:
        # Entries outlive their bucket only by a little: the bucket is in the key.
        return 2 * self.bucket_s


def question_instants(question: DisclosureQuestion) -> Instants:
    """The question's `now` and `as_of` as OPA reads them from its input."""
    now = rfc3339_ns(iso(question.now))
    as_of = rfc3339_ns(iso(question.at))
    if now is None or as_of is None:
        raise ValueError("the question's instants are not RFC 3339")
    return Instants(now, as_of)


def _at(node: Any, path: Path) -> list[Any]:
    """Every value at `path` (a `*` goes through each element or key)."""
    found = [node]
    for part in path:
        step: list[Any] = []
        for item in found:
            if part == STAR:
                if isinstance(item, list):
                    step += item
                elif isinstance(item, dict):
                    step += item.values()
            elif isinstance(item, dict) and part in item:
                step.append(item[part])
        found = step
    return found
