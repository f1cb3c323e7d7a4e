"""Grants on both store backends, with a real OPA, a shared decision cache and a
controlled clock (policy/grants.py, docs/consent.md): a subject's grant, its end and
its revocation change what records already stored disclose, on the next read, with no
record rewritten; an end takes effect at its instant with no write at all, although
the cache's bucket (ten minutes here) spans it.

Every read is made three ways: by id (no pushdown), by filter (the pushdown's
store filter, with each grant an alternative to the audience), and by similarity."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sidecar.auth.identity import Identity
from sidecar.errors import ConsentRefused, GrantsUnavailable, NotFound
from sidecar.messages import Grant, GrantRequest
from sidecar.policy.cache import LocalCache
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.engine import PolicyEngine
from sidecar.policy.grants import FileGrants, Grants
from sidecar.reads.gate import Gate
from sidecar.reads.reader import Bounds, Reader
from sidecar.store.scope import Scope
from sidecar.writes.locks import LocalLocks
from tests.integration.conftest import policy_client
from tests.integration.lifecycle import Core, belief, embedder, ids, own_opa, world

__all__ = ["own_opa", "world"]


class Consent:
    """The lifecycle's core with a grant store, and a reader whose gate applies it
    and shares decisions in a cache whose bucket spans a grant's end: over OPA's
    evaluator linked in, which reports a revision (decisions are cached under one)
    and what a decision reads (they are shared by shape)."""

    def __init__(self, core: Core, folder: Path, policy: PolicyEngine) -> None:
        self.core = core
        self.grants = Grants(
            FileGrants(folder / "grants"), policy, core.audit, LocalLocks(), clock=core.clock
        )
        gate = Gate(
            policy, LocalCache(10_000, ttl_s=3600), core.audit, bucket_s=600, grants=self.grants
        )
        self.gate = gate
        self.reader = Reader(core.store, gate, Bounds(4, 4, 1000))

    def question(self, who: str, purpose: str = "get", **claims: Any) -> DisclosureQuestion:
        return DisclosureQuestion(Identity(who, "acme", **claims), [], purpose, self.core.clock())

    async def seen(self, who: str, *records: uuid.UUID, **claims: Any) -> dict[str, set[str]]:
        """What `who` is shown of these records: by id, by filter, by similarity."""
        wanted = {str(r) for r in records}
        by_id = await self.reader.by_ids(self.question(who, **claims), "test", list(records))
        listed = await self.reader.listing(
            self.question(who, "recall", **claims), "test", Scope(tenant="acme"), 1000
        )
        near = await self.reader.nearest(
            self.question(who, "recall", **claims),
            "test",
            embedder.embed("appointment"),
            Scope(tenant="acme"),
            20,
        )
        return {
            "id": {s.record.id for s in by_id.shown},
            "filter": {s.record.id for s in listed.shown} & wanted,
            "search": {s.record.id for s in near.shown} & wanted,
        }

    async def give(self, who: str, **request: Any) -> uuid.UUID:
        grant = await self.grants.grant(Identity(who, "acme"), GrantRequest.model_validate(request))
        return grant.grant_id


@pytest.fixture
async def consent(
    world: Core, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Consent]:
    linked = policy_client("linked", request, tmp_path)
    await linked.start()
    made = Consent(world, tmp_path, linked)
    try:
        yield made
        await made.gate.idle()
        # Decisions were cached, and shared by shape: the cache had something to serve.
        assert made.gate.decider.plan(made.gate.decider.last_revision).mode == "shape"
    finally:
        await linked.close()


def everywhere(*records: uuid.UUID) -> dict[str, set[str]]:
    shown = {str(r) for r in records}
    return {"id": shown, "filter": shown, "search": shown}


async def alices_records(world: Core) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    appointment, clinical, plain = ids(
        *await world.write(
            "alice",
            belief(
                "alice", "the appointment is Tuesday at 3pm", ["alice"], categories=["appointments"]
            ),
            belief("alice", "the appointment is for a biopsy", ["alice"], categories=["clinical"]),
            belief("alice", "the appointment needs a taxi", ["alice"]),
        )
    )
    return appointment, clinical, plain


async def test_a_grant_reaches_stored_records_until_its_end(world: Core, consent: Consent) -> None:
    appointment, clinical, plain = await alices_records(world)
    before = await world.stored(appointment, clinical, plain)
    assert await consent.seen("beth", appointment, clinical, plain) == everywhere()
    # Records are stamped with the real time: the week starts after they were written.
    monday = world.clock.advance(days=1)
    friday_end = monday + timedelta(days=4, hours=14, minutes=59, seconds=59)
    await consent.give("alice", reader="beth", categories=["appointments"], until=friday_end)
    # The appointment times only: not the clinical record, not the uncategorised one.
    assert await consent.seen("beth", appointment, clinical, plain) == everywhere(appointment)
    assert await consent.seen("carol", appointment, clinical, plain) == everywhere()
    world.clock.set(friday_end - timedelta(seconds=1))
    assert await consent.seen("beth", appointment, clinical, plain) == everywhere(appointment)
    # Its end, in the same ten-minute bucket as the read just above, with no write.
    world.clock.set(friday_end)
    assert await consent.seen("beth", appointment, clinical, plain) == everywhere()
    assert await world.stored(appointment, clinical, plain) == before  # nothing rewritten


async def test_a_revocation_takes_effect_on_the_next_read(world: Core, consent: Consent) -> None:
    appointment, clinical, _ = await alices_records(world)
    given = await consent.give("alice", reader="mum", categories=["appointments", "clinical"])
    assert await consent.seen("mum", appointment, clinical) == everywhere(appointment, clinical)
    # The reader may not revoke it; someone no party to it is told it does not exist.
    with pytest.raises(ConsentRefused):
        await consent.grants.revoke(Identity("mum", "acme"), given)
    with pytest.raises(NotFound):
        await consent.grants.revoke(Identity("carol", "acme"), given)
    revoked = await consent.grants.revoke(Identity("alice", "acme"), given)
    assert revoked.revoked_by == "alice"
    assert await consent.seen("mum", appointment, clinical) == everywhere()
    with pytest.raises(NotFound):
        await consent.grants.revoke(Identity("alice", "acme"), given)
    entries = await world.entries(purpose="consent")
    audited = sorted((e.asker, e.grant.action, e.grant.refused_because) for e in entries if e.grant)
    assert audited == [
        ("alice", "grant", []),
        ("alice", "revoke", []),
        ("mum", "revoke", ["not_subject_or_agent"]),
    ]


async def test_a_grant_for_a_group_purpose_and_scope(world: Core, consent: Consent) -> None:
    appointment, _, _ = await alices_records(world)
    (scoped,) = ids(
        *await world.write(
            "alice",
            belief(
                "alice",
                "the appointment is at the launch site",
                ["alice"],
                categories=["appointments"],
                access_scope="launch-core",
            ),
        )
    )
    await consent.give("alice", reader="group:family", categories=["appointments"], purpose="get")
    # A group grant reaches its members (a token's groups here), for `get` only.
    shown = await consent.seen("beth", appointment, scoped, groups=("family",))
    assert shown == {"id": {str(appointment)}, "filter": set(), "search": set()}
    assert await consent.seen("beth", appointment) == everywhere()
    # A grant does not clear a scope: carol is cleared for launch-core (the directory).
    await consent.give("alice", reader="carol", categories=["appointments"])
    assert await consent.seen("carol", appointment, scoped) == everywhere(appointment, scoped)
    await consent.give("alice", reader="bob", categories=["appointments"])
    assert await consent.seen("bob", appointment, scoped) == everywhere(appointment)


async def test_only_the_subject_or_an_agent_grants_within_the_vocabulary(
    world: Core, consent: Consent
) -> None:
    appointment, _, _ = await alices_records(world)
    with pytest.raises(ConsentRefused) as refused:
        await consent.give("beth", subject="alice", reader="beth", categories=["appointments"])
    assert refused.value.reasons == ["not_subject_or_agent"]
    with pytest.raises(ConsentRefused) as refused:
        await consent.give("alice", reader="beth", categories=["pin"], until=world.clock())
    assert refused.value.reasons == ["ends_before_now", "unknown_category:pin"]
    assert await consent.seen("beth", appointment) == everywhere()
    # The data protection officer (the directory's role) acts for her.
    await consent.grants.grant(
        Identity("dpo", "acme"),
        GrantRequest(subject="alice", reader="beth", categories=["appointments"]),
    )
    assert await consent.seen("beth", appointment) == everywhere(appointment)
    listed = await consent.grants.listed(Identity("alice", "acme"))
    assert [(g.granted_by, g.reader) for g in listed.grants] == [("dpo", "beth")]
    assert (await consent.grants.listed(Identity("carol", "acme"))).grants == []


async def test_an_unreadable_grants_file_fails_as_the_store_being_down(tmp_path: Path) -> None:
    # Deny by default, as when Redis is down: a read applies no grant and a grant route
    # answers 503, where a file that does not parse used to raise through every read.
    folder = tmp_path / "grants"
    grant = Grant(
        grant_id=uuid.uuid4(),
        tenant="acme",
        subject="alice",
        reader="bob",
        categories=["appointments"],
        granted_by="alice",
        granted_at=datetime.now(UTC),
    )
    await FileGrants(folder).add(grant, [])
    (written,) = folder.iterdir()
    assert [g.grant_id for g in await FileGrants(folder).load("acme")] == [grant.grant_id]
    for garbage in (b"{", b"[1, 2]", b"\xff"):
        written.write_bytes(garbage)
        with pytest.raises(GrantsUnavailable):
            await FileGrants(folder).load("acme")
