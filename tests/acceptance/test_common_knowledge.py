"""Design test 5: a qualifying group announcement is represented differently from
independent private observations."""

from __future__ import annotations

import httpx

from tests.acceptance.story import said_by, stored, write
from tests.conftest import as_

TEAM = ["group:launch-team"]


def _announcement() -> dict[str, object]:
    return said_by(
        "carol",
        "all-hands-2026-10-02",
        content="Carol announced to the launch team that the launch is October 17",
        modality="common_knowledge",
        source={"kind": "announcement", "speaker": "carol", "channel": "all-hands"},
        audience=TEAM,
    )


def test_group_announcement_is_common_knowledge(http: httpx.Client) -> None:
    # The channel's integration (an extractor) relays what Carol announced.
    [record] = stored(http, "extractor-bot", _announcement())
    got = http.get(f"/v1/memories/{record['id']}", headers=as_("bob")).json()
    assert got["item"]["usable_as"] == "common_knowledge"
    assert got["item"]["attribution"].startswith(
        "It is common knowledge in group:launch-team that the launch is October 17"
    )


def test_private_observations_do_not_add_up_to_common_knowledge(http: httpx.Client) -> None:
    # Each of them knows p privately: three beliefs, not common knowledge.
    ids = []
    for who in ("alice", "bob", "carol"):
        [record] = stored(http, who, said_by(who, f"dm-{who}", audience=TEAM))
        ids.append(record["id"])
    for record_id in ids:
        item = http.get(f"/v1/memories/{record_id}", headers=as_("carol")).json()["item"]
        assert item["usable_as"] == "belief"
        assert "attribute" in item["obligations"]


def test_claiming_common_knowledge_without_an_announcement_is_refused(http: httpx.Client) -> None:
    pile = said_by("alice", "dm-alice", modality="common_knowledge", audience=TEAM)
    response = write(http, "alice", pile)
    assert response.status_code == 422
    assert response.json()["reasons"][0]["reasons"] == ["common_knowledge_without_announcement"]


def test_announcement_on_a_non_qualifying_channel_is_refused(http: httpx.Client) -> None:
    hallway = _announcement() | {
        "source": {"kind": "announcement", "speaker": "carol", "channel": "hallway"}
    }
    response = write(http, "extractor-bot", hallway)
    assert response.status_code == 422
    assert response.json()["reasons"][0]["reasons"] == ["common_knowledge_without_announcement"]


def test_nobody_can_announce_on_their_own_say_so(http: httpx.Client) -> None:
    response = write(http, "carol", _announcement())
    assert response.status_code == 422
    assert response.json()["reasons"][0]["reasons"] == ["source_needs_role"]


def test_a_belief_about_bob_is_never_common_knowledge(http: httpx.Client) -> None:
    # Alice at the all-hands: "Bob believes the launch is October 17". Stored as
    # common knowledge in a group holding Bob, it would say Bob knows it (docs/design.md §2).
    nested = _announcement() | {
        "observer_id": "alice",
        "observed_id": "bob",
        "observed_attitude": "believes",
        "source": {"kind": "announcement", "speaker": "alice", "channel": "all-hands"},
        "source_id": "s",
    }
    response = write(http, "extractor-bot", nested)
    assert response.status_code == 422, response.text
    assert response.json()["reasons"][0]["reasons"] == ["nested_belief_as_shared_claim"]
    # As what it is, Alice's belief about Bob, it is stored and shown as such.
    [record] = stored(http, "extractor-bot", nested | {"modality": "reported_belief"})
    item = http.get(f"/v1/memories/{record['id']}", headers=as_("carol")).json()["item"]
    assert item["usable_as"] == "nested_belief"
    assert item["attribution"].startswith("alice believes that bob believes that the launch")
