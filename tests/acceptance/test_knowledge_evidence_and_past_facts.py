"""Policy review fixes, end to end through a real sidecar and OPA.

1. Evidence must be tied to the knower: Alice's words relayed with an announcement
   or change record that never names Bob do not become Bob's knowledge (docs/design.md §1);
   common knowledge is only of groups the tenant's directory defines.
2. A fact is a fact at the instant asked about: a recall as of a past date returns
   the authority's fact of that time as a fact; an ended one is `not_current`, never
   `not_authoritative`.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.acceptance.story import fresh_key, launch_17, recall, said_by, stored, write
from tests.conftest import as_

TEAM = ["group:launch-team"]
DM = ["alice"]


def _alice_says_bob_knows(evidence: list[dict[str, str]]) -> dict[str, Any]:
    """What the chat integration heard Alice say in a DM: "Bob already knows"."""
    return said_by(
        "alice",
        "dm-alice-7",
        content="Alice says Bob knows the launch is October 17",
        observed_id="bob",
        observed_attitude="knows",
        modality="known",
        source={"kind": "conversation", "speaker": "alice", "channel": "dm", "participants": DM},
        evidence=evidence,
        audience=["alice"],
    )


def _reasons(response: httpx.Response) -> list[str]:
    assert response.status_code == 422, response.text
    return list(response.json()["reasons"][0]["reasons"])


def test_relayed_words_with_an_unrelated_announcement_are_refused(http: httpx.Client) -> None:
    record = _alice_says_bob_knows([{"kind": "announcement", "ref": "made-up"}])
    assert _reasons(write(http, "extractor-bot", record)) == ["known_without_evidence"]


def test_an_authority_cannot_make_bob_know_without_naming_him(http: httpx.Client) -> None:
    own = {
        "content": "release-bot records that Bob knows the launch is October 17",
        "proposition": launch_17(fresh_key()),
        "observer_id": "release-bot",
        "observed_id": "bob",
        "observed_attitude": "knows",
        "source_id": "CR-x",
        "source": {"kind": "change_record"},
        "modality": "known",
        "evidence": [{"kind": "change_record", "ref": "CR-x"}],
        "audience": TEAM,
        "valid_at": "2026-10-01T09:00:00Z",
    }
    assert _reasons(write(http, "release-bot", own)) == ["known_without_evidence"]
    # The change record that reached Bob (he approved it) does tie it to him.
    approved = own | {"evidence": [{"kind": "change_record", "ref": "CR-x", "by": "bob"}]}
    [record] = stored(http, "release-bot", approved)
    item = http.get(f"/v1/memories/{record['id']}", headers=as_("carol")).json()["item"]
    assert item["usable_as"] == "knowledge"


def test_an_announcement_that_reached_bob_is_knowledge(http: httpx.Client) -> None:
    record = _alice_says_bob_knows([{"kind": "announcement", "ref": "all-hands-1", "by": "bob"}])
    [stored_record] = stored(http, "extractor-bot", record)
    key = stored_record["proposition"]["key"]
    [item] = recall(http, "alice", query="launch date", about=key).json()["items"]
    assert item["usable_as"] == "knowledge"
    assert item["attribution"].startswith("bob knows that the launch is October 17")


def test_common_knowledge_of_a_group_nobody_defined_is_refused(http: httpx.Client) -> None:
    announcement = said_by(
        "carol",
        "all-hands-2026-10-02",
        content="Carol announced that the launch is October 17",
        modality="common_knowledge",
        source={"kind": "announcement", "speaker": "carol", "channel": "all-hands"},
        audience=["alice", "group:nosuchgroup"],
    )
    reasons = _reasons(write(http, "extractor-bot", announcement))
    assert reasons == ["common_knowledge_without_announcement"]


def _change_record(key: str, value: str, valid_at: str) -> dict[str, Any]:
    return {
        "content": f"Change record sets the launch to {value}",
        "proposition": {"text": f"the launch is on {value}", "key": key, "value": value},
        "source_id": f"CR-{value}",
        "source": {"kind": "change_record"},
        "modality": "world_state",
        "audience": TEAM,
        "valid_at": valid_at,
    }


def test_a_past_recall_returns_the_fact_of_that_time(http: httpx.Client) -> None:
    key = fresh_key()
    october_17 = _change_record(key, "2026-10-17", "2026-10-01T00:00:00Z")
    october_20 = _change_record(key, "2026-10-20", "2026-10-10T00:00:00Z")
    [first] = stored(http, "release-bot", october_17)
    [second] = stored(http, "release-bot", october_20)
    # release-bot may not read the team's records: its answer names no other version
    # (bob's history below shows the link).
    assert "supersedes" not in second

    then = recall(http, "bob", query="launch", about=key, as_of="2026-10-05T00:00:00Z").json()

    assert then["verdict"] == "answer"
    [item] = then["items"]
    assert item["id"] == first["id"]
    assert item["usable_as"] == "fact"
    assert item["obligations"] == ["cite_source"]
    assert item["notes"] == []

    # Today the first version is history: not current, and still the authority's.
    history = http.get(f"/v1/memories/{first['id']}/history", headers=as_("bob")).json()
    old, new = history["items"]
    assert [old["id"], new["id"]] == [first["id"], second["id"]]
    assert (old["usable_as"], old["notes"]) == ("unverified_claim", ["not_current"])
    assert (new["usable_as"], new["notes"]) == ("fact", [])


# --- evidence counts from its date on ---


def _bob_acknowledged(at: str, valid_at: str) -> dict[str, Any]:
    return _alice_says_bob_knows(
        [{"kind": "acknowledgement", "ref": "msg-9", "by": "bob", "at": at}]
    ) | {"valid_at": valid_at}


def test_evidence_dated_after_valid_at_does_not_make_a_record_known(
    http: httpx.Client,
) -> None:
    early = _bob_acknowledged("2026-10-20T00:00:00Z", valid_at="2026-10-01T09:00:00Z")
    assert _reasons(write(http, "extractor-bot", early)) == ["known_without_evidence"]


def test_evidence_dated_by_valid_at_makes_it_knowledge(http: httpx.Client) -> None:
    # Bob acknowledged on October 20, and the record says he knows from then on.
    record = _bob_acknowledged("2026-10-20T00:00:00Z", valid_at="2026-10-20T00:00:00Z")
    [stored_record] = stored(http, "extractor-bot", record)
    item = http.get(f"/v1/memories/{stored_record['id']}", headers=as_("alice")).json()["item"]
    assert item["usable_as"] == "knowledge"


# --- world state in someone else's words ---


def _hearsay() -> dict[str, Any]:
    """Alice writes down, as bare world state, what Bob said at the standup."""
    return {
        "content": "The launch moved to October 24",
        "proposition": {"text": "the launch is October 24", "key": fresh_key()},
        "source_id": "standup-3",
        "source": {"kind": "conversation", "speaker": "bob", "channel": "standup"},
        "modality": "world_state",
        "audience": ["carol"],
        "valid_at": "2026-10-01T09:00:00Z",
    }


def test_world_state_in_someone_elses_words_needs_a_relay(http: httpx.Client) -> None:
    assert _reasons(write(http, "alice", _hearsay())) == ["writer_not_holder"]


def test_unverified_world_state_names_who_recorded_it(http: httpx.Client) -> None:
    mine = _hearsay() | {"source": {"kind": "conversation", "channel": "standup"}}
    [record] = stored(http, "alice", mine)
    item = http.get(f"/v1/memories/{record['id']}", headers=as_("carol")).json()["item"]
    assert item["usable_as"] == "unverified_claim"
    assert item["attribution"].startswith(
        "Unverified (recorded by alice): the launch is October 24"
    )
