"""No stale allow: a policy or directory change takes effect on the very next request.

A real OPA polls a real bundle service for its policy, as in production. Carol
reads a record (so its allow is cached, and the cache is seen to serve it);
then a security team ships a Rego edit, then a directory edit, each as a new
bundle revision. The moment OPA has activated a revision, the next request
must be decided by it, whichever cache (in-process or Redis) holds the old allow.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.bundles import (
    bundle_server,
    policy_copy,
    publish,
    start_bundle_opa,
    wait_for_revision,
)
from tests.conftest import as_, metric, start_sidecar, stop

RECORD = {
    "content": "Alice says the launch is October 17",
    "observer_id": "alice",
    "source_id": "launch-sync",
    "source": {"kind": "conversation", "speaker": "alice"},
    "modality": "asserted",
    "audience": ["group:launch-team"],
    "access_scope": "launch-core",
    # Long valid: no time boundary near now, so its decisions are cacheable at once.
    "valid_at": "2026-10-01T00:00:00Z",
}
# A new denial is a rule of its own in whose.disclosure.denials, nothing else to edit.
EMBARGO = """
embargo[record.id] contains "embargoed" if {
	some record in disclosure.records
	input.asker.id == "carol"
}
"""


class World:
    def __init__(self, base: str, opa_url: str, policy: Path, served: Path) -> None:
        self.base, self.opa_url, self.policy, self.served = base, opa_url, policy, served
        self.revision = 1
        self.record_id = ""

    def ship(self) -> None:
        """Publish the edited policy folder as the next revision; wait until OPA runs it."""
        self.revision += 1
        publish(self.policy, f"r{self.revision}", self.served)
        wait_for_revision(self.opa_url, f"r{self.revision}")

    def carol_sees(self) -> bool:
        # GET first: it makes no pushdown call, so only the gate's revision check
        # stands between it and a cached allow.
        got = httpx.get(f"{self.base}/v1/memories/{self.record_id}", headers=as_("carol"))
        assert got.status_code in (200, 404), got.text
        recalled = httpx.post(
            f"{self.base}/v1/recall", json={"query": "launch date"}, headers=as_("carol")
        )
        assert recalled.status_code == 200, recalled.text
        in_recall = self.record_id in {i["id"] for i in recalled.json()["items"]}
        assert in_recall == (got.status_code == 200), "recall and get disagree"
        return in_recall


@pytest.fixture(params=["in-process cache", "redis cache"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    # An hour-long time bucket: the cache, not the clock, must be what stops a stale allow.
    env: dict[str, str] = {"WHOSE_CACHE_BUCKET_S": "3600"}
    if request.param == "redis cache":
        env["WHOSE_REDIS_URL"] = request.getfixturevalue("redis_url")
    policy = policy_copy(tmp_path / "policy")
    served = tmp_path / "served"
    served.mkdir()
    publish(policy, "r1", served)
    with bundle_server(served) as service:
        opa_url, opa = start_bundle_opa(service, tmp_path / "opa.log")
        try:
            wait_for_revision(opa_url, "r1")
            env["WHOSE_OPA_URL"] = opa_url
            base, sidecar = start_sidecar(tmp_path / "data", env=env)
            try:
                yield World(base, opa_url, policy, served)
            finally:
                stop(sidecar)
        finally:
            stop(opa)


def test_policy_and_directory_changes_take_effect_at_once(world: World) -> None:
    wrote = httpx.post(f"{world.base}/v1/memories", json=RECORD, headers=as_("alice"))
    assert wrote.status_code == 201, wrote.text
    world.record_id = wrote.json()["records"][0]["id"]

    hits = metric(world.base, "whose_decision_cache_total", result="hit")
    assert world.carol_sees()
    assert world.carol_sees()
    # Otherwise the rest would prove nothing about the cache.
    assert metric(world.base, "whose_decision_cache_total", result="hit") > hits

    # A Rego edit: an embargo on Carol.
    rules = world.policy / "whose" / "disclosure" / "denials" / "denials.rego"
    original = rules.read_text()
    rules.write_text(original + EMBARGO)
    world.ship()
    assert not world.carol_sees(), "a cached allow outlived the Rego change"

    # A directory edit: Carol loses the launch-core clearance.
    rules.write_text(original)
    directory = world.policy / "whose" / "directory" / "data.json"
    data = json.loads(directory.read_text())
    data["tenants"]["acme"]["principals"]["carol"]["scopes"] = []
    directory.write_text(json.dumps(data))
    world.ship()
    assert not world.carol_sees(), "a cached allow outlived the directory change"

    # And back: no cached denial outlives the change either.
    data["tenants"]["acme"]["principals"]["carol"]["scopes"] = ["launch-core"]
    directory.write_text(json.dumps(data))
    world.ship()
    assert world.carol_sees()


def test_directory_data_pushed_to_opa_outside_the_bundle_is_never_cached_around(
    tmp_path: Path,
) -> None:
    """A bundle that owns the rules but not the directory (synced into OPA over its
    REST API, as an HR system might): a push changes decisions without changing the
    revision, so nothing may be cached under it, and a revoked clearance holds at once."""
    policy = policy_copy(tmp_path / "policy")
    directory = json.loads((policy / "whose" / "directory" / "data.json").read_text())
    shutil.rmtree(policy / "whose" / "directory")
    # Every package and data document of the policy but the directory, whichever the
    # policy has (a root not listed makes `opa build` refuse the files under it).
    owned = sorted({f"whose/{p.name.removesuffix('.rego')}" for p in (policy / "whose").iterdir()})
    (policy / ".manifest").write_text(json.dumps({"roots": owned}))
    served = tmp_path / "served"
    served.mkdir()
    publish(policy, "r1", served)
    with bundle_server(served) as service:
        opa_url, opa = start_bundle_opa(service, tmp_path / "opa.log")
        try:
            wait_for_revision(opa_url, "r1")
            push = f"{opa_url}/v1/data/whose/directory"
            assert httpx.put(push, json=directory, timeout=5).status_code == 204
            env = {"WHOSE_OPA_URL": opa_url, "WHOSE_CACHE_BUCKET_S": "3600"}
            base, sidecar = start_sidecar(tmp_path / "data", env=env)
            try:
                world = World(base, opa_url, policy, served)
                wrote = httpx.post(f"{base}/v1/memories", json=RECORD, headers=as_("alice"))
                assert wrote.status_code == 201, wrote.text
                world.record_id = wrote.json()["records"][0]["id"]
                assert world.carol_sees()
                assert world.carol_sees()
                assert metric(base, "whose_decision_cache_total", result="hit") == 0
                directory["tenants"]["acme"]["principals"]["carol"]["scopes"] = []
                assert httpx.put(push, json=directory, timeout=5).status_code == 204
                assert not world.carol_sees(), "a decision outlived the directory push"
            finally:
                stop(sidecar)
        finally:
            stop(opa)
