"""The forget rules' stores (writes/forget_rules.py): what one replica saves, another
reads on its next write, though each keeps what it read (Redis: under the tenant's
revision); the file store keeps the rules it read and reads the folder once."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path

import redis.asyncio as aioredis

from sidecar.messages import ForgetRule
from sidecar.writes.forget_rules import FileRules, RedisRules


def rule(tenant: str, value: str) -> ForgetRule:
    return ForgetRule(
        rule_id=uuid.uuid4(),
        tenant=tenant,
        subject="amira",
        kind="value",
        value_length=len(value),
        set_by="amira",
        status="standing",
        created_at=datetime.now(UTC),
        value=value,
    )


async def test_a_replica_sees_what_another_saved(redis_url: str) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    one, two = aioredis.from_url(redis_url), aioredis.from_url(redis_url)
    try:
        first, second = RedisRules(one), RedisRules(two)
        assert await first.all(tenant) == []
        saved = rule(tenant, "5532")
        await second.save(saved)
        [read] = await first.all(tenant)
        assert (read.rule_id, read.value) == (saved.rule_id, "5532")
        lifted = saved.model_copy(update={"status": "lifted"})
        await first.save(lifted)
        assert [r.status for r in await second.all(tenant)] == ["lifted"]
        assert await first.all(f"{tenant}-other") == []
    finally:
        await one.aclose()
        await two.aclose()


async def test_the_file_store_reads_once_and_keeps_what_it_saves(tmp_path: Path) -> None:
    store = FileRules(tmp_path)
    saved = rule("acme", "5532")
    await store.save(saved)
    # Another process's view of the same folder: read from the files.
    [read] = await FileRules(tmp_path).all("acme")
    assert read == saved
    # Its own view after a file changed under it is what it saved (one process owns the
    # folder), and a rule it saves next is there at once.
    await asyncio.to_thread(_remove_files, tmp_path)
    again = rule("acme", "7788")
    await store.save(again)
    assert {r.value for r in await store.all("acme")} == {"5532", "7788"}
    assert await store.all("globex") == []


def _remove_files(folder: Path) -> None:
    for path in folder.rglob("*.json"):
        path.unlink()
