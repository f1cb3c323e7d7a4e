"""Faults, with real processes: OPA and Redis are killed, stalled and restarted
under a running sidecar. Nothing may be disclosed without a decision, nothing
answers 500, and the sidecar recovers without a restart.

OPA serves its policy from a bundle (so the decision cache is in play: a fault
must not be masked by cached allows); Redis holds the cache, the audit stream
and the supersession locks.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.bundles import bundle_server, policy_copy, publish, start_bundle_opa, wait_for_revision
from tests.conftest import as_, free_port, free_ports, metric, ops, start_redis, start_sidecar, stop

TEAM_NOTE: dict[str, Any] = {
    "content": "Alice says the launch is October 17",
    "observer_id": "alice",
    "source_id": "launch-sync",
    "source": {"kind": "conversation", "speaker": "alice"},
    "modality": "asserted",
    "audience": ["group:launch-team"],
    "valid_at": "2026-10-01T00:00:00Z",
}
AUDITOR = as_("erin", roles="auditor")


@dataclass
class World:
    base: str
    tmp: Path
    policy: Path
    served: Path
    service: str
    opa_port: int
    opa: subprocess.Popen[bytes]
    redis_port: int
    redis: subprocess.Popen[bytes]
    note_id: str = ""
    revision: int = 1

    @property
    def opa_url(self) -> str:
        return f"http://127.0.0.1:{self.opa_port}"

    def start_opa(self) -> None:
        _, self.opa = start_bundle_opa(self.service, self.tmp / "opa.log", port=self.opa_port)
        wait_for_revision(self.opa_url, f"r{self.revision}")

    def start_redis(self) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None
        _, self.redis = start_redis(binary, self.tmp, port=self.redis_port)

    def ship(self, source: Path) -> None:
        self.revision += 1
        publish(source, f"r{self.revision}", self.served)
        wait_for_revision(self.opa_url, f"r{self.revision}")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("faults")
    policy = policy_copy(tmp / "policy")
    served = tmp / "served"
    served.mkdir()
    publish(policy, "r1", served)
    with bundle_server(served) as service:
        opa_port, redis_port = free_ports(2)
        world = World("", tmp, policy, served, service, opa_port, None, redis_port, None)  # type: ignore[arg-type]
        world.start_opa()
        world.start_redis()
        env = {
            "WHOSE_OPA_URL": world.opa_url,
            "WHOSE_OPA_TIMEOUT_S": "0.5",
            "WHOSE_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "WHOSE_CACHE_BUCKET_S": "3600",
            "WHOSE_LOCK_WAIT_S": "1",
        }
        world.base, sidecar = start_sidecar(tmp / "data", env=env)
        try:
            wrote = httpx.post(f"{world.base}/v1/memories", json=TEAM_NOTE, headers=as_("alice"))
            assert wrote.status_code == 201, wrote.text
            world.note_id = wrote.json()["records"][0]["id"]
            yield world
        finally:
            stop(sidecar)
            for process in (world.opa, world.redis):
                if process.poll() is None:
                    os.kill(process.pid, signal.SIGCONT)
                    stop(process)


def recall(world: World, who: str = "carol") -> httpx.Response:
    return httpx.post(
        f"{world.base}/v1/recall", json={"query": "launch date"}, headers=as_(who), timeout=10
    )


def sees_note(world: World) -> bool:
    response = recall(world)
    assert response.status_code == 200, response.text
    return world.note_id in {item["id"] for item in response.json()["items"]}


def assert_refused(world: World) -> None:
    """Nothing disclosed by any path, a reason given, never a 500."""
    recalled = recall(world)
    assert recalled.status_code == 503, recalled.text
    body = recalled.json()
    assert (body["verdict"], body["items"], body["reason"]) == ("abstain", [], "policy_unavailable")
    got = get_note(world)
    assert (got.status_code, got.json()["error"]) == (503, "policy_unavailable")
    assert TEAM_NOTE["content"] not in recalled.text + got.text


def readiness(world: World) -> dict[str, Any]:
    return dict(httpx.get(f"{ops(world.base)}/readyz").json()["checks"])


def test_everything_up(world: World) -> None:
    assert sees_note(world)
    assert sees_note(world)  # the second one from the cache
    assert readiness(world) == {"opa": True, "store": True, "redis": True}


def get_note(world: World) -> httpx.Response:
    return httpx.get(f"{world.base}/v1/memories/{world.note_id}", headers=as_("carol"))


def test_opa_killed_then_restarted(world: World) -> None:
    # Allows for recall and get are cached now: they must not outlive OPA.
    assert sees_note(world)
    hits = metric(world.base, "whose_decision_cache_total", result="hit")
    assert get_note(world).status_code == 200
    assert get_note(world).status_code == 200
    assert metric(world.base, "whose_decision_cache_total", result="hit") > hits
    unavailable = metric(world.base, "whose_policy_unavailable_total")
    world.opa.kill()
    world.opa.wait()
    assert_refused(world)
    explained = httpx.post(
        f"{world.base}/v1/explain",
        json={"asker": "carol", "record_id": world.note_id},
        headers=as_("pat", roles="policy-admin"),
    )
    assert (explained.status_code, explained.json()["error"]) == (503, "policy_unavailable")
    update = TEAM_NOTE | {"content": "Alice now says the launch is October 31"}
    wrote = httpx.post(f"{world.base}/v1/memories", json=update, headers=as_("alice"))
    assert (wrote.status_code, wrote.json()["error"]) == (503, "policy_unavailable")
    assert readiness(world)["opa"] is False
    # Every refused request counted once: recall, get, explain and the write.
    assert metric(world.base, "whose_policy_unavailable_total") - unavailable == 4

    world.start_opa()
    assert sees_note(world)
    assert readiness(world)["opa"] is True


def test_opa_stalled_past_the_timeout(world: World) -> None:
    os.kill(world.opa.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        assert_refused(world)
        # Two requests, each bounded by the 0.5 s policy timeout (plus slack).
        assert time.monotonic() - started < 5
    finally:
        os.kill(world.opa.pid, signal.SIGCONT)
    assert sees_note(world)


def test_opa_answering_malformed_decisions(world: World) -> None:
    broken = policy_copy(world.tmp / f"broken-{uuid.uuid4().hex[:6]}")
    rules = broken / "whose" / "disclosure" / "disclosure.rego"
    original = "decisions := {record.id: decision(record) | some record in records}"
    text = rules.read_text()
    assert original in text
    # "allow" as a string: truthy in many languages, not a decision here.
    rules.write_text(
        text.replace(
            original,
            'decisions := {record.id: {"allow": "true", "usable_as": "fact"} '
            "| some record in records}",
        )
    )
    world.ship(broken)
    assert_refused(world)
    world.ship(world.policy)
    assert sees_note(world)


def test_redis_killed_then_restarted(world: World) -> None:
    assert sees_note(world)
    bypassed = metric(world.base, "whose_decision_cache_total", result="bypass")
    buffered = metric(world.base, "whose_audit_buffered_total")
    world.redis.kill()
    world.redis.wait()

    # Reads go on, correctly, without the cache; their audit entries are kept locally.
    during = recall(world)
    assert during.status_code == 200
    assert world.note_id in {item["id"] for item in during.json()["items"]}
    bob = recall(world, "bob")
    assert bob.status_code == 200
    assert world.note_id in {item["id"] for item in bob.json()["items"]}  # bob is on the team
    mallory = httpx.post(
        f"{world.base}/v1/recall",
        json={"query": "launch date"},
        headers=as_("mallory", tenant="globex"),
    )
    assert mallory.json()["items"] == []
    assert metric(world.base, "whose_decision_cache_total", result="bypass") > bypassed
    deadline = time.monotonic() + 60
    while metric(world.base, "whose_audit_buffered_total") <= buffered:
        assert time.monotonic() < deadline, "the outage's audit entries were not buffered"
        time.sleep(0.1)

    # Writes need the tenant's forget rules and the supersession lock, both in Redis:
    # refused clearly at the first (writes/forget_rules.py), nothing stored.
    update = TEAM_NOTE | {"content": "Alice now says the launch is October 24"}
    wrote = httpx.post(f"{world.base}/v1/memories", json=update, headers=as_("alice"))
    assert (wrote.status_code, wrote.json()["error"]) == (503, "erasure_requests_unavailable")
    assert readiness(world)["redis"] is False
    # Still in the Service: reads are correct without Redis, only writes wait.
    ready = httpx.get(f"{ops(world.base)}/readyz")
    assert (ready.status_code, ready.json()["status"]) == (200, "degraded")
    assert httpx.get(f"{world.base}/v1/audit", headers=AUDITOR).status_code == 503

    world.start_redis()
    assert sees_note(world)  # the next audit write replays the spilled entries first
    assert readiness(world) == {"opa": True, "store": True, "redis": True}
    decision_id = during.json()["decision_id"]
    deadline = time.monotonic() + 60
    while True:
        audit = httpx.get(f"{world.base}/v1/audit", params={"asker": "carol"}, headers=AUDITOR)
        assert audit.status_code == 200, audit.text
        if decision_id in {entry["decision_id"] for entry in audit.json()["entries"]}:
            break
        assert time.monotonic() < deadline, "the outage's audit entry never reached the stream"
        time.sleep(0.2)
    texts = recall(world, "alice").text
    assert "October 24" not in texts, "the refused write was stored"


def test_store_unreachable(tmp_path: Path) -> None:
    """A Qdrant server that is not there: 503 on every path, not-ready, no crash.

    (No Qdrant server runs on this machine, so the fault is a closed port: the
    real client gets a real connection refusal.)
    """
    dead = f"http://127.0.0.1:{free_port()}"
    base, process = start_sidecar(
        tmp_path / "data", env={"WHOSE_STORE": "server", "WHOSE_QDRANT_URL": dead}
    )
    try:
        assert httpx.get(f"{ops(base)}/readyz").json()["checks"]["store"] is False
        recalled = httpx.post(f"{base}/v1/recall", json={"query": "x"}, headers=as_("alice"))
        assert (recalled.status_code, recalled.json()["error"]) == (503, "store_unavailable")
        got = httpx.get(f"{base}/v1/memories/{uuid.uuid4()}", headers=as_("alice"))
        assert (got.status_code, got.json()["error"]) == (503, "store_unavailable")
        wrote = httpx.post(f"{base}/v1/memories", json=TEAM_NOTE, headers=as_("alice"))
        assert (wrote.status_code, wrote.json()["error"]) == (503, "store_unavailable")
    finally:
        stop(process)
