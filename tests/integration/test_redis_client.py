"""The sidecar's one Redis client (locks, cache, audit) after Redis restarts."""

from __future__ import annotations

import shutil
from pathlib import Path

from sidecar.services import open_redis
from sidecar.settings import Settings
from tests.conftest import free_port, start_redis, stop


async def test_the_first_command_after_a_redis_restart_succeeds(tmp_path: Path) -> None:
    # Without a retry, the pooled connection the restart left dead fails the next
    # command: a write would answer 503 lock_unavailable with Redis back up.
    binary = shutil.which("redis-server")
    assert binary, "redis-server is missing: run the tests with `make test`"
    port = free_port()
    url, redis_process = start_redis(binary, tmp_path, port=port)
    try:
        async with open_redis(Settings(redis_url=url)) as client:
            assert client is not None
            await client.set("whose:test:restart", "before")
            redis_process.kill()
            redis_process.wait()
            _, redis_process = start_redis(binary, tmp_path, port=port)
            await client.set("whose:test:restart", "after")
            assert await client.get("whose:test:restart") == b"after"
    finally:
        stop(redis_process)
