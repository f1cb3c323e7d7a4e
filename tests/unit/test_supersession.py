from __future__ import annotations

import uuid
from typing import Any

from sidecar.supersession import Chain, chain_of, plan, possibly_left_open


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


# --- writes cut short: a stored record names a version that is still open -------


def _closed_by(successor: dict[str, Any]) -> dict[str, Any]:
    return {"invalid_at": successor["valid_at"], "superseded_by": successor["id"]}


def _cut_short_batch() -> tuple[dict[str, Any], ...]:
    """v1 stored; the batch [v2, v3] stored (v2 closed by v3 in it); v1 never closed."""
    v1 = rec("2026-10-01T00:00:00Z")
    v3 = rec("2026-10-10T00:00:00Z")
    v2 = rec("2026-10-05T00:00:00Z", supersedes=v1["id"]) | _closed_by(v3)
    v3["supersedes"] = v2["id"]
    return v1, v2, v3


def test_an_open_version_with_a_stored_successor_is_closed_by_it() -> None:
    v1, v2, v3 = _cut_short_batch()
    result = plan([], {CHAIN: [v1, v3]}, {}, successors=[v2])
    # Not by time (v1 closed by v3, v3 relinked to v1): that drops v2 from the
    # chain and leaves v1 and v2 both current from 10-05 to 10-10.
    assert result.updates == [(v1["id"], _closed_by(v2))]


def test_the_next_version_follows_the_head_of_a_cut_short_batch() -> None:
    v1, v2, v3 = _cut_short_batch()
    v4 = rec("2026-10-20T00:00:00Z")
    result = plan([v4], {CHAIN: [v1, v3]}, {}, successors=[v2])
    assert result.problems == []
    assert v4["supersedes"] == v3["id"]
    assert result.updates == [(v1["id"], _closed_by(v2)), (v3["id"], _closed_by(v4))]


def test_what_a_successor_leaves_doubly_open_is_still_closed_by_time() -> None:
    v1, v2, v3 = _cut_short_batch()
    stray = rec("2026-10-15T00:00:00Z")  # open too, but named by nothing
    result = plan([], {CHAIN: [v1, v3, stray]}, {}, successors=[v2])
    assert result.updates == [
        (v1["id"], _closed_by(v2)),
        (stray["id"], {"supersedes": v3["id"]}),
        (v3["id"], _closed_by(stray)),
    ]


def test_closing_by_time_links_the_successor_before_closing_its_predecessor() -> None:
    # A repair cut short after the first update must leave evidence the next one
    # reads: the newer version naming the older while the older is still open.
    older, newer = rec(), rec("2026-10-02T00:00:00Z")
    assert plan([], {CHAIN: [older, newer]}, {}).updates == [
        (newer["id"], {"supersedes": older["id"]}),
        (older["id"], _closed_by(newer)),
    ]


def test_a_keyless_version_with_a_stored_successor_cannot_be_superseded_again() -> None:
    a = rec(key=None)
    b = rec("2026-10-02T00:00:00Z", key=None, supersedes=a["id"])
    c = rec("2026-10-03T00:00:00Z", key=None, supersedes=a["id"])
    assert plan([c], {}, {a["id"]: a}, successors=[b]).problems == [(0, "cannot_supersede")]


def test_a_keyless_version_with_a_stored_successor_is_closed_by_it() -> None:
    a = rec(key=None)
    b = rec("2026-10-02T00:00:00Z", key=None, supersedes=a["id"])
    assert plan([], {}, {a["id"]: a}, successors=[b]).updates == [(a["id"], _closed_by(b))]


def test_a_successor_outside_the_line_is_not_trusted() -> None:
    a = rec(key=None)
    bobs = rec("2026-10-02T00:00:00Z", key=None, observer_id="bob", supersedes=a["id"])
    keyed = rec("2026-10-02T00:00:00Z", supersedes=a["id"])
    earlier = rec("2026-09-01T00:00:00Z", key=None, supersedes=a["id"])
    assert plan([], {}, {a["id"]: a}, successors=[bobs, keyed, earlier]).updates == []


def test_of_two_stored_successors_the_earlier_closes_the_version() -> None:
    a = rec(key=None)
    first = rec("2026-10-02T00:00:00Z", key=None, supersedes=a["id"])
    second = rec("2026-10-03T00:00:00Z", key=None, supersedes=a["id"])
    assert plan([], {}, {a["id"]: a}, successors=[second, first]).updates == [
        (a["id"], _closed_by(first))
    ]


def test_only_a_chain_with_two_open_versions_or_a_named_keyless_version_is_suspect() -> None:
    head = rec()
    other = Chain("acme", "alice", None, "other")
    v1, _, v3 = _cut_short_batch()
    keyless, closed = rec(key=None), rec(key=None, invalid_at="2026-10-02T00:00:00Z")
    keyed = rec()
    suspects = possibly_left_open(
        {CHAIN: [v1, v3], other: [head]},
        {r["id"]: r for r in (keyless, closed, keyed)},
    )
    assert sorted(suspects) == sorted([v1["id"], v3["id"], keyless["id"]])
    # The common write: one open version, nothing named; no lookup at all.
    assert possibly_left_open({CHAIN: [head]}, {}) == []
