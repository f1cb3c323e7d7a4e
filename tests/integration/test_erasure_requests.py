"""Bulk erasure requests on both store backends, with a real OPA
(writes/erasure_requests.py): an officer's request by subject, source or tenant runs
in bounded steps, is kept where a legal hold says, reports its progress, and goes on
after a restart where it stopped."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from sidecar.auth.identity import Identity
from sidecar.errors import ErasureRefused, NotFound
from sidecar.messages import ErasureRequest
from sidecar.writes.erasure_requests import ErasureRequests, FileRequests
from sidecar.writes.locks import LocalLocks
from tests.integration.lifecycle import Core, belief, own_opa, set_data, world

__all__ = ["own_opa", "world"]

DPO = Identity("dpo", "acme")  # an erasure officer by the demo directory
ALICE = Identity("alice", "acme")


async def seeded(world: Core) -> dict[str, list[str]]:
    """Alice's notes (three), Bob's belief about Alice's mind, Carol's own note, and
    a claim Bob said that a relay wrote (Alice only a participant there)."""
    alices = [belief("alice", f"note {i}", ["alice"]) for i in range(3)]
    about = belief("bob", "alice thinks the launch slips", ["bob"], observed_id="alice")
    carols = belief("carol", "the budget is 2M", ["carol"], source_id="budget-sheet")
    said = belief(
        "bob",
        "the venue is Hall A",
        ["bob", "alice"],
        source={"kind": "conversation", "speaker": "bob", "participants": ["alice"]},
    )
    ids: dict[str, list[str]] = {}
    ids["alice"] = [str(r.id) for r in await world.write("alice", *alices)]
    ids["about_alice"] = [str(r.id) for r in await world.write("bob", about)]
    ids["carol"] = [str(r.id) for r in await world.write("carol", carols)]
    ids["bob"] = [str(r.id) for r in await world.write("relay", said, roles=("extractor",))]
    return ids


async def test_only_an_officer_may_ask(world: Core) -> None:
    await seeded(world)
    with pytest.raises(ErasureRefused) as refused:
        await world.requests.submit(ALICE, ErasureRequest(kind="subject", subject="alice"))
    assert refused.value.reasons == ["needs_erasure_officer"]
    assert len(await world.everything()) == 6


async def test_a_subject_request_erases_what_they_hold_and_what_is_about_them(
    world: Core,
) -> None:
    ids = await seeded(world)
    progress = await world.requests.submit(DPO, ErasureRequest(kind="subject", subject="alice"))
    # Two records a step: the first step alone cannot have finished.
    assert progress.status == "running"
    assert progress.steps == 1
    while progress.status == "running":
        progress = await world.requests.step(progress)
    assert progress.status == "done"
    assert progress.erased == 4
    left = {r.id for r in await world.everything()}
    assert left == set(ids["carol"] + ids["bob"])
    assert progress.finished_at is not None


async def test_source_and_tenant_requests(world: Core) -> None:
    ids = await seeded(world)
    progress = await world.requests.submit(
        DPO, ErasureRequest(kind="source", source="budget-sheet")
    )
    while progress.status == "running":
        progress = await world.requests.step(progress)
    assert {r.id for r in await world.everything()} == set(
        ids["alice"] + ids["about_alice"] + ids["bob"]
    )
    progress = await world.requests.submit(DPO, ErasureRequest(kind="tenant"))
    while progress.status == "running":
        progress = await world.requests.step(progress)
    assert await world.everything() == []


async def test_a_legal_hold_keeps_records_and_says_so(world: Core, own_opa: str) -> None:
    ids = await seeded(world)
    set_data(own_opa, "holds", {"tenants": {"acme": {"records": ids["alice"][:1], "subjects": []}}})
    progress = await world.requests.submit(DPO, ErasureRequest(kind="subject", subject="alice"))
    while progress.status == "running":
        progress = await world.requests.step(progress)
    assert progress.kept == 1
    assert progress.kept_because == {"legal_hold": 1}
    assert {r.id for r in await world.everything()} == set(
        ids["alice"][:1] + ids["carol"] + ids["bob"]
    )


async def test_a_request_goes_on_after_a_restart(world: Core, tmp_path: Path) -> None:
    await seeded(world)
    progress = await world.requests.submit(DPO, ErasureRequest(kind="tenant"))
    assert progress.status == "running"
    # A new process over the same request store and the same data.
    again = ErasureRequests(
        world.store,
        world.policy,
        world.eraser,
        FileRequests(tmp_path / "requests"),
        LocalLocks(),
        step=2,
    )
    [resumed] = await FileRequests(tmp_path / "requests").running()
    assert resumed.request_id == progress.request_id
    while resumed.status == "running":
        resumed = await again.step(resumed)
    assert resumed.erased == 6
    assert await world.everything() == []


async def test_progress_is_for_the_requester_and_officers_only(world: Core) -> None:
    progress = await world.requests.submit(DPO, ErasureRequest(kind="subject", subject="erin"))
    assert (await world.requests.status(DPO, progress.request_id)).status == "done"
    for stranger in (ALICE, Identity("dpo", "globex")):
        with pytest.raises(NotFound):
            await world.requests.status(stranger, progress.request_id)
    with pytest.raises(NotFound):
        await world.requests.status(DPO, uuid.uuid4())
