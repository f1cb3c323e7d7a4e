from __future__ import annotations

import uuid
from typing import Any

from sidecar.supersession import Chain, chain_of, plan


def rec(
    valid_at: str = "2026-10-01T00:00:00Z", key: str | None = "k", **extra: Any
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "tenant": "acme",
        "observer_id": "alice",
        "valid_at": valid_at,
        "recorded_at": valid_at,
    }
    if key:
        record["proposition"] = {"text": "p", "key": key}
    return record | extra


CHAIN = Chain("acme", "alice", None, "k")


def test_chain_is_holder_observed_and_key() -> None:
    assert chain_of(rec()) == CHAIN
    assert chain_of(rec(observed_id="bob")) == Chain("acme", "alice", "bob", "k")
    assert chain_of(rec(key=None)) is None


def test_new_version_closes_the_head() -> None:
    old, new = rec(), rec("2026-10-05T00:00:00Z")
    result = plan([new], {CHAIN: [old]}, {})
    assert result.problems == []
    assert new["supersedes"] == old["id"]
    assert result.updates == [
        (old["id"], {"invalid_at": "2026-10-05T00:00:00Z", "superseded_by": new["id"]})
    ]


def test_first_version_has_nothing_to_close() -> None:
    new = rec()
    assert plan([new], {CHAIN: []}, {}).updates == []
    assert "supersedes" not in new


def test_explicit_supersedes_must_name_the_head() -> None:
    head = rec()
    stale = str(uuid.uuid4())
    result = plan([rec(supersedes=stale)], {CHAIN: [head]}, {})
    assert result.problems == [(0, "cannot_supersede")]
    assert result.updates == []


def test_a_version_cannot_start_before_the_one_it_replaces() -> None:
    head = rec("2026-10-10T00:00:00Z")
    result = plan([rec("2026-10-01T00:00:00Z")], {CHAIN: [head]}, {})
    assert result.problems == [(0, "valid_at_before_current_version")]


def test_an_undated_version_moves_up_to_its_predecessor_instead() -> None:
    head, new = rec("2026-10-10T00:00:00Z"), rec("2026-10-09T23:59:59Z")
    result = plan([new], {CHAIN: [head]}, {}, undated={new["id"]})
    assert result.problems == []
    assert new["valid_at"] == head["valid_at"]


def test_versions_in_one_batch_chain_in_order() -> None:
    first, second = rec(), rec("2026-10-02T00:00:00Z")
    result = plan([first, second], {CHAIN: []}, {})
    assert second["supersedes"] == first["id"]
    assert first["superseded_by"] == second["id"]
    assert result.updates == []  # both are new: their payloads carry the links


def test_two_open_versions_are_repaired_oldest_first() -> None:
    old = rec()
    orphan = rec(supersedes=old["id"])  # same instant: the link decides the order
    head = plan([], {CHAIN: [orphan, old]}, {})
    assert head.updates == [
        (old["id"], {"invalid_at": orphan["valid_at"], "superseded_by": orphan["id"]})
    ]


def test_keyless_record_replaces_only_the_same_holders_open_version() -> None:
    mine = rec(key=None)
    result = plan([rec(key=None, supersedes=mine["id"])], {}, {mine["id"]: mine})
    assert result.problems == []
    theirs = rec(key=None, observer_id="bob")
    refused = plan([rec(key=None, supersedes=theirs["id"])], {}, {theirs["id"]: theirs})
    assert refused.problems == [(0, "cannot_supersede")]


def test_keyless_record_cannot_fork_a_version() -> None:
    mine = rec(key=None)
    twins = [rec(key=None, supersedes=mine["id"]), rec(key=None, supersedes=mine["id"])]
    assert plan(twins, {}, {mine["id"]: mine}).problems == [(1, "cannot_supersede")]


def test_keyless_record_cannot_reach_into_a_keyed_chain() -> None:
    keyed = rec()
    assert plan([rec(key=None, supersedes=keyed["id"])], {}, {keyed["id"]: keyed}).problems == [
        (0, "cannot_supersede")
    ]


def test_a_world_state_chain_belongs_to_its_writer() -> None:
    fact = rec(observer_id=None, provenance={"writer": "release-bot"})
    rumour = rec(observer_id=None, provenance={"writer": "bob"})
    assert chain_of(fact) != chain_of(rumour)
    assert chain_of(fact) == Chain("acme", None, None, "k", "release-bot")


def test_nobody_else_may_name_a_world_state_record_to_replace() -> None:
    fact = rec(key=None, observer_id=None, provenance={"writer": "release-bot"})
    theirs = rec(key=None, observer_id=None, provenance={"writer": "bob"}, supersedes=fact["id"])
    assert plan([theirs], {}, {fact["id"]: fact}).problems == [(0, "cannot_supersede")]
    own = rec(
        key=None, observer_id=None, provenance={"writer": "release-bot"}, supersedes=fact["id"]
    )
    assert plan([own], {}, {fact["id"]: fact}).problems == []


def test_an_undated_version_does_not_follow_a_predecessor_far_in_the_future() -> None:
    head, new = rec("2199-01-01T00:00:00Z"), rec("2026-10-01T00:00:00Z")
    result = plan([new], {CHAIN: [head]}, {}, undated={new["id"]})
    assert result.problems == [(0, "valid_at_before_current_version")]
    assert new["valid_at"] == "2026-10-01T00:00:00Z"


def test_a_version_moved_up_past_its_own_end_is_refused() -> None:
    # Keyless, undated, with an end: moving its start up to follow its predecessor
    # would put the start after the end (found by review: it was stored, then 500).
    head = rec("2026-10-10T00:00:04Z", key=None)
    new = rec("2026-10-10T00:00:00Z", key=None, supersedes=head["id"])
    new["invalid_at"] = "2026-10-10T00:00:02Z"
    result = plan([new], {}, {head["id"]: head}, undated={new["id"]})
    assert result.problems == [(0, "invalid_at_before_valid_at")]
    assert result.updates == []
