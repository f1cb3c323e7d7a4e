"""How much of what the store returns the policy allows, per asker and audience.

Recall's first round asks the store for about limit / rate candidates, and a margin
of half as many again as the denials to expect among them: an asker who may read one
record in ten starts wide enough to finish in one round most of the time (147
candidates for ten), while an asker whose searches the policy's filter already narrows
to what they may read (a rate of 1) pays for two spare candidates, not forty, nor the
half again a fixed factor of 1.5 asked for. The rate is an exponentially weighted moving
average over that asker's searches (their candidates only: never records read by
id, which may be ones the asker may not see), kept in Redis when there is one
(replicas learn together) and in-process otherwise. It only sizes the first round: the
loop still doubles until `limit` allowed records are found or a bound stops it.
"""

from __future__ import annotations

import hashlib
import logging
import math
from typing import Protocol

import orjson
import redis.asyncio as aioredis
from cachetools import LRUCache
from redis.exceptions import RedisError

from sidecar.policy.contract import DisclosureQuestion

log = logging.getLogger(__name__)

# Weight of the newest observation: about the last ten requests matter.
ALPHA = 0.2
# Below this the first round would be enormous; the cap and doubling handle the rest.
FLOOR = 0.02
_TTL_S = 24 * 3600
# Candidates beyond the expected in every first round.
SPARE = 2


class AllowRates(Protocol):
    async def get(self, key: str) -> float | None: ...

    async def observe(self, key: str, allowed: int, decided: int) -> None: ...


def rate_key(question: DisclosureQuestion, filtered: bool) -> str:
    """Per tenant, asker, audience and purpose, and whether the search was filtered by
    the policy's pushdown."""
    asker = question.asker
    parts = [asker.tenant, asker.id, sorted(set(question.audience)), question.purpose, filtered]
    return "whose:allow-rate:" + hashlib.sha256(orjson.dumps(parts)).hexdigest()[:32]


def first_batch(limit: int, rate: float | None, default_factor: int, cap: int) -> int:
    """Candidates to ask the store for in the first round."""
    # Before anything is known about this asker, the configured factor.
    wanted = limit * default_factor
    if rate is not None:
        expected = limit / max(rate, FLOOR)
        # The denials to expect are expected * (1 - rate): half as many again, and
        # SPARE more (a round's last candidate is what tells a tie at the cut).
        wanted = math.ceil(expected + 0.5 * expected * (1 - min(rate, 1.0))) + SPARE
    return max(1, min(max(wanted, limit), cap))


def updated(previous: float | None, allowed: int, decided: int) -> float:
    observed = allowed / decided
    return observed if previous is None else (1 - ALPHA) * previous + ALPHA * observed


class LocalAllowRates:
    def __init__(self, max_entries: int = 100_000) -> None:
        self._rates: LRUCache[str, float] = LRUCache(maxsize=max_entries)

    async def get(self, key: str) -> float | None:
        return self._rates.get(key)

    async def observe(self, key: str, allowed: int, decided: int) -> None:
        if decided:
            self._rates[key] = updated(self._rates.get(key), allowed, decided)


class RedisAllowRates:
    """Shared by replicas; while Redis is down the in-process estimate stands in."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self.local = LocalAllowRates()

    async def get(self, key: str) -> float | None:
        try:
            raw = await self.client.get(key)
        except (RedisError, OSError):
            return await self.local.get(key)
        try:
            return float(raw) if raw is not None else None
        except ValueError:
            return None

    async def observe(self, key: str, allowed: int, decided: int) -> None:
        if not decided:
            return
        await self.local.observe(key, allowed, decided)
        try:
            # Read-modify-write without a lock: two replicas racing lose one
            # observation of an estimate, which is harmless.
            raw = await self.client.get(key)
            previous = float(raw) if raw is not None else None
            await self.client.set(key, updated(previous, allowed, decided), ex=_TTL_S)
        except (RedisError, OSError, ValueError) as exc:
            log.debug("allow rate not stored: %s", exc)
