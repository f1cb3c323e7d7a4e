"""Design test 2: Alice and Bob hold incompatible views; neither is silently deleted."""

from __future__ import annotations

import httpx

from tests.acceptance.story import fresh_key, launch_17, launch_24, recall, said_by, stored
from tests.conftest import as_

TEAM = ["group:launch-team"]


def test_disagreeing_holders_give_a_conflict_with_both_views(http: httpx.Client) -> None:
    key = fresh_key()
    [alice] = stored(
        http, "alice", said_by("alice", "standup-1", audience=TEAM, proposition=launch_17(key))
    )
    [bob] = stored(
        http,
        "bob",
        said_by(
            "bob",
            "standup-1",
            audience=TEAM,
            proposition=launch_24(key),
            content="bob believes the launch is October 24",
        ),
    )

    carol = recall(http, "carol", query="when is the launch?", about=key).json()

    assert carol["verdict"] == "conflict"
    [conflict] = carol["conflicts"]
    assert conflict["key"] == key
    views = {(v["holder"], v["value"], v["record_id"]) for v in conflict["views"]}
    assert views == {
        ("alice", "2026-10-17", alice["id"]),
        ("bob", "2026-10-24", bob["id"]),
    }
    # Each view stays attributed to its holder; neither is presented as the answer.
    attributions = sorted(item["attribution"] for item in carol["items"])
    assert attributions[0].startswith("alice believes that the launch is October 17")
    assert attributions[1].startswith("bob believes that the launch is October 24")
    assert all(item["usable_as"] == "belief" for item in carol["items"])


def test_neither_view_is_deleted_or_rewritten(http: httpx.Client) -> None:
    key = fresh_key()
    [alice] = stored(
        http, "alice", said_by("alice", "standup-2", audience=TEAM, proposition=launch_17(key))
    )
    [bob] = stored(
        http, "bob", said_by("bob", "standup-2", audience=TEAM, proposition=launch_24(key))
    )
    for record, value in ((alice, "2026-10-17"), (bob, "2026-10-24")):
        got = http.get(f"/v1/memories/{record['id']}", headers=as_("carol")).json()
        assert got["item"]["status"] == "current"
        assert got["record"]["proposition"]["value"] == value
        assert "invalid_at" not in got["record"]
        assert "superseded_by" not in got["record"]


def test_asker_who_may_see_one_view_gets_no_conflict(http: httpx.Client) -> None:
    # Bob's private view of the date must not surface as a "conflict" marker to Carol.
    stored(
        http,
        "alice",
        said_by(
            "alice",
            "standup-3",
            audience=TEAM,
            proposition={"text": "the demo is on Friday", "key": "demo.day", "value": "friday"},
        ),
    )
    stored(
        http,
        "bob",
        said_by(
            "bob",
            "standup-3",
            proposition={"text": "the demo is on Monday", "key": "demo.day", "value": "monday"},
        ),
    )

    carol = recall(http, "carol", query="when is the demo?", about="demo.day").json()

    assert carol["verdict"] == "attributed"
    assert carol["conflicts"] == []
    assert "monday" not in str(carol).lower()


def test_a_page_of_one_still_reports_the_conflict(http: httpx.Client) -> None:
    # Review found: with `limit: 1` carol got alice's view alone, verdict `attributed`,
    # no conflict: the page size hid a disagreement she may see.
    key = fresh_key()
    [alice] = stored(
        http, "alice", said_by("alice", "standup-3", audience=TEAM, proposition=launch_17(key))
    )
    [bob] = stored(
        http, "bob", said_by("bob", "standup-3", audience=TEAM, proposition=launch_24(key))
    )
    for limit in (1, 10):
        carol = recall(http, "carol", query="when is the launch?", about=key, limit=limit).json()
        assert carol["verdict"] == "conflict", (limit, carol)
        [conflict] = carol["conflicts"]
        assert {v["record_id"] for v in conflict["views"]} == {alice["id"], bob["id"]}
        assert len(carol["items"]) == min(limit, 2)
