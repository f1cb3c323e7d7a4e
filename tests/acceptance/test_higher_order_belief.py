"""Design test 4: Alice's belief about Bob is not rewritten as Bob's belief or knowledge."""

from __future__ import annotations

import uuid

import httpx

from tests.acceptance.story import launch_17, recall, said_by, stored, write
from tests.conftest import as_

TEAM = ["group:launch-team"]


def _alice_thinks_bob_knows(session: str) -> dict[str, object]:
    return said_by(
        "alice",
        session,
        content="Alice believes Bob knows the launch is October 17",
        observed_id="bob",
        observed_attitude="knows",
        audience=TEAM,
    )


def test_belief_about_bob_stays_alices(http: httpx.Client) -> None:
    [record] = stored(http, "alice", _alice_thinks_bob_knows("session-1"))

    assert record["observer_id"] == "alice"
    assert record["observed_id"] == "bob"
    bob = recall(http, "bob", query="launch date", about=record["proposition"]["key"]).json()
    [item] = bob["items"]
    assert item["usable_as"] == "nested_belief"
    assert item["attribution"].startswith("alice believes that bob knows that")
    assert "attribute" in item["obligations"]


def test_it_is_never_returned_as_bobs_own_view(http: httpx.Client) -> None:
    [record] = stored(http, "alice", _alice_thinks_bob_knows("session-2"))

    as_bobs = recall(http, "carol", query="launch date", observer="bob").json()

    assert as_bobs["verdict"] == "abstain"
    key = record["proposition"]["key"]
    everything = recall(http, "carol", query="launch date", about=key).json()
    assert all(i["usable_as"] != "knowledge" for i in everything["items"])
    assert all(i["observer_id"] == "alice" for i in everything["items"])


def test_flattened_write_is_refused_and_nothing_is_stored(http: httpx.Client) -> None:
    flat_id, good_id = str(uuid.uuid4()), str(uuid.uuid4())
    flattened = {
        "id": flat_id,
        "content": "Bob knows the launch is October 17",
        "proposition": launch_17("launch.date"),
        "observer_id": "bob",
        "source_id": "session-3",
        "source": {"kind": "conversation", "speaker": "alice"},
        "modality": "known",
        "audience": ["alice", "bob"],
    }
    honest = {**_alice_thinks_bob_knows("session-3"), "id": good_id}

    response = write(http, "alice", [honest, flattened])

    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "write_refused"
    [problem] = body["reasons"]
    assert problem["index"] == 1
    assert set(problem["reasons"]) == {
        "observer_not_speaker",
        "known_without_evidence",
        "writer_not_holder",
    }
    # All or nothing: the honest record in the same batch was not stored either.
    for record_id, who in ((flat_id, "bob"), (good_id, "alice")):
        assert http.get(f"/v1/memories/{record_id}", headers=as_(who)).status_code == 404


def test_knowledge_needs_evidence_from_the_knower(http: httpx.Client) -> None:
    acknowledged = _alice_thinks_bob_knows("session-4") | {
        "modality": "known",
        "evidence": [{"kind": "acknowledgement", "by": "bob", "ref": "msg-9"}],
    }
    # Alice cannot vouch for Bob's acknowledgement herself ...
    refused = write(http, "alice", acknowledged)
    assert refused.json()["reasons"][0]["reasons"] == ["evidence_needs_relay"]
    # ... the chat integration that saw Bob acknowledge can.
    [record] = stored(http, "extractor-bot", acknowledged)
    got = http.get(f"/v1/memories/{record['id']}", headers=as_("carol")).json()
    assert got["item"]["usable_as"] == "knowledge"
    assert got["item"]["attribution"].startswith("bob knows that the launch is October 17")
