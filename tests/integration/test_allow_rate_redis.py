"""Replicas learn allow rates together through Redis, and keep going without it."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from sidecar.reads.allow_rate import RedisAllowRates


async def test_one_replica_learns_what_another_observed(redis_url: str) -> None:
    client = aioredis.from_url(redis_url)
    try:
        one, two = RedisAllowRates(client), RedisAllowRates(client)
        await one.observe("whose:allow-rate:test-shared", 1, 10)
        assert await two.get("whose:allow-rate:test-shared") == pytest.approx(0.1)
    finally:
        await client.delete("whose:allow-rate:test-shared")
        await client.aclose()


async def test_without_redis_the_local_estimate_stands_in() -> None:
    # A port nothing listens on: every Redis call fails for real.
    client = aioredis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    try:
        rates = RedisAllowRates(client)
        await rates.observe("k", 3, 10)
        assert await rates.get("k") == pytest.approx(0.3)
    finally:
        await client.aclose()
