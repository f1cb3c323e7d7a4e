"""Write locks: one holder of a key at a time, on every replica.

Two updates of one belief must never both see the same "current" version and
both replace it, so supersession holds its belief chain's key. The writes that
count before they add (a subject's grants, a setter's forget rules, a writer's
membership events) hold theirs too, or requests sent at once would each count
without the others and all pass the bound. In one process an asyncio lock per key
is enough; several sidecar replicas share a Redis lock per key (SET NX with a token
and a TTL, released by compare-and-delete, as redis-py implements it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import weakref
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Protocol

import redis.asyncio as aioredis
from redis.exceptions import LockError, RedisError

from sidecar.errors import LockUnavailable as LockUnavailable


class Held(Protocol):
    async def confirm(self) -> None:
        """Raise LockUnavailable if any lock was lost (expired) since it was taken."""
        ...


class ChainLocks(Protocol):
    def hold(self, keys: Iterable[str]) -> AbstractAsyncContextManager[Held]: ...


class _Kept:
    """In-process locks cannot expire."""

    async def confirm(self) -> None:
        return None


class LocalLocks:
    """Per-key asyncio locks: enough when one process owns the store (edge)."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @asynccontextmanager
    async def hold(self, keys: Iterable[str]) -> AsyncIterator[Held]:
        held = []
        # Sorted, so two writers needing the same two chains cannot deadlock.
        for key in sorted(set(keys)):
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = asyncio.Lock()
            held.append(lock)
        async with AsyncExitStack() as stack:
            for lock in held:
                await stack.enter_async_context(lock)
            yield _Kept()


class RedisLocks:
    """Per-key Redis locks shared by every replica."""

    def __init__(self, client: aioredis.Redis, ttl_s: float = 10.0, wait_s: float = 5.0) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self.wait_s = wait_s

    @asynccontextmanager
    async def hold(self, keys: Iterable[str]) -> AsyncIterator[Held]:
        taken: list[aioredis.lock.Lock] = []
        async with AsyncExitStack() as stack:
            for key in sorted(set(keys)):
                lock = self.client.lock(
                    f"whose:chain:{_digest(key)}", timeout=self.ttl_s, blocking_timeout=self.wait_s
                )
                try:
                    acquired = await lock.acquire()
                except RedisError as exc:
                    raise LockUnavailable(f"redis: {type(exc).__name__}") from exc
                if not acquired:
                    raise LockUnavailable("timed out waiting for a chain lock")
                stack.push_async_callback(_release, lock)
                taken.append(lock)
            yield _RedisHeld(taken)


class _RedisHeld:
    def __init__(self, locks: list[aioredis.lock.Lock]) -> None:
        self.locks = locks

    async def confirm(self) -> None:
        # A lock past its TTL may now belong to another writer: stop before writing.
        try:
            owned = [await lock.owned() for lock in self.locks]
        except RedisError as exc:
            raise LockUnavailable(f"redis: {type(exc).__name__}") from exc
        if not all(owned):
            raise LockUnavailable("a chain lock expired before the write")


async def _release(lock: aioredis.lock.Lock) -> None:
    # Expired or Redis gone: the TTL frees it; the write already happened or failed.
    with contextlib.suppress(LockError, RedisError):
        await lock.release()


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def bound_key(kind: str, *names: str) -> str:
    """The key of a count-then-add bound: what is counted (`kind`), and whose
    (`names`: tenant first). JSON, so never a belief chain's key, which holds a raw
    NUL (JSON escapes it), nor a predecessor's, a bare record id."""
    return json.dumps(["bound", kind, *names])
