"""Grants kept in Redis (policy/grants.py `RedisGrants`): what one replica gives or
revokes, another applies on its next read; tenants apart; a Redis that cannot be
reached refuses a grant (503 grants_unavailable) and a read then applies none."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as aioredis

from sidecar.auth.identity import Identity
from sidecar.errors import GrantsUnavailable
from sidecar.messages import Grant
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.grants import Grants, RedisGrants, in_force
from sidecar.writes.locks import LocalLocks


def grant(tenant: str, subject: str, reader: str, **more: object) -> Grant:
    return Grant.model_validate(
        {
            "grant_id": uuid.uuid4(),
            "tenant": tenant,
            "subject": subject,
            "reader": reader,
            "categories": ["appointments"],
            "granted_by": subject,
            "granted_at": datetime.now(UTC) - timedelta(seconds=1),
        }
        | more
    )


async def test_one_replica_sees_what_another_gave_and_revoked(redis_url: str) -> None:
    client = aioredis.from_url(redis_url)
    prefix = f"whose:grants-test-{uuid.uuid4().hex[:8]}"
    try:
        one, two = RedisGrants(client, prefix), RedisGrants(client, prefix)
        given = grant("acme", "maria", "ana")
        other = grant("globex", "maria", "ana")
        ended = grant("acme", "maria", "rosa", until=datetime.now(UTC) - timedelta(seconds=1))
        await one.add(ended, [])
        await one.add(given, [])
        await one.add(other, [])
        assert {g.grant_id for g in await two.load("acme")} == {given.grant_id, ended.grant_id}
        # Writing a grant drops the ended ones named with it.
        fresh = grant("acme", "maria", "sam")
        await two.add(fresh, [ended.grant_id])
        assert {g.grant_id for g in await one.load("acme")} == {given.grant_id, fresh.grant_id}
        assert not in_force(ended, datetime.now(UTC))
        assert await one.remove("acme", given.grant_id)
        assert not await two.remove("acme", given.grant_id)
        assert [g.grant_id for g in await two.load("acme")] == [fresh.grant_id]
        assert [g.grant_id for g in await two.load("globex")] == [other.grant_id]
    finally:
        keys = [k async for k in client.scan_iter(f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


async def test_without_redis_no_grant_is_given_and_a_read_applies_none() -> None:
    # A port nothing listens on: every Redis call fails for real.
    client = aioredis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    try:
        store = RedisGrants(client)
        with pytest.raises(GrantsUnavailable):
            await store.add(grant("acme", "maria", "ana"), [])
        with pytest.raises(GrantsUnavailable):
            await store.load("acme")
        with pytest.raises(GrantsUnavailable):
            await store.remove("acme", uuid.uuid4())
    finally:
        await client.aclose()


async def test_a_read_applies_no_grant_when_the_store_fails() -> None:
    client = aioredis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    try:
        # policy and audit are not reached on this path: a read only loads grants.
        grants = Grants(RedisGrants(client), policy=None, audit=None, locks=LocalLocks())  # type: ignore[arg-type]
        question = DisclosureQuestion(Identity("ana", "acme"), [], "recall", datetime.now(UTC))
        assert await grants.live(question) == ()
    finally:
        await client.aclose()
