"""A sidecar using Redis for its supersession locks, and what happens when Redis dies."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.acceptance.story import fresh_key, said_by, write
from tests.conftest import Backend, as_, free_port, start_redis, start_sidecar, stop


@pytest.fixture(scope="module")
def redis_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def redis_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("own-redis")


def redis_binary() -> str:
    binary = shutil.which("redis-server")
    assert binary, "redis-server is missing: run the tests with `make test`"
    return binary


@pytest.fixture(scope="module")
def own_redis(
    redis_port: int, redis_folder: Path, store_backend: Backend
) -> Iterator[subprocess.Popen[bytes]]:
    """A Redis only this module uses, so a test may kill it and start it again; one
    per store backend (the last test leaves it stopped)."""
    _, process = start_redis(redis_binary(), redis_folder, redis_port)
    yield process
    stop(process)


@pytest.fixture(scope="module")
def locked(
    tmp_path_factory: pytest.TempPathFactory,
    own_redis: subprocess.Popen[bytes],
    redis_port: int,
    store_backend: Backend,
) -> Iterator[str]:
    # Sixteen writers queue for one chain's lock: on a loaded machine the last of them
    # may wait several seconds (a dead Redis is refused at once, not after this wait).
    env = {"WHOSE_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0", "WHOSE_LOCK_WAIT_S": "20"}
    env |= store_backend.env()
    base, process = start_sidecar(tmp_path_factory.mktemp("locked"), env=env)
    yield base
    stop(process)


def test_concurrent_updates_over_http_leave_one_current_version(locked: str) -> None:
    key = fresh_key()

    def update(n: int) -> int:
        body = said_by("alice", f"s{n}", proposition={"text": f"v{n}", "key": key, "value": n})
        with httpx.Client(base_url=locked, timeout=30) as http:
            return write(http, "alice", body).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(update, range(16))) == {201}
    with httpx.Client(base_url=locked, timeout=30) as http:
        found = http.post(
            "/v1/recall",
            json={"query": "v", "about": key, "include_history": True, "limit": 50},
            headers=as_("alice"),
        ).json()
        assert len(found["items"]) == 16
        assert [i["status"] for i in found["items"]].count("current") == 1
        newest = next(i for i in found["items"] if i["status"] == "current")
        chain = http.get(f"/v1/memories/{newest['id']}/history", headers=as_("alice")).json()
    assert len(chain["items"]) == 16


def test_redis_down_refuses_writes_keeps_reads_and_recovers(
    locked: str, redis_port: int, redis_folder: Path, own_redis: subprocess.Popen[bytes]
) -> None:
    with httpx.Client(base_url=locked, timeout=30) as http:
        own_redis.kill()  # Redis dies under the running sidecar
        own_redis.wait()
        refused = write(http, "alice", said_by("alice", "down"))
        assert refused.status_code == 503
        # The first thing a write reads from Redis is the tenant's forget rules.
        assert refused.json()["error"] == "erasure_requests_unavailable"
        recalled = http.post("/v1/recall", json={"query": "launch"}, headers=as_("alice"))
        assert recalled.status_code == 200

        _, again = start_redis(redis_binary(), redis_folder, redis_port)
        try:
            # No sidecar restart: the next write takes its lock again.
            assert write(http, "alice", said_by("alice", "back")).status_code == 201
        finally:
            stop(again)
