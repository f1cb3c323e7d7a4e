"""Design test 1 and the docs/design.md §8 fixture: a statement from Alice does not
become a fact available to Bob.

GIVEN Alice states p in a private session AND the stored modality is
reported_belief, WHEN Bob asks whether p is true, THEN retrieval may find the
record BUT the response must not disclose p, AND Alice, source, scope and
history remain intact.
"""

from __future__ import annotations

import uuid

import httpx

from tests.acceptance.story import recall, said_by, stored
from tests.conftest import as_

SECRETS = ("October 17", "2026-10-17", "Oct 17")


def test_private_belief_is_not_disclosed_to_bob(http: httpx.Client) -> None:
    [record] = stored(
        http, "alice", said_by("alice", "private-session-42", access_scope="launch-core")
    )

    bob = recall(http, "bob", query="Is the launch on October 17?")

    assert bob.status_code == 200
    body = bob.json()
    assert body["verdict"] == "abstain"
    assert body["items"] == []
    assert body["conflicts"] == []
    for secret in (*SECRETS, record["id"], "private-session-42", "alice"):
        assert secret not in bob.text


def test_retrieval_finds_the_record_that_bob_is_refused(http: httpx.Client) -> None:
    # Relevance is not permission: the same query, as the holder, finds it.
    stored(http, "alice", said_by("alice", "private-session-43"))
    alice = recall(http, "alice", query="Is the launch on October 17?").json()
    assert alice["verdict"] == "attributed"
    assert any(item["source_id"] == "private-session-43" for item in alice["items"])


def test_alice_source_scope_and_history_remain_intact(http: httpx.Client) -> None:
    [record] = stored(
        http, "alice", said_by("alice", "private-session-44", access_scope="launch-core")
    )
    recall(http, "bob", query="Is the launch on October 17?")

    mine = http.get(f"/v1/memories/{record['id']}", headers=as_("alice"))
    assert mine.status_code == 200
    kept = mine.json()["record"]
    assert kept["observer_id"] == "alice"
    assert kept["modality"] == "reported_belief"
    assert kept["source_id"] == "private-session-44"
    assert kept["access_scope"] == "launch-core"
    assert kept["audience"] == ["alice"]
    assert kept["provenance"]["writer"] == "alice"
    item = mine.json()["item"]
    assert item["usable_as"] == "belief"
    assert item["attribution"].startswith("alice believes that the launch is October 17")
    assert "private-session-44" in item["attribution"]
    assert set(item["obligations"]) == {"attribute", "cite_source"}

    history = http.get(f"/v1/memories/{record['id']}/history", headers=as_("alice"))
    assert [i["id"] for i in history.json()["items"]] == [record["id"]]


def test_forbidden_and_missing_records_look_the_same_to_bob(http: httpx.Client) -> None:
    [record] = stored(http, "alice", said_by("alice", "private-session-45"))
    missing = str(uuid.uuid4())
    for path in ("/v1/memories/{}", "/v1/memories/{}/history"):
        forbidden = http.get(path.format(record["id"]), headers=as_("bob"))
        absent = http.get(path.format(missing), headers=as_("bob"))
        assert forbidden.status_code == absent.status_code == 404
        assert forbidden.json() == absent.json() == {"error": "not_found", "reasons": []}


def test_bob_in_the_audience_of_alices_answer_blocks_it(http: httpx.Client) -> None:
    # Alice asking in a chat with Bob: the answer is limited by its least-cleared member.
    stored(http, "alice", said_by("alice", "private-session-46"))
    shared = recall(http, "alice", query="Is the launch on October 17?", audience=["bob"])
    assert shared.json()["verdict"] == "abstain"
    assert not any(secret in shared.text for secret in SECRETS)


def test_other_tenant_sees_nothing(http: httpx.Client) -> None:
    [record] = stored(http, "alice", said_by("alice", "private-session-47"))
    # Same principal name, other tenant: a different person.
    other = http.post(
        "/v1/recall", json={"query": "launch October 17"}, headers=as_("alice", tenant="globex")
    )
    assert other.json()["verdict"] == "abstain"
    assert (
        http.get(f"/v1/memories/{record['id']}", headers=as_("alice", "globex")).status_code == 404
    )
