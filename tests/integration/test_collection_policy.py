"""Who may create or drop a stack collection, and its payload indexes: the shipped
collections policy (rego/whose/collections) asked through PolicyEngine.collection_action,
on both evaluators (an OPA server over HTTP, OPA linked in). Any member creates and
indexes; only the creator or an administrator (config.collections.admin_roles, `admin`
by default) drops, since a drop erases documents the dropper may not read; an engine that
cannot answer, or answers what cannot be read, is PolicyUnavailable (fail closed)."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from sidecar.auth.identity import Identity
from sidecar.errors import CollectionForbidden, Forbidden, PolicyUnavailable
from sidecar.policy.contract import CollectionDecision, collections_input
from sidecar.policy.engine import PolicyEngine
from sidecar.policy.linked_opa import LinkedOpa
from sidecar.policy.opa import PolicyClient
from tests.conftest import OPA_LIBRARY, POLICY_DIR, REPO, start_opa, stop
from tests.integration.conftest import EVALUATORS

ALICE = Identity("alice", "acme")
BOB = Identity("bob", "acme")
ERIN = Identity("erin", "acme", roles=("admin",))
DAVE = Identity("dave", "acme", roles=("kb-owner",))
ALLOWED = CollectionDecision(True, ())
CREATED = datetime(2026, 12, 1, tzinfo=UTC)


async def test_any_member_creates_a_collection_and_its_indexes(policy: PolicyEngine) -> None:
    assert await policy.collection_action(ALICE, "create", "kb") == ALLOWED
    # Indexes change what a search costs, never what anyone may read: anyone's.
    assert await policy.collection_action(BOB, "create_index", "kb", "alice") == ALLOWED
    assert await policy.collection_action(BOB, "drop_index", "kb", "alice") == ALLOWED


async def test_only_the_creator_or_an_admin_drops_it(policy: PolicyEngine) -> None:
    refused = await policy.collection_action(BOB, "drop", "kb", "alice", created_at=CREATED)
    assert refused == CollectionDecision(False, ("not_collection_creator", "role_required:admin"))
    assert await policy.collection_action(ERIN, "drop", "kb", "alice") == ALLOWED
    assert await policy.collection_action(ALICE, "drop", "kb", "alice") == ALLOWED
    # One without a recorded creator (made before whose kept one) is an admin's alone.
    assert not (await policy.collection_action(ALICE, "drop", "legacy")).allow
    assert await policy.collection_action(ERIN, "drop", "legacy") == ALLOWED


def test_a_refusal_is_the_error_every_transport_answers_403() -> None:
    refusal = CollectionForbidden("drop refused", ["not_collection_creator"])
    assert isinstance(refusal, Forbidden)
    body = {"error": "collection_forbidden", "reasons": ["not_collection_creator"]}
    assert refusal.body() == body


def test_what_is_sent_matches_its_schema() -> None:
    schema = json.loads((REPO / "schemas" / "policy" / "collections_input.json").read_text())
    for sent in (
        collections_input(ALICE, "create", "kb", None),
        collections_input(BOB, "drop", "kb", "alice", CREATED),
    ):
        jsonschema.validate(sent, schema)


# --- a policy of one's own: the config, a missing package, a malformed answer ---------


def policy_copy(folder: Path, collections: dict[str, Any] | None) -> Path:
    """The shipped policy with config.collections set (None: without the package)."""
    copy = folder / "rego"
    shutil.copytree(POLICY_DIR, copy)
    if collections is None:
        shutil.rmtree(copy / "whose" / "collections")
        return copy
    config = copy / "whose" / "config" / "data.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"collections": collections}))
    return copy


Stop = Callable[[], Coroutine[Any, Any, None]]


async def started(kind: str, policy_dir: Path, folder: Path) -> tuple[PolicyEngine, Stop]:
    """An engine of `kind` on `policy_dir`, and what takes it down (the server, for HTTP)."""
    if kind == "linked":
        linked = LinkedOpa(OPA_LIBRARY, policy_dir, folder / "bundle", 2.0)
        await linked.start()
        return linked, linked.close
    url, process = start_opa(policy_dir, folder / "opa.log")
    client = PolicyClient(url, 2.0)
    await client.start()

    async def down() -> None:
        if process.poll() is None:
            stop(process)

    return client, down


@pytest.fixture(params=EVALUATORS)
async def engine_on(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[Path], Coroutine[Any, Any, tuple[PolicyEngine, Stop]]]]:
    """Starts an engine of the test's kind on a policy folder; all of them closed after."""
    opened: list[tuple[PolicyEngine, Stop]] = []

    async def start(policy_dir: Path) -> tuple[PolicyEngine, Stop]:
        folder = tmp_path / f"engine{len(opened)}"
        folder.mkdir()
        pair = await started(request.param, policy_dir, folder)
        opened.append(pair)
        return pair

    yield start
    for engine, down in opened:
        await engine.close()
        await down()


async def test_configured_admin_roles_change_who_drops(engine_on: Any, tmp_path: Path) -> None:
    engine, _ = await engine_on(policy_copy(tmp_path, {"admin_roles": ["kb-owner"]}))
    assert await engine.collection_action(DAVE, "drop", "kb", "alice") == ALLOWED
    refused = await engine.collection_action(ERIN, "drop", "kb", "alice")
    reasons = ("not_collection_creator", "role_required:kb-owner")
    assert refused == CollectionDecision(False, reasons)
    assert await engine.collection_action(ALICE, "drop", "kb", "alice") == ALLOWED


async def test_the_engine_down_is_policy_unavailable(engine_on: Any) -> None:
    engine, down = await engine_on(POLICY_DIR)
    assert await engine.collection_action(ALICE, "drop", "kb", "alice") == ALLOWED
    await down()
    with pytest.raises(PolicyUnavailable):
        await engine.collection_action(ALICE, "drop", "kb", "alice")


async def test_without_the_collections_policy_nothing_is_allowed(
    engine_on: Any, tmp_path: Path
) -> None:
    engine, _ = await engine_on(policy_copy(tmp_path, None))
    with pytest.raises(PolicyUnavailable, match="no result"):
        await engine.collection_action(ALICE, "create", "kb")


MALFORMED = {
    "not_a_bool": '{"allow": "yes", "reasons": []}',
    "allowed_with_a_reason": '{"allow": true, "reasons": ["not_collection_creator"]}',
    "refused_without_a_reason": '{"allow": false, "reasons": []}',
    "no_reasons": '{"allow": true}',
}


@pytest.mark.parametrize("answer", sorted(MALFORMED))
async def test_a_malformed_answer_is_policy_unavailable(
    answer: str, engine_on: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "malformed"
    (folder / "whose" / "collections").mkdir(parents=True)
    rego = f"package whose.collections\n\ndecision := {MALFORMED[answer]}\n"
    (folder / "whose" / "collections" / "collections.rego").write_text(rego)
    engine, _ = await engine_on(folder)
    with pytest.raises(PolicyUnavailable, match="malformed"):
        await engine.collection_action(ALICE, "create", "kb")
