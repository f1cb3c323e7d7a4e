"""Stale propagation on both store backends, with a real OPA (writes/lineage.py,
rego/whose/lib/lineage/lineage.rego): a record derived from a premise since superseded,
erased or withdrawn is not served as current, its notes say why, the policy may
withhold it, and a new derivation from a premise that no longer applies is refused.
The Governed Shared Memory study's venue example: Alice's "Hall A" replaced by
"Hall B", her summary "the venue chosen is Hall A" no longer current for Bob."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sidecar.auth.identity import Identity
from sidecar.writes.versions import WrittenPoint
from sidecar.writes.writer import WriteRefused
from tests.integration.lifecycle import (
    DIM,
    Core,
    belief,
    embedder,
    ids,
    own_opa,
    set_data,
    world,
)

__all__ = ["own_opa", "world"]

ALICE = Identity("alice", "acme")


def venue(value: str) -> Any:
    text = f"the venue is {value}"
    return belief(
        "alice",
        text,
        ["alice", "bob"],
        proposition={"text": text, "key": "venue", "value": value},
    )


def summary(*premises: Any, **extra: Any) -> Any:
    return belief(
        "alice",
        "the venue chosen is Hall A",
        ["alice", "bob"],
        provenance={"method": "summary", "derived_from": [str(p) for p in premises]},
        **extra,
    )


async def test_a_summary_of_a_superseded_premise_is_stale_for_bob(world: Core) -> None:
    [hall_a] = await world.write("alice", venue("Hall A"))
    [chosen] = await world.write("alice", summary(hall_a.id))
    await world.write("alice", venue("Hall B"))
    item = (await world.seen_by("bob", chosen.id))[str(chosen.id)]
    assert item.status == "stale"
    assert item.notes == ["premise_superseded"]


async def test_a_new_summary_of_the_superseded_version_is_refused(world: Core) -> None:
    [hall_a] = await world.write("alice", venue("Hall A"))
    await world.write("alice", venue("Hall B"))
    with pytest.raises(WriteRefused) as refused:
        await world.write("alice", summary(hall_a.id))
    assert refused.value.problems[0]["reasons"] == ["premise_superseded"]
    # What applied then may still be summarised as of then.
    [then] = await world.write("alice", summary(hall_a.id, valid_at=hall_a.valid_at))
    assert then.id is not None


@pytest.mark.parametrize("readers", [["alice"], ["alice", "carol"]], ids=["fewer", "others"])
async def test_a_premise_reissued_for_other_readers_reads_the_same_to_bob(
    world: Core, readers: list[str]
) -> None:
    # Alice re-issues the document for readers that leave Bob out: fewer of them, or
    # others. Bob sees neither new line, so what his stale summary says of its premise
    # must not tell the two apart (issue 35: `premise_narrowed` against
    # `premise_withdrawn` told him who the new line's readers are).
    point = uuid.uuid4()
    shared = {"content": "the venue is Hall A", "audience": ["alice", "bob"], "source": "s"}
    vector = embedder.embed("the venue is Hall A")
    assert len(vector) == DIM
    [premise] = await world.versions.upsert(
        ALICE, [WrittenPoint(point, vector, shared)], "proxy.upsert"
    )
    [chosen] = await world.write("alice", summary(premise.id))
    # The document again, for other readers: a new line; the old version withdrawn.
    [again] = await world.versions.upsert(
        ALICE, [WrittenPoint(point, vector, shared | {"audience": readers})], "proxy.upsert"
    )
    assert again.id != premise.id
    old = (await world.stored(premise.id))[str(premise.id)]
    assert "invalid_at" in old
    assert "superseded_by" not in old
    assert await world.seen_by("bob", again.id) == {}
    for reader in ("alice", "bob"):
        item = (await world.seen_by(reader, chosen.id))[str(chosen.id)]
        assert item.status == "stale"
        assert item.notes == ["premise_withdrawn"]
    # The id Alice chose names the new version now.
    assert await world.versions.aliases(ALICE, [point]) == {point: [point, again.id]}


async def test_the_policy_may_withhold_a_stale_derivation(world: Core, own_opa: str) -> None:
    [premise] = await world.write("alice", venue("Hall A"))
    [chosen] = await world.write("alice", summary(premise.id))
    await world.eraser.forget(ALICE, ids(premise), "test")
    assert str(chosen.id) in await world.seen_by("bob", chosen.id)
    set_data(own_opa, "config/stale", {"withhold": ["erased"]})
    assert await world.seen_by("bob", chosen.id) == {}
