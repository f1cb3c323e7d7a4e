"""OPA's evaluator linked in (policy/linked_opa.py) answers exactly as the OPA server.

The same shipped policy, loaded by a real `opa run --server` (the local OPA, as the
embedded default ran it before) and by the library built from the same pinned OPA
module: every question the sidecar asks — the disclosure batch over records of every
shape the policy words, explain, the write policy, partial evaluation for pushdown —
must get the same answer, under the same revision. Then what is the linked
evaluator's own: a policy that does not load stops the start, a closed client and
concurrent calls.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench.rego_batch import SHAPES
from sidecar.auth.identity import Identity
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.linked_opa import LinkedOpa
from sidecar.policy.local_opa import LocalOpa, OpaStartError, make_bundle
from sidecar.policy.opa import PolicyClient, PolicyUnavailable
from sidecar.policy.pushdown import COMPILE_QUERY, UNKNOWNS
from tests.conftest import OPA_BINARY, OPA_LIBRARY, POLICY_DIR
from tests.integration.test_policy_contract import stored

NOW = datetime(2026, 11, 30, tzinfo=UTC)
ASKERS = [
    Identity("carol", "acme", groups=("launch-team",), scopes=("launch-core",)),
    Identity("bob", "acme"),
    Identity("alice", "acme", groups=("ops",)),
    Identity("mallory", "globex"),
]
AUDIENCES: list[list[str]] = [[], ["alice", "bob"], ["group:launch-team"]]


@pytest.fixture
async def both(tmp_path: Path) -> AsyncIterator[tuple[PolicyClient, LinkedOpa]]:
    """The local OPA server and the linked evaluator, each on the shipped policy."""
    opa = LocalOpa(OPA_BINARY, POLICY_DIR, tmp_path / "opa.log", tmp_path / "served-bundle")
    await opa.start()
    server = PolicyClient(opa.url, 5.0, unix_socket=str(opa.socket_path))
    await server.start()
    linked = LinkedOpa(OPA_LIBRARY, POLICY_DIR, tmp_path / "linked-bundle", 5.0)
    await linked.start()
    try:
        yield server, linked
    finally:
        await linked.close()
        await server.close()
        await opa.stop()


def records() -> list[dict[str, Any]]:
    return [stored(**shape) for shape in SHAPES] + [
        stored(**shape, valid_at="2026-12-01T00:00:00Z") for shape in SHAPES[:4]
    ]


async def test_disclosure_decisions_match_the_server(
    both: tuple[PolicyClient, LinkedOpa],
) -> None:
    server, linked = both
    batch = records()
    allowed = denied = 0
    for asker, audience, purpose in itertools.product(ASKERS, AUDIENCES, ["recall", "history"]):
        question = DisclosureQuestion(asker, audience, purpose, NOW)
        heard, got = (
            await server.disclosure(question, batch),
            await linked.disclosure(question, batch),
        )
        assert got.decisions == heard.decisions, (asker, audience, purpose)
        assert got.vocabulary == heard.vocabulary
        assert got.revision == heard.revision
        assert got.revision is not None
        assert got.decision_id
        allowed += sum(d.allow for d in got.decisions.values())
        denied += sum(not d.allow for d in got.decisions.values())
    # Otherwise the comparison would prove little.
    assert allowed
    assert denied


async def test_explanations_and_write_decisions_match_the_server(
    both: tuple[PolicyClient, LinkedOpa],
) -> None:
    server, linked = both
    batch = records()
    for asker in ASKERS:
        question = DisclosureQuestion(asker, ["bob"], "recall", NOW)
        for record in batch:
            heard, _ = await server.explain(question, record)
            got, answer = await linked.explain(question, record)
            assert got == heard
            assert answer.revision is not None
        writes, _ = await server.ingest(asker, batch, batch[:2])
        assert (await linked.ingest(asker, batch, batch[:2]))[0] == writes


async def test_partial_evaluation_matches_the_servers_compile_api(
    both: tuple[PolicyClient, LinkedOpa],
) -> None:
    server, linked = both
    members = [
        {"id": "bob", "tenant": "acme"},
        {"id": "carol", "tenant": "acme"},
        {"id": "dave", "tenant": "acme", "groups": ["ops"], "scopes": ["audit"]},
        {"id": "mallory", "tenant": "globex"},
    ]
    for member in members:
        heard = await server.compile(COMPILE_QUERY, {"member": member}, UNKNOWNS)
        got = await linked.compile(COMPILE_QUERY, {"member": member}, UNKNOWNS)
        assert got == heard, member
        assert got.get("queries"), "every member of acme sees something"


async def test_the_revision_is_the_bundles_digest(tmp_path: Path) -> None:
    linked = LinkedOpa(OPA_LIBRARY, POLICY_DIR, tmp_path / "bundle", 5.0)
    await linked.start()
    try:
        question = DisclosureQuestion(ASKERS[0], [], "recall", NOW)
        revision = (await linked.disclosure(question, records())).revision
    finally:
        await linked.close()
    assert revision == make_bundle(POLICY_DIR, tmp_path / "again")
    # A policy edit is a new revision: decisions cached under the old one are not reused.
    edited = tmp_path / "edited"
    make_bundle(POLICY_DIR, edited)
    (edited / "whose" / "extra.rego").write_text("package whose.extra\n\nx := 1\n")
    assert make_bundle(edited, tmp_path / "edited-bundle") != revision


async def test_a_policy_that_does_not_compile_stops_the_start(tmp_path: Path) -> None:
    policies = tmp_path / "policy"
    policies.mkdir()
    (policies / "broken.rego").write_text("package whose.broken\n\nthis is not rego\n")
    linked = LinkedOpa(OPA_LIBRARY, policies, tmp_path / "bundle", 5.0)
    with pytest.raises(OpaStartError, match="could not load the policy"):
        await linked.start()


async def test_without_the_library_the_start_says_how_to_build_it(tmp_path: Path) -> None:
    linked = LinkedOpa(tmp_path / "missing.so", POLICY_DIR, tmp_path / "bundle", 5.0)
    with pytest.raises(OpaStartError, match="make install"):
        await linked.start()


async def test_a_closed_client_discloses_nothing(tmp_path: Path) -> None:
    linked = LinkedOpa(OPA_LIBRARY, POLICY_DIR, tmp_path / "bundle", 5.0)
    await linked.start()
    assert await linked.ready()
    await linked.close()
    assert not await linked.ready()
    question = DisclosureQuestion(ASKERS[0], [], "recall", NOW)
    with pytest.raises(PolicyUnavailable):
        await linked.disclosure(question, records())


async def test_concurrent_calls_each_get_their_own_answer(tmp_path: Path) -> None:
    linked = LinkedOpa(OPA_LIBRARY, POLICY_DIR, tmp_path / "bundle", 5.0)
    await linked.start()
    try:
        batch = records()
        questions = [
            DisclosureQuestion(asker, audience, "recall", NOW)
            for asker, audience in itertools.product(ASKERS, AUDIENCES)
        ]
        alone = [await linked.disclosure(q, batch) for q in questions]
        together = await asyncio.gather(*(linked.disclosure(q, batch) for q in questions * 3))
        for i, verdicts in enumerate(together):
            assert verdicts.decisions == alone[i % len(questions)].decisions
    finally:
        await linked.close()
